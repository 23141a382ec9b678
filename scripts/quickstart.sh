#!/usr/bin/env bash
# The main job on a fresh machine: install amqpspec, start the bundled reference broker, run
# the conformance suite against it and render the brokers x cases matrix.
#   bash scripts/quickstart.sh            # results in reports/_quickstart, matrix in reports/
# Ports: AMQP 5673 and admin 15673 by default (QUICKSTART_PORT / QUICKSTART_ADMIN_PORT), so a
# broker already on 5672/15672 is left alone. The broker is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${QUICKSTART_PORT:-5673}"
ADMIN="${QUICKSTART_ADMIN_PORT:-15673}"
OUT="${QUICKSTART_RESULTS:-reports/_quickstart}"

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if ! dpkg -s amqp-specs tshark default-jre-headless gcc python3-dev >/dev/null 2>&1; then
        echo "== apt: amqp-specs tshark default-jre-headless gcc python3-dev"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            amqp-specs tshark default-jre-headless gcc python3-dev >/dev/null
    fi
fi
echo "== pip install -e '.[test,spark,speedups]'"
python3 -m pip install -q -e '.[test,spark,speedups]'
echo "== compiling amqp10's fast path (optional: on failure amqp10 runs pure Python)"
python3 scripts/build_speedups.py || true

echo "== starting the reference broker on 127.0.0.1:$PORT (admin $ADMIN)"
python3 -m amqpspec.reference_broker --port "$PORT" --admin-port "$ADMIN" --idle-timeout 10 --log-level warning &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null' EXIT
for _ in $(seq 1 100); do
    (echo >/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
    kill -0 $broker 2>/dev/null || { echo "the reference broker did not start" >&2; exit 1; }
    sleep 0.1
done

echo "== amqpspec run (profile reference)"
rm -rf "$OUT"
set +e
amqpspec run --broker "amqp://127.0.0.1:$PORT" --profile reference \
    --admin "http://guest:guest@127.0.0.1:$ADMIN" --results "$OUT"
verdict=$?
set -e
amqpspec report "$OUT" --out reports
echo "== matrix: reports/conformance-matrix.html (Markdown: reports/conformance-matrix.md)"
if [ -n "${DISPLAY:-}" ] && command -v xdg-open >/dev/null; then
    xdg-open reports/conformance-matrix.html >/dev/null 2>&1 || true
fi
exit $verdict
