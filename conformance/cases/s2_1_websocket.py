"""AMQP over WebSocket: the OASIS "AMQP WebSocket Binding (WSB) Version 1.0" (Committee
Specification 01, 16 August 2016, https://docs.oasis-open.org/amqp-bindmap/amqp-wsb/v1.0/
amqp-wsb-v1.0.html; docs/websocket.md). Not part of the core specification, so not in the
normative manifest: the `wsb` model (profile.MODELS). What the binding asks, paraphrased
here (its text is not among the specification texts the suite grades against): the
WebSocket opening handshake names the subprotocol `amqp` (client and server), the AMQP
byte stream (protocol headers, SASL and AMQP frames) travels as the payload of binary
WebSocket messages, and frames are not aligned with messages: a receiver reassembles the
stream whatever the boundaries. A broker serving AMQP over WebSocket that does otherwise
DIFFERS from the model, never FAILED, until that text is in the manifest.

Capability-gated: a profile without `websocket` is UNSUPPORTED on every case here. The
cases need the broker's ws:// URL: the run's own (`amqpspec run --broker
ws://HOST:PORT/PATH`, which runs every other case over WebSocket too, through
conformance/run/ws_bridge.py), or in a run over TCP the `amqp/ws` listener the admin API lists
(the reference broker started with --ws-port); UNSUPPORTED with neither.

Owns the cases `2.1/websocket-*` (2.1 Transport: the byte stream AMQP runs over).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from aiohttp import WSCloseCode

from amqpspec.amqp10.engine import RemoteClose
from amqpspec.amqp10.frames import SASL_HEADER
from amqpspec.amqp10.message import Message
from amqpspec.conformance.run.registry import MODEL, RunFunction, case
from amqpspec.conformance.run.ws_bridge import SUBPROTOCOL
from amqpspec.conformance.steps.deliveries import roundtrip
from amqpspec.conformance.steps.refusals import mechanisms_after_header
from amqpspec.conformance.steps.websocket import (
    bridged_probe,
    text_message,
    upgrade,
    websocket_url,
)
from amqpspec.conformance.verdicts import CaseFailed

WSB = "wsb"  # profile.MODELS
BODY = bytes(range(256)) * 2  # a message larger than one byte and than one small frame


def _roundtrip(probe, ctx, bridge) -> None:
    """A message sent through a fresh queue and consumed back over `probe`: the body that
    arrives is the body sent."""
    sent = Message.of(BODY)
    try:
        got, payload = roundtrip(probe, ctx, sent)
    except CaseFailed as exc:  # unanswered open, no delivery...: the stream was not reassembled
        raise CaseFailed(
            f"expected the round trip over WebSocket as over TCP; {exc} "
            f"({bridge.messages_sent} binary WebSocket messages sent)"
        ) from exc
    ctx.note(f"{bridge.messages_sent} binary WebSocket messages carried the probe's stream")
    ctx.check(
        got.body == Message.decode(sent.encode()).body,
        f"expected the {len(BODY)}-byte data section back; observed a {len(payload)}-byte "
        f"payload whose body differs",
    )


def _websocket_case(
    case_id: str, sentence: str, *, also: Iterable[str] = ()
) -> Callable[[RunFunction], RunFunction]:
    """`case` for the WebSocket binding (the WSB model): on a broker with a WebSocket
    listener (and the capabilities `also` names); no pipelined variant (each case makes its
    own connections through the WebSocket bridge, steps/websocket.py, pipelined where it
    says so)."""
    return case(case_id, MODEL, sentence, model=WSB, requires={"websocket", *also}, pipelined=False)


@_websocket_case(
    "2.1/websocket-byte-per-message",
    "The AMQP stream sent one byte per binary WebSocket message (the protocol header, SASL, "
    "open, begin, attach, transfer all split) is reassembled: the broker answers as over "
    "TCP and the message comes back whole (WSB: frames need not align with messages).",
    also={"queues"},
)
def websocket_byte_per_message(probe, ctx):
    """Counters Qpid Broker-J's WebSocketTest.amqpFramesSplitOverManyWebSocketFrames (WSB
    2.4 as Broker-J's test quotes it: "[...] a single AMQP frame MAY be split
    over one or more consecutive WebSocket messages."): a probe whose every written byte
    goes out as its own WebSocket message publishes a 512-byte message and consumes it."""
    split_probe, bridge = bridged_probe(ctx, split=1)
    _roundtrip(split_probe, ctx, bridge)


@_websocket_case(
    "2.1/websocket-frames-in-one-message",
    "Many AMQP frames in one binary WebSocket message (open, begin, attach and transfer "
    "written at once) are each handled: the message comes back whole (WSB).",
    also={"queues"},
)
def websocket_frames_in_one_message(probe, ctx):
    """A pipelined probe (its frames up to the first that needs a reply in one write,
    which the bridge sends as one WebSocket message) publishes a message and consumes it."""
    batch_probe, bridge = bridged_probe(ctx, pipelined=True)
    _roundtrip(batch_probe, ctx, bridge)


@_websocket_case(
    "2.1/websocket-subprotocol-required",
    "The WebSocket upgrade offering the subprotocol amqp is accepted naming amqp; one "
    "offering only another subprotocol is refused (WSB: AMQP is spoken under amqp only).",
)
def websocket_subprotocol_required(probe, ctx):
    """Counters Qpid Broker-J's WebSocketTest.successfulOpen (WSB 2.1, Opening a WebSocket
    Connection): the opening handshake alone, once offering `amqp`, once offering only
    `mqtt`."""
    url = websocket_url(ctx)
    bound = ctx.profile.wait
    good = upgrade(url, (SUBPROTOCOL,), bound)
    ctx.note(f"upgrade offering amqp: {good.detail}")
    ctx.check(
        good.accepted and good.protocol == SUBPROTOCOL,
        f"expected HTTP 101 naming the subprotocol amqp; observed {good.detail}",
    )
    wrong = upgrade(url, ("mqtt",), bound)
    ctx.note(f"upgrade offering only mqtt: {wrong.detail}")
    ctx.check(
        not wrong.accepted,
        f"expected the upgrade offering only the subprotocol mqtt refused; observed {wrong.detail}",
    )


@_websocket_case(
    "2.1/websocket-text-message-refused",
    "A text WebSocket message (AMQP travels in binary messages only) makes the broker close "
    "the WebSocket (RFC 6455 code 1003, unsupported data, or another).",
)
def websocket_text_message_refused(probe, ctx):
    """After an amqp upgrade, the AMQP protocol header sent as a text message; the broker
    closes the WebSocket."""
    answer = text_message(websocket_url(ctx), "AMQP\x00\x01\x00\x00", ctx.profile.wait)
    ctx.note(f"after a text message: {answer.detail}")
    ctx.check(answer.closed, f"expected the WebSocket closed; observed {answer.detail}")


@_websocket_case(
    "2.1/websocket-protocol-header",
    "The SASL protocol header alone in a binary WebSocket message is answered with the "
    "broker's SASL header in a binary message, then sasl-mechanisms (WSB 2.2, 2.3: the "
    "protocol headers travel over the WebSocket as over TCP).",
    also={"sasl-plain"},
)
def websocket_protocol_header(probe, ctx):
    """Counters Qpid Broker-J's WebSocketTest.protocolHeader: the header as the first
    WebSocket message of a connection, its answer read back through the bridge (which
    passes binary messages only)."""
    header_probe, _ = bridged_probe(ctx)
    header_probe.send_raw(SASL_HEADER.encode())
    answer = header_probe.header_answer()
    ctx.check(answer == "header:3.1.0.0", f"expected the SASL header back; observed {answer}")
    mechanisms_after_header(header_probe)


@_websocket_case(
    "2.1/websocket-close-handshake",
    "After the AMQP close exchange the broker ends the WebSocket with the close handshake "
    "(a close frame, code 1000), not by dropping the TCP connection (WSB 4, Closing a "
    "Connection).",
)
def websocket_close_handshake(probe, ctx):
    """An open connection closed with an AMQP close: once the broker answered it, the
    WebSocket ends, and the bridge reads the broker's WebSocket close code."""
    close_probe, bridge = bridged_probe(ctx)
    close_probe.open()
    close_probe.conn.close(None)
    close_probe.flush()
    close_probe.expect_type(RemoteClose)
    ended = close_probe.wait_closed(ctx.profile.wait)
    deadline = time.monotonic() + 1.0  # the bridge records the code as it closes the TCP
    while ended and not bridge.broker_closes and time.monotonic() < deadline:
        time.sleep(0.01)
    codes = [None if code is None else int(code) for code in bridge.broker_closes]
    ctx.note(f"the broker's WebSocket close codes: {codes}")
    ctx.check(
        ended and codes == [WSCloseCode.OK],
        f"expected the WebSocket closed by the broker with code {int(WSCloseCode.OK)} after its "
        f"AMQP close; observed {'close codes ' + str(codes) if ended else 'it still open'} "
        f"within {ctx.profile.wait:g} s",
    )
