"""Source filters: 3.5.3 `filter` and the filter-set of 3.5.8, and the OASIS "AMQP Filter
Expressions" property filters (Committee Specification Draft 01,
https://docs.oasis-open.org/amqp/filtex/v1.0/csd01/filtex-v1.0-csd01.html).

A filter the broker does not apply (`3.5.3/filter-unknown-*`), graded on every broker: 3.5.3
filter, "The receiving endpoint sets its desired filter, the sending endpoint sets the
filter actually in place (including any filters defaulted at the node)", and 2.6.3, "When a
link is established, an endpoint may not have all the capabilities necessary to create the
terminus exactly matching the expectations of the peer. Should this happen, the endpoint
MAY adjust the properties in order to succeed in creating the terminus. In this case the
endpoint MUST report the actual properties of the terminus as created." A broker with no
filters at all is the plainest case of it: its source has no filter in place, so its attach
reports none. The receiver, not the broker, then decides whether to detach (3.5.3: "The
receiving endpoint MUST check that the filter in place meets its needs and take
responsibility for detaching if it does not"). A broker may instead refuse the link (a null
source then a detach, 2.6.3; Qpid Broker-J answers amqp:not-implemented): OK too. What
FAILS is an attach whose source lists the unknown filter as in place.

The property filters (`3.5.3/properties-filter-*`, `3.5.3/filter-expressions-*`): the
filtex text is not in conformance/spec (its rules are quoted through RabbitMQ 4.1's
implementation), so a broker that claims them (profile capability `properties-filter`)
and delivers otherwise DIFFERS from the `filtex` model, never FAILED; a broker whose
profile lacks the capability is UNSUPPORTED. The deliveries are judged by the suite's own
evaluator (conformance/steps/filter_expressions.py), never the broker's: on a stream queue when
the profile has streams (RabbitMQ 4.1 applies them on streams only), read from the first
offset, each drained (2.6.7) so that nothing a filter let through is missed.

SQL filter expressions (`amqp:sql-filter`) and the JMS selector
(`apache.org:selector-filter:string`) have their cases in s3_5_sql_filters.py.

Owns the cases `3.5.3/filter-*`, `3.5.3/properties-filter-*` and
`3.5.3/filter-expressions-*`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from amqpspec.amqp10.composites import Properties, Source, Target
from amqpspec.amqp10.engine import RemoteAttach, RemoteClose, RemoteDetach, RemoteEnd
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import Described, symbol, ulong
from amqpspec.conformance.probe import WaitTimeout
from amqpspec.conformance.run.registry import MODEL, MUST, case
from amqpspec.conformance.steps.credit import drain
from amqpspec.conformance.steps.filter_expressions import (
    application_properties_filter,
    properties_filter,
    selects,
)
from amqpspec.conformance.steps.queues import publish_messages, texts
from amqpspec.conformance.steps.sql_strategies import generate_only
from amqpspec.conformance.verdicts import CaseFailed

AS_CREATED = "2.6.3/establishing-or-resuming-a-link.3"  # report the terminus as created
FILTEX = "filtex"  # profile.MODELS
NEEDS = {"queues", "properties-filter"}
STREAM = {"x-queue-type": "stream"}
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
UNKNOWN_KEY = symbol("amqpspec-unknown")
UNKNOWN_FILTER = Described(symbol("amqpspec:no-such-filter:string"), "anything")
SEED = 20261127
EXAMPLES = 25


def _answer(probe, link, session):
    """The broker's answer to our attach: its RemoteAttach, or the detach / end / close
    that came instead."""
    return probe.expect(
        lambda e: (
            (isinstance(e, RemoteAttach | RemoteDetach) and e.link is link)
            or (isinstance(e, RemoteEnd) and e.session is session)
            or isinstance(e, RemoteClose)
        ),
        what="the broker's attach",
    )


@case(
    "3.5.3/filter-unknown-not-reported",
    MUST,
    "In this case the endpoint MUST report the actual properties of the terminus as "
    "created: a filter the broker does not apply is not in the filter of its source.",
    sentences=(AS_CREATED,),
    role="sender",
    requires={"queues"},
)
def filter_unknown_not_reported(probe, ctx):
    """Counters Qpid Broker-J's FilterTest.unsupportedFilter: a receiver from a queue whose
    source filter-set holds a filter of a type no broker knows
    (`amqpspec:no-such-filter:string`): the broker's attach leaves it out of its source
    (or the broker refuses the link: a null source and a detach)."""
    queue = ctx.queue()
    session = probe.open_session()
    source = Source(address=ctx.source(queue), filter={UNKNOWN_KEY: UNKNOWN_FILTER})
    link = session.attach_receiver(f"amqpspec-filter-{id(source)}", source, Target())
    probe.flush()
    event = _answer(probe, link, session)
    if not isinstance(event, RemoteAttach) or event.attach.source is None:
        ctx.note(f"the broker refused the link: {event}")
        return
    reported = event.attach.source.filter or {}
    ctx.note(f"the broker's source filter: {reported!r}")
    ctx.check(
        str(UNKNOWN_KEY) not in {str(key) for key in reported},
        f"expected the unknown filter {str(UNKNOWN_KEY)!r} left out of the broker's source "
        f"(it cannot be in place: no broker knows its type); observed filter {reported!r} "
        f"in the attach's source {event.attach.source!r}",
    )


def _filtered_queue(probe, ctx, messages: list[Message]) -> str:
    """A fresh queue holding `messages` (a stream when the profile has streams)."""
    queue = ctx.queue("filtered", STREAM) if ctx.profile.has("streams") else ctx.queue()
    publish_messages(probe, ctx, queue, messages)
    return queue


def _received(probe, ctx, queue: str, filters: dict[Any, Any], most: int):
    """Attach a receiver with `filters` (plus the offset-spec first on a stream), drain it
    with `most` credit: (the broker's reported filter-set, the bodies received)."""
    filter_set = dict(filters)
    if ctx.profile.has("streams"):
        filter_set[OFFSET_SPEC] = Described(OFFSET_SPEC, "first")
    source = Source(address=ctx.source(queue), filter=filter_set)
    session = probe.open_session()
    link = probe.attach_receiver(session, source)
    reported = link.remote_attach.source.filter if link.remote_attach.source else None
    ctx.model(
        reported is not None and all(str(key) in {str(k) for k in reported} for key in filters),
        f"expected the property filters {sorted(str(k) for k in filters)} in place (the "
        f"profile claims properties-filter); observed the broker's source filter {reported!r}",
    )
    try:
        drain(probe, link, most + 1)  # its reply follows every delivery (2.6.7)
    except WaitTimeout as exc:
        raise CaseFailed(f"expected a drain reply (2.6.7) after the deliveries: {exc}") from None
    got = probe.transfers(link)
    probe.detach(link, wait=False)
    probe.end(session, wait=False)
    return reported, texts(got)


def _fields(message: Message) -> tuple:
    """What a generated message's filters can see: (subject, group-id, message-id,
    application-properties)."""
    p = message.properties
    return (p.subject, p.group_id, p.message_id, message.application_properties)


def _expected(filters: dict[Any, Any], messages: list[Message]) -> list[bytes]:
    return sorted(bytes(m.body[0].value) for m in messages if selects(filters, m))


def _message(
    index: int, subject: str | None, application: dict[str, Any], **properties: Any
) -> Message:
    return Message.of(
        f"m{index}".encode(),
        properties=Properties(subject=subject, **properties),
        application_properties=application or None,
    )


@case(
    "3.5.3/properties-filter-subject",
    MODEL,
    "A receiver whose source carries amqp:properties-filter {subject: '&p:ap'} gets exactly "
    "the messages whose subject starts 'ap' (filtex 4.1.1, 4.2.4).",
    model=FILTEX,
    requires=NEEDS,
)
def properties_filter_subject(probe, ctx):
    """Counters RabbitMQ 4.1's amqp_filter_prop_SUITE property filter cases: messages with
    subjects apple, apricot, banana and none; a properties filter on the subject prefix
    'ap' and the exact subject 'banana': the first receiver gets m0 and m1, the second
    m2."""
    messages = [
        _message(0, "apple", {}),
        _message(1, "apricot", {}),
        _message(2, "banana", {}),
        _message(3, None, {}),
    ]
    queue = _filtered_queue(probe, ctx, messages)
    for reference, want in (("&p:ap", [b"m0", b"m1"]), ("banana", [b"m2"])):
        filters = {symbol("subject-filter"): properties_filter({"subject": reference})}
        _, got = _received(probe, ctx, queue, filters, len(messages))
        ctx.check(
            got == want,
            f"expected {want} through properties-filter subject={reference!r}; observed {got}",
        )


@case(
    "3.5.3/properties-filter-application-properties",
    MODEL,
    "A receiver whose source carries amqp:application-properties-filter gets exactly the "
    "messages whose application-properties match every entry (filtex 4.1.1, 4.2.5).",
    model=FILTEX,
    requires=NEEDS,
)
def application_properties_filter_case(probe, ctx):
    """Messages with application-properties color / size; a filter {color: 'red', size:
    2.0}: only the message with color red and size 2 (an integer, equal as a number) gets
    through, not the red one of size 3 nor the one without color."""
    messages = [
        _message(0, None, {"color": "red", "size": 2}),
        _message(1, None, {"color": "red", "size": 3}),
        _message(2, None, {"size": 2}),
        _message(3, None, {"color": "green", "size": 2}),
    ]
    queue = _filtered_queue(probe, ctx, messages)
    filters = {symbol("app-filter"): application_properties_filter({"color": "red", "size": 2.0})}
    _, got = _received(probe, ctx, queue, filters, len(messages))
    ctx.check(got == [b"m0"], f"expected [b'm0'] through {filters!r}; observed {got}")


# --- generated messages and filters, judged by the suite's evaluator ---------------------
WORDS = ["apple", "apricot", "banana", "band", "&amp", "grape"]
NUMBERS: list[Any] = [0, 1, 2, 1.0, 2.5]
VALUES = st.sampled_from(["apple", "banana", "&amp", 1, 2, 1.0, True])
KEYS = ["color", "size", "flag"]
GROUPS = ["g1", "g2", "group"]
MESSAGE_IDS: list[Any] = [ulong(1), ulong(2), "id-1", "id-2"]


def _string_references(words: list[str]) -> list[str]:
    """Each word exactly ('&&' escaping a leading '&'), by a 2-character prefix and by a
    2-character suffix (filtex 4.1.1)."""
    out: list[str] = []
    for word in words:
        out += ["&" + word if word.startswith("&") else word, "&p:" + word[:2], "&s:" + word[-2:]]
    return sorted(set(out))


# references drawn from flat pools: a null reference (matching everything) is one in many
REFERENCES = st.sampled_from(
    [*_string_references(["apple", "banana", "&amp"]), *NUMBERS, True, False, None]
)
MESSAGES = st.lists(
    st.tuples(
        st.sampled_from([*WORDS, None]),
        st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=3),
        st.sampled_from([*GROUPS, None]),
        st.sampled_from([*MESSAGE_IDS, None]),
    ),
    min_size=5,
    max_size=10,
)
# a properties filter's entries: the field, then its reference (filtex 4.2.4: a string
# field takes the string modifiers; message-id a ulong or a string, as 3.2.4 types it)
PROPERTY_REFERENCES = {
    "subject": st.sampled_from([*_string_references(WORDS), None]),
    "group-id": st.sampled_from([*_string_references(GROUPS), None]),
    "message-id": st.sampled_from([*MESSAGE_IDS, "&p:id", None]),
}
PROPERTY_FILTERS = st.lists(
    st.sampled_from(sorted(PROPERTY_REFERENCES)), min_size=1, max_size=2, unique=True
).flatmap(lambda names: st.fixed_dictionaries({name: PROPERTY_REFERENCES[name] for name in names}))
APPLICATION_FILTERS = st.dictionaries(st.sampled_from(KEYS), REFERENCES, min_size=1, max_size=2)
# (properties filter, application-properties filter): either one, or both
FILTERS = st.one_of(
    st.tuples(PROPERTY_FILTERS, st.none()),
    st.tuples(st.none(), APPLICATION_FILTERS),
    st.tuples(PROPERTY_FILTERS, APPLICATION_FILTERS),
)


@case(
    "3.5.3/filter-expressions-generated",
    MODEL,
    "Generated messages and property filters: the broker delivers exactly the messages the "
    "suite's own evaluator of the filter expressions selects (filtex 4.1.1, 4.2.4, 4.2.5; "
    "3.5.8: a message passes a filter-set if and only if it passes each filter).",
    model=FILTEX,
    requires=NEEDS,
    budget=60.0,
)
def filter_expressions_generated(probe, ctx):
    """Hypothesis (seed 20261127, 25 examples, no shrinking): 5 to 10 messages with a
    subject, group-id, message-id (ulong or string) and application-properties drawn from
    small pools (strings, one starting '&', integers, floats, booleans), and a filter-set
    of a properties filter on one or two of those fields and / or an application-properties
    filter (exact, '&p:' prefix, '&s:' suffix, '&&'
    escape, null references, numbers across types); each example a fresh queue, its
    receiver drained: the bodies received must equal the evaluator's selection."""
    state: dict[str, Any] = {"runs": 0, "failure": None}

    @generate_only(SEED, EXAMPLES)
    @given(MESSAGES, FILTERS)
    def example(drawn, pair):
        if state["failure"] is not None:
            return
        messages = [
            _message(i, subject, app, group_id=group, message_id=message_id)
            for i, (subject, app, group, message_id) in enumerate(drawn)
        ]
        props_filter, app_filter = pair
        filters: dict[Any, Any] = {}
        if props_filter is not None:
            filters[symbol("props")] = properties_filter(props_filter)
        if app_filter is not None:
            filters[symbol("app-props")] = application_properties_filter(app_filter)
        want = _expected(filters, messages)
        queue = _filtered_queue(probe, ctx, messages)
        try:
            _, got = _received(probe, ctx, queue, filters, len(messages))
            ctx.check(
                got == want,
                f"expected {want} (the suite's evaluator) through filter-set {filters!r} over "
                f"messages {[_fields(m) for m in messages]}; observed {got}",
            )
        except CaseFailed as exc:
            state["failure"] = exc
            return
        state["runs"] += 1

    example()
    ctx.note(f"{state['runs']} examples run (seed {SEED}, {EXAMPLES} examples)")
    if state["failure"] is not None:
        raise state["failure"]
