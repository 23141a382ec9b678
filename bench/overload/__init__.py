"""Durability and overload of the reference broker, measured (bench/README.md "Durability and
overload").

One module per measurement, each runnable on its own (`python -m amqpspec.bench.overload.<name>`,
or `amqpspec bench <name>`) at full size by default and at a small size in seconds
(tests/test_overload_bench.py); each starts its own broker on free ports with a data dir
under a temp dir, bounds every wait, stops everything it started by PID, writes
reports/bench/overload-<name>.json and prints a summary:
- kill_soak: kill -9 cycles under confirmed publishing and consuming, classic + stream;
- alarm_flood: publishing far past a memory watermark, consumers on the same connection;
- conn_scale: thousands of idle connections, memory per connection, a new client's latency;
- hostile: slowloris and random-byte peers beside a normal client.
`peer` holds what they share (engine peers over non-blocking sockets, RSS readings, the
report file).
"""
