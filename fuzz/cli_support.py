"""What the fuzz commands share (fuzz.cli, fuzz.differential_cli, fuzz.detection): a target
from the options, the admin API's memory reader and queue set-up, the option checks, the
number of workers and processes, the progress line and findings.md's summary.

Owns: `FuzzUsageError` (a bad option or an unusable target: exit 2 with its message),
`QUEUE` (the fuzz queue every profile's addresses name), `target_from(broker, profile)`,
`target_of(args)`, `memory_reader(admin_url)`, `declare(profile, admin_url)`,
`queue_admin(args, target)`, `parse_strategies(text)`, `check_budget(args)`,
`chosen_workers` / `chosen_processes` (fuzz.pace for auto), `write_findings_md(directory)`,
`print_behaviours(directory, groups)`, `Progress`, `corpus_of(args)` and `failed_status(stats)`
(exit 3 for a campaign stopped by the fuzzer's own error). Builds no AMQP bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from urllib.parse import unquote, urlsplit

from amqpspec.fuzz.model import FUZZ_QUEUE
from amqpspec.fuzz.mutators import STRATEGIES
from amqpspec.fuzz.oracle import Bounds, Target

QUEUE = FUZZ_QUEUE


class FuzzUsageError(Exception):
    """A bad option or an unusable target: exit 2 with this message."""


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


def target_of(args: argparse.Namespace) -> Target:
    target = target_from(args.broker, args.profile)
    profile = target.profile
    reply = args.reply_timeout if args.reply_timeout is not None else profile.wait
    if reply <= 0:
        raise FuzzUsageError("--reply-timeout must be positive")
    target.bounds = Bounds(reply=reply, restart_wait=args.restart_wait)
    if args.admin:
        target.memory = memory_reader(args.admin)
        if profile.declare_queues:
            declare(profile, args.admin)
    return target


def memory_reader(url: str):  # type: ignore[no-untyped-def]
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


def declare(profile, admin_url: str) -> None:  # type: ignore[no-untyped-def]
    from amqpspec.conformance.admin import make_admin

    admin = make_admin(profile.admin, admin_url)
    try:
        admin.declare_queue(QUEUE)
    except Exception as exc:
        raise FuzzUsageError(f"cannot declare queue {QUEUE!r} through {admin_url}: {exc}") from None
    finally:
        admin.close()


def queue_admin(args: argparse.Namespace, target: Target):  # type: ignore[no-untyped-def]
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


def parse_strategies(text: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown or not chosen:
        raise FuzzUsageError(f"unknown strategy {unknown}; choose from {','.join(STRATEGIES)}")
    return chosen


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


def write_findings_md(directory: str) -> list:
    from amqpspec.fuzz.findings_report import write_report

    return write_report(directory)


def print_behaviours(directory: str, groups: list) -> None:
    from amqpspec.fuzz.findings_report import REPORT_NAME, summary_lines

    findings = sum(len(g.findings) for g in groups)
    print(
        f"by broker behaviour: {len(groups)} behaviour(s) from {findings} finding(s) in "
        f"{os.path.join(directory, REPORT_NAME)}"
    )
    for line in summary_lines(groups):
        print(f"  {line}")


class Progress:
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
            + (f"  skipped {skipped} (crash thresholds)" if (skipped := _skipped(stats)) else "")
            + _memory_text(stats)
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


def corpus_of(args: argparse.Namespace) -> list:
    """--corpus: every trace and reproducer under the directory (fuzz.seeds), or none."""
    if not args.corpus:
        return []
    if not os.path.isdir(args.corpus):
        raise FuzzUsageError(f"--corpus {args.corpus}: not a directory")
    from amqpspec.fuzz.seeds import load_corpus

    return load_corpus(args.corpus)


def failed_status(stats) -> int | None:  # type: ignore[no-untyped-def]
    """A campaign stopped by the fuzzer's own error did not run its budget: no verdict,
    neither "no finding" nor findings (exit 3, said on stderr); None otherwise."""
    from amqpspec import exit_status
    from amqpspec.fuzz.stops import WORKER_FAILED

    if not stats.stopped.startswith(WORKER_FAILED):
        return None
    print(
        f"amqpspec fuzz: the campaign failed, no verdict (exit {exit_status.JOB_FAILED}): "
        f"{stats.stopped}",
        file=sys.stderr,
    )
    return exit_status.JOB_FAILED


def _skipped(stats) -> int:  # type: ignore[no-untyped-def]
    """Cases skipped by the crash thresholds (fuzz.crash_sites), where a campaign counts
    them."""
    return getattr(stats, "skipped", 0)


def _memory_text(stats) -> str:  # type: ignore[no-untyped-def]
    """The memory watch's searches (fuzz.memory_watch): they pause every case."""
    searches = getattr(stats, "memory_searches", 0)
    if not searches:
        return ""
    unsearched = getattr(stats, "memory_unsearched", 0)
    return f"  memory searches {searches} ({stats.memory_search_s:.0f}s paused" + (
        f", {unsearched} past their share)" if unsearched else ")"
    )
