"""What a fuzz campaign leaves to CPython's cyclic collector: as little as can be.

Errors kept past their except block carry no traceback (amqp10.errors.kept).

A kept traceback holds the frames the error passed through, each frame its locals and its
callers: a cycle only the cyclic collector frees, and with it everything those frames held.
In a fuzz campaign that was every case's whole trace (recording, frames, items), and the
collector cost the fuzzer about a fifth of its CPU (bench/README.md, "Fuzzer speed"). These
tests turn the collector off and check that what a bad input touched is freed by reference
counting alone: the monitor that met undecodable bytes, the engine's protocol-error event,
and a fuzz case's recording against the reference broker over real sockets. And what
lives when a campaign starts is frozen (gc.freeze) while it runs, and unfrozen after.
"""

from __future__ import annotations

import gc
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from engine_support import server_peer

from amqpspec.amqp10 import composites
from amqpspec.amqp10.errors import DecodeError, kept
from amqpspec.amqp10.frames import AMQP_HEADER, encode_frame
from amqpspec.amqp10.monitor import ConnectionMonitor
from amqpspec.amqp10.origins import CLIENT
from amqpspec.conformance.probe.recording import Recording
from amqpspec.fuzz.campaign import Campaign, CampaignConfig
from amqpspec.fuzz.evidence import stream_status
from amqpspec.fuzz.making import make_case
from amqpspec.fuzz.model import QUEUE_HANDSHAKE
from amqpspec.fuzz.oracle import Target, run_case
from amqpspec.reference_broker.runtime.process import BrokerProcess

# an end whose performative list is replaced by null: 2.7.8's fields cannot be read
_BAD_END = encode_frame(composites.End())[:-1] + b"\x40"


@contextmanager
def _collector_off() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def test_kept_clears_the_tracebacks_of_the_error_its_cause_and_its_context() -> None:
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise DecodeError(3, "a list") from inner
    except DecodeError as exc:
        error = kept(exc)
    assert error.__traceback__ is None
    assert error.__cause__ is not None and error.__cause__.__traceback__ is None
    assert error.__context__ is not None and error.__context__.__traceback__ is None
    assert (error.offset, error.expected) == (3, "a list")  # what it says is kept


def test_kept_clears_a_context_that_is_not_the_cause() -> None:
    try:
        raise ValueError("the cause, raised earlier")
    except ValueError as raised:
        cause = raised
    try:
        try:
            raise KeyError("handled when the error came")
        except KeyError:
            raise DecodeError(5, "a frame") from cause
    except DecodeError as exc:
        error = kept(exc)
    assert error.__cause__ is cause and isinstance(error.__context__, KeyError)
    assert cause.__traceback__ is None
    assert error.__context__.__traceback__ is None
    assert error.__traceback__ is None


def test_a_monitor_that_met_undecodable_bytes_is_freed_without_the_collector() -> None:
    with _collector_off():
        monitor = ConnectionMonitor(check=False)
        monitor.feed(CLIENT, AMQP_HEADER.encode() + _BAD_END, 0.0)
        error = monitor.decode_error(CLIENT)
        assert error is not None and error.__traceback__ is None
        gone = weakref.ref(monitor)
        del monitor
        assert gone() is None


def test_the_engines_protocol_error_event_keeps_no_traceback() -> None:
    peer = server_peer()
    peer.frame(composites.End(), channel=5)  # no session begun on channel 5: raised (2.7.8)
    raised = peer.errors()
    assert raised and raised[0].error is not None
    assert raised[0].error.__traceback__ is None


def test_a_fuzz_cases_recording_is_freed_without_the_collector() -> None:
    with BrokerProcess() as broker:
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE)
        config = CampaignConfig(target, tempfile.mkdtemp(), seed=3)
        cases = [make_case(config, index) for index in range(60)]
        # cases whose bytes the core cannot decode are among them: their errors are kept
        assert any(stream_status(case.steps)[0] == "malformed" for case in cases)
        with _collector_off():
            before = _recordings()
            for case in cases:
                outcome = run_case(target, case.steps, quick=True)
                assert outcome.recording is not None
                del outcome
            left = _recordings() - before
        assert left == 0, f"{left} of {len(cases)} recordings wait for the cyclic collector"


def _recordings() -> int:
    """Recordings alive now (the cyclic collector is off: only reference counting frees)."""
    return sum(1 for thing in gc.get_objects() if isinstance(thing, Recording))


def test_a_campaign_freezes_the_heap_it_started_with_and_unfreezes_it_after() -> None:
    frozen_while_running: list[int] = []
    with BrokerProcess() as broker:
        target = Target("127.0.0.1", broker.port, QUEUE_HANDSHAKE)
        config = CampaignConfig(target, tempfile.mkdtemp(), seed=3, cases=30, workers=2)
        campaign = Campaign(
            config, on_progress=lambda stats: frozen_while_running.append(gc.get_freeze_count())
        )
        stats = campaign.run()
    assert stats.cases == 30
    assert frozen_while_running and min(frozen_while_running) > 0
    assert gc.get_freeze_count() == 0
