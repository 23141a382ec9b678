"""reference_broker: the bundled, correct-first AMQP 1.0 broker (docs/architecture.md).

Broker model (no AMQP bytes, no engine, no clock):
- `queues`     classic queue: FIFO, round-robin, per-consumer credit (credit API v2), drain,
               echo, settlement outcomes, requeue; `Delivery` / `CreditReply` events.
- `credit`     publisher link-credit re-grant rule (170, below half, unconfirmed cap).
- `exchanges`  direct, fanout, topic, headers, default exchange; bindings.
- `addressing` RabbitMQ 4 address v2 (and v1 aliases) parsing and building.
- `vhost`      the shared registry: queues, exchanges, bindings, dynamic queues,
               connections; publish/route, dispatch_pending, durable definitions.
- `store`      durable message log (group commit, compaction, recovery), definitions file.
- `alarms`     memory / disk resource alarms with observers.
- `config`     BrokerConfig from TOML + command line.
- `faults`     the catalog of switchable real-world bugs.
- `admin`, `admin_client`  RabbitMQ-compatible management HTTP API subset and its client.
Protocol layer (on the `amqp10` engine; sans-IO: `now` and a scheduler are injected):
- `connection` per-connection broker logic of the engine's events (bytes in, bytes out,
               its own deadlines); `BrokerContext` shared by all connections (dispatch,
               confirms, alarms, housekeeping).
- `sessions`   per-session unsettled deliveries, batched confirms, alarm windows.
- `links`      consumer links (queue credit, credit API v2) and publisher links (170 credit).
- `parser_faults`, `wire_faults`  what the parser-layer and wire-layer faults do.
- `scheduler`  the injected clock/timer/blocking-work interface; `ManualScheduler`.
- `memory`     the broker in memory: `MemoryBroker` + engine clients, manual clock.
I/O:
- `pump`       asyncio Protocol (socket <-> BrokerConnection) and `LoopScheduler`.
- `server`     asyncio server (uvloop), TLS, admin API; `BrokerThread`.
- `cli`        `amqpspec broker` / `python -m amqpspec.reference_broker`.
"""
