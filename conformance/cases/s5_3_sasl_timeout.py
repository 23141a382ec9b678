"""5.3 a client silent in the middle of SASL (SASL header sent, sasl-mechanisms received,
then nothing): the broker closes the connection when its SASL (authentication) time-out,
or else its handshake time-out, expires (Qpid Broker-J's SaslAuthenticationTimeoutTest;
RabbitMQ's handshake_timeout covers the SASL exchange; the reference broker's
`--sasl-timeout`). No sentence of the specification bounds the time a client may take
(5.3 sets no time-out, 2.4.5's idle time-out starts with the open), so this is the
rabbitmq4 model's (DIFFERS, never FAILED). It runs when the bound is known, from the
profile (`[limits] sasl_timeout_ms`, `handshake_timeout_ms`) or the admin API
(`sasl_timeout`, `handshake_timeout` of /api/overview, in ms), and short enough to wait out
in a fast case (UNSUPPORTED otherwise).

Owns the cases `5.3/sasl-silent-client-closed`.
"""

from __future__ import annotations

from amqpspec.amqp10.frames import SASL_HEADER
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.steps.refusals import offered_mechanisms
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import Unsupported

LONGEST_WAIT_S = 3.0  # a time-out beyond this is not waited out (the suite stays fast)
GRACE_S = 1.5  # past the time-out, for the broker's timer and a loaded machine
TIMEOUTS = ("sasl_timeout", "handshake_timeout")  # the SASL one first; ms, 0 = none


def _timeout_ms(ctx, key: str) -> int | None:
    """The broker's `key` time-out (ms) from the profile, else its admin API (None:
    unknown)."""
    ms = ctx.profile.limits.get(f"{key}_ms")
    if ms is None:
        try:
            ms = ctx.admin.timeout_ms(key)
        except Unsupported:
            return None
    return int(ms)


def _sasl_bound(ctx) -> float:
    """Seconds the broker lets a client sit in SASL: its SASL time-out, else its handshake
    time-out (UNSUPPORTED: unknown, none, or longer than LONGEST_WAIT_S)."""
    known = {key: _timeout_ms(ctx, key) for key in TIMEOUTS}
    bounds = [ms for ms in known.values() if ms]
    if not bounds:
        raise Unsupported(f"the broker's SASL and handshake time-outs are unknown or 0 ({known})")
    seconds = min(bounds) / 1000
    if seconds > LONGEST_WAIT_S:
        raise Unsupported(
            f"the broker's time-out ({known}) is longer than the {LONGEST_WAIT_S:g} s a case waits"
        )
    return seconds


@case(
    "5.3/sasl-silent-client-closed",
    MODEL,
    "A client that sends the SASL header and, after the broker's sasl-mechanisms, nothing "
    "more (SASL started, then silence) has its connection closed when the broker's SASL "
    "or handshake time-out expires (RabbitMQ's handshake_timeout; Qpid Broker-J's "
    "SaslAuthenticationTimeoutTest).",
    model=RABBITMQ4,
    outcomes={"tcp-close"},
    pipelined=False,  # headers and SASL alone
)
def sasl_silent_client_closed(probe, ctx):
    """SASL header, the broker's sasl-mechanisms, then silence (no sasl-init): the broker
    closes the TCP connection within its time-out (+GRACE_S)."""
    if ctx.profile.sasl == "none":
        ctx.require("sasl-plain")
    bound = _sasl_bound(ctx)
    probe.send_header(SASL_HEADER)
    offered_mechanisms(probe)
    since = probe.mark()
    closed = probe.wait_closed(timeout=bound + GRACE_S)
    ctx.check(
        closed,
        "expected the broker to close the connection of a client silent after "
        f"sasl-mechanisms within its time-out ({bound:g} s, +{GRACE_S:g} s); "
        f"{probe.observed(since)}",
    )
    ctx.outcome("tcp-close")
