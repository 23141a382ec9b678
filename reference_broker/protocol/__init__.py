"""The broker's protocol layer on the `amqp10` engine, sans-IO (`now` and a scheduler injected).

Owns: each connection's engine and the broker logic that answers its events, split the way
the engine splits connection, session and link (docs/architecture.md, "The reference broker").
May touch: the model (queues/), the features (features/), the /management node (admin/),
the faults (faults/); never a socket or the event loop (runtime/ feeds it).
"""
