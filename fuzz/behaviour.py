"""Broker behaviours: which findings of a campaign are one thing the broker does.

Owns: `InputClass` and `input_class(steps, bad)` (what is wrong with the bad frame, by the
kind of the core decoder's error (amqp10.errors.ErrorKind, never its message text) and
the mutation's label: a field of the wrong type, a composite whose
size or count lies, a framing error, a protocol header out of place, or a well-formed frame
of a performative), `Behaviour` and `behaviour_of(kind, rule, section, sentence, input)`
(one entry of `DIR/findings.md`: its key, its title in broker terms, what was expected,
the spec sentences at stake by manifest id).

A finding's signature (fuzz.findings) is one bucket per rule, triggering performative and
state, so one broker behaviour ("RabbitMQ 3.10 accepts a mistyped field instead of refusing
it") shows as several findings (begin, open, flow, detach, sasl-init ...). A behaviour is
(kind, rule, input class): the same reaction, by the oracle's verdict, to the same kind of
input. For a frame the core decoder accepts, the performative is part of the input class
(dying on a reused channel and dying on a large credit are two code paths); for a malformed
one, the kind of malformation is (a wrong type is a wrong type in any performative).

Spec sentences are the normative manifest's ids (conformance.manifest): for a verdict that
breaks a MUST, the sentence the broker breaks (the checker rule's `RULES[rule].sentences`,
or the oracle's pseudo-rule sentence); for a robustness verdict (no MUST binds the broker),
the sentence the bad frame itself breaks, which binds its sender (the fuzzer, on purpose).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from amqpspec.amqp10.checker.rules import RULES
from amqpspec.amqp10.errors import DecodeError, ErrorKind
from amqpspec.amqp10.frames import decode_frame
from amqpspec.amqp10.spec import Cond
from amqpspec.conformance import manifest
from amqpspec.fuzz.case import Step, mutation_label
from amqpspec.fuzz.evidence import stream_error
from amqpspec.fuzz.oracle import (
    CLOSE_MISSING,
    CLOSE_SENTENCE,
    CRASH,
    ERROR_MISSING,
    FRAME_SENTENCE,
    HANG,
    RESOURCE,
    UNDECODABLE,
    VIOLATION,
)

# the oracle's pseudo-rules (fuzz.oracle) and the sentence each enforces
PSEUDO_SENTENCES = {CLOSE_MISSING[0]: CLOSE_SENTENCE[0], UNDECODABLE[0]: FRAME_SENTENCE[0]}
# fuzz.mutators' labels of a frame-header mutation: 'begin[DOFF=1]', 'flow[cut to 3B]'
FRAMING = re.compile(r"^(SIZE=|DOFF=|TYPE=|cut to |extended-header=|trailer=)")
AMQP_FRAMES = FRAME_SENTENCE[0]  # 2.3.2: a performative encoded as its described type


@dataclass(frozen=True, slots=True)
class InputClass:
    """What is wrong with the bad frame, coarse enough to be one behaviour."""

    key: str  # "mistyped-field", "framing", "well-formed:flow", ...
    text: str  # "a field of the wrong type"
    detail: str  # this example's own: the decoder's reason or the mutation
    sentence: str = ""  # the manifest id the bad frame breaks ("" when well-formed)


def input_class(steps: list[Step], bad: int) -> InputClass:
    """The bad step's input class, from its mutation label and the core decoder."""
    if not steps:
        return InputClass("none", "no frame at all", "")
    bad = max(0, min(bad, len(steps) - 1))
    step = steps[bad]
    label = mutation_label(step.label)
    mutation = label.partition("[")[2].rstrip("]")
    status, where, error = stream_error(steps[: bad + 1])
    if status == "malformed" and where == bad and error is not None:
        reason = f"{error.condition}: {error.expected}"  # for humans: the detail
    else:
        reason, error = step.malformed or "", _step_error(step)
    if step.is_header or label.startswith("protocol-header"):
        return InputClass(
            "protocol-header",
            "a protocol header out of place or of another protocol",
            label,
            "2.2/version-negotiation.2",
        )
    framing = error is not None and error.condition == Cond.FRAMING_ERROR
    if FRAMING.match(mutation) or framing:
        return InputClass(
            "framing",
            "a frame whose header or length is malformed (a framing error)",
            f"{label}: {reason}" if reason else label,
            _framing_sentence(error, mutation),
        )
    if reason:
        return _decode_class(error, reason, label)
    if "+" in step.label:
        label = step.label
    performative = label.partition("[")[0] or "frame"
    return InputClass(
        f"well-formed:{performative}",
        f"a well-formed {performative} frame (it abuses state, not the encoding)",
        step.label,
    )


# the core decoder's error kind -> (input class, its text); any other kind is "malformed"
_DECODE_CLASSES = {
    ErrorKind.NESTED_DESCRIPTOR: (
        "described-descriptor",
        "a described type whose descriptor is itself described",
    ),
    ErrorKind.FIELD_TYPE: ("mistyped-field", "a field of the wrong type"),
    **dict.fromkeys(
        (ErrorKind.COMPOUND_END, ErrorKind.SHORT_INPUT, ErrorKind.NOT_A_LIST),
        ("composite-shape", "a composite whose size or count disagrees with its bytes"),
    ),
    ErrorKind.MANDATORY_FIELD: ("null-mandatory", "a mandatory field left null"),
    **dict.fromkeys(
        (ErrorKind.NOT_A_PERFORMATIVE, ErrorKind.NOT_A_SASL_BODY),
        ("descriptor", "a frame body that is not a performative its frame type allows"),
    ),
}


_DECODE_SENTENCES = {
    "null-mandatory": "1.3/composite-types.1",  # a mandatory field's null is not permitted
    "described-descriptor": "1.1.3/descriptor-values.1",  # symbol or ulong descriptors only
}


def _step_error(step: Step) -> DecodeError | None:
    """The core decoder's error on the step's bytes alone (what `step.malformed` says in
    words), or None when they decode or the step is not malformed."""
    if step.malformed is None:
        return None
    try:
        decode_frame(step.data)
    except DecodeError as exc:
        return exc
    return None


def _decode_class(error: DecodeError | None, reason: str, label: str) -> InputClass:
    found = _DECODE_CLASSES.get(error.kind) if error is not None else None
    if found is not None:
        key, text = found
        sentence = _DECODE_SENTENCES.get(key, AMQP_FRAMES)
        return InputClass(key, text, f"{label}: {reason}", sentence)
    return InputClass("malformed", "bytes the decoder rejects", f"{label}: {reason}", AMQP_FRAMES)


def _framing_sentence(error: DecodeError | None, mutation: str) -> str:
    """2.3.1's sentence that the frame header breaks."""
    kind = error.kind if error is not None else None
    if kind == ErrorKind.FRAME_SIZE_TOO_SMALL or re.search(r"SIZE=[0-7]$", mutation):
        return "2.3.1/frame-layout.2"  # size below the 8-byte header
    if kind in (ErrorKind.DOFF_TOO_SMALL, ErrorKind.DOFF_BEYOND_SIZE) or "DOFF=" in mutation:
        return "2.3.1/frame-layout.3"  # data offset below 2
    if "TYPE=" in mutation or kind == ErrorKind.NOT_A_SASL_BODY:
        return AMQP_FRAMES
    return "2.3.1/frame-layout.1"  # SIZE is the total frame size


@dataclass(frozen=True, slots=True)
class Behaviour:
    key: str  # "kind|rule|input class"
    id: str  # short, stable: an anchor in findings.md
    kind: str
    rule: str
    section: str
    level: str  # MUST, or robustness
    title: str  # "accepts a field of the wrong type instead of refusing it"
    expected: str  # what a broker following the text does, in broker terms
    broker_sentences: tuple[str, ...]  # manifest ids the broker breaks (MUST)
    input_sentences: tuple[str, ...]  # manifest ids the bad frame breaks (its sender's)


def by_rule(kind: str, rule: str) -> bool:
    """A checker rule the broker's own frames break: the rule says what the broker does,
    whatever the input that led there (a pseudo-rule of the oracle, e.g. a drop without
    close, says only how it reacted: the input class is part of the behaviour)."""
    return kind == VIOLATION and rule in RULES


def behaviour_key(kind: str, rule: str, given: InputClass) -> str:
    return f"{kind}|{rule}|{'*' if by_rule(kind, rule) else given.key}"


def behaviour_of(
    kind: str, rule: str, section: str, sentence: str, level: str, inputs: list[InputClass]
) -> Behaviour:
    """The behaviour of findings of (kind, rule) whose bad frames are `inputs` (one class,
    or any for a checker rule)."""
    first = inputs[0]
    key = behaviour_key(kind, rule, first)
    broker = _broker_sentences(rule, sentence) if kind == VIOLATION else ()
    input_ids = tuple(dict.fromkeys(i.sentence for i in inputs if i.sentence))
    if by_rule(kind, rule):
        input_ids = ()
    return Behaviour(
        key=key,
        id="B-" + hashlib.sha1(key.encode()).hexdigest()[:8],
        kind=kind,
        rule=rule,
        section=section,
        level=level or ("MUST" if kind == VIOLATION else "robustness"),
        title=_title(kind, rule, first),
        expected=_expected(kind, rule, first),
        broker_sentences=broker,
        input_sentences=input_ids,
    )


def _broker_sentences(rule: str, sentence: str) -> tuple[str, ...]:
    ids: list[str] = [sentence] if sentence else []
    if rule in PSEUDO_SENTENCES:
        ids.append(PSEUDO_SENTENCES[rule])
    known = RULES.get(rule)
    if known is not None:
        ids += list(known.sentences)
    return tuple(i for i in dict.fromkeys(ids) if _known(i))


def _known(sentence_id: str) -> bool:
    try:
        manifest.sentence(sentence_id)
    except KeyError:
        return False
    return True


def _title(kind: str, rule: str, given: InputClass) -> str:
    what = given.text
    if kind == ERROR_MISSING:
        return f"accepts {what} instead of refusing it"
    if kind == HANG:
        return f"neither answers nor closes after {what}"
    if kind == CRASH:
        return f"stops serving (no fresh connection opens) after {what}"
    if kind == RESOURCE:
        return f"its memory grows past the bound after {what}"
    if rule == CLOSE_MISSING[0]:
        return f"drops the TCP connection without a close frame after {what}"
    if rule == UNDECODABLE[0]:
        return f"writes a frame that does not decode after {what}"
    known = RULES.get(rule)
    title = known.title if known is not None else rule
    return f"sends frames that break {rule}: {title}"


def _expected(kind: str, rule: str, given: InputClass) -> str:
    refuse = (
        "a close with amqp:connection:framing-error"
        if given.key == "framing"
        else "a close with amqp:decode-error"
    )
    if kind == ERROR_MISSING:
        return (
            f"the broker refuses the frame: {refuse} (or an end or detach with an error), or "
            "at least a TCP close"
        )
    if kind == HANG:
        return (
            "the broker reacts within the bound: a close (with an error if it refuses the "
            "frame) or a TCP close; at the least it answers the fuzzer's close with its own"
        )
    if kind == CRASH:
        return "the broker goes on serving: a fresh connection opens, begins and attaches"
    if kind == RESOURCE:
        return "the memory one connection costs the broker stays under the bound"
    if rule == CLOSE_MISSING[0]:
        error = refuse if not given.key.startswith("well-formed") else "a close with an error"
        return f"{error} before the broker closes the TCP connection"
    if rule == UNDECODABLE[0]:
        return "every frame the broker writes decodes as the performative it names"
    known = RULES.get(rule)
    if known is None:
        return f"the broker keeps {rule}"
    return f'the broker keeps {rule}: "{known.sentence.rstrip(".")}"'


def sentence_text(sentence_id: str) -> tuple[str, str, str]:
    """(level, binds, text) of a manifest sentence."""
    s = manifest.sentence(sentence_id)
    return s.level, s.binds or "unreviewed", s.text
