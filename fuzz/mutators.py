"""Mutators: a legal client conversation in, a fuzz case out (three strategies).

Owns: `STRATEGIES` and `mutate_case(steps, strategy, rng)`:
- "bytes": frame level — frame header fields (SIZE, DOFF, TYPE, channel, extended
  header) through `amqp10.builder.build_frame`, protocol header variants
  (`builder.protocol_header`), SASL stage inputs, bit flips and boundary bytes, frame
  split and coalescing, duplicated and dropped frames.
- "fields": field level — one field of one performative, chosen from the spec table
  (`amqp10.layout` spans through `amqp10.builder.mutate`): boundary values of its type
  (0, 1, max, max-1, serial-number wrap points), wrong types, null where mandatory,
  multiple where single, unassigned constructors, bad UTF-8, duplicate map keys, deep
  nesting, huge arrays; the list's size/count/descriptor/truncation.
- "sequences": state abuse on well-formed frames — out-of-order performatives, reused
  channels, handles, names and delivery ids, link-credit 2^32-1, delivery-count wrap,
  incoming-window 0 then transfers, drain and echo storms, detach/end/close at any point.
Every byte is built by amqp10 (codec, frames, builder, and malformed: the suspect values
and malformed encodings chosen from); each produced step is labelled
with what was done and judged by the core decoder (`fuzz.case.step`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from amqpspec.amqp10 import codec, malformed, spec
from amqpspec.amqp10.builder import build_frame, mutate, protocol_header, sasl_frame
from amqpspec.amqp10.composites import COMPOSITE_CLASSES, Composite
from amqpspec.amqp10.errors import AMQPError, DecodeError, EncodeError
from amqpspec.amqp10.frames import FrameType, ProtocolId, decode_frame
from amqpspec.amqp10.types import INT_RANGES, WRAPPERS, Array, Described, symbol, ulong
from amqpspec.fuzz.case import HEADER, Step, decoded, step

STRATEGIES = ("bytes", "fields", "sequences")
SERIAL_WRAP = (0, 1, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 2, 2**32 - 1)
MAX_NESTING = 300


def _frames(steps: list[Step]) -> list[int]:
    """Positions of whole, decodable frames (mutation targets)."""
    return [i for i, s in enumerate(steps) if s.kind != HEADER and s.malformed is None]


def _performative(data: bytes) -> Composite | None:
    """The performative of a frame step (None: an empty frame); bytes the decoder
    refuses raise its DecodeError (decoded again, so the remembered one is never raised)."""
    frame, _error = decoded(data)
    return frame.performative if frame is not None else decode_frame(data).performative


def _after_open(steps: list[Step]) -> int:
    """The position just after the client's open (or after the last header)."""
    for i, s in enumerate(steps):
        if s.label == "open":
            return i + 1
    headers = [i for i, s in enumerate(steps) if s.kind == HEADER]
    return headers[-1] + 1 if headers else 0


def _replace(steps: list[Step], position: int, new: list[Step]) -> list[Step]:
    return [*steps[:position], *new, *steps[position + 1 :]]


# ----------------------------------------------------------------- bytes (frame level)


def _frame_header_variant(steps: list[Step], rng: random.Random) -> list[Step]:
    position = rng.choice(_frames(steps))
    frame = decode_frame(steps[position].data)
    body = frame.performative
    choice = rng.randrange(6)
    kw: dict = {}
    if choice == 0:
        kw["size"] = rng.choice([0, 1, 7, 8, len(frame.raw) - 1, len(frame.raw) + 1, 2**32 - 1])
        what = f"SIZE={kw['size']}"
    elif choice == 1:
        kw["doff"] = rng.choice([0, 1, 3, 255])
        what = f"DOFF={kw['doff']}"
    elif choice == 2:
        kw["frame_type"] = rng.choice([FrameType.SASL, 2, 0x7F, 0xFF])
        what = f"TYPE={kw['frame_type']}"
    elif choice == 3:
        channel = rng.choice([1, 2, 255, 0xFFFE, 0xFFFF])
        data = build_frame(body, channel, payload=frame.payload)
        return _replace(steps, position, [step(data, f"{frame.name}[channel={channel}]")])
    elif choice == 4:
        words = rng.choice([1, 2, 63])
        kw["extended_header"] = bytes(4 * words)
        what = f"extended-header={4 * words}B"
    else:
        kw["trailer"] = bytes(rng.randrange(1, 9))
        what = f"trailer={len(kw['trailer'])}B"
    try:
        data = build_frame(body, frame.channel, payload=frame.payload, **kw)
    except EncodeError:
        return steps
    return _replace(steps, position, [step(data, f"{frame.name}[{what}]")])


def _protocol_header_variant(steps: list[Step], rng: random.Random) -> list[Step]:
    headers = [i for i, s in enumerate(steps) if s.kind == HEADER]
    if not headers:
        return steps
    position = rng.choice(headers)
    variants = [
        (protocol_header(ProtocolId.TLS), "TLS"),
        (protocol_header(4), "id 4"),
        (protocol_header(ProtocolId.AMQP, 0, 9, 1), "0-9-1"),
        (protocol_header(ProtocolId.AMQP, 1, 0, 1), "1.0.1"),
        (protocol_header(ProtocolId.AMQP, 2), "2.0.0"),
        (
            protocol_header(ProtocolId.SASL)
            if steps[position].data[4] == 0
            else protocol_header(ProtocolId.AMQP),
            "other layer",
        ),
        (protocol_header(magic=b"AMQX"), "magic AMQX"),
        (protocol_header(magic=b"amqp"), "magic amqp"),
    ]
    data, what = rng.choice(variants)
    return _replace(steps, position, [Step(data, f"protocol-header[{what}]", HEADER, what)])


def _sasl_input(steps: list[Step], rng: random.Random) -> list[Step]:
    """SASL stage inputs: out of order, repeated, with an unknown mechanism, or an AMQP
    frame where a SASL one is due."""
    inits = [i for i, s in enumerate(steps) if s.label == "sasl-init"]
    sasl = COMPOSITE_CLASSES
    frames = [
        (sasl_frame(sasl["sasl-init"](mechanism=symbol("NO-SUCH-MECH"))), "sasl-init[mech]"),
        (sasl_frame(sasl["sasl-response"](response=b"x" * rng.randrange(0, 600))), "sasl-resp"),
        (
            sasl_frame(sasl["sasl-init"](mechanism=symbol("PLAIN"), initial_response=b"\0\xff\0")),
            "sasl-init[bad-utf8]",
        ),
        (
            sasl_frame(sasl["sasl-mechanisms"](sasl_server_mechanisms=[symbol("PLAIN")])),
            "sasl-mechanisms[from client]",
        ),
        (sasl_frame(sasl["sasl-outcome"](code=0)), "sasl-outcome[from client]"),
        (build_frame(sasl["open"](container_id="x")), "open[in SASL]"),
    ]
    data, label = rng.choice(frames)
    position = rng.choice(inits) + rng.choice([0, 1]) if inits else _after_open(steps)
    return [*steps[:position], step(data, label), *steps[position:]]


def _bit_flip(steps: list[Step], rng: random.Random) -> list[Step]:
    position = rng.choice(_frames(steps))
    data = bytearray(steps[position].data)
    flips = rng.choice([1, 1, 2, 4])
    for _ in range(flips):
        index = rng.randrange(len(data))
        if rng.random() < 0.5:
            data[index] ^= 1 << rng.randrange(8)
        else:
            data[index] = rng.choice(malformed.BOUNDARY_BYTES)
    label = f"{steps[position].label}[{flips} byte(s) changed]"
    return _replace(steps, position, [step(bytes(data), label)])


def _split(steps: list[Step], rng: random.Random) -> list[Step]:
    """One frame sent in two writes (a correct peer decodes it the same)."""
    position = rng.choice(_frames(steps))
    data = steps[position].data
    cut = rng.randrange(1, len(data))
    first = Step(data[:cut], f"{steps[position].label}[first {cut}B]", "raw")
    rest = Step(data[cut:], f"{steps[position].label}[rest]", "raw")
    return _replace(steps, position, [first, rest])


def _coalesce(steps: list[Step], rng: random.Random) -> list[Step]:
    frames = _frames(steps)
    position = rng.choice(frames)
    if position + 1 >= len(steps):
        return steps
    a, b = steps[position], steps[position + 1]
    merged = Step(a.data + b.data, f"{a.label}+{b.label}", "raw")
    return [*steps[:position], merged, *steps[position + 2 :]]


def _duplicate_or_drop(steps: list[Step], rng: random.Random) -> list[Step]:
    position = rng.choice(_frames(steps))
    if rng.random() < 0.5:
        return [*steps[: position + 1], steps[position], *steps[position + 1 :]]
    return [*steps[:position], *steps[position + 1 :]]


def _truncate_stream(steps: list[Step], rng: random.Random) -> list[Step]:
    position = rng.choice(_frames(steps))
    data = steps[position].data
    cut = rng.randrange(0, len(data))
    label = f"{steps[position].label}[cut to {cut}B]"
    return [*steps[:position], Step(data[:cut], label, "raw", "truncated frame")]


BYTE_OPS: list[Callable[[list[Step], random.Random], list[Step]]] = [
    _frame_header_variant,
    _protocol_header_variant,
    _sasl_input,
    _bit_flip,
    _split,
    _coalesce,
    _duplicate_or_drop,
    _truncate_stream,
]


# ----------------------------------------------------------------- fields (field level)


def _int_edges(primitive: str) -> list[int]:
    cls = WRAPPERS.get(primitive)
    if cls is None or cls not in INT_RANGES:
        return []
    low, high = INT_RANGES[cls]
    edges = {low, high, high - 1, 0, 1, low + 1}
    if primitive == "uint":
        edges.update(SERIAL_WRAP)
    return sorted(v for v in edges if low <= v <= high)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _wrong_values(rng: random.Random) -> list[tuple[object, str]]:
    return [
        ("not-a-number", "string"),
        (ulong(2**64 - 1), "ulong-max"),
        (symbol("x" * rng.randrange(1, 300)), "symbol"),
        ([1, 2, 3], "list"),
        ({symbol("k"): 1}, "map"),
        (Described(ulong(0x99), None), "described-unknown"),
        (Described(Described(ulong(1), ulong(2)), 3), "described-descriptor"),
        (_nested(rng.choice([16, 64, MAX_NESTING])), "deep-nesting"),
        (Array("uint", [7] * rng.choice([1000, 16000])), "huge-array"),
        (True, "boolean"),
        (-1, "negative"),
    ]


def _field_mutation(perf: Composite, rng: random.Random) -> tuple[bytes, str]:
    name = perf.NAME
    fields = spec.COMPOSITES[name].fields
    m = mutate(perf, wide=rng.random() < 0.2)
    choice = rng.randrange(10)
    if choice <= 4 and fields:
        field = rng.choice(fields)
        primitive = spec.primitive_of(field.type) if field.type != "*" else "*"
        edges = _int_edges(primitive)
        pick = rng.randrange(7)
        if pick == 6 and field.type in ("fields", "map", "*"):  # a wrong value one level in
            value, what = rng.choice(_wrong_values(rng))
            m.set_field(field.name, {symbol("k"): value})
            return m.encode(), f"{name}[{field.name}={{k: {what}}}]"
        if pick in (0, 6) and edges:
            value = rng.choice(edges)
            m.set_field(field.name, WRAPPERS[primitive](value))
            return m.encode(), f"{name}[{field.name}={value}]"
        if pick == 1:
            m.null_field(field.name)
            return m.encode(), f"{name}[{field.name}=null]"
        if pick == 2:
            value, what = rng.choice(_wrong_values(rng))
            m.set_field(field.name, value)
            return m.encode(), f"{name}[{field.name}={what}]"
        if pick == 3:
            code = rng.choice(malformed.SUSPECT_CONSTRUCTORS)
            m.set_constructor(field.name, code)
            return m.encode(), f"{name}[{field.name} constructor 0x{code:02x}]"
        if pick == 4:
            m.replace_field(field.name, malformed.str8_of(rng.choice(malformed.INVALID_UTF8)))
            return m.encode(), f"{name}[{field.name}=bad-utf8]"
        keys = [symbol("dup"), 1, symbol("dup"), 2]
        m.replace_field(field.name, malformed.map8_of(keys))
        return m.encode(), f"{name}[{field.name}=duplicate-keys]"
    if choice == 5:
        count = rng.choice([0, 1, len(fields) + 1, 255])
        return m.set_count(count).encode(), f"{name}[count={count}]"
    if choice == 6:
        size = rng.choice([0, 1, 2, 200, 255])
        return m.set_size(size).encode(), f"{name}[size={size}]"
    if choice == 7:
        code = rng.choice(malformed.SUSPECT_DESCRIPTORS)
        if rng.random() < 0.3:
            code = rng.choice(
                sorted(
                    t.descriptor_code
                    for t in spec.COMPOSITES.values()
                    if t.descriptor_code is not None
                )
            )
        return m.descriptor(code).encode(), f"{name}[descriptor=0x{code:x}]"
    if choice == 8:
        cut = rng.randrange(1, max(2, len(m.encode())))
        return m.truncate(cut).encode(), f"{name}[body cut to {cut}B]"
    extra = rng.choice([codec.encode(None), codec.encode(ulong(1)), codec.encode("extra")])
    return m.append_field(extra).encode(), f"{name}[extra field]"


def _fields(steps: list[Step], rng: random.Random) -> list[Step]:
    candidates = [i for i in _frames(steps) if _performative(steps[i].data)]
    if not candidates:
        return steps
    position = rng.choice(candidates)
    frame = decode_frame(steps[position].data)  # its own: the mutation reads it
    try:
        body, label = _field_mutation(frame.performative, rng)
        data = build_frame(body, frame.channel, payload=frame.payload, frame_type=frame.type)
    except (EncodeError, ValueError, OverflowError):
        return steps
    return _replace(steps, position, [step(data, label)])


# ----------------------------------------------------------------- sequences (state)


def _perf(name: str, /, **fields: object) -> Composite:
    return COMPOSITE_CLASSES[name](**fields)


# A crafted frame: how to build it, and its label. Only the one drawn is built (each draw
# built all thirteen to keep one).
Crafted = tuple[Callable[[], bytes], str]


def _crafted(rng: random.Random) -> list[Crafted]:
    """Well-formed frames that abuse state: each is (its builder, label)."""
    handle = rng.choice([0, 0, 1, 7, 2**32 - 1])
    channel = rng.choice([0, 0, 0, 1, 5])
    wrap = rng.choice(SERIAL_WRAP)
    out = _crafted_flows(handle, channel, wrap) + _crafted_transfers(handle, channel, wrap)
    return out + _crafted_endpoints(rng, handle, channel, wrap)


def _crafted_flows(handle: int, channel: int, wrap: int) -> list[Crafted]:
    """Flows at the ends of credit, windows and serial numbers."""
    flow = COMPOSITE_CLASSES["flow"]
    return [
        (
            lambda: build_frame(
                flow(
                    next_incoming_id=0,
                    incoming_window=2**32 - 1,
                    next_outgoing_id=0,
                    outgoing_window=2**32 - 1,
                    handle=handle,
                    delivery_count=0,
                    link_credit=2**32 - 1,
                ),
                channel,
            ),
            "flow[link-credit=2^32-1]",
        ),
        (
            lambda: build_frame(
                flow(
                    incoming_window=0,
                    next_outgoing_id=wrap,
                    outgoing_window=0,
                    handle=handle,
                    delivery_count=wrap,
                    link_credit=1,
                ),
                channel,
            ),
            f"flow[delivery-count={wrap}]",
        ),
        (
            lambda: build_frame(
                flow(incoming_window=0, next_outgoing_id=0, outgoing_window=0), channel
            ),
            "flow[incoming-window=0]",
        ),
    ]


def _crafted_transfers(handle: int, channel: int, wrap: int) -> list[Crafted]:
    """Transfers at a serial wrap, and one reusing a delivery id."""
    return [
        (
            lambda: build_frame(
                _perf(
                    "transfer",
                    handle=handle,
                    delivery_id=wrap,
                    delivery_tag=b"t%d" % wrap,
                    message_format=0,
                ),
                channel,
                payload=malformed.amqp_value("x"),
            ),
            f"transfer[delivery-id={wrap}]",
        ),
        (
            lambda: build_frame(
                _perf("transfer", handle=handle, delivery_id=0, delivery_tag=b"dup", more=True),
                channel,
                payload=b"x",
            ),
            "transfer[more, reused id]",
        ),
    ]


def _crafted_endpoints(rng: random.Random, handle: int, channel: int, wrap: int) -> list[Crafted]:
    """Dispositions, begins, attaches and endings where the state has no room for them.
    The draws are made here, in this order, whichever frame is then built."""
    role = rng.choice([True, False])
    last = rng.choice([wrap, 0, 2**32 - 1])
    remote_channel = rng.choice([0, 1, 0xFFFF])
    handle_max = rng.choice([0, 2**32 - 1])
    closed = rng.choice([True, False])
    return [
        (
            lambda: build_frame(
                _perf("disposition", role=role, first=wrap, last=last, settled=True), channel
            ),
            f"disposition[first={wrap}]",
        ),
        (
            lambda: build_frame(
                _perf(
                    "begin",
                    remote_channel=remote_channel,
                    next_outgoing_id=wrap,
                    incoming_window=0,
                    outgoing_window=0,
                    handle_max=handle_max,
                ),
                channel,
            ),
            "begin[reused channel]",
        ),
        (
            lambda: build_frame(
                _perf(
                    "attach",
                    name="amqpspec-fuzz-sender-1",
                    handle=handle,
                    role=False,
                    initial_delivery_count=wrap,
                ),
                channel,
            ),
            "attach[reused name/handle]",
        ),
        (lambda: build_frame(_perf("detach", handle=handle, closed=closed), channel), "detach"),
        (lambda: build_frame(_perf("end"), channel), "end"),
        (lambda: build_frame(_perf("close")), "close[early]"),
        (lambda: build_frame(_perf("open", container_id="again")), "open[again]"),
        (lambda: build_frame(None, channel), "empty"),
    ]


def _storm(rng: random.Random) -> list[Crafted]:
    handle = rng.choice([0, 1])
    count = rng.choice([8, 64, 256])
    drain = rng.random() < 0.5
    perf = _perf(
        "flow",
        next_incoming_id=0,
        incoming_window=100,
        next_outgoing_id=0,
        outgoing_window=100,
        handle=handle,
        delivery_count=0,
        link_credit=1,
        drain=drain,
        echo=not drain,
    )
    label = f"flow[{'drain' if drain else 'echo'} storm x{count}]"
    return [(lambda: build_frame(perf, 0) * count, label)]


def _after(steps: list[Step], label: str) -> int | None:
    """The position after the first step labelled `label`, if any."""
    for i, s in enumerate(steps):
        if s.label == label:
            return i + 1
    return None


def _sequences(steps: list[Step], rng: random.Random) -> list[Step]:
    start = _after_open(steps)
    out = list(steps)
    for _ in range(rng.choice([1, 1, 2, 3])):
        op = rng.randrange(6)
        if op <= 2:
            build, label = rng.choice(_crafted(rng) if op < 2 else _storm(rng))
            data = build()
            # mostly where the state exists (after the first begin / attach), sometimes
            # anywhere after the open
            anchor = _after(out, "attach" if label.startswith(("flow", "transfer")) else "begin")
            low = anchor if anchor is not None and rng.random() < 0.8 else start
            position = rng.randrange(min(low, len(out)), len(out) + 1)
            out.insert(position, Step(data, label, "frame" if op < 2 else "raw"))
        elif op == 3 and len(out) > start + 1:  # out of order: move a frame earlier
            source = rng.randrange(start, len(out))
            moved = out.pop(source)
            out.insert(rng.randrange(max(1, start - 1), source + 1), moved)
        elif op == 4 and len(out) > start:  # reuse: repeat a frame later
            out.insert(rng.randrange(start, len(out) + 1), out[rng.randrange(start, len(out))])
        elif len(out) > start:  # cut the conversation at any point with detach/end/close
            stop = rng.choice(["detach", "end", "close"])
            perf = _perf(stop, handle=0) if stop == "detach" else _perf(stop)
            position = rng.randrange(start, len(out) + 1)
            out.insert(position, Step(build_frame(perf, 0), f"{stop}[at {position}]"))
    return [step(s.data, s.label) if s.kind != "raw" else s for s in out]


# ----------------------------------------------------------------- entry point


def mutate_case(steps: list[Step], strategy: str, rng: random.Random) -> list[Step]:
    """One mutation of `steps` (the client side of a legal conversation) by `strategy`."""
    if not _frames(steps):
        return steps
    try:
        if strategy == "bytes":
            return rng.choice(BYTE_OPS)(steps, rng)
        if strategy == "fields":
            return _fields(steps, rng)
        if strategy == "sequences":
            return _sequences(steps, rng)
    except (AMQPError, DecodeError, EncodeError, ValueError, OverflowError):
        return steps
    raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
