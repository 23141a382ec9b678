#!/usr/bin/env bash
# Install, build and run Qpid Proton's C example broker (and the C example send/receive/direct
# clients) from Debian's libqpid-proton11-dev-examples. See docs/real-brokers.md.
#
# Usage: proton-c-broker.sh install|build|start|stop|status [PORT]
# Environment (all optional):
#   PROTON_BUILD_DIR   where the binaries go (default /tmp/amqpspec-proton-c)
#   PROTON_PORT        listen port on 127.0.0.1 (default 5680; or the 2nd argument)
#   START_TIMEOUT      seconds to wait for "listening on" (default 20)
# The broker's pid is kept in $PROTON_BUILD_DIR/broker-$PORT.pid, its output in
# $PROTON_BUILD_DIR/broker-$PORT.log. Exit codes: 0 ok, 1 failure, 3 not running (status).
set -euo pipefail

cmd="${1:-}"
PORT="${2:-${PROTON_PORT:-5680}}"
B="${PROTON_BUILD_DIR:-/tmp/amqpspec-proton-c}"
START_TIMEOUT="${START_TIMEOUT:-20}"
SRC=/usr/share/proton/examples/c
PIDFILE="$B/broker-$PORT.pid"
LOGFILE="$B/broker-$PORT.log"

log() { echo "proton-c-broker.sh: $*" >&2; }

install() {
    if dpkg -s libqpid-proton11-dev libqpid-proton11-dev-examples >/dev/null 2>&1 \
        && command -v gcc >/dev/null; then
        log "already installed"
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get install -y --no-install-recommends \
        libqpid-proton11-dev libqpid-proton11-dev-examples gcc libc6-dev >&2 || {
        timeout 300 apt-get update >&2
        timeout 600 apt-get install -y --no-install-recommends \
            libqpid-proton11-dev libqpid-proton11-dev-examples gcc libc6-dev >&2
    }
}

build() {
    [ -f "$SRC/broker.c" ] || { log "examples missing: run '$0 install'"; exit 1; }
    mkdir -p "$B"
    local prog
    for prog in broker send receive direct; do
        if [ ! -x "$B/$prog" ] || [ "$SRC/$prog.c" -nt "$B/$prog" ]; then
            gcc -O2 -I"$SRC" -o "$B/$prog" "$SRC/$prog.c" -lqpid-proton -lpthread
        fi
    done
    log "built broker send receive direct in $B"
}

# shellcheck source=pidfile.sh
source "$(dirname "$0")/pidfile.sh"  # running_pid, launch, wait_ready, stop, status

listening() { grep -q "listening on" "$LOGFILE" 2>/dev/null; }

start() {
    [ -x "$B/broker" ] || build
    if pid="$(running_pid)"; then
        log "already running on $PORT (pid $pid)"
        return 0
    fi
    launch "$B/broker" 127.0.0.1 "$PORT"
    wait_ready listening
}

case "$cmd" in
install) install ;;
build) build ;;
start) start ;;
stop) stop ;;
status) status ;;
*) echo "usage: $0 install|build|start|stop|status [PORT]" >&2; exit 2 ;;
esac
