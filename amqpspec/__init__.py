"""amqpspec: AMQP 1.0 conformance and fuzz test suite (command-line entry point)."""

__version__ = "0.1.0"
