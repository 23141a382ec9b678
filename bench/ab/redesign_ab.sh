#!/bin/bash
# A/B of two checkouts: the reference broker's CPU per 100k messages (broker_bench) and
# triage decode + check (triage_bench check), pure-Python amqp10 on both sides, alternating.
# Usage: bench/ab/redesign_ab.sh BEFORE_DIR AFTER_DIR [ROUNDS] [OUT_DIR]
set -u
BEFORE=${1:?before checkout}; AFTER=${2:?after checkout}; ROUNDS=${3:-2}
OUT=${4:-$(mktemp -d -t amqpspec-ab-XXXX)}
for round in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    dir=$BEFORE; [ "$side" = after ] && dir=$AFTER
    echo "== $side round $round $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log"
    (cd "$dir" && AMQP10_PURE=1 PYTHONPATH="$dir" python3 -m amqpspec.bench.broker_bench \
        --brokers reference --messages 100000 --rounds 1 --no-durable --out "$OUT/$side-$round" | tail -6) | tee -a "$OUT/log"
    (cd "$dir" && AMQP10_PURE=1 PYTHONPATH="$dir" python3 -m amqpspec.bench.triage_bench check --rounds 3 | tail -4) | tee -a "$OUT/log"
  done
done
echo "reports: $OUT" | tee -a "$OUT/log"
