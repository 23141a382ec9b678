"""5.3 SASL: mechanisms offered, ANONYMOUS and PLAIN, a bad password refused.

Owns the cases `5.3.*/*`.
"""

from __future__ import annotations

from amqp10.engine import ClientSasl
from amqp10.frames import AMQP_HEADER, SASL_HEADER, FrameType, encode_frame
from conformance.registry import MUST, case


@case(
    "5.3.3.1/sasl-mechanisms-offered",
    MUST,
    "sasl-server-mechanisms: a list of the sasl security mechanisms supported by the sending "
    "peer; the server sends sasl-mechanisms after the SASL header (5.3.2).",
)
def mechanisms_offered(probe, ctx):
    """SASL header: the broker answers the SASL header, then sasl-mechanisms listing the
    profile's mechanism."""
    mechanism = ctx.profile.sasl
    if mechanism == "none":
        ctx.require("sasl-plain")
    probe.send_header(SASL_HEADER)
    ctx.outcome(probe.header_answer(), {"header:3.1.0.0"})
    frame = probe.wait_for_frame("sasl-mechanisms")
    offered = frame.performative.sasl_server_mechanisms
    offered = [str(m) for m in (offered if isinstance(offered, list | tuple) else [offered])]
    ctx.check(mechanism in offered, f"{mechanism} not among the offered {offered}")


def _opens_with(probe, ctx, mechanism: str) -> None:
    probe.sasl_mechanism = mechanism
    probe.open()
    ctx.check(probe.conn.sasl_outcome == 0, f"sasl outcome {probe.conn.sasl_outcome}")


@case(
    "5.3.3.2/sasl-anonymous",
    MUST,
    "ANONYMOUS (RFC 4505): a server that offers it completes the exchange with outcome ok "
    "and the connection opens.",
    requires={"sasl-anonymous"},
)
def sasl_anonymous(probe, ctx):
    """SASL ANONYMOUS: outcome ok, then the broker's open."""
    _opens_with(probe, ctx, "ANONYMOUS")


@case(
    "5.3.3.2/sasl-plain",
    MUST,
    "PLAIN (RFC 4616) with valid credentials: outcome ok and the connection opens.",
    requires={"sasl-plain"},
)
def sasl_plain(probe, ctx):
    """SASL PLAIN with the profile's credentials: outcome ok, then the broker's open."""
    _opens_with(probe, ctx, "PLAIN")


@case(
    "5.3.3.6/sasl-plain-bad-password",
    MUST,
    "sasl-outcome code auth (1): connection authentication failed due to an unspecified "
    "problem with the supplied credentials; no AMQP traffic follows.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:1"},
)
def sasl_bad_password(probe, ctx):
    """SASL PLAIN with a wrong password: outcome auth, and the broker opens nothing."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    init = ClientSasl("PLAIN", probe.username or "guest", "amqpspec-wrong-password")
    frame = init.init_for(("PLAIN",))
    probe.send_raw(encode_frame(frame, 0, frame_type=FrameType.SASL))
    try:
        outcome = probe.wait_for_frame("sasl-outcome")
        observed = f"sasl-outcome:{outcome.performative.code}"
    except AssertionError:
        observed = "tcp-close" if probe.closed else "timeout"
    ctx.outcome(observed)
    if not probe.closed:
        probe.send_header(AMQP_HEADER)
        probe.idle(0.5)
    ctx.check(not probe.server_frames("open"), "the broker opened after a failed SASL outcome")
