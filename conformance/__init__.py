"""conformance: the AMQP 1.0 conformance suite against any broker.

Owns this package: the probe client (`probe`), broker profiles (`profile`, `profiles/*.toml`),
admin adapters (`admin`), the case registry (`registry`, `cases/`), the case runner and its
verdicts (`runner`, `verdicts`), result files (`results`), the pytest plugin (`plugin`,
`suite`), and the `amqpspec run` / `amqpspec report` commands (`cli`, `report_cli`,
`report`). Reads the protocol core (`amqp10`) and the trace writers (`traces`); touches
nothing else. See docs/conformance.md.
"""
