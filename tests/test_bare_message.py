"""3.2 bare message comparison (conformance/steps/messages.py over
amqp10.message.split_sections): a section inserted, dropped or changed is named, with both
byte strings in short hex; header, annotations and footer may change; the case module's
messages are all unchanged by the reference broker's fault-free path and the
insert-properties fault (RabbitMQ 3.10) is caught.
"""

from __future__ import annotations

import pytest

from amqpspec.amqp10.builder import mutate
from amqpspec.amqp10.composites import AmqpSequence, AmqpValue, Data, Header, Properties
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.message import Message, split_sections
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.steps.messages import bare_changes, check_bare_unchanged, short_hex
from amqpspec.conformance.verdicts import CaseFailed
from amqpspec.reference_broker.faults.wire import insert_properties

BODY_ONLY = Message(body=[Data(b"only a body")])
FULL = Message(
    header=Header(durable=True),
    message_annotations={symbol("x-opt-a"): 1},
    properties=Properties(message_id="m", subject="s"),
    application_properties={"k": "v"},
    body=[Data(b"one"), Data(b"two")],
    footer={symbol("f"): 1},
)


def test_split_sections_keeps_exact_bytes_and_order():
    payload = FULL.encode()
    sections = split_sections(payload)
    assert [s.name for s in sections] == [
        "header",
        "message-annotations",
        "properties",
        "application-properties",
        "data",
        "data",
        "footer",
    ]
    assert b"".join(s.raw for s in sections) == payload
    assert [s.bare for s in sections] == [False, False, True, True, True, True, False]
    with pytest.raises(DecodeError):
        split_sections(Data(b"x").encode() + Properties().encode())  # 3.2 order


def test_unchanged_and_annotations_may_change():
    assert bare_changes(FULL.encode(), FULL.encode()) == []
    annotated = Message(
        header=Header(durable=False, delivery_count=2),
        delivery_annotations={symbol("x"): 1},
        properties=FULL.properties,
        application_properties=FULL.application_properties,
        body=FULL.body,
    )
    assert bare_changes(FULL.encode(), annotated.encode()) == []


def test_inserted_properties_are_named_with_both_byte_strings():
    delivered = insert_properties(BODY_ONLY.encode())
    [change] = bare_changes(BODY_ONLY.encode(), delivered)
    assert change.startswith("properties inserted (3.2: 'If a section of the bare message is")
    assert "sent none, delivered 005373" in change and "(4 bytes)" in change


def test_dropped_changed_and_body_sections():
    no_app = Message(properties=FULL.properties, body=FULL.body)
    [dropped] = bare_changes(FULL.encode(), no_app.encode())
    assert dropped.startswith("application-properties dropped") and "delivered none" in dropped
    other = Message(properties=Properties(message_id="m", subject="t"), body=[Data(b"x")])
    changes = bare_changes(Message(properties=FULL.properties, body=[Data(b"x")]).encode(),
                           other.encode())  # fmt: skip
    assert len(changes) == 1 and changes[0].startswith("properties changed at byte")
    assert "MUST NOT be modified" in changes[0]
    one_more = Message(body=[Data(b"only a body"), Data(b"extra")])
    [inserted] = bare_changes(BODY_ONLY.encode(), one_more.encode())
    assert inserted.startswith("body section 2 of 1 sent (data) inserted")
    kinds = bare_changes(BODY_ONLY.encode(), Message(body=[AmqpValue(b"only a body")]).encode())
    assert kinds and "(sent data, delivered amqp-value)" in kinds[0]


def test_body_sections_in_another_order():
    """RabbitMQ 3.10 delivers several body sections in reverse order."""
    sent = Message(body=[Data(b"one"), Data(b""), Data(b"three")])
    reversed_ = Message(body=list(reversed(sent.body)))
    [change] = bare_changes(sent.encode(), reversed_.encode())
    assert change.startswith("body sections delivered in another order, sent 1..3, delivered 3, 2")


def test_a_re_encoded_properties_section_is_a_change():
    """The same values in another valid encoding (list32 -> list8) still break 3.2."""
    properties = Properties(message_id="wide")
    wide = mutate(properties, wide=True).encode() + Data(b"b").encode()
    narrow = properties.encode() + Data(b"b").encode()
    [change] = bare_changes(wide, narrow)
    assert change.startswith("properties changed at byte") and "c0" in change


def test_undecodable_delivery_and_short_hex():
    [change] = bare_changes(BODY_ONLY.encode(), b"\x00\x53")
    assert change.startswith("the delivered message does not decode")
    assert short_hex(bytes(100), 50).startswith("…") and short_hex(bytes(100)).endswith(
        "… (100 bytes)"
    )
    assert short_hex(None) == "none"


def test_check_fails_the_case_with_the_reason():
    class Ctx:
        def check(self, condition, message):
            if not condition:
                raise CaseFailed(message)

    sent = Message(body=[AmqpSequence([1])])
    check_bare_unchanged(Ctx(), sent, sent.encode())
    with pytest.raises(CaseFailed, match="properties inserted"):
        check_bare_unchanged(Ctx(), sent, insert_properties(sent.encode()))


def test_every_case_message_survives_the_clean_path_and_not_insert_properties():
    from amqpspec.conformance.cases.s3_2_message import MESSAGES

    without = 0
    for message, _ in MESSAGES.values():
        payload = message.encode()
        assert bare_changes(payload, payload) == []
        has = any(s.name == "properties" for s in split_sections(payload))
        if not has:
            without += 1
            assert bare_changes(payload, insert_properties(payload))
        else:
            assert insert_properties(payload) == payload
    assert without >= 6  # body-only kinds, no-properties, annotated-no-properties
