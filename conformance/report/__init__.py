"""report: what the results directories of runs say, for people and CI.

Owns: `amqpspec report` (`cli`) and its brokers x cases matrix (`matrix`: the model;
`markdown`; `html`: the self-contained HTML page; `case_page`: a page per case; `history`: what
changed since older runs; `statement`: a conformance statement per broker), the JUnit XML of a
run (`junit`) and `amqpspec coverage` (`coverage`, `coverage_cli`). Reads results directories
(`run.results`), the registry and the ledger; writes only the report files it is asked for.
"""
