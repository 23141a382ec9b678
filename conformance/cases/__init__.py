"""Conformance cases, one module per spec section (`s<section>_<topic>.py`).

Each module registers its cases with `conformance.registry.case`; see docs/conformance.md.
"""
