#!/usr/bin/env bash
# The main job on a fresh machine, in one command: install amqpspec, start the bundled
# reference broker, run the conformance suite against it and render the brokers x cases matrix.
#   bash scripts/quickstart.sh               # everything
#   bash scripts/quickstart.sh --no-install  # skip apt and pip (already installed)
# Results in reports/_quickstart/ (index.json, traces, JUnit), the broker's log in
# reports/_quickstart/broker.log, the matrix in reports/conformance-matrix.html / .md.
# Ports: AMQP 5673 and admin 15673 (QUICKSTART_PORT / QUICKSTART_ADMIN_PORT), so a broker
# already on 5672/15672 is left alone. The broker is stopped by its PID on exit.
# Exit status: that of `amqpspec run` (0: no FAILED or ERROR verdict).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${QUICKSTART_PORT:-5673}"
ADMIN="${QUICKSTART_ADMIN_PORT:-15673}"
WS="${QUICKSTART_WS_PORT:-15683}"  # AMQP over WebSocket (the 2.1/websocket-* cases)
OUT="${QUICKSTART_RESULTS:-reports/_quickstart}"
INSTALL=1
for arg in "$@"; do
    case "$arg" in
        --no-install) INSTALL=0 ;;
        -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "quickstart: unknown option $arg (--no-install, --help)" >&2; exit 2 ;;
    esac
done
if [ "${QUICKSTART_SKIP_INSTALL:-0}" = 1 ]; then INSTALL=0; fi
START=$SECONDS
step() { echo "== [$((SECONDS - START)) s] $*"; }

if [ "$INSTALL" = 1 ]; then
    # amqp-specs: the spec XML; tshark: dissects the traces; a JRE: Spark (triage);
    # gcc + python3-dev: pip compiles amqp10's fast path (docs/speedups.md)
    APT_PACKAGES="amqp-specs tshark default-jre-headless gcc python3-dev"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        # shellcheck disable=SC2086
        if ! dpkg -s $APT_PACKAGES >/dev/null 2>&1; then
            step "apt-get install $APT_PACKAGES"
            apt-get update -qq
            # shellcheck disable=SC2086
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                $APT_PACKAGES >/dev/null
        fi
    fi
    step "python3 -m pip install -e '.[test,speedups]' (compiles amqp10's fast path: a few minutes)"
    python3 -m pip install -q -e '.[test,speedups]'
    # pyenv finds new console scripts only after a rehash
    if command -v pyenv >/dev/null; then pyenv rehash || true; fi
fi
if command -v amqpspec >/dev/null; then AMQPSPEC=(amqpspec); else AMQPSPEC=(python3 -m amqpspec.cli); fi
"${AMQPSPEC[@]}" --version   # says whether amqp10 runs compiled or pure

rm -rf "$OUT"
mkdir -p "$OUT"
LOG="$OUT/broker.log"
step "starting the reference broker on 127.0.0.1:$PORT (admin API $ADMIN, WebSocket $WS), log in $LOG"
DATA=$(mktemp -d)   # its --data-dir: the durability cases restart it (3.2.1)
python3 -m amqpspec.reference_broker --port "$PORT" --admin-port "$ADMIN" --ws-port "$WS" \
    --data-dir "$DATA" --idle-timeout 10 --sasl-timeout 2 --log-level warning >"$LOG" 2>&1 &
broker=$!
stop_broker() {
    if kill -0 "$broker" 2>/dev/null; then
        kill "$broker" 2>/dev/null || true
        wait "$broker" 2>/dev/null || true
    fi
    rm -rf "$DATA"
}
trap stop_broker EXIT
for _ in $(seq 1 300); do   # at most 30 s
    (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
    if ! kill -0 "$broker" 2>/dev/null; then
        echo "quickstart: the reference broker did not start; its log ($LOG):" >&2
        cat "$LOG" >&2
        exit 1
    fi
    sleep 0.1
done

step "amqpspec run --profile reference (progress and the verdict tally below)"
set +e
"${AMQPSPEC[@]}" run --broker "amqp://127.0.0.1:$PORT" --profile reference \
    --admin "http://guest:guest@127.0.0.1:$ADMIN" --results "$OUT"
verdict=$?
set -e
stop_broker

step "amqpspec report $OUT"
"${AMQPSPEC[@]}" report "$OUT" --out reports
echo
echo "Done in $((SECONDS - START)) s (amqpspec run exit status $verdict)."
echo "  results:    $OUT/index.json (verdict, reason, trace per case), $OUT/traces/"
echo "  matrix:     reports/conformance-matrix.html (Markdown: reports/conformance-matrix.md)"
echo "  broker log: $LOG"
if [ -n "${DISPLAY:-}" ] && command -v xdg-open >/dev/null; then
    xdg-open reports/conformance-matrix.html >/dev/null 2>&1 || true
fi
exit $verdict
