#!/usr/bin/env bash
# Run the conformance suite against every broker CI has and compare each verdict
# with the committed expectations file: the bundled reference broker, RabbitMQ 3.10 (Debian,
# AMQP 1.0 plugin), the Qpid Proton C example broker and the Proton Python example broker.
# Any difference fails. The reference
# broker is held to its expectations on the first attempt; a third-party broker's case that
# differs is rerun up to twice (--expect-retries 2: their races show only in some runs) and is
# listed as UNSTABLE when a retry matches. Cases run CONFORMANCE_JOBS at a time (default 8,
# `amqpspec run --jobs`; cases on broker-global state such as alarms run alone). Brokers are
# started here and stopped by PID on exit. Results land in reports/_ci/ (git-ignored);
# the matrix is rendered with `amqpspec report`.
set -uo pipefail  # pipefail: `amqpspec run | tee` keeps amqpspec's exit status
cd "$(dirname "$0")/.."
OUT="${CONFORMANCE_RESULTS:-reports/_ci}"
JOBS="${CONFORMANCE_JOBS:-8}"
REF_PORT=5673 REF_ADMIN=15673 REF_WS=15683 RMQ_PORT=5672 RMQ_ADMIN=15672 PROTON_PORT=5680 PROTON_PY_PORT=5681
rm -rf "$OUT"; mkdir -p "$OUT"
status=0
ref_pid=""

cleanup() {
    [ -n "$ref_pid" ] && kill "$ref_pid" 2>/dev/null && wait "$ref_pid" 2>/dev/null
    STOP_MODE=kill AMQP_PORT=$RMQ_PORT MGMT_PORT=$RMQ_ADMIN bash tools/brokers/rabbitmq.sh stop >/dev/null 2>&1
    bash tools/brokers/proton-c-broker.sh stop $PROTON_PORT >/dev/null 2>&1
    bash tools/brokers/proton-python-broker.sh stop $PROTON_PY_PORT >/dev/null 2>&1
}
trap cleanup EXIT

wait_port() {  # bounded wait for a TCP listener
    for _ in $(seq 1 100); do
        (echo >/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "conformance-ci: nothing listening on port $1" >&2
    return 1
}

run_suite() {  # name profile url admin retries
    local name=$1 profile=$2 url=$3 admin=${4:-} retries=${5:-0}
    local started=$SECONDS
    echo "== conformance: $name (--jobs $JOBS)"
    args=(run --broker "$url" --profile "$profile" --results "$OUT" --jobs "$JOBS"
          --expect "conformance/expectations/$name.toml")
    [ -n "$admin" ] && args+=(--admin "$admin")
    [ "$retries" -gt 0 ] && args+=(--expect-retries "$retries")
    if amqpspec "${args[@]}" 2>&1 | tee "$OUT/$name.log"; then
        echo "== $name: verdicts match conformance/expectations/$name.toml ($((SECONDS - started)) s)"
    else
        echo "== $name: verdicts DIFFER from conformance/expectations/$name.toml" >&2
        status=1
    fi
}

# 1. the bundled reference broker
data=$(mktemp -d)
python3 -m amqpspec.reference_broker --port $REF_PORT --admin-port $REF_ADMIN --ws-port $REF_WS \
    --data-dir "$data" --idle-timeout 10 --sasl-timeout 2 \
    >"$OUT/reference-broker.log" 2>&1 &
ref_pid=$!
wait_port $REF_PORT && run_suite reference reference "amqp://127.0.0.1:$REF_PORT" \
    "http://guest:guest@127.0.0.1:$REF_ADMIN" || status=1
kill "$ref_pid" 2>/dev/null; wait "$ref_pid" 2>/dev/null; ref_pid=""

# 2. RabbitMQ 3.10 with the AMQP 1.0 plugin
if AMQP_PORT=$RMQ_PORT MGMT_PORT=$RMQ_ADMIN bash tools/brokers/rabbitmq.sh start; then
    run_suite rabbitmq3 rabbitmq3 "amqp://guest:guest@127.0.0.1:$RMQ_PORT" \
        "http://guest:guest@127.0.0.1:$RMQ_ADMIN" 2
    STOP_MODE=kill AMQP_PORT=$RMQ_PORT MGMT_PORT=$RMQ_ADMIN bash tools/brokers/rabbitmq.sh stop
else
    echo "conformance-ci: RabbitMQ did not start" >&2; status=1
fi

# 3. Qpid Proton's C example broker
if bash tools/brokers/proton-c-broker.sh build && bash tools/brokers/proton-c-broker.sh start $PROTON_PORT; then
    run_suite proton-example proton-example "amqp://127.0.0.1:$PROTON_PORT" "" 2
    bash tools/brokers/proton-c-broker.sh stop $PROTON_PORT
else
    echo "conformance-ci: the proton C example broker did not start" >&2; status=1
fi

# 4. Qpid Proton's Python example broker
if bash tools/brokers/proton-python-broker.sh start $PROTON_PY_PORT; then
    run_suite proton-python proton-python "amqp://127.0.0.1:$PROTON_PY_PORT" "" 2
    bash tools/brokers/proton-python-broker.sh stop $PROTON_PY_PORT
else
    echo "conformance-ci: the proton Python example broker did not start" >&2; status=1
fi

amqpspec report "$OUT" --out "$OUT" || status=1
exit $status
