"""reference_broker: the bundled, correct-first AMQP 1.0 broker (docs/architecture.md,
"The reference broker", has a paragraph per part: what it owns, what it may touch).

- `queues/`    the model: `vhost` (registry, publish/route, dispatch), `classic` (FIFO,
               round-robin, credit API v2), `quorum`, `streams`, `kinds` (building each),
               `exchanges`, `addressing` (RabbitMQ 4 address v2 and v1 aliases), `store`
               (durable log, group commit), `definitions` (durable definitions, recovery).
- `protocol/`  sans-IO broker logic on the `amqp10` engine: `connection` (+ `session_handler`,
               `link_handler`, `delivery_handler`, `deadlines`), `context` (what all
               connections share), `sessions`, `links`, `credit`, and beside them `sasl`,
               `limits`, `permissions`.
- `features/`  relay, dynamic_nodes, topic_subscriptions, transactions, recovery, filters,
  sole_connection, alarms.
- `admin/`     the admin HTTP API (`api`, `views`, `http_server`, `client`) and the
               `/management` node (`management`, `management_links`).
- `faults/`    `catalog` of switchable real-world bugs, `parser` and `wire` fault effects.
- `runtime/`   `scheduler`, `pump` (asyncio), `server`, `websocket`, `memory` (in-memory broker,
               manual clock), `process` (the broker as a subprocess), `loop_thread` (an
               event loop in a thread of its own).
- `config`     BrokerConfig from TOML + command line; `cli`: `amqpspec broker` /
               `python -m amqpspec.reference_broker`.
"""
