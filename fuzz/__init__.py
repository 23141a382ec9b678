"""fuzz: fuzz any AMQP 1.0 broker's frame parser and state machine (see docs/fuzz.md).

Network campaigns (`amqpspec fuzz --broker URL --out DIR`): `seeds` (legal conversations
made on the engine, and corpus traces) -> `mutators` (bytes, fields, sequences) ->
`oracle` (one connection per case, judged by the checker, a bounded wait and liveness)
-> `campaign` (workers, ddmin minimising, replay x3, signatures) -> `findings` (the
store). `replay` re-sends reproducers and traces; `model` is the engine-made reference
model (legal conversations, the state each step arrives in, table coverage); `case` is
the step list and the reproducer format; `strategies` the hypothesis strategies from the
spec table; `cli` is `amqpspec fuzz`.
"""
