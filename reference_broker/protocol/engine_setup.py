"""The engine of one broker connection, made once the client's protocol header arrives.

Owns `new_engine`: whether the SASL layer comes first (5.3.1: a client that sends the AMQP
header skips SASL and is let in only where ANONYMOUS would be; anything else gets the SASL
layer, whose engine answers an unsupported header, 2.2), the engine's configured limits
(limits.py), its policy (echo answered by the broker, faults relaxing rules) and the
wire-layer faults' editor of its outgoing frames. protocol/connection.py calls it once per
connection; nothing here keeps state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amqpspec.amqp10.engine import Connection
from amqpspec.amqp10.errors import DecodeError
from amqpspec.amqp10.frames import ProtocolHeader, ProtocolId

from ..faults import wire as wire_faults
from .limits import engine_options
from .sasl import anonymous_allowed, server_sasl

if TYPE_CHECKING:
    from .context import BrokerContext


def new_engine(
    context: BrokerContext, first_bytes: bytes, host: str, tls_identity: str | None
) -> Connection:
    """The server engine for a client at `host` whose protocol header is `first_bytes`
    (`tls_identity`: its verified certificate's CN, for EXTERNAL)."""
    config, faults = context.config, context.faults
    try:
        header = ProtocolHeader.decode(first_bytes)
    except DecodeError:
        header = None
    sasl = None
    if (
        header is None
        or header.protocol_id != ProtocolId.AMQP
        or not anonymous_allowed(config, host)
    ):
        sasl = server_sasl(config, host, tls_identity, proofless=faults.scram_accepts_any_proof)
    engine = Connection(
        "server",
        f"amqpspec-reference-broker-{context.next_id()}",
        **engine_options(config.limits),
        sasl=sasl,
        # echo answered from the queue's state (delivery_handler.py); faults relax the rest
        policy=faults.endpoint_policy(auto_echo=False),
    )
    if faults.wire:  # fault injection: our frames as the buggy broker sent them
        engine.edit_outgoing(wire_faults.editor(faults, engine))
    return engine
