"""5.3 SASL, more: a mechanism the server did not offer, a pipelined sasl-init sent before
sasl-mechanisms arrived, a wrong user name, an AMQP open before the SASL exchange finished,
and ANONYMOUS with trace information.

Owns the cases `5.3.*/sasl-more-*`.
"""

from __future__ import annotations

from amqp10.composites import Open, SaslInit
from amqp10.engine import ClientSasl
from amqp10.frames import AMQP_HEADER, SASL_HEADER, FrameType, encode_frame
from amqp10.types import symbol
from conformance.cases.refusals import offered_mechanisms, refused_sasl_init, sasl_outcome
from conformance.registry import MUST, SHOULD, case

REFUSED = {"sasl-outcome:1", "sasl-outcome:2", "sasl-outcome:3", "sasl-outcome:4", "tcp-close"}


@case(
    "5.3.3.2/sasl-more-unknown-mechanism",
    MUST,
    "mechanism: the name of the SASL mechanism used for the SASL exchange; a mechanism the "
    "server did not offer cannot authenticate: the outcome is not ok (5.3.3.6).",
    requires={"sasl-plain"},
    outcomes=REFUSED,
)
def unknown_mechanism(probe, ctx):
    """sasl-init with mechanism AMQPSPEC-NONSUCH: a failing outcome (or close), no open."""
    init = SaslInit(mechanism=symbol("AMQPSPEC-NONSUCH"), initial_response=b"\x00x\x00y")
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.3.6/sasl-more-wrong-user",
    MUST,
    "sasl-outcome code auth (1): authentication failed due to a problem with the supplied "
    "credentials; no AMQP traffic follows.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:1", "tcp-close"},
    lenient=REFUSED,
)
def wrong_user(probe, ctx):
    """PLAIN with an unknown user name: outcome auth, no open."""
    init = ClientSasl("PLAIN", "amqpspec-no-such-user", "x").init_for(("PLAIN",))
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.2/sasl-more-pipelined-init",
    SHOULD,
    "The SASL exchange: the server sends sasl-mechanisms, the client sasl-init; a client "
    "that pipelines its header and init (as many do) is served once the server reads it.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:0"},
    lenient={"sasl-outcome:*", "tcp-close"},
)
def pipelined_init(probe, ctx):
    """SASL header and sasl-init PLAIN in one write, before sasl-mechanisms: outcome ok."""
    init = ClientSasl("PLAIN", probe.username or "guest", probe.password or "guest").init_for(
        ("PLAIN",)
    )
    probe.send_raw(SASL_HEADER.encode() + encode_frame(init, 0, frame_type=FrameType.SASL))
    ctx.outcome(sasl_outcome(probe))


@case(
    "5.3.1/sasl-more-open-before-outcome",
    MUST,
    "A server that requires SASL does not accept AMQP frames before a successful SASL "
    "outcome (5.3.1): an open sent without authentication opens nothing.",
    requires={"sasl-plain"},
    outcomes={"tcp-close", "close:*", "ignored"},
)
def open_before_outcome(probe, ctx):
    """SASL header, then (no sasl-init) the AMQP header and an open: the broker does not
    answer with an open."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    since = probe.mark()
    probe.send_raw(AMQP_HEADER.encode() + encode_frame(Open(container_id="amqpspec-early")))
    probe.idle(1.5)
    ctx.check(not probe.server_frames("open"), "the broker opened without a SASL outcome")
    observed = "tcp-close" if probe.closed else probe.error_outcome(timeout=0.5, since=since)
    if observed == "timeout":
        observed = "ignored"
    ctx.outcome(observed)


@case(
    "5.3.3.2/sasl-more-anonymous-trace",
    MUST,
    "ANONYMOUS (RFC 4505): the initial response is optional trace information; a server "
    "that offers ANONYMOUS accepts it with any trace string.",
    requires={"sasl-anonymous"},
    outcomes={"sasl-outcome:0"},
)
def anonymous_trace(probe, ctx):
    """sasl-init ANONYMOUS with trace 'amqpspec@example.org': outcome ok."""
    probe.send_header(SASL_HEADER)
    offered = offered_mechanisms(probe)
    if "ANONYMOUS" not in offered:
        from conformance.verdicts import Unsupported

        raise Unsupported(f"ANONYMOUS not offered ({offered})")
    init = SaslInit(mechanism=symbol("ANONYMOUS"), initial_response=b"amqpspec@example.org")
    probe.send_raw(encode_frame(init, 0, frame_type=FrameType.SASL))
    ctx.outcome(sasl_outcome(probe))
