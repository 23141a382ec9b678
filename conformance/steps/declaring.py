"""Case options a family of cases shares for one reason, named once: `opening_case`, a case
that builds or checks its frames from the broker's open or begin (so it has no pipelined
variant: conformance/run/registry.py `case`, `pipelined`), and `above_max_case`, a number
above the broker's own limit (2.7.1 channel-max, 2.7.3 handle-max) refused with
framing-error.

Owns those declarations; registers no case itself. Touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amqpspec.conformance.run.registry import MUST, Level, RunFunction, case

FRAMING_ERROR = frozenset({"close:amqp:connection:framing-error"})


def opening_case(
    case_id: str, level: Level, sentence: str, **options: Any
) -> Callable[[RunFunction], RunFunction]:
    """`case` (`options` as its) for a case that reads the broker's open or begin before it
    builds or checks its frames: the probe's pipelined mode does not wait for them, so no
    pipelined variant."""
    return case(case_id, level, sentence, pipelined=False, **options)


def above_max_case(case_id: str, what: str, sentence: str) -> Callable[[RunFunction], RunFunction]:
    """`opening_case` for a `what` (a channel number, a handle) above the limit the
    broker's open or begin announced: "A peer that receives a <what> outside the supported
    range MUST close the Connection with the framing-error error-code" (`sentence`, the
    manifest id)."""
    return opening_case(
        case_id,
        MUST,
        f"A peer that receives a {what} outside the supported range MUST close the Connection "
        "with the framing-error error-code.",
        sentences=(sentence,),
        outcomes=FRAMING_ERROR,
    )
