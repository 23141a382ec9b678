"""conformance: the AMQP 1.0 conformance suite against any broker.

Owns this package, one folder per part (docs/architecture.md, "The conformance parts"): the
probe client (`probe/`), admin adapters (`admin/`), the cases and their shared steps
(`cases/`, `steps/`), one run from `amqpspec run` to the verdicts on disk (`run/`: command,
pytest plugin, registry, runner, results), the reports (`report/`: `amqpspec report`,
`amqpspec coverage`, JUnit), the audits (`audit/`: ledger, anchor parity, fault matrix) and
the normative manifest (`manifest/`); at the top, broker profiles (`profile.py`,
`profiles/*.toml`), verdicts (`verdicts.py`) and the entry points users name (`plugin.py`,
`suite.py`, `ledger.py`, `anchor_parity.py`, `fault_matrix.py`). Reads the protocol core
(`amqp10`) and the trace writers (`traces`); touches nothing else. See docs/conformance.md.
"""
