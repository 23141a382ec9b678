"""`amqpspec fuzz --differential URL2` and the replay of a divergence on both brokers.

    amqpspec fuzz --broker URL --differential URL2 [--profile2 NAME] [--admin2 URL] ...
    amqpspec fuzz replay DIR/findings/<id> --broker URL --differential URL2 [--profile2 NAME]

Owns: the second target (its profile, default the first's; its admin API for the queue),
the start-up checks (both brokers serve; the second takes the first's login and addresses,
since both get the same bytes), the differential campaign's summary and exit status:
0 no divergence a rule decides (every divergence, if any, labelled `spec allows both`),
1 a divergence where the single-broker oracle holds a verdict against a side (a MUST it
breaks, or a robustness verdict: crash, hang, error-missing), 2 usage or a broker
unreachable at the start, 3 a campaign stopped by the fuzzer's own error
(amqpspec.exit_status; docs/fuzz.md, "Differential campaigns"). The work is in
fuzz.differential; fuzz.cli hands over when `--differential` is given (the option checks
shared with it are fuzz.cli_support's).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from amqpspec import exit_status
from amqpspec.fuzz.cli_support import (
    FuzzUsageError,
    Progress,
    check_budget,
    chosen_workers,
    corpus_of,
    declare,
    failed_status,
    parse_strategies,
    print_behaviours,
    target_from,
    target_of,
    write_findings_md,
)
from amqpspec.fuzz.differential import DifferentialCampaign, Pair, replay_divergence
from amqpspec.fuzz.divergence import DIVERGENCE, SPEC_ALLOWS_BOTH
from amqpspec.fuzz.oracle import Bounds, Target, alive
from amqpspec.fuzz.pace import MAX_WORKERS


def pair_from(args: argparse.Namespace, workers: int = 1) -> Pair:
    """Both targets; FuzzUsageError when either is unusable or the second does not take
    the first's login and addresses."""
    first = target_of(args)
    first.memory = None  # a differential campaign compares replies, not memory
    profile2 = args.profile2 or args.profile
    second = target_from(args.differential, profile2)
    reply = args.reply_timeout if args.reply_timeout is not None else second.profile.wait
    second.bounds = Bounds(reply=reply, restart_wait=args.restart_wait)
    if args.admin2 and second.profile.declare_queues:
        declare(second.profile, args.admin2)
    for target in (first, second):
        if not alive(target):
            raise FuzzUsageError(
                f"broker {target.url} is unreachable (no open/begin/attach answer)"
            )
    # the same bytes go to both: the second must log in and attach as the first's profile
    probe = Target(second.host, second.port, first.handshake, second.bounds)
    if not alive(probe):
        raise FuzzUsageError(
            f"{second.url} does not take {first.url}'s login and addresses (profile "
            f"{args.profile}: source {first.handshake.source!r}); put first the broker whose "
            "addresses both take (e.g. RabbitMQ 3.x's v1 addresses, which the reference "
            "broker takes too)"
        )
    names = (f"A ({args.profile} {first.url})", f"B ({profile2} {second.url})")
    from concurrent.futures import ThreadPoolExecutor

    return Pair(first, second, names, ThreadPoolExecutor(max(4, 2 * workers + 4)))


class _DiffProgress(Progress):
    def __init__(self, quiet: bool) -> None:
        super().__init__(quiet)
        self.divergent = lambda: 0

    def _text(self, stats) -> str:  # type: ignore[no-untyped-def]
        return f"{super()._text(stats)}  divergent cases {self.divergent()}"


def campaign(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.campaign import CampaignConfig

    check_budget(args)
    strategies = parse_strategies(args.strategy)
    auto = args.workers == "auto"
    pair = pair_from(args, MAX_WORKERS if auto else args.workers)
    corpus = corpus_of(args)
    config = CampaignConfig(
        pair.a, args.out, strategies, args.seed, args.duration, args.cases, 1, corpus
    )
    # auto: the workers the slower of the two brokers needs (fuzz.pace)
    config.workers = chosen_workers(
        args.workers, [config, dataclasses.replace(config, target=pair.b)], args.quiet
    )
    progress = _DiffProgress(args.quiet)
    run = DifferentialCampaign(config, pair, progress.update)
    store = run.store
    progress.behaviours = lambda: len(store.behaviours)
    progress.divergent = lambda: run.divergences
    store.note_campaign(
        broker=pair.a.url,
        profile=args.profile,
        broker2=pair.b.url,
        profile2=args.profile2 or args.profile,
        seed=args.seed,
        strategies=list(strategies),
        differential=True,
    )
    try:
        stats = run.run()
    finally:
        pair.close()
    progress.done(stats)
    groups = write_findings_md(args.out)
    decided = _print_summary(args, run, stats)
    if groups:
        print_behaviours(args.out, groups)
    failed = failed_status(stats)
    if failed is not None:
        return failed
    return exit_status.VIOLATIONS if decided else exit_status.OK


def _print_summary(args: argparse.Namespace, run: DifferentialCampaign, stats) -> int:  # type: ignore[no-untyped-def]
    """The campaign's lines on stdout; returns how many divergences a rule decides."""
    findings = list(run.store.findings.values())
    decided = [f for f in findings if f.kind != DIVERGENCE or f.level != SPEC_ALLOWS_BOTH]
    print(
        f"amqpspec fuzz --differential: {stats.cases} cases on both brokers in "
        f"{time.monotonic() - stats.started:.1f} s ({stats.rate:.1f}/s), {run.divergences} "
        f"divergent case(s), {len(findings)} divergence(s) confirmed "
        f"({len(decided)} where the oracle holds a verdict against a side, "
        f"{len(findings) - len(decided)} {SPEC_ALLOWS_BOTH}) in "
        f"{os.path.join(args.out, 'findings.json')}"
        + (f" [{stats.stopped}]" if stats.stopped else "")
    )
    if stats.kept:
        print(
            f"amqpspec fuzz: {stats.kept} divergence(s) of new signatures not triaged (the "
            f"queue full, or the grace over), kept in {os.path.join(args.out, 'candidates')} "
            "(`amqpspec fuzz replay DIR/candidates/<id> --broker URL --differential URL2`)"
        )
    for finding in findings:
        print(f"  {finding.id} [{finding.level}] {finding.summary}")
        for line in finding.extra.get("divergence", {}).get("labels", []):
            print(f"      {line}")
    return len(decided)


def replay(args: argparse.Namespace) -> int:
    from amqpspec.fuzz.case import CaseFileError

    pair = pair_from(args)
    try:
        result = replay_divergence(pair, args.path, args.times)
    except CaseFileError as exc:
        raise FuzzUsageError(f"cannot read {exc}") from None
    finally:
        pair.close()
    for number, (seen, (a, _b)) in enumerate(zip(result.seen, result.outcomes), 1):
        if seen is None:
            print(f"  replay {number}: no divergence (both: {seen_text(a)})")
        else:
            print(
                f"  replay {number}: {seen.kind}: {pair.names[0]} {seen.a.text()}; "
                f"{pair.names[1]} {seen.b.text()}"
            )
    print(f"reproduced {result.reproduced}/{result.times} {result.wanted or 'any divergence'}")
    return 1 if result.reproduced else 0


def seen_text(outcome) -> str:  # type: ignore[no-untyped-def]
    from amqpspec.fuzz.divergence import reaction_of

    return reaction_of(outcome).text()


def needs_pair(path: str) -> None:
    """FuzzUsageError for a divergence's reproducer replayed on one broker."""
    from amqpspec.fuzz.case import CaseFileError, load_case

    try:
        _, record = load_case(path)
    except CaseFileError:
        return  # replay_finding says why
    if record.get("kind") == DIVERGENCE:
        raise FuzzUsageError(
            f"{path} is a divergence of two brokers: replay it with --broker URL "
            "--differential URL2 (the command is in the campaign's findings.md)"
        )
