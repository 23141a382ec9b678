"""5.3 SASL: mechanisms offered, ANONYMOUS and PLAIN, a bad password refused.

Owns the cases `5.3.*/*`.
"""

from __future__ import annotations

from amqp10.engine import ClientSasl
from amqp10.frames import SASL_HEADER
from conformance.cases.refusals import offered_mechanisms, refused_sasl_init
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
    offered = offered_mechanisms(probe)
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
    init = ClientSasl("PLAIN", probe.username or "guest", "amqpspec-wrong-password")
    refused_sasl_init(probe, ctx, init.init_for(("PLAIN",)))
