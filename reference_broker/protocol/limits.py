"""The configured limits a connection applies at open and begin (`Limits` in config.py).

Owns: how the limits shape a connection's engine (max-frame-size, channel-max, idle
time-out: 2.4.5 advertise T, close a peer silent for 2T), the refusal of a connection over
max_connections / max_connections_per_user (RabbitMQ's connection_max and per-user
max-connections), a session's accepted begin (incoming window, 0 while a resource alarm
blocks publishers; handle-max) and the handshake time-out's reason. Plain functions of the
config and counts; the connection acts on what they return.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..config import Limits


def engine_options(limits: Limits) -> dict[str, Any]:
    """The `amqp10` Connection options the limits set (2.4.5: advertise T, close a peer
    silent for 2T with amqp:resource-limit-exceeded)."""
    return {
        "max_frame_size": limits.max_frame_size,
        "channel_max": limits.channel_max - 1,
        "idle_timeout_ms": limits.idle_time_out_ms or None,
        "idle_threshold_ms": 2 * limits.idle_time_out_ms or None,
    }


def connection_refusal(limits: Limits, users_open: Iterable[str | None], user: str) -> str | None:
    """Limits max_connections (in all) and max_connections_per_user (0 = none): the reason to
    refuse a connection of `user`, counted among those already open (their users)."""
    opened = list(users_open)
    if limits.max_connections and len(opened) >= limits.max_connections:
        return f"connection limit ({limits.max_connections}) reached"
    if limits.max_connections_per_user:
        mine = sum(1 for other in opened if other == user)
        if mine >= limits.max_connections_per_user:
            return f"connection limit ({limits.max_connections_per_user}) of user '{user}' reached"
    return None


def session_options(limits: Limits, publishers_blocked: bool) -> dict[str, Any]:
    """A begin's answer: the configured incoming window (0 while a resource alarm blocks
    publishers, 2.5.6), our outgoing window and handle-max."""
    return {
        "incoming_window": 0 if publishers_blocked else limits.max_incoming_window,
        "outgoing_window": 0xFFFFFFFF,
        "handle_max": limits.handle_max - 1,
    }


def sasl_timeout_reason(limits: Limits) -> str:
    """The SASL time-out: no SASL outcome within the bound of the client's SASL header."""
    return f"no SASL outcome within {limits.sasl_timeout:g} s of the SASL header (SASL timeout)"


def handshake_timeout_reason(limits: Limits) -> str:
    """RabbitMQ's handshake_timeout: no open within the bound of the TCP accept."""
    return f"no open within {limits.handshake_timeout:g} s of the TCP accept (handshake timeout)"
