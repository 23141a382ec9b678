"""The oracle's cut at the fuzzer's own ending (fuzz.oracle `judged_items`) leaves the rules
that judge a frame's own fields (amqp10.checker.fields FRAME_CONTENT_RULES, 2.7.3-2.7.4)
judged past it: a quick case sends its close at once, so the broker's answer to an attach is
read after that close; a flow without delivery-count is still one, whatever the broker had
not read yet. Against the reference broker with that fault, every quick run of one case
finds it (before, the verdict depended on whether the broker's flow overtook our close)."""

from __future__ import annotations

import re
from pathlib import Path

import amqpspec.amqp10.checker.fields as fields_module
from amqpspec.amqp10.checker.fields import FRAME_CONTENT_RULES
from amqpspec.amqp10.checker.rules import RULES
from amqpspec.fuzz.detection import Supervised, target_for
from amqpspec.fuzz.model import Conversation
from amqpspec.fuzz.oracle import run_case

RULE = "link.flow.receiver-delivery-count-missing"


def test_frame_content_rules_are_rules_the_fields_module_reports() -> None:
    source = Path(fields_module.__file__).read_text(encoding="utf-8")
    body = source.split("FRAME_CONTENT_RULES = ", 1)[1].split("\n)\n", 1)[1]  # after the set
    reported = set(re.findall(r'"((?:link|session|connection)\.[a-z0-9.-]+)"', body))
    assert reported >= FRAME_CONTENT_RULES
    assert set(RULES) >= FRAME_CONTENT_RULES


def test_a_field_violation_after_our_close_is_judged_every_time() -> None:
    broker = Supervised(["flow-without-delivery-count"])
    try:
        target = target_for(broker)
        conversation = Conversation(target.handshake).open()
        conversation.attach_sender(conversation.begin())  # the broker answers with a flow
        steps = conversation.steps()
        rules = [run_case(target, steps, quick=True) for _ in range(8)]
        found = [o.verdict.rule if o.verdict is not None else None for o in rules]
        assert found == [RULE] * 8
    finally:
        broker.stop()
