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
by the store at each confirmed finding) and fuzz.inprocess; what this shares with
fuzz.differential_cli (targets, option checks, progress) is fuzz.cli_support's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from amqpspec.fuzz.cli_support import QUEUE as QUEUE
from amqpspec.fuzz.cli_support import (
    FuzzUsageError,
    Progress,
    check_budget,
    chosen_processes,
    chosen_workers,
    corpus_of,
    failed_status,
    parse_strategies,
    print_behaviours,
    queue_admin,
    target_of,
    write_findings_md,
)
from amqpspec.fuzz.cli_support import target_from as target_from
from amqpspec.fuzz.mutators import STRATEGIES
from amqpspec.fuzz.stops import broker_gone

ACTIONS = ("replay", "report", "codec", "engine", "broker")


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
    _add_target_arguments(parser)
    _add_pace_arguments(parser)
    _add_other_arguments(parser)


def _add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The action, the broker and the budget."""
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


def _add_pace_arguments(parser: argparse.ArgumentParser) -> None:
    """Workers, processes, triage, the output and the broker's bounds."""
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
    parser.add_argument(
        "--crash-threshold",
        type=int,
        default=None,
        metavar="N",
        help="crashes of the broker one mutation site (a field or kind of mutation of one "
        "performative) may cause before its cases are skipped, 4N for a whole performative "
        "(fuzz.crash_sites, as boofuzz's crash thresholds; default 3; 0: never skip)",
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


def _add_other_arguments(parser: argparse.ArgumentParser) -> None:
    """Replay, progress and the differential campaign's second broker."""
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


# ----------------------------------------------------------------- actions


def _campaign(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.campaign import Campaign

    config = _campaign_config(args)
    progress = Progress(args.quiet)
    campaign = Campaign(config, progress.update)
    store = campaign.store
    progress.behaviours = lambda: len(store.behaviours)
    store.note_campaign(
        broker=config.target.url,
        profile=args.profile,
        seed=args.seed,
        strategies=list(config.strategies),
    )
    if args.kind != "single":
        store.note_campaign(kind=args.kind, admin=args.admin)
    stats = campaign.run()
    progress.done(stats)
    groups = write_findings_md(args.out)
    total = len(campaign.store.findings)
    _print_campaign(args, config, stats, total)
    if total:
        from amqpspec.fuzz.report import write_report

        report_md, _ = write_report(args.out)
        print(f"amqpspec fuzz: report {report_md} (.html beside it)")
    _print_findings(campaign.store.findings.values())
    if groups:
        print_behaviours(args.out, groups)
    failed = failed_status(stats)
    if failed is not None:
        return failed
    return 1 if total else 0


def _campaign_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The campaign the options ask for (FuzzUsageError when unusable): the broker must
    serve before anything runs."""
    from amqpspec.fuzz.campaign import CampaignConfig
    from amqpspec.fuzz.oracle import alive

    check_budget(args)
    if args.triage_per_behaviour is not None and args.triage_per_behaviour < 0:
        raise FuzzUsageError("--triage-per-behaviour must be 0 or more")
    if args.crash_threshold is not None and args.crash_threshold < 0:
        raise FuzzUsageError("--crash-threshold must be 0 or more")
    strategies = parse_strategies(args.strategy)
    target = target_of(args)
    if not alive(target):
        raise FuzzUsageError(f"broker {target.url} is unreachable (no open/begin/attach answer)")
    corpus = corpus_of(args)
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
        config.queues = queue_admin(args, target)
    if args.triage_per_behaviour is not None:
        config.per_behaviour = args.triage_per_behaviour
    if args.crash_threshold is not None:
        config.crash_threshold = args.crash_threshold
    config.workers = chosen_workers(args.workers, [config], args.quiet)
    config.processes = chosen_processes(args.processes, config.workers)
    return config


def _print_campaign(args: argparse.Namespace, config, stats, total: int) -> None:  # type: ignore[no-untyped-def]
    print(
        f"amqpspec fuzz: {stats.cases} cases in {time.monotonic() - stats.started:.1f} s "
        f"({stats.rate:.0f}/s), state coverage {100 * stats.coverage:.1f}%, "
        f"{stats.findings} new finding(s), {total} in {os.path.join(args.out, 'findings.json')}"
        + (f" [{stats.stopped}]" if stats.stopped else "")
    )
    if stats.kept:
        why = "within the budget's grace"
        if broker_gone(stats.stopped):
            why = "once the broker stopped serving"
        print(
            f"amqpspec fuzz: {stats.kept} candidate(s) of new signatures not triaged {why}, "
            f"kept in {os.path.join(args.out, 'candidates')} "
            "(`amqpspec fuzz replay DIR/candidates/<id>` runs one)"
        )
    if stats.exhausted:
        print(
            f"amqpspec fuzz: {stats.skipped} case(s) skipped: their mutation site crashed the "
            f"broker {config.crash_threshold}x or more (--crash-threshold): "
            + ", ".join(stats.exhausted)
        )
    if stats.polished:
        print(f"amqpspec fuzz: {stats.polished} crash(es) minimised after the budget")
    if stats.examples:
        print(
            f"amqpspec fuzz: {stats.examples} candidate(s) of new signatures of a broker "
            f"behaviour already triaged {config.per_behaviour}x, kept untriaged as examples in "
            f"{os.path.join(args.out, 'candidates')}"
        )


def _print_findings(findings) -> None:  # type: ignore[no-untyped-def]
    for finding in findings:
        print(
            f"  {finding.id} {finding.kind:<13} {finding.rule} ({finding.section}): "
            f"{finding.summary} -> {finding.reproducer}"
        )
        if finding.observed:
            print(f"      expected: {finding.expected}\n      observed: {finding.observed}")


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
    target = target_of(args)
    if not alive(target):
        raise FuzzUsageError(f"broker {target.url} is unreachable (no open/begin/attach answer)")
    from amqpspec.fuzz import multiparty

    if multiparty.is_multi_reproducer(args.path):  # every party of the schedule, each time
        queues = queue_admin(args, target)
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
    print_behaviours(args.path, write_findings_md(args.path))
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
