"""bench: the benchmarks behind bench/README.md, run by `amqpspec bench` (bench/cli.py).

See ARCHITECTURE.md.
"""
