"""`amqpspec run`: the conformance suite against one broker, through pytest and the plugin.

Owns: the `run` subcommand's options (--jobs N: cases run N at a time, serial ones alone,
`conformance.jobs`) and turning them into a pytest invocation of
`conformance/suite.py` with `-p amqpspec.conformance.plugin` (and the plugin's `--amqp-`
options), JUnit XML (DIR/junit-<broker>.xml, `junit.render_junit`) and
allure results (DIR/allure, when allure-pytest is installed), and what the terminal shows
(`progress.RunProgress`: a progress bar with the verdict tally, plain lines when stdout is
not a terminal; pytest's line per case with -v). Exit status: 0 when every
verdict is OK / NON-STRICT / UNSUPPORTED / DIFFERS (with --expect: when every verdict
matches the expectations file), 1 otherwise, 2 on bad usage or when no broker passes the
preflight (`preflight.check_broker`: one clear line, every case ERROR in index.json);
--strict also fails on NON-STRICT, --gate-differs on a DIFFERS of a model the profile
claims (its broker's own documentation promises the behaviour). A ws:// or wss:// --broker
runs every case through a loopback TCP <-> WebSocket bridge (`ws_bridge`, the OASIS
WebSocket binding; docs/websocket.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

from amqpspec.conformance.profile import Profile, ProfileError, available_profiles, load_profile
from amqpspec.conformance.run.context import BrokerTarget, CaseResult
from amqpspec.conformance.run.jobs import DEFAULT_JOBS
from amqpspec.conformance.run.preflight import PREFLIGHT_TIMEOUT_S, check_broker
from amqpspec.conformance.run.progress import RunProgress
from amqpspec.conformance.run.registry import suite_cases
from amqpspec.conformance.run.results import ResultsDir
from amqpspec.conformance.run.ws_bridge import WebSocketBridge
from amqpspec.conformance.verdicts import Verdict
from amqpspec.exit_status import BAD_INPUT, JOB_FAILED

SUITE = Path(__file__).parents[1] / "suite.py"
PLUGIN = "amqpspec.conformance.plugin"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `run` subcommand's options, in the order `--help` lists them."""
    _target_options(parser)
    _verdict_options(parser)
    _output_options(parser)
    _pace_options(parser)


def _target_options(parser: argparse.ArgumentParser) -> None:
    """Which broker, which profile, which cases, the admin endpoint, where results go."""
    parser.add_argument(
        "--broker",
        required=True,
        help="amqp://[user:pass@]HOST:PORT, or ws[s]://[user:pass@]HOST:PORT/PATH for AMQP "
        "over WebSocket (docs/websocket.md)",
    )
    parser.add_argument(
        "--profile",
        default="generic",
        help=f"profile name ({', '.join(available_profiles())}) or path to a .toml file",
    )
    parser.add_argument("-k", dest="keyword", help="pytest -k expression over case ids")
    parser.add_argument("--admin", help="admin endpoint URL, e.g. http://guest:guest@HOST:15672")
    parser.add_argument(
        "--results",
        default="reports/_conformance",
        help="results directory (default reports/_conformance, not committed)",
    )


def _verdict_options(parser: argparse.ArgumentParser) -> None:
    """What the verdicts are held to: expectations files, strictness."""
    parser.add_argument("--expect", help="expectations TOML; any difference fails the run")
    parser.add_argument(
        "--expect-retries",
        type=int,
        default=0,
        metavar="N",
        help="with --expect: rerun a case whose verdict differs up to N times; one that "
        "matches on a retry is reported UNSTABLE and does not fail the run (default 0)",
    )
    parser.add_argument("--write-expect", help="write this run's verdicts to a TOML file")
    parser.add_argument("--broker-name", help="name of the broker in index.json (default: profile)")
    parser.add_argument("--strict", action="store_true", help="fail on NON-STRICT (SHOULD) too")
    parser.add_argument(
        "--gate-differs",
        action="store_true",
        help="fail on DIFFERS too (behaviour the spec does not require, differing from a model "
        "the profile claims, e.g. RabbitMQ 4's requeue on detach; docs/conformance.md)",
    )


def _output_options(parser: argparse.ArgumentParser) -> None:
    """What a person sees while the run goes."""
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress: pytest's dots and the summary"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="pytest's line per case instead of the progress bar (and NON-STRICT reasons)",
    )


def _pace_options(parser: argparse.ArgumentParser) -> None:
    """How the cases run: pipelined variants, concurrency, the preflight bound."""
    parser.add_argument(
        "--pipelined",
        choices=("only", "also", "never"),
        default="also",
        help="also run each case pipelined (<case id>/pipelined: its frames up to the first "
        "that needs a reply in one write); only; or never (default also)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        metavar="N",
        help="cases run at once, each on its own connections; a case that touches "
        "broker-global state (alarms) runs alone; 1 runs them one after the other "
        f"(default {DEFAULT_JOBS})",
    )
    parser.add_argument(
        "--preflight-timeout",
        type=float,
        default=PREFLIGHT_TIMEOUT_S,
        metavar="S",
        help="seconds the broker has to answer the preflight handshake (header, SASL, open) "
        f"before any case runs; 0 skips it (default {PREFLIGHT_TIMEOUT_S:g})",
    )


def pytest_args(args: argparse.Namespace, broker_name: str) -> list[str]:
    results = Path(args.results)
    argv = [
        str(SUITE),
        "-p",
        PLUGIN,
        "-p",
        "no:cacheprovider",
        # no assertion rewriting: the suite asserts nothing, and pytest would otherwise
        # rewrite every module of each plugin's distribution (all of hypothesis) at each
        # run where bytecode is not written (PYTHONDONTWRITEBYTECODE): seconds of start-up
        "--assert=plain",
        # the installed pytest plugins the suite does not use, not even imported
        "-p",
        "no:benchmark",
        "-p",
        "no:timeout",
        "-p",
        "no:hypothesispytest",
        "--rootdir",
        str(SUITE.parent.parent),  # item ids stay conformance/suite.py::test_case[<case id>]
        "-c",
        str(SUITE.with_name("suite.ini")),  # the suite's own settings, never the user's project's
        "--amqp-broker",
        args.broker,
        "--amqp-profile",
        args.profile,
        "--amqp-results",
        str(results),
        "--amqp-broker-name",
        broker_name,
        "--amqp-pipelined",
        args.pipelined,
        "--amqp-jobs",
        str(getattr(args, "jobs", DEFAULT_JOBS)),
        "--amqp-junit",  # a suite per section, the case id as its name (report/junit.py)
        str(results / f"junit-{broker_name}.xml"),
        "-rN",
    ]
    if getattr(args, "verbose", False):
        argv.append("-v")
    else:
        argv += ["-q", "-o", "console_output_style=classic"]
    if importlib.util.find_spec("allure_pytest") is not None:
        argv.append(f"--alluredir={results / 'allure'}")
    for option in ("keyword", "admin", "expect", "write_expect"):
        value = getattr(args, option, None)
        if value:
            flag = "-k" if option == "keyword" else "--amqp-" + option.replace("_", "-")
            argv += [flag, value]
    if getattr(args, "expect_retries", 0):
        argv += ["--amqp-expect-retries", str(args.expect_retries)]
    if args.strict:
        argv.append("--amqp-strict")
    if getattr(args, "gate_differs", False):
        argv.append("--amqp-gate-differs")
    return argv


def preflight(args: argparse.Namespace, profile: Profile, broker_name: str) -> str | None:
    """The preflight: one bounded handshake before any case. On failure every case of the run
    is recorded as ERROR with the reason in the results' index.json (no traces: nothing ran)
    and the reason is returned."""
    try:
        target = BrokerTarget.parse(args.broker)
    except ValueError as exc:
        return str(exc)
    if target.websocket:  # through a bridge of its own (ws_bridge.py), as the cases will
        with WebSocketBridge(target.websocket) as bridge:
            reason = check_broker(target.bridged(bridge.port), profile, args.preflight_timeout)
            if reason is not None and bridge.refusals:
                reason = f"{target}: {bridge.last_refusal}"
    else:
        reason = check_broker(target, profile, args.preflight_timeout)
    if reason is None:
        return None
    results = ResultsDir(args.results, broker_name)
    for case in suite_cases(args.pipelined):
        results.add(
            CaseResult(case.case_id, case.level, Verdict.ERROR, 0.0, f"preflight: {reason}")
        )
    results.write_index()
    return reason


def run(args: argparse.Namespace) -> int:
    import pytest

    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        print(f"amqpspec run: {exc}", file=sys.stderr)
        return 2
    if args.expect_retries < 0 or (args.expect_retries and not args.expect):
        print(
            "amqpspec run: --expect-retries needs --expect and a count of 0 or more",
            file=sys.stderr,
        )
        return 2
    if args.jobs < 1:
        print(f"amqpspec run: --jobs must be 1 or more, got {args.jobs}", file=sys.stderr)
        return 2
    broker_name = args.broker_name or profile.name
    started = time.monotonic()
    if args.preflight_timeout > 0:
        failure = preflight(args, profile, broker_name)
        if failure is not None:
            print(f"amqpspec run: no AMQP 1.0 broker: {failure}", file=sys.stderr)
            return 2
    # a progress bar with the tally (plain lines when stdout is no terminal), unless -v or -q
    progress = [] if args.verbose or args.quiet else [RunProgress()]
    code = int(pytest.main(pytest_args(args, broker_name), plugins=progress))
    from amqpspec.conformance.run import plugin

    state = plugin.LAST_RUN
    elapsed = time.monotonic() - started
    print(
        f"amqpspec run: {len(state.results)} cases against {broker_name} in {elapsed:.1f} s "
        f"(--jobs {args.jobs})"
    )
    if not state.results:
        return _no_results(code)
    return state.exit_status()


PYTEST_USAGE_ERROR = 4  # pytest.ExitCode.USAGE_ERROR


def _no_results(code: int) -> int:
    """The exit status of a run that judged nothing (amqpspec/exit_status.py): a usage error
    pytest found is BAD_INPUT, an interrupted or broken session JOB_FAILED (never 1, which
    claims violations), and an empty selection (pytest's 5) stays 5."""
    code = int(code)
    if code in (0, 5):
        return code
    if code == PYTEST_USAGE_ERROR:
        return BAD_INPUT
    print(
        f"amqpspec run: the run failed, no verdict (exit {JOB_FAILED}): pytest ended with "
        f"status {code} before any case had a result (its output above)",
        file=sys.stderr,
    )
    return JOB_FAILED
