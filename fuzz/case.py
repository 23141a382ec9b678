"""A fuzz case: the client's side of one connection as a list of steps, and its file form.

Owns: `Step` (the exact bytes of one send: a protocol header, a frame, several frames
coalesced, part of a frame, or junk; with a label saying what it is and how it was
mutated), `Case` (the steps, the strategy and seed that made them) and the reproducer
format: `reproducer_record` (the head every reproducer.json shares, a multi-party one's
too), `case_to_json` / `case_from_json` / `load_case(path)` (a reproducer `.json`, a
finding directory, or a recorded trace: its first connection's client side, read by
`client_sides(path)` through `traces.load`).
`describe(step)` names a step's bytes through the core decoder; `decoded(data)` is that
decoder's answer for one step's bytes, remembered. Builds no AMQP bytes; touches nothing
else.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amqpspec.amqp10.errors import DecodeError, kept
from amqpspec.amqp10.frames import PROTOCOL_HEADER_SIZE, Frame, ProtocolHeader, decode_frame

REPRODUCER_FORMAT = "amqpspec-fuzz-reproducer"
REPRODUCER_VERSION = 1
REPRODUCER_NAME = "reproducer.json"

if TYPE_CHECKING:
    from amqpspec.fuzz.multiparty import MultiCase

HEADER = "header"  # Step.kind values
FRAME = "frame"
RAW = "raw"  # anything the core does not take as one whole header or frame


@dataclass(frozen=True, slots=True)
class Step:
    """One send of the client. `label` is what it is ('flow', 'begin[remote-channel=
    ulong]'); `malformed` is the core decoder's verdict on these bytes alone (None: they
    decode), i.e. why a spec-following peer must refuse them."""

    data: bytes
    label: str
    kind: str = FRAME
    malformed: str | None = None

    @property
    def is_header(self) -> bool:
        return self.kind == HEADER

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"hex": self.data.hex(), "label": self.label, "kind": self.kind}
        if self.malformed:
            record["malformed"] = self.malformed
        return record

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> Step:
        return cls(
            bytes.fromhex(record["hex"]),
            str(record.get("label", "")),
            str(record.get("kind", FRAME)),
            record.get("malformed"),
        )


FIELDS_MARK = "[fields:"  # what fuzz.shrink appends to the label of a step it changed


def mutation_label(label: str) -> str:
    """A step's label as the mutators made it, without what field minimising added:
    'open[fields: container-id]' -> 'open'."""
    return label.split(FIELDS_MARK, 1)[0]


DECODED_KEPT = 8192  # step encodings whose decoding `decoded` remembers
DECODED_MAX_SIZE = 4096  # ... each of at most this many bytes (a storm is decoded again)


def decoded(data: bytes) -> tuple[Frame | None, DecodeError | None]:
    """(the frame, None) that `decode_frame(data)` gives, or (None, the DecodeError it
    raises), remembered by the bytes: a campaign's cases are a pool of legal conversations
    with a step or two changed, so the same steps are judged, labelled and modelled case
    after case (about 5 us a decoding, under 1 us remembered; bench/README.md "Fuzzer
    speed"). The frame is shared by every caller: read it, never change it."""
    if len(data) > DECODED_MAX_SIZE or type(data) is not bytes:
        return _decode(data)
    return _remembered(data)


def _decode(data: bytes) -> tuple[Frame | None, DecodeError | None]:
    try:
        return decode_frame(data), None
    except DecodeError as exc:
        return None, kept(exc)  # remembered: without the frames its traceback holds


_remembered = functools.lru_cache(maxsize=DECODED_KEPT)(_decode)


def judge_bytes(data: bytes) -> tuple[str, str | None]:
    """(kind, malformed) for one step's bytes, by the core decoder alone."""
    if data[:4] == b"AMQP" and len(data) == PROTOCOL_HEADER_SIZE:
        header = ProtocolHeader.decode(data)
        return HEADER, None if header.is_supported else "unsupported protocol header (2.2)"
    _frame, error = decoded(data)
    if error is not None:
        return RAW if len(data) < 8 else FRAME, f"{error.condition}: {error.expected}"
    return FRAME, None


def step(data: bytes, label: str | None = None) -> Step:
    """A step for `data`, labelled by the core decoder unless `label` is given."""
    kind, malformed = judge_bytes(data)
    return Step(data, label or describe(data), kind, malformed)


def describe(data: bytes) -> str:
    """'open', 'flow', 'protocol-header 3.1.0.0', 'empty' or 'raw(12)'."""
    if data[:4] == b"AMQP" and len(data) == PROTOCOL_HEADER_SIZE:
        return "protocol-header " + ".".join(str(b) for b in data[4:8])
    frame, _error = decoded(data)
    return frame.name if frame is not None else f"raw({len(data)})"


@dataclass(slots=True)
class Case:
    """The client side of one fuzzed connection (`steps` in send order)."""

    steps: list[Step]
    strategy: str = "none"
    seed: str = ""
    note: str = ""
    original: list[Step] = field(default_factory=list)  # before minimising

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.steps]

    def with_steps(self, steps: Sequence[Step]) -> Case:
        return Case(list(steps), self.strategy, self.seed, self.note, self.original or self.steps)

    def to_json(self, **extra: Any) -> dict[str, Any]:
        record = reproducer_record(self, [s.to_json() for s in self.steps])
        record.update(extra)
        return record


def reproducer_record(case: Case | MultiCase, steps: list[Any]) -> dict[str, Any]:
    """The head of a reproducer.json: its format and version, the case's strategy, seed and
    note, and `steps` (those of a one-connection case; none for a multi-party one)."""
    return {
        "format": REPRODUCER_FORMAT,
        "version": REPRODUCER_VERSION,
        "strategy": case.strategy,
        "seed": case.seed,
        "note": case.note,
        "steps": steps,
    }


def case_from_json(record: dict[str, Any]) -> Case:
    if record.get("format") != REPRODUCER_FORMAT:
        raise ValueError("not an amqpspec fuzz reproducer (no 'format' field)")
    if int(record.get("version", 0)) > REPRODUCER_VERSION:
        raise ValueError(f"reproducer version {record.get('version')} is newer than this tool")
    steps = [Step.from_json(r) for r in record.get("steps", [])]
    return Case(steps, str(record.get("strategy", "")), str(record.get("seed", "")))


class CaseFileError(Exception):
    """A reproducer or trace that cannot be read."""


def load_case(path: str) -> tuple[Case, dict[str, Any]]:
    """The case in a reproducer .json, a finding directory, or a trace (pcap/pcapng/frame
    log: the client side of its first connection). Returns (case, the file's record)."""
    if os.path.isdir(path):
        path = os.path.join(path, REPRODUCER_NAME)
    try:
        with open(path, "rb") as file:
            head = file.read(4)
    except OSError as exc:
        raise CaseFileError(f"{path}: {exc.strerror or exc}") from None
    if head[:1] in (b"{", b"[", b" ", b"\n"):
        try:
            with open(path, encoding="utf-8") as file:
                record = json.load(file)
            return case_from_json(record), record
        except (ValueError, KeyError, TypeError) as exc:
            raise CaseFileError(f"{path}: {exc}") from None
    sides = client_sides(path)
    if not sides:
        raise CaseFileError(f"{path}: no connection with client bytes in it")
    return Case(sides[0], "trace", os.path.basename(path)), {}


def client_sides(path: str) -> list[list[Step]]:
    """The client side of each connection in a trace file, one step per item."""
    from amqpspec.amqp10.origins import CLIENT
    from amqpspec.traces.load import open_trace  # the corpus readers: the fuzz extra

    sides: dict[int, list[Step]] = {}
    for item in open_trace(path):
        if item.direction == CLIENT:
            sides.setdefault(item.connection_id, []).append(step(item.raw))
    return [s for s in sides.values() if s]
