"""Steps whose point is the broker's refusal: crafted bytes or a frame and how the broker
ends the connection, session or link after them (2.3, 2.6.2, 2.7), a protocol header it
does not speak (2.2; `refused_header_case` registers such a case for the module that calls
it), our close answered with the broker's (2.4.3; `close_answered_case` likewise), a SASL
exchange it must fail (5.3), and what it makes of one message it should
refuse (`published_answer`: an outcome or an ending).

Owns sending the crafted input and grading the answer; registers no case of its own.
Touches nothing else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from amqpspec.amqp10.composites import Error, Rejected
from amqpspec.amqp10.engine import (
    DispositionReceived,
    Link,
    RemoteClose,
    RemoteDetach,
    RemoteEnd,
    Session,
    TransportClosed,
)
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, ProtocolHeader
from amqpspec.amqp10.message import Message
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MUST, RunFunction, case, case_function
from amqpspec.conformance.steps.links import wait_credit
from amqpspec.conformance.steps.sentences import (
    CLOSE_FIRST,
    NEGOTIATION,
    SUPPORTED_HEADERS,
    VERSION_HIGHEST,
    VERSION_HIGHEST_BELOW,
    VERSION_UNSUPPORTED,
)
from amqpspec.conformance.verdicts import CaseFailed, NoDelivery


def _ending_after(
    probe: Probe, send: Callable[[], object], timeout: float | None, silence: str
) -> str:
    """`send()`, then how the broker ended something (`silence` when nothing ended)."""
    since = probe.mark()
    send()
    observed = probe.error_outcome(timeout=timeout, since=since)
    return silence if observed == "timeout" else observed


def sent_bytes_outcome(
    probe: Probe, data: bytes, *, timeout: float | None = None, silence: str = "timeout"
) -> str:
    """Send crafted bytes: how the broker ended something after them (`silence` when it
    ended nothing within `timeout`)."""
    return _ending_after(probe, lambda: probe.send_raw(data), timeout, silence)


def sent_frame_outcome(
    probe: Probe,
    performative: Any,
    channel: int = 0,
    payload: bytes = b"",
    *,
    timeout: float | None = None,
    silence: str = "timeout",
) -> str:
    """Send one crafted performative through the engine (recorded as sent when its tables
    allow it, written anyway as a deliberate violation when they do not): how the broker
    ended something after it (`silence` when it ended nothing within `timeout`)."""
    send = functools.partial(probe.send_frame, performative, channel, payload, strict=False)
    return _ending_after(probe, send, timeout, silence)


def sent_transfer_outcome(probe: Probe, session: Session, transfer: Any, **options: Any) -> str:
    """`sent_frame_outcome` for a crafted `transfer` on `session` carrying a one-byte-body
    message (`options`: its timeout, silence)."""
    payload = Message.of(b"x").encode()
    return sent_frame_outcome(probe, transfer, session.channel, payload, **options)


def refused_after_open(probe: Probe, ctx: CaseContext, data: bytes) -> None:
    """Open the connection, send crafted bytes (a malformed frame): grade how the broker
    ends it (the case's outcomes)."""
    probe.open()
    ctx.outcome(sent_bytes_outcome(probe, data))


def header_refused(probe: Probe, ctx: CaseContext, header: ProtocolHeader | bytes) -> None:
    """2.2: send a protocol header (or bytes) the broker does not speak: grade its answer
    (the case's outcomes), then it must close the socket."""
    probe.send_raw(header if isinstance(header, bytes) else header.encode())
    ctx.outcome(probe.header_answer())
    since = probe.mark()
    ctx.check(
        probe.wait_closed(),
        f"expected the socket closed after the broker's header; observed it still open "
        f"{probe.wait:g}s later ({probe.observed(since)})",
    )


def refused_header_case(
    case_id: str,
    header: ProtocolHeader,
    name: str,
    doc: str,
    module: str,
    *,
    sentences: tuple[str, ...] = (VERSION_UNSUPPORTED, VERSION_HIGHEST_BELOW, VERSION_HIGHEST),
    outcomes: frozenset[str] | set[str] = frozenset(SUPPORTED_HEADERS),
    lenient: frozenset[str] | set[str] = frozenset({"header:*"}),
) -> RunFunction:
    """Register the case `case_id` (2.2 negotiation, MUST for the server): `header` is
    answered with a header the broker speaks, then the socket is closed (2.2:
    version-negotiation.7); a supported version other than the highest one at or below the
    requested one (RabbitMQ's AMQP 0-9-1 header) meets the MUST, not the SHOULD (.8, .9)."""

    def run(probe: Probe, ctx: CaseContext) -> None:
        header_refused(probe, ctx, header)

    return case(
        case_id,
        MUST,
        NEGOTIATION,
        sentences=sentences,
        outcomes=outcomes,
        lenient=lenient,
        pipelined=False,  # a protocol header alone: nothing to pipeline
    )(case_function(run, name, doc, module))


def close_answered_case(
    case_id: str, answered: str, name: str, doc: str, module: str, error: Error | None = None
) -> RunFunction:
    """Register the case `case_id` (2.4.3 MUST: "Prior to closing a Connection, each peer
    MUST write a close frame", `answered` saying how it applies): open, begin, our close
    (with `error`), answered with the broker's close before the connection ends (its
    error, if any, recorded in the note; a TCP close without it, or no answer, is
    FAILED)."""

    def run(probe: Probe, ctx: CaseContext) -> None:
        probe.open_session()
        since = probe.mark()
        probe.conn.close(error)
        probe.flush()
        ctx.outcome(probe.error_outcome(since=since))

    return case(
        case_id,
        MUST,
        f"Prior to closing a Connection, each peer MUST write a close frame: {answered}",
        sentences=(CLOSE_FIRST,),
        outcomes={"close:*"},
    )(case_function(run, name, doc, module))


# SASL (5.3)


def mechanisms_after_header(probe: Probe) -> None:
    """5.3.2: the broker's sasl-mechanisms follows its SASL header; CaseFailed (at the
    case's level) naming what came instead."""
    since = probe.mark()
    try:
        probe.wait_for_frame("sasl-mechanisms", since=0)
    except CaseFailed as exc:
        raise CaseFailed(
            f"expected sasl-mechanisms after the broker's SASL header; {probe.observed(since)}"
        ) from exc


def offered_mechanisms(probe: Probe) -> list[str]:
    """Wait for sasl-mechanisms: the names it offers."""
    frame = probe.wait_for_frame("sasl-mechanisms")
    offered = frame.performative.sasl_server_mechanisms
    return [str(m) for m in (offered if isinstance(offered, list | tuple) else [offered])]


def sasl_outcome(probe: Probe, timeout: float | None = None) -> str:
    """The broker's sasl-outcome as an outcome string (or tcp-close / timeout)."""
    try:
        outcome = probe.wait_for_frame("sasl-outcome", timeout=timeout)
    except CaseFailed:
        return "tcp-close" if probe.closed else "timeout"
    return f"sasl-outcome:{outcome.performative.code}"


def check_no_open_after(probe: Probe, ctx: CaseContext) -> None:
    """After a failed SASL outcome: send the AMQP header anyway; no open may follow."""
    if not probe.closed:
        probe.send_header(AMQP_HEADER)
        probe.idle(0.5)
    ctx.check(
        not probe.server_frames("open"),
        "expected no open after a failed SASL outcome; observed the broker's open",
    )


def refused_sasl_init(probe: Probe, ctx: CaseContext, init: Any) -> None:
    """SASL header; after the broker's sasl-mechanisms, the sasl-init `init` it must refuse:
    grade its sasl-outcome (the case's outcomes), then no open may follow."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    probe.send_frame(init)
    ctx.outcome(sasl_outcome(probe))
    check_no_open_after(probe, ctx)


def published_answer(probe: Probe, sender: Link, message: Message, timeout: float = 2.0) -> str:
    """One unsettled `message` on `sender` (credit granted within `timeout`, else
    'no-credit'), and what the broker made of it: 'rejected:<condition>', 'accepted' (or
    another outcome's name), an ending ('detach:<condition>', 'end:...', 'close:...',
    'tcp-close') or 'timeout'."""
    try:
        wait_credit(probe, sender, timeout=timeout)
    except NoDelivery:
        return "no-credit"
    since = probe.mark()
    probe.send_message(sender, message, settled=False)
    answers = (DispositionReceived, RemoteDetach, RemoteEnd, RemoteClose, TransportClosed)
    try:
        event = probe.expect(lambda e: isinstance(e, answers), timeout, "the message's outcome")
    except WaitTimeout:
        return "timeout"
    if not isinstance(event, DispositionReceived):
        return probe.error_outcome(timeout=0.5, since=since)
    state = event.state
    if isinstance(state, Rejected):
        error = state.error
        return f"rejected:{error.condition if error is not None else 'none'}"
    return type(state).__name__.lower() if state is not None else "no outcome"
