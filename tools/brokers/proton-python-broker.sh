#!/usr/bin/env bash
# Install and run Qpid Proton's Python example broker (examples/python/broker.py from Debian's
# python-qpid-proton-doc, on the PyPI python-qpid-proton the project installs): the fourth
# broker of the conformance CI. See docs/real-brokers.md.
#
# Usage: proton-python-broker.sh install|start|stop|status [PORT]
# Environment (all optional):
#   PROTON_PY_DIR      where its pid and log go (default /tmp/amqpspec-proton-python)
#   PROTON_PY_PORT     listen port on 127.0.0.1 (default 5681; or the 2nd argument)
#   START_TIMEOUT      seconds to wait for the port to accept connections (default 20)
# Exit codes: 0 ok, 1 failure, 3 not running (status).
set -euo pipefail

cmd="${1:-}"
PORT="${2:-${PROTON_PY_PORT:-5681}}"
D="${PROTON_PY_DIR:-/tmp/amqpspec-proton-python}"
START_TIMEOUT="${START_TIMEOUT:-20}"
SRC=/usr/share/proton/examples/python/broker.py
PIDFILE="$D/broker-$PORT.pid"
LOGFILE="$D/broker-$PORT.log"

log() { echo "proton-python-broker.sh: $*" >&2; }

install() {
    if [ -f "$SRC" ]; then
        log "already installed"
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get install -y --no-install-recommends python-qpid-proton-doc >&2 || {
        timeout 300 apt-get update >&2
        timeout 600 apt-get install -y --no-install-recommends python-qpid-proton-doc >&2
    }
}

# shellcheck source=pidfile.sh
source "$(dirname "$0")/pidfile.sh"  # running_pid, launch, wait_ready, stop, status

accepting() { (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; }  # it prints no ready line

start() {
    [ -f "$SRC" ] || { log "$SRC missing: run '$0 install'"; exit 1; }
    if pid="$(running_pid)"; then
        log "already running on $PORT (pid $pid)"
        return 0
    fi
    mkdir -p "$D"
    launch python3 "$SRC" --address "127.0.0.1:$PORT"
    wait_ready accepting
}

case "$cmd" in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 install|start|stop|status [PORT]" >&2; exit 2 ;;
esac
