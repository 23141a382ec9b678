"""Wire faults: the broker's outgoing session frames edited as the buggy broker sent them.

Owns: `editor(faults, engine)`, the function a connection's engine passes each session frame
it writes through (`amqp10.engine.Connection.edit_outgoing`) while a wire-layer fault is on,
and what each wire fault changes (catalog.py lists them, each breaking one field rule of
2.7.3-2.7.5 that the checker enforces on every frame):
- flow-without-delivery-count: our flows for a receiving link carry no delivery-count
  (RabbitMQ 3.10 as a receiver), 2.7.4 flow.delivery-count.3;
- stale-receiver-delivery-count: our flows for a receiving link keep the sender's
  initial-delivery-count, never counting the messages received, 2.7.4 flow.delivery-count.3;
- sender-flow-without-delivery-count: our flows for a sending link carry no delivery-count,
  2.7.4 flow.delivery-count.2;
- session-flow-with-link-fields: our flows without a handle carry link-credit and
  delivery-count 0, 2.7.4 flow.delivery-count.1 / flow.link-credit.2;
- attach-without-initial-delivery-count: our attach for a sending link has none, 2.7.3;
- attach-unsettled-null-key: our attaches carry an unsettled map with a null key, 2.7.3;
- transfer-without-message-format: the first transfer of each delivery has none, 2.7.5.
And `insert_properties(payload)`, the message a consumer gets under the protocol-layer fault
insert-properties (links.ConsumerLink.deliver): a properties section added to a bare
message sent without one (RabbitMQ 3.10), 3.2 message-format.1.
Frames are decoded and re-encoded with amqp10.frames (no bytes built here); the engine's
own state is not told, so it goes on as the correct broker would. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import Properties
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import decode_frame, encode_frame
from amqpspec.amqp10.message import split_sections

from .catalog import Faults


def editor(faults: Faults, engine: Any) -> Callable[[bytes], bytes]:
    """The edit of one outgoing frame for the wire faults on in `faults`; `engine` (the
    connection's amqp10 Connection) has our links, to tell sending from receiving ones."""

    def edit(frame_bytes: bytes) -> bytes:
        frame = decode_frame(frame_bytes)
        performative = frame.performative
        name = frame.name
        changes: dict[str, Any] = {}
        if name == "flow":
            session = engine.sessions_by_channel.get(frame.channel)
            links = session.links if session is not None else {}
            changes = _flow(faults, performative, links.get(performative.handle))
        elif name == "attach":
            if faults.attach_without_initial_delivery_count and not performative.role:
                changes["initial_delivery_count"] = None
            if faults.attach_unsettled_null_key:
                changes["unsettled"] = {None: None}
        elif name == "transfer":
            first = performative.delivery_id is not None  # continuations carry none here
            if faults.transfer_without_message_format and first:
                changes["message_format"] = None
        if not changes:
            return frame_bytes
        return encode_frame(performative.replace(**changes), frame.channel, frame.payload)

    return edit


def _flow(faults: Faults, flow: Any, link: Any) -> dict[str, Any]:
    """The changes to one of our flows; `link`: our engine link of its handle (or None)."""
    if flow.handle is None:
        if faults.session_flow_with_link_fields:
            return {"link_credit": 0, "delivery_count": 0}
        return {}
    if link is None:
        return {}
    if link.is_sender:
        return {"delivery_count": None} if faults.sender_flow_without_delivery_count else {}
    if faults.flow_without_delivery_count:
        return {"delivery_count": None}
    if faults.stale_receiver_delivery_count:
        return {"delivery_count": link.initial_delivery_count}
    return {}


def insert_properties(payload: bytes) -> bytes:
    """`payload` with an empty properties section inserted where 3.2 puts it (after the
    annotations) when it has none; unchanged otherwise, or when it does not decode."""
    try:
        sections = split_sections(payload)
    except DecodeError:
        return payload
    if any(section.name == "properties" for section in sections):
        return payload
    head = [s.raw for s in sections if s.name in _BEFORE_PROPERTIES]
    tail = [s.raw for s in sections if s.name not in _BEFORE_PROPERTIES]
    return b"".join([*head, Properties().encode(), *tail])


_BEFORE_PROPERTIES = frozenset({"header", "delivery-annotations", "message-annotations"})
