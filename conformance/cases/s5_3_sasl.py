"""5.3 SASL: the mechanisms offered, ANONYMOUS (also with trace information) and PLAIN
accepted; a bad password, a wrong user name and a mechanism the server did not offer
refused with no open after; a sasl-init pipelined before sasl-mechanisms arrived; an AMQP
open before the SASL exchange finished.

Owns the cases `5.3.*/*`.
"""

from __future__ import annotations

from amqpspec.amqp10.builder import build_frame, sasl_frame
from amqpspec.amqp10.composites import Open, SaslInit
from amqpspec.amqp10.engine import ClientSasl
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.registry import MUST, SHOULD, case
from amqpspec.conformance.steps.refusals import offered_mechanisms, refused_sasl_init, sasl_outcome
from amqpspec.conformance.verdicts import Unsupported


@case(
    "5.3.3.1/sasl-mechanisms-offered",
    MUST,
    "sasl-server-mechanisms: a list of the sasl security mechanisms supported by the sending "
    "peer; the server sends sasl-mechanisms after the SASL header (5.3.2).",
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
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
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def sasl_bad_password(probe, ctx):
    """SASL PLAIN with a wrong password: outcome auth, and the broker opens nothing."""
    init = ClientSasl("PLAIN", probe.username or "guest", "amqpspec-wrong-password")
    refused_sasl_init(probe, ctx, init.init_for(("PLAIN",)))


REFUSED = {"sasl-outcome:1", "sasl-outcome:2", "sasl-outcome:3", "sasl-outcome:4", "tcp-close"}


@case(
    "5.3.3.2/sasl-unknown-mechanism",
    MUST,
    "mechanism: the name of the SASL mechanism used for the SASL exchange; a mechanism the "
    "server did not offer cannot authenticate: the outcome is not ok (5.3.3.6).",
    requires={"sasl-plain"},
    outcomes=REFUSED,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def unknown_mechanism(probe, ctx):
    """sasl-init with mechanism AMQPSPEC-NONSUCH: a failing outcome (or close), no open."""
    init = SaslInit(mechanism=symbol("AMQPSPEC-NONSUCH"), initial_response=b"\x00x\x00y")
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.3.6/sasl-wrong-user",
    MUST,
    "sasl-outcome code auth (1): authentication failed due to a problem with the supplied "
    "credentials; no AMQP traffic follows.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:1", "tcp-close"},
    lenient=REFUSED,
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def wrong_user(probe, ctx):
    """PLAIN with an unknown user name: outcome auth, no open."""
    init = ClientSasl("PLAIN", "amqpspec-no-such-user", "x").init_for(("PLAIN",))
    refused_sasl_init(probe, ctx, init)


@case(
    "5.3.2/sasl-pipelined-init",
    SHOULD,
    "The SASL exchange: the server sends sasl-mechanisms, the client sasl-init; a client "
    "that pipelines its header and init (as many do) is served once the server reads it.",
    requires={"sasl-plain"},
    outcomes={"sasl-outcome:0"},
    lenient={"sasl-outcome:*", "tcp-close"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def pipelined_init(probe, ctx):
    """SASL header and sasl-init PLAIN in one write, before sasl-mechanisms: outcome ok."""
    init = ClientSasl("PLAIN", probe.username or "guest", probe.password or "guest").init_for(
        ("PLAIN",)
    )
    probe.send_raw(SASL_HEADER.encode() + sasl_frame(init))
    ctx.outcome(sasl_outcome(probe))


@case(
    "5.3.1/sasl-open-before-outcome",
    MUST,
    "A server that requires SASL does not accept AMQP frames before a successful SASL "
    "outcome (5.3.1): an open sent without authentication opens nothing.",
    requires={"sasl-plain"},
    outcomes={"tcp-close", "close:*", "ignored"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def open_before_outcome(probe, ctx):
    """SASL header, then (no sasl-init) the AMQP header and an open: the broker does not
    answer with an open."""
    probe.send_header(SASL_HEADER)
    probe.wait_for_frame("sasl-mechanisms")
    since = probe.mark()
    probe.send_raw(AMQP_HEADER.encode() + build_frame(Open(container_id="amqpspec-early")))
    probe.idle(1.5)
    ctx.check(not probe.server_frames("open"), "the broker opened without a SASL outcome")
    observed = "tcp-close" if probe.closed else probe.error_outcome(timeout=0.5, since=since)
    if observed == "timeout":
        observed = "ignored"
    ctx.outcome(observed)


@case(
    "5.3.3.2/sasl-anonymous-trace",
    MUST,
    "ANONYMOUS (RFC 4505): the initial response is optional trace information; a server "
    "that offers ANONYMOUS accepts it with any trace string.",
    requires={"sasl-anonymous"},
    outcomes={"sasl-outcome:0"},
    pipelined=False,  # nothing to pipeline: headers, SASL or open alone
)
def anonymous_trace(probe, ctx):
    """sasl-init ANONYMOUS with trace 'amqpspec@example.org': outcome ok."""
    probe.send_header(SASL_HEADER)
    offered = offered_mechanisms(probe)
    if "ANONYMOUS" not in offered:
        raise Unsupported(f"ANONYMOUS not offered ({offered})")
    init = SaslInit(mechanism=symbol("ANONYMOUS"), initial_response=b"amqpspec@example.org")
    probe.send_frame(init)
    ctx.outcome(sasl_outcome(probe))
