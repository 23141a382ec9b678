#!/usr/bin/env bash
# The project's test command (README): the whole suite, with per-test time limits.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m pytest -q -p no:cacheprovider "$@"
