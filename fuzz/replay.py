"""Replays: a fuzz finding's reproducer, or any recorded trace, sent again to a broker.

Owns: `replay_finding(target, path, times)` (`amqpspec fuzz replay`: the reproducer's
steps sent `times` times, each judged by the same oracle as the campaign; returns the
count reproduced and the verdicts) and `replay_trace(target, path)` (`amqpspec trace
replay`: every connection's client side re-sent, the broker's frames compared, by
performative and error condition, with those recorded).
"""

from __future__ import annotations

from dataclasses import dataclass

from amqpspec.amqp10.frames import Frame
from amqpspec.amqp10.origins import SERVER
from amqpspec.fuzz.case import client_sides, load_case
from amqpspec.fuzz.findings import signature
from amqpspec.fuzz.oracle import Target, Verdict, run_case
from amqpspec.traces.load import open_trace

REPLAY_PACE = 0.05  # a recorded client waited for answers: so does its replay, this long


@dataclass(slots=True)
class ReplayResult:
    reproduced: int
    times: int
    expected: tuple[str, str] | None  # (kind, rule) the reproducer was saved with
    verdicts: list[Verdict | None]
    signature: str = ""


def replay_finding(target: Target, path: str, times: int = 3) -> ReplayResult:
    """Send the reproducer at `path` (a .json or a finding directory) `times` times."""
    case, record = load_case(path)
    expected = (record["kind"], record["rule"]) if "kind" in record and "rule" in record else None
    careful = expected is not None and expected[0] == "resource"
    # as it was confirmed: the fuzzer's close held for the bound (fuzz.oracle), unless the
    # finding says its confirming runs closed at once (a verdict the broker's own frames prove)
    quick = record.get("close_held") is False
    verdicts = [run_case(target, case.steps, careful, quick=quick).verdict for _ in range(times)]

    def matches(v: Verdict | None) -> bool:
        if v is None:
            return False
        return expected is None or (v.kind, v.rule) == expected

    reproduced = sum(matches(v) for v in verdicts)
    sig = str(record.get("signature", ""))
    if not sig:
        first = next((v for v in verdicts if v is not None), None)
        if first is not None and case.steps:
            sig = signature(first.kind, first.rule, first.section, case.steps[-1].label, "-")
    return ReplayResult(reproduced, times, expected, verdicts, sig)


def _answer(frame: Frame) -> str:
    error = getattr(frame.performative, "error", None)
    if error is not None:
        return f"{frame.name}:{error.condition}"
    return frame.name


@dataclass(slots=True)
class ConnectionReplay:
    connection: int
    recorded: list[str]
    replayed: list[str]
    verdict: Verdict | None

    @property
    def same(self) -> bool:
        return self.recorded == self.replayed

    def line(self) -> str:
        if self.same:
            head = f"connection {self.connection}: same {len(self.recorded)} broker frame(s)"
        else:
            at = next(
                (i for i, (a, b) in enumerate(zip(self.recorded, self.replayed)) if a != b),
                min(len(self.recorded), len(self.replayed)),
            )
            was = self.recorded[at] if at < len(self.recorded) else "(nothing)"
            now = self.replayed[at] if at < len(self.replayed) else "(nothing)"
            head = (
                f"connection {self.connection}: differs at broker frame {at}: recorded "
                f"{was}, replayed {now} ({len(self.recorded)} vs {len(self.replayed)} frames)"
            )
        if self.verdict is not None:
            head += f"; oracle: {self.verdict.kind} {self.verdict.rule}: {self.verdict.summary}"
        return head


def replay_trace(target: Target, path: str) -> list[ConnectionReplay]:
    """Re-send each recorded connection's client side; compare the broker's frames."""
    recorded: dict[int, list[str]] = {}
    for item in open_trace(path):
        if item.direction == SERVER and isinstance(item.item, Frame) and not item.item.is_empty:
            recorded.setdefault(item.connection_id, []).append(_answer(item.item))
    results = []
    for number, steps in enumerate(client_sides(path), 1):
        outcome = run_case(target, steps, pace=REPLAY_PACE)
        replayed = []
        if outcome.recording is not None:
            replayed = [
                _answer(t.item)
                for t in outcome.recording.items
                if t.direction == SERVER and isinstance(t.item, Frame) and not t.item.is_empty
            ]
        connection_ids = sorted(recorded) or [number]
        key = connection_ids[number - 1] if number - 1 < len(connection_ids) else number
        expected = recorded.get(key, [])
        # our closing close is answered: compare what the recording has
        results.append(
            ConnectionReplay(key, expected, replayed[: max(len(expected), 1)], outcome.verdict)
        )
    return results
