"""Errors carry kinds (amqp10/errors.py): whatever acts on an error keys on its kind and
structured facts, never on its message text. Every raise site in amqp10 names a kind; then
every message is reworded (DecodeError and ProtocolError get other text at construction,
in the pure and, where built, the compiled path alike) and nothing else changes: the
reference broker's parser faults fire the same, the fuzzer's input classes (its triage of
findings into broker behaviours) are the same, and spark triage still knows bad input."""

from __future__ import annotations

import ast
import functools
import random
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_fuzz_faults import C, _run

from amqpspec.amqp10 import composites
from amqpspec.amqp10.builder import build_frame, mutate
from amqpspec.amqp10.errors import DecodeError, ErrorKind, ProtocolError
from amqpspec.amqp10.frames import decode_frame, decode_stream
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import Described, symbol, ulong
from amqpspec.fuzz import case as fuzz_case
from amqpspec.reference_broker.faults import parser as parser_faults

ROOT = Path(__file__).resolve().parents[1]
# (class, the position of its kind among the positional arguments)
_KIND_POSITION = {"DecodeError": 3, "ProtocolError": 3}


def _reword(text: str) -> str:
    return f"reworded {zlib.crc32(text.encode()):08x}"


def _reword_every_message(patch: pytest.MonkeyPatch) -> None:
    """Every DecodeError and ProtocolError message replaced by other words (the second
    argument of both: `expected`, `description`), wherever it is raised."""
    for cls in (DecodeError, ProtocolError):
        original = cls.__init__

        def init(self, first, text, *args, _original=original, **kwargs) -> None:
            _original(self, first, _reword(text), *args, **kwargs)

        patch.setattr(cls, "__init__", init)
    # the fuzzer remembers the decoder's answers (fuzz.case.decoded): while the words are
    # changed it remembers apart, and the answers in the old words are back after
    patch.setattr(fuzz_case, "_remembered", functools.lru_cache(maxsize=64)(fuzz_case._decode))


# ----------------------------------------------------------------- every raise has a kind


def _raise_sites() -> list[tuple[str, int, ast.Call]]:
    sites = []
    for path in sorted((ROOT / "amqp10").rglob("*.py")):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name in _KIND_POSITION:
                    sites.append((f"{path.relative_to(ROOT)}:{node.lineno}", name, node))
    return sites


def test_every_raise_site_in_amqp10_names_a_kind():
    sites = _raise_sites()
    assert len(sites) > 60
    missing = [
        where
        for where, name, call in sites
        if not any(k.arg == "kind" for k in call.keywords)
        and len(call.args) <= _KIND_POSITION[name]
        and not any(k.arg is None for k in call.keywords)  # **facts of a re-raise
    ]
    assert missing == []
    generated = [
        line
        for source, _ in composites.GENERATED.values()
        for line in source.splitlines()
        if "raise DecodeError(" in line
    ]
    assert generated and all("kind=" in line for line in generated)


def test_kinds_and_facts_of_some_errors():
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    with pytest.raises(DecodeError) as caught:
        decode_frame(mutate(begin).set_count(200).frame(1))
    error = caught.value
    assert error.kind == ErrorKind.TOO_MANY_FIELDS
    assert (error.performative, error.declared, error.allowed) == ("begin", 200, 8)
    with pytest.raises(DecodeError) as caught:
        decode_frame(mutate(begin).set_size(200).frame(1))
    assert caught.value.kind == ErrorKind.COMPOUND_OVERRUN
    assert caught.value.performative == "begin"
    assert caught.value.facts()["kind"] == "compound-overrun"


def test_the_rewording_reaches_the_decoder_and_the_engine(monkeypatch):
    _reword_every_message(monkeypatch)
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    with pytest.raises(DecodeError) as caught:
        decode_frame(mutate(begin).set_count(200).frame(1))
    assert caught.value.expected.startswith("reworded ")
    assert caught.value.kind == ErrorKind.TOO_MANY_FIELDS and caught.value.declared == 200
    # the engine's own error, as the broker sends it: a fault that does not act on it
    *_, after = _run("hang-on-disposition-range", build_frame(begin, 0))
    frames = decode_stream(after, expect_header=False)
    (close,) = [f for f in frames if getattr(f, "name", "") == "close"]
    assert close.performative.error.condition == Cond.ILLEGAL_STATE
    assert close.performative.error.description.startswith("reworded ")


# ----------------------------------------------------------------- parser faults


def _nested_descriptor() -> bytes:
    value = {symbol("k"): Described(Described(ulong(1), ulong(2)), 3)}
    begin = C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)
    return mutate(begin).set_field("properties", value).frame(1)


def _begin() -> object:
    return C["begin"](next_outgoing_id=0, incoming_window=9, outgoing_window=9)


# the faults that acted on the core's error messages, each with a frame that triggers it
MESSAGE_FAULTS = {
    "die-on-nested-descriptor": _nested_descriptor,
    "exit-on-compound-overrun": lambda: mutate(_begin()).set_size(200).frame(1),
    "leak-on-declared-count": lambda: mutate(_begin()).set_count(200).frame(1),
    "die-on-channel-reuse": lambda: build_frame(_begin(), 0),
}
# frames that must not trigger any of them
QUIET = {
    "a list overrun in the codec (no composite)": lambda: (
        mutate(_begin()).set_field("properties", [1, 2]).frame(1)[:-3]
    ),
    "a mistyped field": lambda: mutate(_begin()).set_field("handle-max", "x").frame(1),
    "a well-formed begin": lambda: build_frame(_begin(), 1),
}


def _fired(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """What every message fault does for every trigger, recorded (an exit or a die is
    recorded, then the connection dies; a leak records its size)."""
    fired: list = []

    def fire(fault: str, action: str) -> None:
        fired.append((fault, action))
        raise parser_faults.FaultTriggeredError(fault, parser_faults.DIE)

    monkeypatch.setattr(parser_faults, "_fire", fire)
    monkeypatch.setattr(parser_faults, "_leak", lambda _s, size: fired.append(("leak", size)))
    seen = {}
    for fault in MESSAGE_FAULTS:
        for name, trigger in {**MESSAGE_FAULTS, **QUIET}.items():
            fired.clear()
            _run(fault, trigger())
            seen[f"{fault} <- {name}"] = list(fired)
    return seen


def test_parser_faults_fire_the_same_when_every_message_is_reworded(monkeypatch):
    plain = _fired(monkeypatch)
    for fault in MESSAGE_FAULTS:  # each fires on its own trigger
        assert plain[f"{fault} <- {fault}"], fault
    assert plain["leak-on-declared-count <- leak-on-declared-count"] == [
        ("leak", 200 * parser_faults.LEAK_PER_DECLARED_FIELD)
    ]
    with monkeypatch.context() as patch:
        _reword_every_message(patch)
        assert _fired(monkeypatch) == plain


# ----------------------------------------------------------------- the fuzzer's triage


def _input_classes(count: int) -> list[tuple[int, str, str, str]]:
    """(bad step, input class, its sentence, the decoder's words) of `count` seeded
    mutated conversations, as the fuzzer's triage classifies them."""
    from amqpspec.fuzz.behaviour import input_class
    from amqpspec.fuzz.evidence import bad_step
    from amqpspec.fuzz.model import Handshake
    from amqpspec.fuzz.mutators import STRATEGIES, mutate_case
    from amqpspec.fuzz.seeds import scenario

    found = []
    for index in range(count):
        rng = random.Random(f"error-kinds:{index}")
        handshake = Handshake(
            sasl=rng.choice(["none", "ANONYMOUS", "PLAIN"]), source="/queues/q", target="/queues/q"
        )
        _, steps = scenario(handshake, rng)
        steps = mutate_case(steps, STRATEGIES[index % len(STRATEGIES)], rng)
        bad = bad_step(steps, len(steps))
        given = input_class(steps, bad)
        found.append((bad, given.key, given.sentence, steps[bad].malformed or ""))
    return found


def test_fuzz_input_classes_are_the_same_when_every_message_is_reworded(monkeypatch):
    plain = _input_classes(240)
    keys = {key for _, key, _, _ in plain}
    assert {"mistyped-field", "composite-shape", "framing", "malformed"} <= keys
    with monkeypatch.context() as patch:
        _reword_every_message(patch)
        again = _input_classes(240)
    assert any("reworded" in words for *_, words in again)  # the rewording took
    assert [item[:3] for item in again] == [item[:3] for item in plain]


# ----------------------------------------------------------------- spark triage


def test_triage_knows_bad_input_by_its_kind_not_its_words(tmp_path, monkeypatch):
    """An executor's reader refuses a frame log (FrameLogSchemaError, its message
    reworded): the task that reads the whole file and the data source of the shuffled
    path both hand it on as data (a BAD_INPUT result row, an `error` segment row)."""
    from amqpspec.spark_triage import datasource, framelog_segments, job
    from amqpspec.traces.framelog import METADATA_KEY_VERSION, FrameLogSchemaError

    class RewordedError(FrameLogSchemaError):
        def __init__(self, message: str) -> None:
            super().__init__(_reword(message))

    monkeypatch.setattr(framelog_segments, "FrameLogSchemaError", RewordedError)
    log = tmp_path / "old.parquet"
    table = pa.table({"connection_id": [1]})
    pq.write_table(table.replace_schema_metadata({METADATA_KEY_VERSION: b"0"}), log)
    split = datasource.Split(str(log), "framelog", False, None, 0, None)
    (rows,) = [batch.to_pylist() for batch in job.check_split(split, None)]
    assert rows[0]["kind"] == job.BAD_INPUT and rows[0]["source"] == str(log)
    assert rows[0]["reason"].startswith("reworded ")
    reader = datasource._Reader({"files": "[]"})
    (segment,) = list(reader.read(split))
    assert segment.column("error")[0].as_py().startswith("reworded ")
    key = (pa.scalar(str(log)), pa.scalar(""))
    (result,) = [batch.to_pylist() for batch in job.check_group(key, iter([segment]))]
    assert result[0]["kind"] == job.BAD_INPUT
