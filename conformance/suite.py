"""The conformance suite as one parametrized pytest test: one item per registered case.

Collected when named explicitly (`amqpspec run` does; or `pytest -p amqpspec.conformance.plugin
--pyargs amqpspec.conformance.suite --amqp-broker URL --amqp-profile NAME`). Each item id is
the case id, e.g.
`test_case[2.6.7/drain-empty-queue]`; select with `-k drain-empty`.
"""

from __future__ import annotations


def test_case(conformance_case, conformance_run):
    conformance_run(conformance_case)
