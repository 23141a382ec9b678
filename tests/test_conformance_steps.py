"""The steps of conformance/steps/ and the probe's crafted frames against a real reference
broker (a subprocess on free ports): crafted transfers and a crafted begin go through the
engine, which records them as sent, so its session and link state follow the wire; no
steps module registers a case."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import pytest

import amqpspec.conformance.steps
from amqpspec.amqp10.builder import mutate
from amqpspec.amqp10.composites import Begin
from amqpspec.amqp10.engine import RemoteBegin
from amqpspec.conformance.admin import make_admin
from amqpspec.conformance.audit.fault_matrix import reference_broker
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.profile import load_profile
from amqpspec.conformance.run.registry import load_cases
from amqpspec.conformance.steps.frames import send_one_delivery, send_transfers
from amqpspec.conformance.steps.links import publisher
from amqpspec.conformance.steps.refusals import sent_frame_outcome
from amqpspec.reference_broker.runtime.process import BrokerProcess

PROFILE = load_profile("reference")


class _Context:
    """The two CaseContext methods `publisher` uses."""

    def target_address(self, queue: str) -> str:
        return PROFILE.target(queue)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = reference_broker()
    yield running
    running.stop()


@pytest.fixture
def probe(broker: BrokerProcess) -> Iterator[Probe]:
    admin = make_admin(PROFILE.admin, broker.admin_url)
    admin.declare_queue("steps-q")
    admin.close()
    sasl = None if PROFILE.sasl == "none" else PROFILE.sasl
    client = Probe("127.0.0.1", broker.port, username=PROFILE.username,
                   password=PROFILE.password, sasl_mechanism=sasl, wait=5.0)  # fmt: skip
    yield client
    client.disconnect()


def test_crafted_transfers_advance_the_engines_ids_and_credit(probe: Probe) -> None:
    session, sender = publisher(probe, _Context(), "steps-q")  # type: ignore[arg-type]
    ids, delivery_id = session.next_outgoing_id, session.next_delivery_id
    count, credit = sender.delivery_count, sender.link_credit
    send_transfers(probe, session, sender, [b"a", b"b", b"c"], settled=True)
    send_one_delivery(probe, session, sender, b"d", 4)
    assert session.next_outgoing_id == ids + 3 + 4  # one transfer-id per frame (2.5.6)
    assert session.next_delivery_id == delivery_id + 4  # one per delivery
    assert (sender.delivery_count, sender.link_credit) == (count + 4, credit - 4)  # 2.6.7
    assert probe.error_outcome(timeout=0.5) == "timeout"  # within the window: accepted
    assert not [v for v in probe.violations if v.origin == "client"]  # the wire is legal


def test_crafted_begin_is_recorded_and_a_refused_frame_still_goes_out(probe: Probe) -> None:
    probe.open()
    begin = Begin(next_outgoing_id=7, incoming_window=10, outgoing_window=10)
    raw = mutate(begin).descriptor("amqp:begin:list").frame(3)
    session = probe.send_frame(begin, 3, raw=raw)
    probe.expect(lambda e: isinstance(e, RemoteBegin) and e.session is session, what="begin")
    assert session is not None and (session.channel, session.next_outgoing_id) == (3, 7)
    # a second begin on channel 3: the engine refuses it, strict=False writes it anyway
    assert sent_frame_outcome(probe, begin, 3, timeout=2.0).startswith(("end:", "close:"))


def test_steps_register_no_case() -> None:
    modules = {
        f"{amqpspec.conformance.steps.__name__}.{info.name}"
        for info in pkgutil.iter_modules(amqpspec.conformance.steps.__path__)
    }
    for module in modules:
        assert importlib.import_module(module).__doc__, f"{module} has no header"
    assert not {case.module for case in load_cases()} & modules
