"""`amqpspec fuzz --differential`: every case on two brokers, divergences kept as findings.

The CI campaigns (fixed seed, free ports, every wait bounded): the reference broker against
itself gives no divergence (exit 0); against a reference broker with a parser fault
(`die-on-channel-reuse`: the connection task dies, the socket closes without a close
frame) the divergence is found, minimised, labelled with the side that breaks 2.4.3,
written with both brokers' frames in findings.md, and `amqpspec fuzz replay
--differential` reproduces it on both (exit 1); on one broker only it is a usage error.
Plus the reaction model and the divergence signature on hand-made outcomes."""

from __future__ import annotations

import json

import pytest
from fuzz_support import run_fuzz

from amqpspec.fuzz.divergence import (
    ACCEPTED,
    DIVERGENCE,
    REFUSAL_SCOPE,
    REFUSE_VS_ACCEPT,
    Reaction,
    input_name,
)
from amqpspec.reference_broker.runtime.process import BrokerProcess

FAULT = "die-on-channel-reuse"


def _differential(a, b, out, *options: str, timeout: float = 180):
    return run_fuzz(
        "--broker",
        a.url,
        "--profile",
        "reference",
        "--admin",
        a.admin_url,
        "--differential",
        b.url,
        "--admin2",
        b.admin_url,
        "--out",
        str(out),
        "--quiet",
        *options,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def brokers():
    started = []
    try:
        for faults in ((), (), (FAULT,)):
            started.append(BrokerProcess(faults=faults, admin=True))
        yield started
    finally:
        for broker in started:
            broker.stop()


def test_reference_against_itself_has_no_divergence(brokers, tmp_path):
    """The CI differential campaign: the clean reference broker on both sides."""
    a, b, _ = brokers
    result = _differential(a, b, tmp_path, "--duration", "20", "--seed", "1", "--workers", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((tmp_path / "findings.json").read_text()) == []
    assert "0 divergence(s) confirmed" in result.stdout


@pytest.fixture(scope="module")
def faulty(brokers, tmp_path_factory):
    a, _, c = brokers
    out = tmp_path_factory.mktemp("differential")
    result = _differential(
        a, c, out, "--duration", "20", "--seed", "1", "--workers", "2", "--strategy", "sequences"
    )
    return out, result


def test_a_parser_fault_is_a_divergence_the_oracle_pins_on_its_side(brokers, faulty):
    _, _, c = brokers
    out, result = faulty
    assert result.returncode == 1, result.stdout + result.stderr
    findings = json.loads((out / "findings.json").read_text())
    found = [f for f in findings if f["rule"] == f"{DIVERGENCE}.{REFUSAL_SCOPE}"]
    assert found, result.stdout
    finding = found[0]
    assert finding["kind"] == DIVERGENCE and finding["level"] == "MUST"
    assert finding["replays"] == "3/3"
    sides = finding["extra"]["divergence"]
    assert sides["a"]["reaction"] == "refused:connection:amqp:illegal-state"
    assert sides["b"]["reaction"] == "dropped:tcp"
    assert sides["b"]["broker"] == c.url and sides["a"]["verdict"] is None
    assert sides["b"]["verdict"]["rule"] == "connection.close-missing"
    assert "begin" in finding["frames"][-1]
    folder = out / "findings" / finding["id"]
    assert {"reproducer.json", "reproducer.pcap", "reproducer-b.pcap"} <= {
        p.name for p in folder.iterdir()
    }
    report = (out / "findings.md").read_text()
    assert "2.4.3/closing-a-connection.1" in report
    assert "<- broker: @close" in report and "<- broker: TCP close (FIN)" in report
    assert "--differential" in report


def test_replay_on_both_reproduces_it_and_on_one_is_refused(brokers, faulty):
    a, _, c = brokers
    out, _ = faulty
    finding = json.loads((out / "findings.json").read_text())[0]
    folder = str(out / "findings" / finding["id"])
    both = run_fuzz(
        "replay", folder, "--broker", a.url, "--profile", "reference", "--differential", c.url,
        timeout=120,
    )  # fmt: skip
    assert both.returncode == 1, both.stdout + both.stderr
    assert "reproduced 3/3" in both.stdout
    one = run_fuzz("replay", folder, "--broker", a.url, "--profile", "reference", timeout=60)
    assert one.returncode == 2 and "--differential" in one.stderr


def test_the_signature_is_the_kind_the_field_and_both_reactions():
    assert input_name("begin[remote-channel=ulong]") == "begin/remote-channel"
    assert input_name("flow[drain storm x64]") == "flow/drain storm xN"
    assert input_name("open[max-frame-size constructor 0x52][fields: x]") == "open/max-frame-size"
    assert input_name("attach") == "attach"
    refused = Reaction("refused", "connection", "amqp:decode-error")
    assert Reaction.from_key(refused.key) == refused
    assert "close with amqp:decode-error" in refused.text()
    assert Reaction(ACCEPTED).key == "accepted"
    assert REFUSE_VS_ACCEPT != REFUSAL_SCOPE


def _outcome(frames, dropped=None):
    """An Outcome whose exchange holds the broker's `frames` (built and decoded by amqp10)."""
    from amqpspec.amqp10.builder import build_frame
    from amqpspec.amqp10.composites import COMPOSITE_CLASSES
    from amqpspec.amqp10.frames import decode_frame
    from amqpspec.amqp10.types import symbol
    from amqpspec.fuzz.evidence import FRAME, Exchange, Received
    from amqpspec.fuzz.oracle import Outcome

    received = []
    for at, (name, condition) in enumerate(frames):
        error = COMPOSITE_CLASSES["error"](condition=symbol(condition)) if condition else None
        fields = {"handle": 0} if name == "detach" else {}
        perf = COMPOSITE_CLASSES[name](**fields, **({"error": error} if error else {}))
        frame = decode_frame(build_frame(perf, 0))
        received.append(Received(float(at), FRAME, frame, frame.size, 0))
    exchange = Exchange([], received, dropped, None, 1.0, False)
    return Outcome(None, None, 0, exchange=exchange)


def test_the_reaction_is_the_strongest_not_the_first():
    from amqpspec.fuzz.divergence import DROPPED, SILENT, compare, reaction_of

    link_then_connection = _outcome(
        [("detach", "amqp:link:transfer-limit-exceeded"), ("close", "amqp:illegal-state")]
    )
    assert reaction_of(link_then_connection).key == "refused:connection:amqp:illegal-state"
    session_then_drop = _outcome([("end", "amqp:session:window-violation")], dropped=9.0)
    assert reaction_of(session_then_drop).outcome == DROPPED
    assert reaction_of(_outcome([("close", None)])).key == "accepted"
    assert reaction_of(_outcome([])).outcome == SILENT
    found = compare([], link_then_connection, _outcome([("close", None)]))
    assert found is not None and found.kind == REFUSE_VS_ACCEPT
    assert compare([], link_then_connection, link_then_connection) is None
