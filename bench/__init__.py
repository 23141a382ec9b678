"""bench: the benchmarks behind bench/README.md, run by `amqpspec bench` (bench/cli.py).

Where they stand among the parts: docs/architecture.md.
"""
