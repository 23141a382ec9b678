"""Whole-campaign fuzzing speed against any broker: what `amqpspec fuzz` gets, triage included.

    python -m amqpspec.bench.fuzz_bench --broker URL|reference [--profile NAME] [--admin URL]
                                        [--seconds 120] [--seed 3] [--workers auto,1,32]

Owns: `run_campaign(target, seconds, seed, workers)` and the rows `bench.fuzz_bench` prints
for `--broker`: one campaign per entry of `--workers` (`auto`: fuzz.pace's choice, as the
CLI's default), each `fuzz.campaign.Campaign` exactly as `amqpspec fuzz --duration S --seed N`
runs it (generation, oracle, state coverage, the triage queue and its grace, the workers
spread over `--processes auto`'s worker processes; no memory watch), in a fresh temporary
directory. `reference` starts a reference broker on free ports (profile reference).
Figures: cases / wall time of the whole campaign (the budget plus the triage's grace: what
a user waits), cases / budget, findings, candidates triaged, kept untriaged (grace over, or
further examples of a behaviour), state coverage, and the CPU per case of the fuzzer (its
process and its worker processes) and of the broker (reference only), and the share of the
machine's CPU time the hypervisor gave to others while the campaign ran (`steal`, Linux's
/proc/stat; None elsewhere): on a shared host the same code runs markedly slower when that
share rises, so a rate comes with it. bench/README.md ("Fuzzer speed") quotes them with the
command and the machine's load.
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from dataclasses import dataclass

from amqpspec.fuzz.campaign import Campaign, CampaignConfig
from amqpspec.fuzz.oracle import Bounds, Target


@dataclass(slots=True)
class CampaignFigures:
    workers: int
    processes: int
    cases: int
    budget: float
    wall: float
    findings: int
    triaged: int
    kept: int
    coverage: float
    fuzzer_cpu: float = 0.0  # CPU seconds of the campaign's process and its worker processes
    broker_cpu: float | None = None  # CPU seconds of the broker's process (reference only)
    steal: float | None = None  # the hypervisor's share of the machine's CPU time, 0..1

    @property
    def whole_rate(self) -> float:
        return self.cases / max(1e-9, self.wall)

    @property
    def budget_rate(self) -> float:
        return self.cases / max(1e-9, self.budget)

    def row(self, label: str) -> tuple[str, str]:
        return (
            f"{label}, {self.workers} workers in {self.processes} process(es)",
            f"{self.whole_rate:,.1f}/s whole ({self.cases} cases in {self.wall:.0f} s), "
            f"{self.budget_rate:,.1f}/s in the budget; {self.findings} findings, "
            f"{self.triaged} triaged, {self.kept} kept; state coverage "
            f"{100 * self.coverage:.1f}%; CPU per case: fuzzer {self.per_case(self.fuzzer_cpu)}"
            + ("" if self.broker_cpu is None else f", broker {self.per_case(self.broker_cpu)}")
            + ("" if self.steal is None else f"; steal {100 * self.steal:.1f}%"),
        )

    def per_case(self, seconds: float) -> str:
        return f"{1000 * seconds / max(1, self.cases):.2f} ms"


def target_for(broker: str, profile: str, admin: str | None) -> Target:
    """The broker as `amqpspec fuzz` would see it (the profile's reply bound; with `admin`,
    the fuzz queue declared first)."""
    from amqpspec.fuzz.cli import QUEUE, target_from

    target = target_from(broker, profile)
    target.bounds = Bounds(reply=target.profile.wait)
    if admin and target.profile.declare_queues:
        from amqpspec.conformance.admin import make_admin

        client = make_admin(target.profile.admin, admin)
        try:
            client.declare_queue(QUEUE)
        finally:
            client.close()
    return target


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) process `pid` used so far (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_times(stat: str) -> tuple[int, int] | None:
    """(steal, total) clock ticks of the machine from /proc/stat's text: its first line,
    `cpu  user nice system idle iowait irq softirq steal ...` (proc(5)); None without one.
    guest and guest_nice are already counted in user and nice, so they are left out."""
    for line in stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(value) for value in fields[1:9]]
            if len(ticks) < 8:
                return None
            return ticks[7], sum(ticks)
    return None


def read_cpu_times() -> tuple[int, int] | None:
    """`cpu_times` of this machine now (None where /proc/stat cannot be read)."""
    try:
        with open("/proc/stat", encoding="ascii") as file:
            return cpu_times(file.read())
    except OSError:
        return None


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The hypervisor's share (0..1) of the machine's CPU time between two readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def own_cpu() -> float:
    """CPU seconds of this process and of its children waited for (the worker processes)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_campaign(
    target: Target,
    seconds: float,
    seed: int,
    workers: str,
    keep: str | None = None,
    broker_pid: int | None = None,
    processes: str = "auto",
) -> CampaignFigures:
    """One whole campaign of `seconds` (`workers`: a number or auto), in a temporary
    directory, or under `keep` (its findings kept: `amqpspec fuzz report` reads it);
    `processes`: worker processes, a number or auto (`amqpspec fuzz --processes`).
    CPU per case: the campaign's (getrusage: this process and its worker processes) and,
    with `broker_pid`, the broker's (/proc): load distorts them less than the rates."""
    from amqpspec.fuzz.pace import choose_processes, choose_workers, measure_case_latency

    if keep:
        os.makedirs(keep, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fuzz-bench-", dir=keep) as scratch:
        name = f"workers-{workers}-seed-{seed}"
        if processes != "auto":
            name = f"workers-{workers}-processes-{processes}-seed-{seed}"
        out = os.path.join(keep, name) if keep else scratch
        config = CampaignConfig(target, out, seed=seed, duration=seconds, workers=1)
        if workers == "auto":
            config.workers = choose_workers(measure_case_latency(config))
        else:
            config.workers = int(workers)
        if processes == "auto":
            config.processes = choose_processes(config.workers)  # `amqpspec fuzz`'s default
        else:
            config.processes = int(processes)
        broker_before = process_cpu(broker_pid) if broker_pid else None
        machine_before = read_cpu_times()
        cpu_before, started = own_cpu(), time.monotonic()
        stats = Campaign(config).run()
        wall = time.monotonic() - started
        fuzzer_cpu = own_cpu() - cpu_before
        broker_after = process_cpu(broker_pid) if broker_pid else None
        steal = steal_share(machine_before, read_cpu_times())
    broker_cpu = None
    if broker_before is not None and broker_after is not None:
        broker_cpu = broker_after - broker_before
    return CampaignFigures(
        workers=config.workers,
        processes=config.processes,
        cases=stats.cases,
        budget=seconds,
        wall=wall,
        findings=stats.findings,
        triaged=stats.triaged,
        kept=stats.kept + stats.examples,
        coverage=stats.coverage,
        fuzzer_cpu=fuzzer_cpu,
        broker_cpu=broker_cpu,
        steal=steal,
    )
