"""`amqpspec fuzz`: fuzz a broker over the network, replay findings, fuzz in-process.

    amqpspec fuzz --broker amqp://HOST:PORT [--profile NAME] [--admin URL]
                  [--duration SECONDS | --cases N] [--seed N] [--strategy bytes,fields,sequences]
                  [--corpus DIR] [--workers N] [--processes N] [--restart-wait S]
                  [--kind single|multi|both] --out DIR
    amqpspec fuzz replay FINDING_DIR|FILE --broker URL [--times N]
    amqpspec fuzz --broker URL --differential URL2 [--profile2 NAME] [--admin2 URL] ...
                  (every case on both brokers; divergences: fuzz.differential_cli)
    amqpspec fuzz report DIR      (report.md / report.html of a campaign's findings, and
                                   findings.md: the findings grouped by broker behaviour)
    amqpspec fuzz codec|engine|broker --duration S [--seed N] [--corpus DIR]

Owns: the options, their checks, progress output and exit status (amqpspec.exit_status):
0 no finding, 1 findings (replay: reproduced), 2 usage errors and a broker unreachable at
the start (one clear line on stderr, never a traceback), 3 a campaign stopped by an error
of the fuzzer's own (its traceback, then one line naming it: no verdict). The work is in
fuzz.campaign, fuzz.replay, fuzz.report, fuzz.findings_report (findings.md, also rewritten
by the store at each confirmed finding) and fuzz.inprocess.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from urllib.parse import unquote, urlsplit

from amqpspec import exit_status
from amqpspec.fuzz.model import FUZZ_QUEUE
from amqpspec.fuzz.mutators import STRATEGIES
from amqpspec.fuzz.oracle import Bounds, Target

ACTIONS = ("replay", "report", "codec", "engine", "broker")
QUEUE = FUZZ_QUEUE


class FuzzUsageError(Exception):
    """A bad option or an unusable target: exit 2 with this message."""


def _workers(text: str) -> int | str:
    """--workers: a positive number, or auto."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number or auto") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=ACTIONS,
        help="replay a finding, report a campaign directory, or fuzz in-process: codec, "
        "engine, broker (default: a network campaign against --broker)",
    )
    parser.add_argument(
        "path", nargs="?", help="replay: a finding directory or reproducer; report: a campaign DIR"
    )
    parser.add_argument("--broker", help="amqp://[user:pass@]HOST:PORT")
    parser.add_argument("--profile", default="generic", help="broker profile (default generic)")
    parser.add_argument("--admin", help="management API URL (queue set-up, memory readings)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--duration", type=float, help="seconds to fuzz")
    budget.add_argument("--cases", type=int, help="number of cases to run")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    parser.add_argument(
        "--strategy",
        default=",".join(STRATEGIES),
        help=f"comma-separated strategies (default {','.join(STRATEGIES)})",
    )
    parser.add_argument(
        "--corpus",
        help="directory of seed traces (pcap/pcapng/Parquet) "
        "or reproducers; in-process: the corpus directory",
    )
    parser.add_argument(
        "--workers",
        type=_workers,
        default="auto",
        help="cases in flight at once, each on its own connection; auto (the default): "
        "from the time the broker takes to answer the first cases (fuzz.pace: 2 for an "
        "instant broker, up to 128 for one that answers errors seconds later)",
    )
    parser.add_argument(
        "--processes",
        type=_workers,
        default="auto",
        help="processes the workers are spread over, each with its own interpreter lock "
        "(fuzz.processes); auto (the default): one per CPU core, at most one per worker; "
        "1 for threads in one process. Not for --differential, nor for multi-party cases "
        "with --admin (one process there)",
    )
    parser.add_argument(
        "--triage-per-behaviour",
        type=int,
        default=None,
        metavar="N",
        help="signatures of one broker behaviour minimised and confirmed; further ones are "
        "kept untriaged in DIR/candidates/ as examples (default 2; 0: triage every one)",
    )
    parser.add_argument("--out", help="campaign directory (findings.json, findings/)")
    parser.add_argument(
        "--restart-wait",
        type=float,
        default=30.0,
        help="after a crash, seconds to wait for the broker to come back (default 30)",
    )
    parser.add_argument(
        "--reply-timeout",
        type=float,
        help="seconds for the broker to answer before a case is a hang (default: the "
        "profile's [timeouts] wait, 5 s in every bundled profile: RabbitMQ 3.10 answers a "
        "failed login or a frame before open only after 3 s)",
    )
    parser.add_argument(
        "--kind",
        choices=("single", "multi", "both"),
        default="single",
        help="single: one connection per case (default); multi: multi-party cases, several "
        "peers on one queue at once, judged across connections (docs/fuzz.md); both: every "
        "other case",
    )
    parser.add_argument("--times", type=int, default=3, help="replay: how many times")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    # the differential campaign's (fuzz.differential_cli), defined here: building the
    # parser must not import the campaign, whose corpus readers need the fuzz extra
    parser.add_argument(
        "--differential",
        metavar="URL2",
        help="a second broker: every case goes to both, where they differ is a finding "
        "(kind divergence); the case's bytes are --broker's profile's, so URL2 must take "
        "its login and addresses",
    )
    parser.add_argument(
        "--profile2", help="the second broker's profile (default: --profile's); its timeouts"
    )
    parser.add_argument("--admin2", help="the second broker's management API (queue set-up)")


# ----------------------------------------------------------------- target


def target_from(broker: str | None, profile_name: str, bounds: Bounds | None = None) -> Target:
    """The broker URL and profile as a fuzz Target (FuzzUsageError when unusable)."""
    from amqpspec.conformance.profile import ProfileError, load_profile
    from amqpspec.fuzz.model import Handshake

    if not broker:
        raise FuzzUsageError("--broker amqp://HOST:PORT is required")
    parts = urlsplit(broker if "://" in broker else f"amqp://{broker}")
    if parts.scheme != "amqp":
        raise FuzzUsageError(f"unsupported broker URL scheme {parts.scheme!r} (amqp:// only)")
    try:
        port = parts.port or 5672
    except ValueError as exc:
        raise FuzzUsageError(f"bad broker URL {broker!r}: {exc}") from None
    try:
        profile = load_profile(profile_name)
    except (ProfileError, ValueError, OSError) as exc:
        raise FuzzUsageError(str(exc)) from None
    handshake = Handshake(
        sasl=profile.sasl if profile.sasl in ("PLAIN", "ANONYMOUS") else "none",
        username=unquote(parts.username) if parts.username else (profile.username or ""),
        password=unquote(parts.password) if parts.password else (profile.password or ""),
        hostname=profile.hostname,
        source=profile.source(QUEUE),
        target=profile.target(QUEUE),
    )
    target = Target(parts.hostname or "127.0.0.1", port, handshake, bounds or Bounds())
    target.profile = profile
    return target


def _target(args: argparse.Namespace) -> Target:
    target = target_from(args.broker, args.profile)
    profile = target.profile
    reply = args.reply_timeout if args.reply_timeout is not None else profile.wait
    if reply <= 0:
        raise FuzzUsageError("--reply-timeout must be positive")
    target.bounds = Bounds(reply=reply, restart_wait=args.restart_wait)
    if args.admin:
        target.memory = _memory_reader(args.admin)
        if profile.declare_queues:
            _declare(profile, args.admin)
    return target


def _memory_reader(url: str):  # type: ignore[no-untyped-def]
    """The broker's memory (mem_used of GET /api/nodes), or None when it cannot say."""
    from amqpspec.reference_broker.admin.client import ManagementClient

    parts = urlsplit(url)
    client = ManagementClient(
        f"http://{parts.hostname or '127.0.0.1'}:{parts.port or 15672}",
        unquote(parts.username or "guest"),
        unquote(parts.password or "guest"),
        timeout=5.0,
    )

    lock = threading.Lock()  # one HTTP connection, shared by the workers

    def read() -> int | None:
        try:
            with lock:
                nodes = client.call("GET", "/api/nodes")
            value = nodes[0].get("mem_used") if nodes else None
            return int(value) if value is not None else None
        except Exception:
            return None

    return read


def _declare(profile, admin_url: str) -> None:  # type: ignore[no-untyped-def]
    from amqpspec.conformance.admin import make_admin

    admin = make_admin(profile.admin, admin_url)
    try:
        admin.declare_queue(QUEUE)
    except Exception as exc:
        raise FuzzUsageError(f"cannot declare queue {QUEUE!r} through {admin_url}: {exc}") from None
    finally:
        admin.close()


def _queue_admin(args: argparse.Namespace, target: Target):  # type: ignore[no-untyped-def]
    """Multi-party cases: each run's own queue is declared and deleted through --admin when
    the profile says queues must be declared (None: the broker makes them on attach)."""
    from amqpspec.conformance.admin import make_admin
    from amqpspec.fuzz.multiparty import LockedAdmin

    if not target.profile.declare_queues:
        return None
    if not args.admin:
        raise FuzzUsageError(
            f"multi-party cases: profile {args.profile!r} declares its queues: give --admin URL "
            "(each multi-party run gets a queue of its own)"
        )
    return LockedAdmin(make_admin(target.profile.admin, args.admin))


def _strategies(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown or not chosen:
        raise FuzzUsageError(f"unknown strategy {unknown}; choose from {','.join(STRATEGIES)}")
    return chosen


# ----------------------------------------------------------------- actions


def check_budget(args: argparse.Namespace) -> None:
    """--out and a positive --duration or --cases, as every network campaign needs."""
    if not args.out:
        raise FuzzUsageError("--out DIR is required for a campaign")
    if args.duration is None and args.cases is None:
        raise FuzzUsageError("give --duration SECONDS or --cases N")
    if (args.duration is not None and args.duration <= 0) or (
        args.cases is not None and args.cases <= 0
    ):
        raise FuzzUsageError("--duration and --cases must be positive")


def _campaign(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.campaign import WORKER_FAILED, Campaign, CampaignConfig
    from amqpspec.fuzz.oracle import alive
    from amqpspec.fuzz.seeds import load_corpus

    check_budget(args)
    if args.triage_per_behaviour is not None and args.triage_per_behaviour < 0:
        raise FuzzUsageError("--triage-per-behaviour must be 0 or more")
    strategies = _strategies(args.strategy)
    target = _target(args)
    if not alive(target):
        raise FuzzUsageError(f"broker {target.url} is unreachable (no open/begin/attach answer)")
    corpus = []
    if args.corpus:
        if not os.path.isdir(args.corpus):
            raise FuzzUsageError(f"--corpus {args.corpus}: not a directory")
        corpus = load_corpus(args.corpus)
    config = CampaignConfig(
        target,
        args.out,
        strategies,
        args.seed,
        args.duration,
        args.cases,
        1,
        corpus,
    )
    config.kind = args.kind
    if args.kind != "single":
        config.queues = _queue_admin(args, target)
    if args.triage_per_behaviour is not None:
        config.per_behaviour = args.triage_per_behaviour
    config.workers = chosen_workers(args.workers, [config], args.quiet)
    config.processes = chosen_processes(args.processes, config.workers)
    progress = _Progress(args.quiet)
    campaign = Campaign(config, progress.update)
    store = campaign.store
    progress.behaviours = lambda: len(store.behaviours)
    store.note_campaign(
        broker=target.url, profile=args.profile, seed=args.seed, strategies=list(strategies)
    )
    if args.kind != "single":
        store.note_campaign(kind=args.kind, admin=args.admin)
    stats = campaign.run()
    progress.done(stats)
    groups = _write_findings_md(args.out)
    total = len(campaign.store.findings)
    print(
        f"amqpspec fuzz: {stats.cases} cases in {time.monotonic() - stats.started:.1f} s "
        f"({stats.rate:.0f}/s), state coverage {100 * stats.coverage:.1f}%, "
        f"{stats.findings} new finding(s), {total} in {os.path.join(args.out, 'findings.json')}"
        + (f" [{stats.stopped}]" if stats.stopped else "")
    )
    if stats.kept:
        print(
            f"amqpspec fuzz: {stats.kept} candidate(s) of new signatures not triaged within the "
            f"budget's grace, kept in {os.path.join(args.out, 'candidates')} "
            "(`amqpspec fuzz replay DIR/candidates/<id>` runs one)"
        )
    if stats.examples:
        print(
            f"amqpspec fuzz: {stats.examples} candidate(s) of new signatures of a broker "
            f"behaviour already triaged {config.per_behaviour}x, kept untriaged as examples in "
            f"{os.path.join(args.out, 'candidates')}"
        )
    if total:
        from amqpspec.fuzz.report import write_report

        report_md, _ = write_report(args.out)
        print(f"amqpspec fuzz: report {report_md} (.html beside it)")
    for finding in campaign.store.findings.values():
        print(
            f"  {finding.id} {finding.kind:<13} {finding.rule} ({finding.section}): "
            f"{finding.summary} -> {finding.reproducer}"
        )
        if finding.observed:
            print(f"      expected: {finding.expected}\n      observed: {finding.observed}")
    if groups:
        _print_behaviours(args.out, groups)
    if stats.stopped.startswith(WORKER_FAILED):
        # the campaign did not run its budget: no verdict, neither "no finding" nor findings
        print(
            f"amqpspec fuzz: the campaign failed, no verdict (exit {exit_status.JOB_FAILED}): "
            f"{stats.stopped}",
            file=sys.stderr,
        )
        return exit_status.JOB_FAILED
    return 1 if total else 0


def chosen_processes(processes: int | str, workers: int) -> int:
    """--processes as given, or (auto) one per CPU core, at most one per worker (fuzz.pace)."""
    from amqpspec.fuzz.pace import choose_processes

    return choose_processes(workers) if processes == "auto" else int(processes)


def chosen_workers(workers: int | str, configs: list, quiet: bool) -> int:
    """--workers as given, or (auto) from the answer time of the slowest broker of
    `configs` (fuzz.pace; fewer for multi-party cases, which hold several connections)."""
    if workers != "auto":
        return int(workers)
    from amqpspec.fuzz.pace import (
        MULTI_PARTY_CONNECTIONS,
        PROBE_CASES,
        choose_workers,
        measure_case_latency,
    )

    latency = max(measure_case_latency(config) for config in configs)
    multi = any(getattr(config, "kind", "single") != "single" for config in configs)
    chosen = choose_workers(latency, MULTI_PARTY_CONNECTIONS if multi else 1)
    if not quiet:
        print(
            f"amqpspec fuzz: the broker takes {latency:.3f} s per case (mean of the first "
            f"{PROBE_CASES} at most, one by one): {chosen} workers (--workers N to choose)",
            file=sys.stderr,
        )
    return chosen


def _write_findings_md(directory: str) -> list:
    from amqpspec.fuzz.findings_report import write_report

    return write_report(directory)


def _print_behaviours(directory: str, groups: list) -> None:
    from amqpspec.fuzz.findings_report import REPORT_NAME, summary_lines

    findings = sum(len(g.findings) for g in groups)
    print(
        f"by broker behaviour: {len(groups)} behaviour(s) from {findings} finding(s) in "
        f"{os.path.join(directory, REPORT_NAME)}"
    )
    for line in summary_lines(groups):
        print(f"  {line}")


class _Progress:
    """Cases/s, findings and state coverage: a rich live line on a terminal, a plain line
    every 5 s otherwise."""

    def __init__(self, quiet: bool) -> None:
        self.behaviours = lambda: 0  # the campaign's findings.md behaviours so far
        self.quiet = quiet
        self._last = 0.0
        self._live = None
        if not quiet and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True)
            self._live.start()

    def _text(self, stats) -> str:  # type: ignore[no-untyped-def]
        elapsed = time.monotonic() - stats.started
        return (
            f"{elapsed:6.1f}s  cases {stats.cases}  {stats.rate:6.0f}/s  findings "
            f"{stats.findings} (findings.md: {self.behaviours()} behaviour(s))  triage: "
            f"{stats.triaged} done, {stats.queued} queued, {stats.kept + stats.examples} kept, "
            f"{stats.duplicates} known  state coverage {100 * stats.coverage:.1f}%"
        )

    def update(self, stats) -> None:  # type: ignore[no-untyped-def]
        if self.quiet:
            return
        now = time.monotonic()
        if self._live is not None:
            if now - self._last > 0.25:
                self._last = now
                self._live.update(self._text(stats))
        elif now - self._last > 5.0:
            self._last = now
            print(self._text(stats), file=sys.stderr, flush=True)

    def done(self, stats) -> None:  # type: ignore[no-untyped-def]
        if self._live is not None:
            self._live.stop()


def _replay(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.case import CaseFileError
    from amqpspec.fuzz.oracle import alive
    from amqpspec.fuzz.replay import replay_finding

    if not args.path:
        raise FuzzUsageError("replay needs a finding directory or reproducer file")
    if args.times < 1:
        raise FuzzUsageError("--times must be at least 1")
    if getattr(args, "differential", None):
        from amqpspec.fuzz.differential_cli import replay as replay_on_both

        return replay_on_both(args)
    from amqpspec.fuzz.differential_cli import needs_pair

    needs_pair(args.path)  # a divergence replays on two brokers only
    target = _target(args)
    if not alive(target):
        raise FuzzUsageError(f"broker {target.url} is unreachable (no open/begin/attach answer)")
    from amqpspec.fuzz import multiparty

    if multiparty.is_multi_reproducer(args.path):  # every party of the schedule, each time
        queues = _queue_admin(args, target)
        result = multiparty.replay_multi(target, args.path, args.times, queues)
        for number, verdict in enumerate(result.verdicts, 1):
            seen = f"{verdict.kind} {verdict.rule}: {verdict.summary}" if verdict else "nothing"
            print(f"  replay {number}: {seen}")
        print(f"reproduced {result.reproduced}/{result.times} {result.signature}")
        return 1 if result.reproduced else 0
    try:
        result = replay_finding(target, args.path, args.times)
    except CaseFileError as exc:
        raise FuzzUsageError(f"cannot read {exc}") from None
    for number, verdict in enumerate(result.verdicts, 1):
        seen = f"{verdict.kind} {verdict.rule}: {verdict.summary}" if verdict else "nothing"
        print(f"  replay {number}: {seen}")
    print(f"reproduced {result.reproduced}/{result.times} {result.signature}")
    return 1 if result.reproduced else 0


def _inprocess(args: argparse.Namespace) -> int:
    try:
        from amqpspec.fuzz.inprocess import TARGETS, run_inprocess
    except ImportError:
        raise FuzzUsageError("in-process fuzzing is not available in this version yet") from None
    if args.duration is None or args.duration <= 0:
        raise FuzzUsageError(f"fuzz {args.action} needs --duration SECONDS (> 0)")
    if args.corpus and not os.path.isdir(args.corpus):
        raise FuzzUsageError(f"--corpus {args.corpus}: not a directory")
    result = run_inprocess(TARGETS[args.action], args.duration, args.seed, args.corpus)
    print(result.line())
    return 1 if result.crashers else 0


def _report(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.findings import FINDINGS_JSON
    from amqpspec.fuzz.report import write_report

    if not args.path or not os.path.isfile(os.path.join(args.path, FINDINGS_JSON)):
        raise FuzzUsageError(f"fuzz report needs a campaign DIR with {FINDINGS_JSON}")
    md, page = write_report(args.path)
    print(f"amqpspec fuzz: {md}, {page}")
    _print_behaviours(args.path, _write_findings_md(args.path))
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "replay":
            return _replay(args)
        if args.action == "report":
            return _report(args)
        if args.action in ("codec", "engine", "broker"):
            return _inprocess(args)
        if args.path:
            raise FuzzUsageError(f"unexpected argument {args.path!r}")
        if getattr(args, "differential", None):
            if args.kind != "single":  # a multi-party case is judged on one broker's queue
                raise FuzzUsageError(f"--kind {args.kind} does not combine with --differential")
            from amqpspec.fuzz.differential_cli import campaign as differential_campaign

            return differential_campaign(args)
        return _campaign(args)
    except FuzzUsageError as exc:
        print(f"amqpspec fuzz: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("amqpspec fuzz: interrupted", file=sys.stderr)
        return 2
