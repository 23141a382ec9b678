"""The broker model: the virtual host, its queues (classic, quorum, stream), exchanges,
addresses and the durable store. No AMQP bytes, no engine, no clock of its own.

Owns: messages, their order, consumers' credit and settlement outcomes, routing and
durability. May touch: faults/ (the catalog it consults); nothing of protocol/ or runtime/.
"""
