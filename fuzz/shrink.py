"""Field-level minimising: after ddmin over frames, the fields within each frame left.

Owns: `shrink_fields(steps, still_fails, max_tests)` and `non_default_fields(step)`.
Every whole frame of a minimised case (`Step.kind` frame; protocol headers, split,
coalesced and truncated sends are kept as they are) is taken apart by
`amqp10.builder.read_frame` (right or wrong: a field of the wrong type or with an
unassigned constructor is still a field). Then, while `still_fails` holds:
1. ddmin (`traces.minimize.ddmin`) over the "units" of the case, to a 1-minimal set
   kept as they are while every other is reset: a unit is an optional field that is not
   at its default (reset: null, which means the default), an optional field of a
   described composite inside one (a source, target or error), or a transfer's
   payload (reset: none);
2. trailing null or default optional fields no longer carried, frame by frame;
3. greedily, for each field still off its default, mandatory ones included: shorter
   strings, symbols and binaries (empty, then half), empty lists, maps and arrays,
   numbers lowered toward boundary values (0, 1, the largest 2^n-1 or 2^n below them);
   half the payload.
A change is kept only if the case fails with it twice in a row (one lucky race is not
a reproducer); the caller confirms the result again and may fall back to its input.
Knows nothing about brokers: what "still fails" means is the caller's (the campaign
replays the case and compares signatures). Every byte goes through amqp10 (builder,
codec); a changed step is labelled with the fields it still carries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from amqpspec.amqp10 import codec, malformed
from amqpspec.amqp10.builder import FrameParts, Mutation, read_body, read_frame
from amqpspec.amqp10.errors import AMQPError, DecodeError, EncodeError
from amqpspec.amqp10.spec import COMPOSITES, Field, default_value, primitive_of
from amqpspec.amqp10.types import WRAPPERS, Array, Described, symbol
from amqpspec.fuzz.case import FIELDS_MARK, FRAME, Step, mutation_label, step
from amqpspec.traces.minimize import ddmin

NULL = codec.encode(None)
PAYLOAD = ()  # the path of a transfer's payload unit
_BOUNDARIES = tuple(sorted({2**n + d for n in (7, 8, 15, 16, 31, 32, 63) for d in (-1, 0)}))
_ZERO = {"string": "", "symbol": symbol(""), "binary": b""}

Predicate = Callable[[list[Step]], bool]


def _spec_field(composite: str, index: int) -> Field | None:
    fields = COMPOSITES[composite].fields
    return fields[index] if index < len(fields) else None


def _zero(field: Field) -> bytes | None:
    """The least value of a mandatory field's type (0, ""), if it has one."""
    primitive = primitive_of(field.type)
    if primitive in _ZERO:
        return codec.encode(_ZERO[primitive])
    wrapper = WRAPPERS.get(primitive)
    if wrapper is None or primitive in ("null", "boolean", "float", "double", "char", "uuid"):
        return None
    try:
        return codec.encode(wrapper(0))
    except (EncodeError, TypeError, ValueError):
        return None


def _at_default(field: Field | None, item: bytes) -> bool:
    """An optional field (or an item past the spec's fields) null or at its spec default
    (drain=false); a mandatory one at the least value of its type."""
    if field is not None and field.mandatory:
        return item == _zero(field)
    if item == NULL:
        return True
    if field is None or field.default is None:
        return False
    try:
        return codec.decode(item) == default_value(field)
    except DecodeError:
        return False


def _resettable(field: Field | None, item: bytes) -> bool:
    return (field is None or not field.mandatory) and not _at_default(field, item)


def _units_of(m: Mutation) -> Iterator[tuple[int, ...]]:
    """(field,) for each optional field off its default, (field, sub) for the optional
    fields of a described composite in it."""
    for index in range(m.sent):
        item = m.field_bytes(index)
        if not _resettable(_spec_field(m.layout.composite, index), item):
            continue
        yield (index,)
        inner = read_body(item) if malformed.is_described(item) else None
        if inner is not None:
            for sub in _units_of(inner):
                if len(sub) == 1:
                    yield (index, sub[0])


def _readable(s: Step) -> tuple[FrameParts, Mutation] | None:
    """The step's frame as parts and its body as a Mutation, when it reads field by field."""
    parts = read_frame(s.data) if s.kind == FRAME else None
    if parts is None or not isinstance(parts.body, Mutation):
        return None
    return parts, parts.body


def _off_default(body: Mutation) -> list[str]:
    """Names of the fields of `body` off their default."""
    names = []
    for index in range(body.sent):
        field = _spec_field(body.layout.composite, index)
        if not _at_default(field, body.field_bytes(index)):
            names.append(field.name if field is not None else f"#{index}")
    return names


def non_default_fields(s: Step) -> int:
    """How many fields of the step's performative are off their default (see
    `_at_default`); 0 for what is not a readable frame."""
    read = _readable(s)
    return len(_off_default(read[1])) if read is not None else 0


@dataclass(frozen=True, slots=True)
class _Unit:
    step: int
    path: tuple[int, ...]  # (field,), (field, sub-field) or PAYLOAD


@dataclass(slots=True)
class FieldResult:
    steps: list[Step]
    tests: int  # calls of still_fails
    before: int  # non-default fields over all frames, before
    after: int


def _units(steps: list[Step]) -> list[_Unit]:
    units: list[_Unit] = []
    for index, s in enumerate(steps):
        read = _readable(s)
        if read is None:
            continue
        parts, body = read
        units += [_Unit(index, path) for path in _units_of(body)]
        if parts.payload:
            units.append(_Unit(index, PAYLOAD))
    return units


def _write(steps: list[Step], units: list[_Unit], kept: set[_Unit]) -> list[Step]:
    """`steps` with every unit not in `kept` reset."""
    out = list(steps)
    for index in sorted({u.step for u in units if u not in kept}):
        read = _readable(steps[index])
        assert read is not None
        _reset(*read, [u.path for u in units if u.step == index and u not in kept])
        out[index] = _relabel(steps[index], read[0])
    return out


def _reset(parts: FrameParts, body: Mutation, paths: list[tuple[int, ...]]) -> None:
    inner: dict[int, Mutation] = {}
    for path in paths:
        if path == PAYLOAD:
            parts.payload = b""
        elif len(path) == 2:
            nested = inner.get(path[0]) or read_body(body.field_bytes(path[0]))
            if nested is not None:
                inner[path[0]] = nested.null_field(path[1])
    for field, nested in inner.items():
        body.replace_field(field, nested.encode())
    for path in paths:  # a field reset outright wins over its sub-fields
        if len(path) == 1:
            body.null_field(path[0])


def _relabel(old: Step, parts: FrameParts) -> Step:
    """The step for the changed parts, labelled with the fields it still carries."""
    assert isinstance(parts.body, Mutation)
    names = _off_default(parts.body)
    if parts.payload:
        names.append("payload")
    label = f"{mutation_label(old.label)}{FIELDS_MARK} {', '.join(names) or 'none'}]"
    return step(parts.build(), label)


# ----------------------------------------------------------------- value shrinking


def _smaller(item: bytes) -> list[bytes]:
    """Smaller encodings of the same type: shorter, emptier, lower (see module doc)."""
    try:
        value = codec.decode(item)
    except DecodeError:
        return []
    out: list = []
    if isinstance(value, (Described, bool)):
        return []
    if type(value) in (str, symbol, bytes):
        out = [type(value)(v) for v in (value[:0], value[: len(value) // 2])]
    elif isinstance(value, int) and type(value) is not int and value > 1:
        below = [b for b in _BOUNDARIES if b < value]
        out = [type(value)(v) for v in sorted({0, 1, *below[-1:]})]
    elif isinstance(value, Array) and value.items:
        out = [Array(value.element_type, [], value.descriptor)]
    elif isinstance(value, list) and value:
        out = [[], value[: len(value) // 2]]
    elif isinstance(value, dict) and value:
        out = [{}]
    encoded: list[bytes] = []
    for candidate in out:
        try:
            data = codec.encode(candidate)
        except (EncodeError, TypeError, ValueError, OverflowError):
            continue
        if len(data) <= len(item) and data != item and data not in encoded:
            encoded.append(data)
    return encoded


class _Budget:
    def __init__(self, still_fails: Predicate, max_tests: int) -> None:
        self.still_fails, self.max_tests, self.tests = still_fails, max_tests, 0
        self._lock = threading.Lock()  # ddmin's parallel tests count here at once

    @property
    def left(self) -> bool:
        return self.tests < self.max_tests

    def _take(self) -> bool:
        with self._lock:
            if self.tests >= self.max_tests:
                return False
            self.tests += 1
            return True

    def fails_twice(self, steps: list[Step]) -> bool:
        """Fails, and again (each run counted); an error building the case is a pass."""
        for _ in range(2):
            if not self._take():
                return False
            try:
                if not self.still_fails(steps):
                    return False
            except AMQPError:
                return False
        return True


def _lower_values(steps: list[Step], budget: _Budget) -> list[Step]:
    for index in range(len(steps)):
        read = _readable(steps[index])
        if read is None:
            continue
        parts, body = read
        trials: list[tuple[int | None, bytes]] = []  # (field, or None: the payload; bytes)
        for field in range(body.sent):
            item = body.field_bytes(field)
            if not _at_default(_spec_field(body.layout.composite, field), item):
                trials += [(field, smaller) for smaller in _smaller(item)]
        if len(parts.payload) > 1:
            trials.append((None, parts.payload[: len(parts.payload) // 2]))
        done: set[int | None] = set()
        for field, data in trials:
            if field in done or not budget.left:
                continue
            read = _readable(steps[index])
            assert read is not None
            parts, body = read
            if field is None:
                parts.payload = data
            else:
                body.replace_field(field, data)
            trial = [*steps[:index], _relabel(steps[index], parts), *steps[index + 1 :]]
            if budget.fails_twice(trial):
                steps = trial
                done.add(field)
    return steps


def _droppable(field: Field | None, item: bytes) -> bool:
    """Leaving the field out of the list means the same."""
    if field is None:
        return item == NULL
    return not field.mandatory and _at_default(field, item)


def _trim(steps: list[Step], budget: _Budget) -> list[Step]:
    """Trailing null or default optional fields no longer carried (the encoder's own
    form), frame by frame."""
    for index, s in enumerate(steps):
        read = _readable(s)
        if read is None or not budget.left:
            continue
        parts, body = read
        keep = body.sent
        while keep and _droppable(
            _spec_field(body.layout.composite, keep - 1), body.field_bytes(keep - 1)
        ):
            keep -= 1
        if keep < body.sent:
            body.drop_trailing(keep)
            trial = [*steps[:index], _relabel(s, parts), *steps[index + 1 :]]
            if budget.fails_twice(trial):
                steps = trial
    return steps


def shrink_fields(
    steps: list[Step], still_fails: Predicate, max_tests: int = 60, parallel: int = 1
) -> FieldResult:
    """Minimise the fields of `steps` (which must fail as they are) while `still_fails`
    holds, within `max_tests` calls of it (`parallel` of them at once in step 1: ddmin's)."""
    before = sum(non_default_fields(s) for s in steps)
    units = _units(steps)
    budget = _Budget(still_fails, max_tests)
    if not any(_readable(s) for s in steps) or max_tests <= 0:
        return FieldResult(list(steps), 0, before, before)
    current = list(steps)
    if units:
        result = ddmin(
            units,
            lambda kept: budget.fails_twice(_write(steps, units, set(kept))),
            max_tests=max_tests,
            check_input=False,
            parallel=parallel,
        )
        current = _write(steps, units, set(result.items))
    current = _lower_values(_trim(current, budget), budget)
    after = sum(non_default_fields(s) for s in current)
    return FieldResult(current, budget.tests, before, after)
