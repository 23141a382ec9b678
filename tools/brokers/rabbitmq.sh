#!/usr/bin/env bash
# Install and run a private RabbitMQ 3.10 node (Debian rabbitmq-server, AMQP 1.0 plugin and
# management plugin) for tests, CI and benchmarks. No systemd, no root-owned state: the node
# lives entirely under a data dir. See docs/real-brokers.md.
#
# Usage: rabbitmq.sh install|start|stop|status|env [DATA_DIR]
# Environment (all optional):
#   RABBITMQ_DATA_DIR   data dir (default /tmp/amqpspec-rabbitmq; or the 2nd argument)
#   AMQP_PORT           AMQP listener port on 127.0.0.1 (default 5672)
#   MGMT_PORT           management HTTP port on 127.0.0.1 (default 15672)
#   DIST_PORT           Erlang distribution port (default AMQP_PORT + 20000)
#   EPMD_PORT           epmd port (default 4369)
#   START_TIMEOUT       seconds to wait for the node (default 90)
#   NODE_NAME           node name (default rabbit@localhost)
#   STOP_MODE           "graceful" (rabbitmqctl shutdown, ~10 s; default) or "kill" (SIGKILL
#                       the node, for throw-away data dirs in tests: well under a second)
#   MEMORY_HIGH_WATERMARK_BYTES  vm_memory_high_watermark.absolute (default: unset, the
#                       node's 0.4 of RAM); the memory alarm blocks publishers above it
#   MEMORY_PAGING_RATIO vm_memory_high_watermark_paging_ratio (default: unset, 0.5): classic
#                       queues page messages to disk above this fraction of the watermark
#   STATS_INTERVAL_MS   collect_statistics_interval (default: unset, 5000): how often the
#                       management API's queue and node figures are refreshed
# Exit codes: 0 ok, 1 failure, 3 not running (status).
set -euo pipefail

cmd="${1:-}"
R="${2:-${RABBITMQ_DATA_DIR:-/tmp/amqpspec-rabbitmq}}"
AMQP_PORT="${AMQP_PORT:-5672}"
MGMT_PORT="${MGMT_PORT:-15672}"
DIST_PORT="${DIST_PORT:-$((AMQP_PORT + 20000))}"
EPMD_PORT="${EPMD_PORT:-4369}"
START_TIMEOUT="${START_TIMEOUT:-90}"
NODE_NAME="${NODE_NAME:-rabbit@localhost}"
BIN=/usr/lib/rabbitmq/bin

log() { echo "rabbitmq.sh: $*" >&2; }

node_env() {
    export HOME="$R"
    export RABBITMQ_NODENAME="$NODE_NAME"
    export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
    export RABBITMQ_NODE_PORT="$AMQP_PORT"
    export RABBITMQ_DIST_PORT="$DIST_PORT"
    export RABBITMQ_CONFIG_FILE="$R/rabbitmq.conf"
    export RABBITMQ_CONF_ENV_FILE="$R/rabbitmq-env.conf"
    export RABBITMQ_ENABLED_PLUGINS_FILE="$R/enabled_plugins"
    export RABBITMQ_MNESIA_BASE="$R/mnesia"
    export RABBITMQ_LOG_BASE="$R/log"
    export RABBITMQ_PID_FILE="$R/rabbitmq.pid"
    export ERL_EPMD_ADDRESS=127.0.0.1
    export ERL_EPMD_PORT="$EPMD_PORT"
    export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

install() {
    if [ -x "$BIN/rabbitmq-server" ] && dpkg -s rabbitmq-server >/dev/null 2>&1; then
        log "rabbitmq-server already installed ($(dpkg-query -W -f='${Version}' rabbitmq-server))"
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    # policy-rc.d keeps the package's own service from starting during install
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    timeout 600 apt-get install -y --no-install-recommends rabbitmq-server curl >&2 || {
        timeout 300 apt-get update >&2
        timeout 600 apt-get install -y --no-install-recommends rabbitmq-server curl >&2
    }
}

write_config() {
    mkdir -p "$R/mnesia" "$R/log"
    cat >"$R/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $MGMT_PORT
loopback_users.guest = true
EOF
    if [ -n "${MEMORY_HIGH_WATERMARK_BYTES:-}" ]; then
        echo "vm_memory_high_watermark.absolute = $MEMORY_HIGH_WATERMARK_BYTES" >>"$R/rabbitmq.conf"
    fi
    if [ -n "${MEMORY_PAGING_RATIO:-}" ]; then
        echo "vm_memory_high_watermark_paging_ratio = $MEMORY_PAGING_RATIO" >>"$R/rabbitmq.conf"
    fi
    if [ -n "${STATS_INTERVAL_MS:-}" ]; then
        echo "collect_statistics_interval = $STATS_INTERVAL_MS" >>"$R/rabbitmq.conf"
    fi
    : >"$R/rabbitmq-env.conf"
    echo '[rabbitmq_amqp1_0,rabbitmq_management].' >"$R/enabled_plugins"
}

pid_of_node() {
    [ -s "$R/rabbitmq.pid" ] || return 1
    local pid
    pid="$(cat "$R/rabbitmq.pid")"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

mgmt_ready() {
    curl -sf -m 5 -u guest:guest "http://127.0.0.1:$MGMT_PORT/api/overview" >/dev/null 2>&1
}

start() {
    [ -x "$BIN/rabbitmq-server" ] || { log "not installed: run '$0 install'"; exit 1; }
    if pid_of_node >/dev/null; then
        log "already running (pid $(pid_of_node))"
        return 0
    fi
    write_config
    node_env
    "$BIN/rabbitmq-server" -detached >"$R/log/detached.out" 2>&1
    # rabbitmqctl wait needs the pid file, which appears a moment after -detached
    local deadline=$((SECONDS + START_TIMEOUT))
    until [ -s "$R/rabbitmq.pid" ]; do
        if [ $SECONDS -ge $deadline ]; then log "no pid file after ${START_TIMEOUT}s"; exit 1; fi
        sleep 0.2
    done
    if ! timeout "$START_TIMEOUT" "$BIN/rabbitmqctl" wait "$R/rabbitmq.pid" \
        --timeout "$START_TIMEOUT" >"$R/log/wait.out" 2>&1; then
        log "node did not start; see $R/log"
        tail -20 "$R/log/wait.out" >&2 || true
        exit 1
    fi
    until mgmt_ready; do
        if [ $SECONDS -ge $deadline ]; then log "management API not up on :$MGMT_PORT"; exit 1; fi
        sleep 0.3
    done
    log "running: pid $(cat "$R/rabbitmq.pid"), amqp 127.0.0.1:$AMQP_PORT, mgmt :$MGMT_PORT"
}

stop() {
    node_env
    local pid
    if pid="$(pid_of_node)"; then
        if [ "${STOP_MODE:-graceful}" = kill ]; then
            kill -9 "$pid" 2>/dev/null || true
        else
            timeout 60 "$BIN/rabbitmqctl" shutdown >"$R/log/shutdown.out" 2>&1 || true
        fi
        local deadline=$((SECONDS + 30))
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then
                log "node pid $pid still alive: SIGKILL"
                kill -9 "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
        done
        log "stopped (pid $pid)"
    else
        log "not running"
    fi
    rm -f "$R/rabbitmq.pid"
    # epmd was started by this node (127.0.0.1:$EPMD_PORT); stop it unless another node uses it
    if command -v epmd >/dev/null; then
        if ! epmd -port "$EPMD_PORT" -names 2>/dev/null | grep -q '^name '; then
            epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
        fi
    fi
}

status() {
    if pid_of_node >/dev/null && mgmt_ready; then
        echo "running pid=$(pid_of_node) amqp=127.0.0.1:$AMQP_PORT mgmt=127.0.0.1:$MGMT_PORT"
    else
        echo "not running"
        exit 3
    fi
}

case "$cmd" in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
env) node_env; env | grep -E '^(RABBITMQ|ERL_|HOME=)' ;;
*) echo "usage: $0 install|start|stop|status|env [DATA_DIR]" >&2; exit 2 ;;
esac
