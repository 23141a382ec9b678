"""audit: the checks that keep the suite's claims honest, each a `python -m` command.

Owns: the reviewed ledger of every non-OK verdict on a real broker (`ledger`), the parity of
the cases with the anchor suites (`anchor_parity`, data in conformance/anchor_parity.toml) and
the fault-detection matrix of the reference broker's `--fault`s (`fault_matrix`, which runs
the suite and writes reports/fault-detection.md). `conformance/ledger.py`,
`anchor_parity.py` and `fault_matrix.py` are their documented entry points.
"""
