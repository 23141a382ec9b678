"""The checker on a real capture: RabbitMQ 3.10.8 over-delivering at prefetch 2 (#2597).

The data is python-qpid-proton's own PN_TRACE_FRM=1 log of the run (the client's view,
tests/data/captures/rabbitmq-3.10.8-prefetch2-overdelivery.client-trace.txt.gz). That is
proton's text rendering, not AMQP bytes, so a small test-only parser turns each line into
a composite; only top-level scalar fields are kept (nested composites such as source or
state become placeholders, strings and binaries stay text). Frames built in memory carry
no SIZE, so the frame-size rules are not exercised here.
"""

from __future__ import annotations

import gzip
import re

import pytest
from capture_files import PROTON_C_PCAP, RABBITMQ_CLIENT_LOG, RABBITMQ_PCAP

from amqpspec.amqp10.checker import check_connection
from amqpspec.amqp10.composites import COMPOSITE_CLASSES, Source, Target
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, Frame, FrameType

CAPTURE = RABBITMQ_CLIENT_LOG

_LINE = re.compile(r"(SASL|AMQP):FRAME:(\d*) +(->|<-) +(?:@([a-z-]+)\(\d+\) \[(.*)|(SASL|AMQP)$)")
_VALUE = re.compile(r'0x[0-9a-f]+|true|false|b?"(?:[^"\\]|\\.)*"|:"[^"]*"|:[\w.-]+')
_PLACEHOLDER = {"source": Source(), "target": Target()}


def _fields(text: str) -> dict[str, object]:
    """Top-level name=value pairs of one rendered composite body."""
    fields: dict[str, object] = {}
    depth, pos, quote = 0, 0, False
    start = 0
    pieces: list[str] = []
    for pos, char in enumerate(text):
        if char == '"' and (pos == 0 or text[pos - 1] != "\\"):
            quote = not quote
        elif quote:
            continue
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth < 0:
                pieces.append(text[start:pos])
                break
        elif char == "," and depth == 0:
            pieces.append(text[start:pos])
            start = pos + 1
    for piece in pieces:
        name, _, value = piece.strip().partition("=")
        if not name:
            continue
        key = name.replace("-", "_")
        if value.startswith("@"):
            fields[key] = _PLACEHOLDER.get(name)
        elif value.startswith("0x"):
            fields[key] = int(value, 16)
        elif value in ("true", "false"):
            fields[key] = value == "true"
        elif value.startswith('b"'):
            fields[key] = value[2:-1].encode()
        else:
            fields[key] = value.strip('"')
    return fields


def parse_proton_trace(lines):
    """(origin, ProtocolHeader | Frame) in log order; '->' is the client (initiator)."""
    classes = {cls.NAME: cls for cls in COMPOSITE_CLASSES.values()}
    for line in lines:
        match = _LINE.search(line)
        if not match:
            continue
        _layer, channel, arrow, name, body, header = match.groups()
        origin = "client" if arrow == "->" else "server"
        if header:
            yield origin, SASL_HEADER if header == "SASL" else AMQP_HEADER
            continue
        frame_type = FrameType.SASL if name.startswith("sasl-") else FrameType.AMQP
        if name in ("sasl-mechanisms", "sasl-init", "sasl-outcome", "open"):
            performative = classes[name](**_sasl_or_open(name, body))
        else:
            performative = classes[name](**_fields(body))
        yield origin, Frame(frame_type, int(channel or 0), performative)


def _sasl_or_open(name: str, body: str) -> dict[str, object]:
    fields = _fields(body)
    keep = {
        "open": ("container_id", "max_frame_size", "channel_max", "idle_time_out"),
        "sasl-outcome": ("code",),
        "sasl-init": ("mechanism",),
        "sasl-mechanisms": (),
    }[name]
    out = {key: fields[key] for key in keep if key in fields}
    if name == "sasl-mechanisms":
        out["sasl_server_mechanisms"] = ["ANONYMOUS"]
    return out


@pytest.fixture(scope="module")
def capture_items():
    assert CAPTURE.exists(), f"shared test data missing: {CAPTURE}"
    with gzip.open(CAPTURE, "rt") as text:
        return list(parse_proton_trace(text))


def test_parser_reads_every_frame(capture_items):
    names = [item.name if isinstance(item, Frame) else "header" for _, item in capture_items]
    assert names.count("transfer") == 10_000
    assert names.count("header") == 4
    assert names.count("attach") == 2


# Proton (C and Python) receivers send delivery-count 0 in the flow granting credit before
# the sender's attach came back: 2.7.4 "In the event that the Receiving Link Endpoint has not
# yet seen the initial attach frame from the Sender this field MUST NOT be set." The client's.
BEFORE_ATTACH = "link.flow.receiver-delivery-count-before-attach"


def test_rabbitmq_over_deliveries_and_nothing_else(capture_items):
    violations = check_connection(capture_items)
    broker = [v for v in violations if v.origin == "server"]
    assert {v.rule_id for v in broker} == {"link.credit.transfer-beyond-credit"}
    flagged = [v.reason for v in broker]
    assert any("delivery-id 0xf93 " in reason and "horizon 0xf93" in reason for reason in flagged)
    assert len(broker) == 3
    client = [(v.rule_id, v.frame_index) for v in violations if v.origin == "client"]
    assert client == [(BEFORE_ATTACH, 9)]  # the first grant, before the broker's attach


def _pcap_findings(path) -> list:
    assert path.exists(), f"shared test data missing: {path}"
    from amqpspec.traces.check import check_trace
    from amqpspec.traces.load import open_trace

    return check_trace(open_trace(str(path)), liveness_bound=30.0)


def test_rabbitmq_pcap_wire_view_flags_four_over_deliveries_and_a_flow_after_close():
    """On the wire (tshark on loopback) the broker's frames are seen as it sent them.

    The wire shows one more over-delivery than the client's log (0xd56: the client's next
    grant was sent only after that transfer left the broker; in the client's own log the
    grant precedes the transfer's arrival, so there it may have raced) and a flow the
    broker sent after its own close (2.7.9).
    """
    findings = [f for f in _pcap_findings(RABBITMQ_PCAP) if f.violation]
    broker = [f for f in findings if f.violation.origin == "server"]
    rules = sorted(f.violation.rule_id for f in broker)
    assert rules == ["connection.frame-after-close"] + ["link.credit.transfer-beyond-credit"] * 4
    client = [f.violation.rule_id for f in findings if f.violation.origin == "client"]
    assert client == [BEFORE_ATTACH]
    reasons = " ".join(f.violation.reason for f in broker)
    for delivery_id in ("0xd56", "0xf93", "0x2011", "0x22be"):
        assert f"delivery-id {delivery_id} " in reasons


def test_proton_c_broker_pcap_is_clean():
    """Proton C example broker, 2,000 small and 40 multi-frame messages: no violation of
    the broker's; its Proton clients grant credit with delivery-count 0 before the broker's
    attach on both receiving links (2.7.4, the client's)."""
    findings = _pcap_findings(PROTON_C_PCAP)
    assert [f.line() for f in findings if f.violation.origin == "server"] == []
    client = [(f.connection_id, f.violation.rule_id) for f in findings]
    assert client == [(2, BEFORE_ATTACH), (4, BEFORE_ATTACH)]
