#!/usr/bin/env bash
# The project's test command (README): the whole suite, with per-test time limits; amqp10 runs
# compiled when pip install -e (or scripts/build_speedups.py) has built it. Then the core's tests again on the
# pure-Python amqp10 (AMQP10_PURE=1), so both paths are tested (docs/speedups.md).
# With arguments: only `pytest ARGS`, as the environment says (e.g. AMQP10_PURE=1).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -gt 0 ]; then
    exec python3 -m pytest -q -p no:cacheprovider "$@"
fi
status=0
python3 -m pytest -q -p no:cacheprovider || status=$?
if [ -f amqp10/_speedups.json ]; then
    echo "== the core's tests on the pure-Python amqp10 (AMQP10_PURE=1)"
    AMQP10_PURE=1 python3 -m pytest -q -p no:cacheprovider \
        tests/test_builder.py tests/test_checker_*.py tests/test_codec.py \
        tests/test_codec_composites.py tests/test_decoder_fuzz.py tests/test_engine_*.py \
        tests/test_frames.py tests/test_message.py tests/test_monitor.py tests/test_serial.py \
        || status=$?
fi
exit $status
