"""amqp10: the pure AMQP 1.0 protocol core of amqpspec.

No sockets, no clock, no asyncio; imports nothing from the rest of the project.
Layers: spec (the table) -> codec -> composites -> frames/message -> engine -> checker ->
monitor (a connection's bytes, both directions, through the checker: docs/monitor.md).
"""

# first: amqp10.speedups chooses compiled or pure for the modules imported after it
from amqpspec.amqp10 import speedups

# isort: split
from amqpspec.amqp10 import codec, composites, spec
from amqpspec.amqp10.codec import decode, decode_value, encode, encode_into
from amqpspec.amqp10.errors import AMQPError, DecodeError, EncodeError, ProtocolError
from amqpspec.amqp10.speedups import implementation

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
    "implementation",
    "spec",
    "speedups",
]
