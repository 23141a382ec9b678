"""amqp10: the pure AMQP 1.0 protocol core of amqpspec.

No sockets, no clock, no asyncio; imports nothing from the rest of the project.
Layers: spec (the table) -> codec -> composites -> frames/message -> engine -> checker ->
monitor (a connection's bytes, both directions, through the checker: docs/monitor.md).
"""

from amqp10 import codec, composites, spec
from amqp10.codec import decode, decode_value, encode, encode_into
from amqp10.errors import AMQPError, DecodeError, EncodeError, ProtocolError

__all__ = [
    "AMQPError",
    "DecodeError",
    "EncodeError",
    "ProtocolError",
    "codec",
    "composites",
    "decode",
    "decode_value",
    "encode",
    "encode_into",
    "spec",
]
