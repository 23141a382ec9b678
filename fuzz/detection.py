"""Detection power of the fuzzer: how fast it finds each parser/state-machine fault.

    python -m amqpspec.fuzz.detection [--budget SECONDS] [--seed N] [--out reports] [--clean S]
                             [--kind single|multi|both] [FAULT ...]

Owns: `Supervised` (a reference broker with faults on, restarted on the same ports when
a fault makes it exit, like a service manager would), `detect(fault, budget, seed)` (one
network campaign against it until the first finding or the budget) and writing
`<out>/fuzz-detection.md`: fault x time to the first finding x its kind and signature,
for a fixed seed and budget, plus the clean broker's campaign (0 findings expected). The
concurrency faults (faults.CONCURRENCY_FAULTS: only two consumers of one queue show them) get
multi-party campaigns (fuzz.multiparty, each run's queue declared through the admin API);
the clean campaign is multi-party when every fault asked for is one of them (`--kind` says
otherwise).
Exit status 1 when a fault is not found within the budget or the clean broker has one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from amqpspec.fuzz.campaign import Campaign, CampaignConfig
from amqpspec.fuzz.cli_support import QUEUE, memory_reader
from amqpspec.fuzz.model import Handshake
from amqpspec.fuzz.multiparty import LockedAdmin
from amqpspec.fuzz.oracle import Bounds, Target
from amqpspec.reference_broker.admin.client import ManagementClient
from amqpspec.reference_broker.faults.catalog import CATALOG, CONCURRENCY_FAULTS, PARSER_LAYER
from amqpspec.reference_broker.runtime.process import BrokerProcess, free_port

PARSER_FAULTS = [name for name, info in CATALOG.items() if info.layer == PARSER_LAYER]


class Supervised:
    """A reference broker on fixed free ports, restarted whenever it exits."""

    def __init__(self, faults: list[str]) -> None:
        self.faults = faults
        self.restarts = 0
        self._stop = threading.Event()
        for attempt in range(5):  # a free port may be taken before the broker binds it
            self.port = free_port()
            self.admin_port = free_port(avoid={self.port})
            try:
                self.broker = self._start()
                break
            except AssertionError:
                if attempt == 4:
                    raise
        self._watch = threading.Thread(target=self._watcher, daemon=True)
        self._watch.start()

    def _start(self) -> BrokerProcess:
        ports = ("--port", str(self.port), "--admin-port", str(self.admin_port))
        return BrokerProcess(*ports, faults=self.faults, admin=True)

    def _watcher(self) -> None:
        while not self._stop.wait(0.1):
            if self.broker.proc.poll() is not None and not self._stop.is_set():
                self.restarts += 1
                self.broker._finish()
                try:
                    self.broker = self._start()
                except AssertionError:  # slow or port not yet free: the next turn retries
                    continue

    @property
    def url(self) -> str:
        return self.broker.url  # the same ports on every restart

    @property
    def admin_url(self) -> str:
        return self.broker.admin_url

    def stop(self) -> None:
        self._stop.set()
        self._watch.join(5)
        self.broker.stop()


def target_for(broker: Supervised) -> Target:
    queue = f"/queues/{QUEUE}"
    target = Target(
        "127.0.0.1",
        broker.port,
        Handshake(source=queue, target=queue),
        Bounds(reply=1.5, restart_wait=20.0),
        memory_reader(broker.admin_url),
    )
    from amqpspec.conformance.profile import load_profile

    target.profile = load_profile("reference")  # its /management node: multi-party M1
    with ManagementClient(f"http://127.0.0.1:{broker.admin_port}") as client:
        client.declare_queue(QUEUE)
    return target


@dataclass(slots=True)
class Detection:
    fault: str
    seconds: float | None  # to the first confirmed finding (None: not found)
    cases: int
    kind: str = ""
    signature: str = ""
    reproducer: list[str] | None = None
    cases_kind: str = "single"  # the campaign's --kind


def kind_for(faults: list[str]) -> str:
    """multi for the concurrency faults (multi-party cases show them), else single."""
    return "multi" if faults and all(f in CONCURRENCY_FAULTS for f in faults) else "single"


def detect(
    faults: list[str],
    budget: float,
    seed: int,
    workers: int = 2,
    stop_at_first: bool = True,
    kind: str | None = None,
) -> Detection:
    """One campaign against a reference broker with `faults` on (`kind`: single, multi or
    both; default kind_for(faults))."""
    kind = kind or kind_for(faults)
    broker = Supervised(faults)
    out = tempfile.mkdtemp(prefix="amqpspec-detection-")
    try:
        config = CampaignConfig(target_for(broker), out, seed=seed, duration=budget,
                                workers=workers, kind=kind)  # fmt: skip
        if kind != "single":
            admin = ManagementClient(f"http://127.0.0.1:{broker.admin_port}")
            config.queues = LockedAdmin(admin)
        first: list[float] = []

        def progress(stats) -> None:  # type: ignore[no-untyped-def]
            if stats.findings and not first:
                first.append(time.monotonic() - stats.started)
                if stop_at_first:
                    campaign.stop("first finding")

        campaign = Campaign(config, progress)
        stats = campaign.run()
        name = "+".join(faults) or "clean"
        findings = list(campaign.store.findings.values())
        if not findings:
            return Detection(name, None, stats.cases, cases_kind=kind)
        finding = findings[0]
        seconds = first[0] if first else time.monotonic() - stats.started
        return Detection(
            name, seconds, stats.cases, finding.kind, finding.signature, finding.frames, kind
        )
    finally:
        broker.stop()
        shutil.rmtree(out, ignore_errors=True)


def report(rows: list[Detection], clean: Detection | None, budget: float, seed: int) -> str:
    lines = [
        "# Fuzzer detection power",
        "",
        "Generated by `python -m amqpspec.fuzz.detection` (a network campaign per fault against "
        "the "
        f"reference broker with that `--fault` on; seed {seed}, budget {budget:.0f} s each, "
        "2 workers, stopped at the first confirmed finding: minimised, replayed 3/3). "
        f"Machine: {os.cpu_count()} cores.",
        "",
        "| fault | cases | found after | cases run | kind | signature | minimised reproducer |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        found = f"{row.seconds:.1f} s" if row.seconds is not None else "NOT FOUND"
        steps = ", ".join(row.reproducer or [])
        lines.append(
            f"| `{row.fault}` | {row.cases_kind} | {found} | {row.cases} | {row.kind} | "
            f"`{row.signature}` | {steps} |"
        )
    if clean is not None:
        verdict = "0 findings" if clean.seconds is None else f"FINDING: {clean.signature}"
        lines += [
            "",
            f"Clean reference broker ({clean.cases_kind} cases): {clean.cases} cases, {verdict}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m amqpspec.fuzz.detection", description=__doc__)
    parser.add_argument("faults", nargs="*", help=f"default: {' '.join(PARSER_FAULTS)}")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per fault")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--clean", type=float, default=60.0, help="seconds on the clean broker")
    parser.add_argument("--out", default="reports")
    parser.add_argument(
        "--kind",
        choices=("single", "multi", "both"),
        help="the clean campaign's cases (default: multi when every fault named is a "
        "concurrency fault, else single); each fault's campaign: multi for the concurrency "
        "faults, else single",
    )
    args = parser.parse_args(argv)
    rows = []
    for fault in args.faults or PARSER_FAULTS:
        if fault not in CATALOG:
            print(f"unknown fault {fault!r}", file=sys.stderr)
            return 2
        row = detect([fault], args.budget, args.seed)
        print(f"{fault}: {row.seconds} s, {row.kind} {row.signature}", flush=True)
        rows.append(row)
    clean_kind = args.kind or kind_for(list(args.faults))
    clean = None
    if args.clean > 0:
        clean = detect([], args.clean, args.seed, stop_at_first=False, kind=clean_kind)
    if clean is not None:
        print(f"clean: {clean.cases} cases, finding: {clean.signature or 'none'}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "fuzz-detection.md")
    with open(path + ".tmp", "w", encoding="utf-8") as file:
        file.write(report(rows, clean, args.budget, args.seed))
    os.replace(path + ".tmp", path)
    print(f"wrote {path}")
    missed = any(r.seconds is None for r in rows) or (clean is not None and clean.seconds)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
