"""Source filters: the reference broker's (reference_broker/features/filters.py) over a real socket
(an unknown filter left out of the attach, property filters on a stream applied), the
suite's own evaluator (conformance/steps/filter_expressions.py) on the filtex rules, the two
evaluators against each other on generated messages and filters, and the conformance cases
(conformance/cases/s3_5_filters.py) against the broker: OK clean, FAILED / DIFFERS with
each of the two filter faults, UNSUPPORTED on a profile without properties-filter."""

from __future__ import annotations

from broker_support import connected_client, management, running_broker
from broker_support.case_verdicts import case_verdicts
from broker_support.filtered import drained
from hypothesis import given, settings

from amqpspec.amqp10.composites import Properties, Source
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol
from amqpspec.conformance.cases import s3_5_filters as filter_cases
from amqpspec.conformance.steps.filter_expressions import (
    application_properties_filter,
    properties_filter,
    reference_matches,
    selects,
)
from amqpspec.conformance.verdicts import Verdict
from amqpspec.reference_broker.faults.catalog import Faults
from amqpspec.reference_broker.features.filters import in_place

OFFSET = symbol("rabbitmq:stream-offset-spec")
UNKNOWN = symbol("unknown")
SUBJECTS = ["apple", "apricot", "banana", None]


def _message(index: int, subject: str | None, app: dict | None = None) -> Message:
    return Message.of(
        f"m{index}".encode(), properties=Properties(subject=subject), application_properties=app
    )


def test_filters_over_a_socket():
    """A stream of four messages; one receiver with an unknown filter, a properties filter
    on the subject prefix `ap` and the offset-spec: its attach reports the last two only,
    and it gets m0 and m1. A receiver from a classic queue with a property filter: the
    filter is not in place (reported without it) and every message comes."""
    with running_broker() as b:
        management(b).declare_queue("s", arguments={"x-queue-type": "stream"})
        management(b).declare_queue("q", durable=False)

        def fill() -> None:
            for name in ("s", "q"):
                queue = b.server.vhost.get_queue(name)
                for i, subject in enumerate(SUBJECTS):
                    queue.publish(_message(i, subject).encode())

        b.call(fill)
        wanted = properties_filter({"subject": "&p:ap"})
        filters = {
            UNKNOWN: Described(symbol("amqpspec:no-such-filter:string"), "x"),
            symbol("p"): wanted,
            OFFSET: Described(OFFSET, "first"),
        }
        with connected_client(b) as c:
            reported, got = drained(c, filters, "/queues/s")
            assert set(reported) == {symbol("p"), OFFSET}
            assert got == [b"m0", b"m1"]
            reported, got = drained(c, {symbol("p"): wanted}, "/queues/q")
            assert reported == {}
            assert got == [b"m0", b"m1", b"m2", b"m3"]


def test_suite_evaluator_follows_filtex():
    m = _message(0, "apple", {"n": 2, "s": "&x", "b": True})
    assert reference_matches("&p:ap", True, "apple")
    assert reference_matches("&s:le", True, "apple")
    assert not reference_matches("&s:ap", True, "apple")
    assert reference_matches(2.0, True, 2)  # numbers across types
    assert not reference_matches(1, True, True)  # a boolean is no number
    assert reference_matches(None, False, None)  # null matches even a missing field
    assert not reference_matches("a", False, None)
    assert selects({"a": application_properties_filter({"s": "&&x"})}, m)
    assert not selects({"a": application_properties_filter({"missing": 1})}, m)
    both = {
        "p": properties_filter({"subject": "apple"}),
        "a": application_properties_filter({"n": 3}),
    }
    assert not selects(both, m)  # 3.5.8: every filter of the set
    assert selects({"x": None, "o": Described(OFFSET, "first")}, m)


@settings(max_examples=300, deadline=None, database=None)
@given(filter_cases.MESSAGES, filter_cases.FILTERS)
def test_broker_and_suite_evaluators_agree(drawn, pair):
    """The broker's evaluator (filters.py) and the suite's (filter_expressions.py), written
    apart, decide the same for every message and filter-set the generated case draws."""
    props_filter, app_filter = pair
    filters: dict = {OFFSET: Described(OFFSET, "first")}
    if props_filter is not None:
        filters[symbol("p")] = properties_filter(props_filter)
    if app_filter is not None:
        filters[symbol("a")] = application_properties_filter(app_filter)
    placed = in_place(Source(address="s", filter=filters), stream=True, faults=Faults())
    assert set(placed.source.filter) == set(filters)
    for subject, app, group, message_id in drawn:
        message = _message(0, subject, app or None)
        message.properties = Properties(subject=subject, group_id=group, message_id=message_id)
        broker = placed.accepts is None or placed.accepts(message.encode())
        assert broker == selects(filters, message)


UNKNOWN_CASE = "3.5.3/filter-unknown-not-reported"
SUBJECT_CASE = "3.5.3/properties-filter-subject"
GENERATED_CASE = "3.5.3/filter-expressions-generated"
CASES = (UNKNOWN_CASE, SUBJECT_CASE, "3.5.3/properties-filter-application-properties")


def test_the_cases_grade_the_clean_broker_ok_and_each_fault():
    with running_broker() as b:
        clean = case_verdicts(b, *CASES, GENERATED_CASE)
        assert {v for v, _ in clean.values()} == {Verdict.OK}, clean
        other = case_verdicts(b, *CASES[1:], profile_name="rabbitmq3")
        assert {v for v, _ in other.values()} == {Verdict.UNSUPPORTED}, other
    with running_broker(faults=("report-unknown-filters",)) as b:
        echoed = case_verdicts(b, UNKNOWN_CASE)[UNKNOWN_CASE]
    assert echoed[0] is Verdict.FAILED and "2.6.3/establishing-or-resuming-a-link.3" in echoed[1]
    with running_broker(faults=("properties-filter-ignores-subject",)) as b:
        ignored = case_verdicts(b, SUBJECT_CASE, GENERATED_CASE)
    assert {v for v, _ in ignored.values()} == {Verdict.DIFFERS}, ignored
    assert "filtex" in ignored[SUBJECT_CASE][1]
