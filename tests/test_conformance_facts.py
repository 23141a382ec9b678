"""The run's facts (docs/conformance.md "Concurrent cases"): once a full wait for the window-0 flow
of a memory alarm went unanswered, later alarm cases of the run wait `AFTER_MISS_S`; the verdict of
every wait stays what a full wait gives, for a broker that never sends the flow and for one that
sends it late (fake probes: no broker, no sleeping)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from amqpspec.amqp10.composites import Flow
from amqpspec.amqp10.frames import Frame
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.facts import RunFacts
from amqpspec.conformance.steps.alarms import AFTER_MISS_S, ALARM_WINDOW_0, window_closed
from amqpspec.conformance.verdicts import CaseFailed


class LateBroker:
    """A probe whose broker sends a flow with incoming-window 0 on channel `channel`
    `delay` seconds after the alarm (None: never); it records every bound waited."""

    def __init__(self, delay: float | None, channel: int = 0) -> None:
        self.delay = delay
        self.flow = Frame(
            0, channel, Flow(incoming_window=0, next_outgoing_id=0, outgoing_window=0)
        )
        self.waited: list[float] = []

    def _sent_within(self, bound: float) -> bool:
        return self.delay is not None and self.delay <= bound

    def wait_for_frame(self, name: str, timeout: float, predicate: Any, since: int) -> Frame:
        self.waited.append(timeout)
        if self._sent_within(timeout) and predicate(self.flow):
            return self.flow
        raise WaitTimeout(f"no {name} frame from the broker within {timeout:g}s")

    def frames_since(self, since: int, name: str) -> list[SimpleNamespace]:
        return [SimpleNamespace(item=self.flow)] if self._sent_within(self.waited[-1]) else []


def _case(facts: RunFacts, case_id: str) -> Any:
    return SimpleNamespace(facts=facts, case=SimpleNamespace(case_id=case_id))


BOUNDS = [5.0, 5.0, 10.0, 10.0, 5.0, 10.0, 5.0]  # the alarm cases' bounds, in suite order


@pytest.mark.parametrize("delay", [None, 0.05, 0.9, 4.0, 7.0, 12.0])
def test_every_wait_gets_the_verdict_of_a_full_wait(delay: float | None) -> None:
    facts = RunFacts()
    for index, bound in enumerate(BOUNDS):
        probe = LateBroker(delay)
        full = delay is not None and delay <= bound
        try:
            window_closed(probe, _case(facts, f"case-{index}"), 0, bound)  # type: ignore[arg-type]
            seen = True
        except CaseFailed:
            seen = False
        assert seen == full, (index, bound, probe.waited)


def test_a_broker_that_never_closes_its_window_is_waited_for_in_full_once_per_bound() -> None:
    facts = RunFacts()
    waited = []
    for index, bound in enumerate(BOUNDS):
        probe = LateBroker(None)
        with pytest.raises(CaseFailed) as failed:
            window_closed(probe, _case(facts, f"case-{index}"), 0, bound)  # type: ignore[arg-type]
        waited += probe.waited
        if index == 4:
            assert "case-2 waited 10s for one in vain this run" in str(failed.value)
    assert waited == [5.0, AFTER_MISS_S, 10.0] + [AFTER_MISS_S] * 4
    known = facts.unanswered(ALARM_WINDOW_0)
    assert known is not None and (known.bound, known.case_id) == (10.0, "case-2")


def test_a_flow_on_another_session_is_not_recorded_as_no_flow() -> None:
    """A broker that closes one session's window but not the one waited for has not shown
    that it sends no window-0 flow: nothing is recorded, the next case waits in full."""
    facts = RunFacts()
    probe = LateBroker(0.1, channel=1)
    with pytest.raises(CaseFailed):
        window_closed(probe, _case(facts, "one-session"), 0, 5.0, channel=0)  # type: ignore[arg-type]
    assert facts.unanswered(ALARM_WINDOW_0) is None
    later = LateBroker(3.0)
    window_closed(later, _case(facts, "next"), 0, 5.0)  # type: ignore[arg-type]
    assert later.waited == [5.0]


def test_facts_keep_the_longest_unanswered_bound() -> None:
    facts = RunFacts()
    assert facts.shortened("w", 5.0, 1.0) is None
    facts.record_unanswered("w", 5.0, "a")
    facts.record_unanswered("w", 2.0, "b")
    assert facts.unanswered("w") == facts.shortened("w", 5.0, 1.0)
    assert facts.shortened("w", 10.0, 1.0) is None  # a longer wait is not known to be vain
    assert facts.shortened("w", 0.5, 1.0) is None  # never longer than asked
    assert facts.shortened("other", 1.5, 1.0) is None
