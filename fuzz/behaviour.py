"""Broker behaviours: which findings of a campaign are one thing the broker does.

Owns: `InputClass` and `input_class(steps, bad)` (what is wrong with the bad frame, by the
core decoder's reason and the mutation's label: a field of the wrong type, a composite whose
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
from amqpspec.conformance import manifest
from amqpspec.fuzz.case import Step, mutation_label
from amqpspec.fuzz.evidence import stream_status
from amqpspec.fuzz.oracle import (
    _CLOSE_SENTENCE,
    _FRAME_SENTENCE,
    CLOSE_MISSING,
    CRASH,
    ERROR_MISSING,
    HANG,
    RESOURCE,
    UNDECODABLE,
    VIOLATION,
)

# the oracle's pseudo-rules (fuzz.oracle) and the sentence each enforces
PSEUDO_SENTENCES = {CLOSE_MISSING[0]: _CLOSE_SENTENCE[0], UNDECODABLE[0]: _FRAME_SENTENCE[0]}
# fuzz.mutators' labels of a frame-header mutation: 'begin[DOFF=1]', 'flow[cut to 3B]'
FRAMING = re.compile(r"^(SIZE=|DOFF=|TYPE=|cut to |extended-header=|trailer=)")
AMQP_FRAMES = _FRAME_SENTENCE[0]  # 2.3.2: a performative encoded as its described type


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
    status, where, reason = stream_status(steps[: bad + 1])
    if status != "malformed" or where != bad:
        reason = step.malformed or ""
    if step.is_header or label.startswith("protocol-header"):
        return InputClass(
            "protocol-header",
            "a protocol header out of place or of another protocol",
            label,
            "2.2/version-negotiation.2",
        )
    if FRAMING.match(mutation) or "framing-error" in reason:
        return InputClass(
            "framing",
            "a frame whose header or length is malformed (a framing error)",
            f"{label}: {reason}" if reason else label,
            _framing_sentence(reason, mutation),
        )
    if reason:
        return _decode_class(reason, label)
    if "+" in step.label:
        label = step.label
    performative = label.partition("[")[0] or "frame"
    return InputClass(
        f"well-formed:{performative}",
        f"a well-formed {performative} frame (it abuses state, not the encoding)",
        step.label,
    )


_DECODE_CLASSES = (
    (
        r"descriptor that is not itself described",
        "described-descriptor",
        "a described type whose descriptor is itself described",
    ),
    (r" of type \S+, got constructor", "mistyped-field", "a field of the wrong type"),
    (
        r"(list|map|array) to end at byte|byte\(s\) of .*only \d+ left|as a list, got",
        "composite-shape",
        "a composite whose size or count disagrees with its bytes",
    ),
    (r"(?i)utf-?8", "encoding", "a string that is not valid UTF-8"),
    (r"(?i)mandatory|null", "null-mandatory", "a mandatory field left null"),
    (
        r"(?i)descriptor|frame body, got|performative",
        "descriptor",
        "a frame body that is not a performative its frame type allows",
    ),
)


_DECODE_SENTENCES = {
    "null-mandatory": "1.3/composite-types.1",  # a mandatory field's null is not permitted
    "described-descriptor": "1.1.3/descriptor-values.1",  # symbol or ulong descriptors only
}


def _decode_class(reason: str, label: str) -> InputClass:
    for pattern, key, text in _DECODE_CLASSES:
        if re.search(pattern, reason):
            sentence = _DECODE_SENTENCES.get(key, AMQP_FRAMES)
            return InputClass(key, text, f"{label}: {reason}", sentence)
    return InputClass("malformed", "bytes the decoder rejects", f"{label}: {reason}", AMQP_FRAMES)


def _framing_sentence(reason: str, mutation: str) -> str:
    """2.3.1's sentence that the frame header breaks."""
    if "SIZE >= 8" in reason or re.search(r"SIZE=[0-7]$", mutation):
        return "2.3.1/frame-layout.2"  # size below the 8-byte header
    if "DOFF" in reason or "DOFF=" in mutation:
        return "2.3.1/frame-layout.3"  # data offset below 2
    if "TYPE=" in mutation or "SASL frame body" in reason:
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
