"""Human and JSON renderings of trace items (`amqpspec trace show`).

Owns: `show_line(item)` in the style of proton's PN_TRACE_FRM
(`[conn 1] #7 0 -> @flow(19) [next-incoming-id=0, ...]`; `->` is client to server) and
`json_record(item)` (one JSON-able dict per item). Only present fields are shown.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from amqpspec.amqp10.composites import Composite
from amqpspec.amqp10.frames import Frame, ProtocolHeader
from amqpspec.amqp10.monitor import TraceItem
from amqpspec.amqp10.origins import CLIENT
from amqpspec.amqp10.types import Described, symbol

_PROTOCOLS = {0: "AMQP", 2: "AMQP-TLS", 3: "AMQP-SASL"}


def _spec_name(field_name: str) -> str:
    return field_name.replace("_", "-")


def format_value(value: Any) -> str:
    if isinstance(value, Composite):
        return format_composite(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, symbol):
        return f":{value}"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return f'b"{data.hex()}"' if len(data) <= 32 else f"b<{len(data)} bytes>"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{format_value(k)}={format_value(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, Described):
        return f"@{format_value(value.descriptor)} {format_value(value.value)}"
    return str(value)


def format_composite(value: Composite) -> str:
    fields = [
        f"{_spec_name(name)}={format_value(getattr(value, name))}"
        for name in value.FIELD_NAMES
        if getattr(value, name) is not None
    ]
    return f"@{value.NAME}({value.DESCRIPTOR_CODE}) [{', '.join(fields)}]"


def describe(item: TraceItem) -> str:
    decoded = item.item
    if isinstance(decoded, ProtocolHeader):
        protocol = _PROTOCOLS.get(decoded.protocol_id, f"AMQP-{decoded.protocol_id}")
        return f"{protocol} {decoded.major}.{decoded.minor}.{decoded.revision}"
    if isinstance(decoded, Frame):
        if decoded.performative is None:
            return "(empty frame)"
        text = format_composite(decoded.performative)
        if decoded.payload:
            text += f" (payload {len(decoded.payload)} bytes)"
        return text
    return f"raw {len(item.raw)} bytes: {item.raw[:32].hex()}{'...' if len(item.raw) > 32 else ''}"


def show_line(item: TraceItem, with_time: bool = False) -> str:
    arrow = "->" if item.direction == CLIENT else "<-"
    channel = item.item.channel if isinstance(item.item, Frame) else ""
    stamp = f" {_iso(item.time)}" if with_time else ""
    prefix = f"[conn {item.connection_id}] #{item.index}{stamp}"
    middle = f" {channel} " if channel != "" else " "
    return f"{prefix}{middle}{arrow} {describe(item)}"


def _iso(time: float) -> str:
    return datetime.fromtimestamp(time, UTC).isoformat(timespec="microseconds")


def _jsonable(value: Any) -> Any:
    if isinstance(value, Composite):
        return {
            "@type": value.NAME,
            **{
                _spec_name(name): _jsonable(getattr(value, name))
                for name in value.FIELD_NAMES
                if getattr(value, name) is not None
            },
        }
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"@binary": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dict):
        return [[_jsonable(k), _jsonable(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Described):
        return {"@descriptor": _jsonable(value.descriptor), "@value": _jsonable(value.value)}
    return repr(value)


def json_record(item: TraceItem) -> dict[str, Any]:
    record: dict[str, Any] = {
        "connection": item.connection_id,
        "index": item.index,
        "time": item.time,
        "direction": item.direction,
        "kind": item.kind,
        "name": item.name,
    }
    decoded = item.item
    if isinstance(decoded, ProtocolHeader):
        record["protocol_id"] = decoded.protocol_id
        record["version"] = f"{decoded.major}.{decoded.minor}.{decoded.revision}"
    elif isinstance(decoded, Frame):
        record["channel"] = decoded.channel
        record["frame_type"] = decoded.type
        if decoded.performative is not None:
            record["fields"] = _jsonable(decoded.performative)
        if decoded.payload:
            record["payload_size"] = len(decoded.payload)
    else:
        record["raw"] = base64.b64encode(item.raw).decode()
    return record
