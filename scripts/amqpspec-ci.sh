#!/usr/bin/env bash
# What a broker project's CI job does with amqpspec (docs/ci.md: the GitHub Actions and
# GitLab CI examples call this script; copy it into your repository, or run it from a
# checkout of amqpspec). It runs the conformance suite against one broker, compares every
# verdict with an expectations file when one is given (the known state: a difference fails
# the job, an unchanged known failure does not), then writes the reports a CI server shows:
# JUnit (RESULTS/junit-<broker>.xml), allure results (RESULTS/allure/), the matrix and the
# conformance statement (RESULTS/report/). The reports are written whatever the verdicts;
# the exit status is the run's (0 pass, 1 a verdict or a difference fails, 2 no broker).
#
# Settings (environment):
#   AMQPSPEC_BROKER    amqp://[user:pass@]HOST:PORT of the broker under test (required)
#   AMQPSPEC_PROFILE   profile name or PATH.toml (default generic)
#   AMQPSPEC_EXPECT    expectations file: compare, fail on any difference (optional)
#   AMQPSPEC_RETRIES   with AMQPSPEC_EXPECT: rerun a differing case up to N times (default 0)
#   AMQPSPEC_ADMIN     admin endpoint URL (optional; else the profile's)
#   AMQPSPEC_STRICT    1: NON-STRICT (a SHOULD not met) fails too
#   AMQPSPEC_RESULTS   results directory (default amqpspec-results)
#   AMQPSPEC_ARGS      more `amqpspec run` options, e.g. "-k 2.6.7 --jobs 4"
#   AMQPSPEC           the command (default: amqpspec, else python3 -m amqpspec.cli)
# On GitHub Actions the Markdown summary goes to the job summary ($GITHUB_STEP_SUMMARY).
set -uo pipefail

: "${AMQPSPEC_BROKER:?set AMQPSPEC_BROKER to amqp://HOST:PORT of the broker under test}"
PROFILE="${AMQPSPEC_PROFILE:-generic}"
RESULTS="${AMQPSPEC_RESULTS:-amqpspec-results}"
if [ -n "${AMQPSPEC:-}" ]; then
    read -r -a CMD <<<"$AMQPSPEC"
elif command -v amqpspec >/dev/null 2>&1; then
    CMD=(amqpspec)
else
    CMD=(python3 -m amqpspec.cli)
fi

run=("${CMD[@]}" run --broker "$AMQPSPEC_BROKER" --profile "$PROFILE" --results "$RESULTS")
[ -n "${AMQPSPEC_ADMIN:-}" ] && run+=(--admin "$AMQPSPEC_ADMIN")
if [ -n "${AMQPSPEC_EXPECT:-}" ]; then
    run+=(--expect "$AMQPSPEC_EXPECT" --expect-retries "${AMQPSPEC_RETRIES:-0}")
fi
[ "${AMQPSPEC_STRICT:-0}" = 1 ] && run+=(--strict)
# shell words, quotes kept: AMQPSPEC_ARGS="-k '2.6.7 or 2.7.4'" (the job's own setting)
eval "extra=(${AMQPSPEC_ARGS:-})"
run+=("${extra[@]}")

mkdir -p "$RESULTS"
echo "== ${run[*]}"
"${run[@]}"
status=$?

report=("${CMD[@]}" report "$RESULTS" --out "$RESULTS/report" --statement)
if [ -f "$RESULTS/index.json" ]; then
    echo "== ${report[*]}"
    "${report[@]}" || status=$((status == 0 ? 1 : status))
    if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
        # the summary block and the failures: everything above the per-section tables
        sed '/^## Cases by section/q' "$RESULTS/report/conformance-matrix.md" >>"$GITHUB_STEP_SUMMARY"
    fi
fi
echo "== amqpspec exit status $status (results: $RESULTS, reports: $RESULTS/report)"
exit "$status"
