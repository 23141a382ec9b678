"""`amqpspec bench arrows`: quiver-style sender and receiver arrows.

Modules: `spec` (the arrows' shared command line and message stamp), `python_arrow` (the
arrows on the amqp10 engine over plain sockets), `arrow.c` + `build` (the same arrows on
libqpid-proton's proactor), `results` (records -> rates, latency percentiles, broker CPU and
RSS), `plots` (matplotlib), `run` (the `bench arrows` command: brokers, peer-to-peer, JSON,
summary). Docs: bench/README.md "Arrows".
"""
