"""Sole connection for container: OASIS "Advanced Message Queuing Protocol (AMQP) Enforcing
Connection Uniqueness Version 1.0" (Committee Specification 01, 17 September 2018,
https://docs.oasis-open.org/amqp/soleconn/v1.0/soleconn-v1.0.html; not part of the core
specification, so not in the normative manifest: the `soleconn` model, profile.MODELS).

Capability-gated: a profile claims the convention with the `sole-connection` capability; a
broker whose profile does not is UNSUPPORTED on every case here, never FAILED. On a profile
that claims it, the broker's open must offer `sole-connection-for-container` (2.7.1
offered-capabilities; DIFFERS from the model when not). What the cases check is the
convention as Qpid Broker-J's protocol tests (extensions/soleconn: CloseExistingPolicyTest,
RefuseConnectionPolicyTest, MixedPolicyTest and their SoleConnectionAsserts) hold a broker
to, each case countering one of those tests:
- a client asks for the capability in its open's desired-capabilities, with the connection
  property `sole-connection-enforcement-policy` (uint 0 refuse-connection, the default; 1
  close-existing); the broker's open echoes the policy it enforces (none: refuse-connection)
  and may say how it detects other connections, `sole-connection-detection-policy` (uint 0
  strong, 1 weak);
- refuse-connection: a second connection of the same container-id gets an open whose
  properties carry `amqp:connection-establishment-failed` = true, then a close with
  amqp:invalid-field and info {invalid-field: container-id}; the first stays open;
- close-existing: the first connection is closed with amqp:resource-locked and info
  {sole-connection-enforcement: true}; the second is opened, the policy echoed;
- strong detection counts a connection of the container that did not ask for the
  capability (a broker that reports weak detection is UNSUPPORTED on those cases);
- the policy of the connection already open decides (MixedPolicyTest).
The soleconn text is not among the specification texts the suite grades against (the
normative manifest covers the core specification: conformance/spec/amqp-1.0) and these rules
come second-hand, from Broker-J's tests: a broker that claims the capability and breaks one
DIFFERS from the soleconn model, never FAILED, until that text is in the manifest.

Every case uses a container-id of its own (concurrent cases and runs never share one) and
waits only for the broker's answers (open, close, begin), each bounded by the profile's wait.

Owns the cases `2.7.1/sole-connection-*` (the open's container-id, desired-capabilities and
properties, 2.7.1, as the convention uses them).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from amqpspec.amqp10.engine import RemoteBegin, RemoteClose, RemoteOpen
from amqpspec.amqp10.extensions import (
    CLOSE_EXISTING,
    DETECTION_STRONG,
    DETECTION_WEAK,
    REFUSE_CONNECTION,
)
from amqpspec.amqp10.extensions import CONNECTION_ESTABLISHMENT_FAILED as ESTABLISHMENT_FAILED
from amqpspec.amqp10.extensions import CONTAINER_ID_FIELD as CONTAINER_ID
from amqpspec.amqp10.extensions import INVALID_FIELD_KEY as INVALID_FIELD
from amqpspec.amqp10.extensions import SOLE_CONNECTION_CAPABILITY as CAPABILITY
from amqpspec.amqp10.extensions import SOLE_CONNECTION_DETECTION_POLICY as DETECTION_POLICY
from amqpspec.amqp10.extensions import SOLE_CONNECTION_ENFORCEMENT as ENFORCEMENT
from amqpspec.amqp10.extensions import SOLE_CONNECTION_ENFORCEMENT_POLICY as ENFORCEMENT_POLICY
from amqpspec.amqp10.spec import Cond
from amqpspec.amqp10.types import symbol, uint
from amqpspec.conformance.probe import Probe, WaitTimeout
from amqpspec.conformance.run.registry import MODEL, case
from amqpspec.conformance.verdicts import Unanswered, Unsupported

SOLECONN = "soleconn"  # profile.MODELS
REFUSE, CLOSE = REFUSE_CONNECTION, CLOSE_EXISTING
POLICY_NAMES = {REFUSE: "refuse-connection", CLOSE: "close-existing"}
STRONG, WEAK = DETECTION_STRONG, DETECTION_WEAK
REQUIRES = {"sole-connection"}
REFUSED = (
    "soleconn (refuse-connection, as Broker-J's SoleConnectionAsserts checks it): the new "
    "connection's open carries amqp:connection-establishment-failed = true and a close "
    "follows with amqp:invalid-field, info {invalid-field: container-id}"
)
CLOSED = (
    "soleconn (close-existing, as Broker-J's SoleConnectionAsserts checks it): the existing "
    "connection is closed with amqp:resource-locked, info {sole-connection-enforcement: true}"
)
_containers = itertools.count(1)


def _container(ctx: Any) -> str:
    """A container-id no other case or run uses."""
    slug = ctx.case.case_id.rsplit("/", 1)[-1]
    return f"amqpspec-{slug}-{os.getpid()}-{next(_containers)}-{id(ctx) % 100000}"


def _connect(ctx: Any, container: str, policy: int | None = None, *, desire: bool = True):
    """A connection of `container`, asking for the capability (with `policy` when not None)
    when `desire`: (probe, the broker's open)."""
    probe = ctx.probe()
    properties = {ENFORCEMENT_POLICY: uint(policy)} if desire and policy is not None else None
    event = probe.open(
        container_id=container,
        desired_capabilities=[symbol(CAPABILITY)] if desire else None,
        properties=properties,
    )
    assert isinstance(event, RemoteOpen)
    return probe, event.open


def _newcomer(ctx: Any, container: str, policy: int | None, desire: bool = True):
    """A further connection of `container`: (probe, the broker's open). The convention
    answers it with an open whatever the policy (refused: an open, then the close): a
    broker that claims it and sends none DIFFERS from the model."""
    try:
        return _connect(ctx, container, policy, desire=desire)
    except Unanswered as exc:
        ctx.model(
            False,
            f"expected the broker's open on a further connection of container {container!r} "
            f"(refused or not, the convention answers with an open first); {exc}",
        )
        raise


def _props(opened: Any) -> dict:
    return opened.properties if isinstance(opened.properties, dict) else {}


def _offered(opened: Any) -> list[str]:
    offered = opened.offered_capabilities
    return [str(offered)] if isinstance(offered, str) else [str(c) for c in offered or ()]


def _claims(ctx: Any, opened: Any) -> None:
    """The broker's open offers the capability (the profile says it has it)."""
    ctx.model(
        CAPABILITY in _offered(opened),
        f"expected the broker's open to offer {CAPABILITY} (the profile claims "
        f"sole-connection); observed offered-capabilities {_offered(opened)}",
    )


def _enforces(opened: Any, policy: int) -> None:
    """UNSUPPORTED when the broker's open does not agree to `policy` (Broker-J assumes it)."""
    echoed = _props(opened).get(ENFORCEMENT_POLICY)
    if echoed == policy or (echoed is None and policy == REFUSE):
        return
    raise Unsupported(
        f"the broker's open does not agree to {POLICY_NAMES[policy]}: its "
        f"sole-connection-enforcement-policy is {echoed!r}"
    )


def _strong(opened: Any) -> None:
    """UNSUPPORTED when the broker reports weak detection (Broker-J assumes strong)."""
    detection = _props(opened).get(DETECTION_POLICY)
    if detection not in (None, STRONG):
        raise Unsupported(f"the broker reports sole-connection-detection-policy {detection!r}")


def _first(ctx: Any, container: str, policy: int | None, *, desire: bool = True) -> Probe:
    """The container's first connection, on a broker that offers the capability and agrees
    to `policy` (refuse-connection when None)."""
    probe, opened = _connect(ctx, container, policy, desire=desire)
    _claims(ctx, opened)
    if desire:
        _enforces(opened, REFUSE if policy is None else policy)
    return probe


def _close_of(probe: Probe, what: str) -> Any:
    """The broker's close on `probe`: its error (WaitTimeout: none within the wait)."""
    event = probe.expect(lambda e: isinstance(e, RemoteClose), what=what)
    return event.error


def _describe(error: Any) -> str:
    if error is None:
        return "a close without error"
    return f"close {error.condition} (info {getattr(error, 'info', None)!r})"


def _assert_refused(ctx: Any, probe: Probe, opened: Any) -> None:
    """The new connection was refused as refuse-connection says."""
    failed = _props(opened).get(ESTABLISHMENT_FAILED)
    try:
        error = _close_of(probe, "the close refusing the second connection")
    except WaitTimeout as exc:
        ctx.model(False, f"expected the second connection refused; {exc}. {REFUSED}")
        return
    ctx.model(
        failed is True,
        f"expected the second connection's open to carry {ESTABLISHMENT_FAILED} = true; "
        f"observed open properties {_props(opened)!r}, then {_describe(error)}. {REFUSED}",
    )
    info = getattr(error, "info", None)
    ctx.model(
        error is not None
        and str(error.condition) == Cond.INVALID_FIELD
        and isinstance(info, dict)
        and str(info.get(INVALID_FIELD)) == str(CONTAINER_ID),
        f"expected the second connection closed with {Cond.INVALID_FIELD}, info "
        f"{{invalid-field: container-id}}; observed {_describe(error)}. {REFUSED}",
    )


def _assert_still_open(ctx: Any, probe: Probe, what: str) -> None:
    """`probe`'s connection still works: a begin on it is answered (no close instead)."""
    session = probe.conn.begin()
    probe.flush()
    event = probe.expect(
        lambda e: (
            (isinstance(e, RemoteBegin) and e.session is session) or isinstance(e, RemoteClose)
        ),
        what="the begin's answer",
    )
    ctx.model(
        isinstance(event, RemoteBegin),
        f"expected the {what} left open (a begin on it answered); observed "
        f"{_describe(getattr(event, 'error', None))}",
    )


def _assert_replaced(ctx: Any, first: Probe) -> None:
    """The first connection was closed as close-existing says."""
    try:
        error = _close_of(first, "the close of the existing connection")
    except WaitTimeout as exc:
        ctx.model(False, f"expected the existing connection closed; {exc}. {CLOSED}")
        return
    info = getattr(error, "info", None)
    ctx.model(
        error is not None
        and str(error.condition) == Cond.RESOURCE_LOCKED
        and isinstance(info, dict)
        and info.get(ENFORCEMENT) is True,
        f"expected the existing connection closed with {Cond.RESOURCE_LOCKED}, info "
        f"{{sole-connection-enforcement: true}}; observed {_describe(error)}. {CLOSED}",
    )


def _assert_admitted(ctx: Any, opened: Any, policy: int | None) -> None:
    """The new connection was opened (no establishment failure), its policy echoed."""
    props = _props(opened)
    ctx.model(
        not props.get(ESTABLISHMENT_FAILED) and CAPABILITY in _offered(opened),
        f"expected the second connection opened, {CAPABILITY} offered; observed open "
        f"properties {props!r}, offered-capabilities {_offered(opened)}",
    )
    if policy is not None:
        echoed = props.get(ENFORCEMENT_POLICY)
        ctx.model(
            echoed == policy or (echoed is None and policy == REFUSE),
            f"expected the second connection's open to echo sole-connection-enforcement-"
            f"policy {policy} ({POLICY_NAMES[policy]}); observed open properties {props!r}",
        )


def _negotiation(ctx: Any, policy: int) -> None:
    _, opened = _connect(ctx, _container(ctx), policy)
    _claims(ctx, opened)
    _enforces(opened, policy)
    detection = _props(opened).get(DETECTION_POLICY)
    ctx.model(
        detection in (None, STRONG, WEAK),
        f"expected sole-connection-detection-policy, when present, to be 0 (strong) or 1 "
        f"(weak); observed {detection!r} in the open's properties {_props(opened)!r}",
    )
    ctx.note(f"the broker's open properties: {_props(opened)!r}")


@case(
    "2.7.1/sole-connection-negotiation-refuse",
    MODEL,
    "A broker that offers sole-connection-for-container agrees to refuse-connection in its "
    "open; its detection policy, when it reports one, is strong (0) or weak (1) (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def negotiation_refuse(probe, ctx):
    """Counters Qpid Broker-J's RefuseConnectionPolicyTest.basicNegotiation: an open asking
    for the capability with policy 0; the broker's open offers it and carries policy 0 (or
    none: the default) and a detection policy of 0 or 1 if any."""
    _negotiation(ctx, REFUSE)


@case(
    "2.7.1/sole-connection-negotiation-close-existing",
    MODEL,
    "A broker that offers sole-connection-for-container echoes close-existing in its open; "
    "its detection policy, when it reports one, is strong (0) or weak (1) (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def negotiation_close_existing(probe, ctx):
    """Counters Qpid Broker-J's CloseExistingPolicyTest.basicNegotiation: policy 1 asked
    for and echoed (UNSUPPORTED when the broker does not agree to close-existing)."""
    _negotiation(ctx, CLOSE)


def _refused_second(ctx: Any, first_policy: int | None, second_policy: int | None, **kw: Any):
    """A first connection (`first_policy`; `first_desire`), then a second of the same
    container (`second_policy`; `second_desire`): the second is refused, the first stays."""
    container = _container(ctx)
    first = _first(ctx, container, first_policy, desire=kw.get("first_desire", True))
    if not kw.get("first_desire", True):
        _strong_or_unsupported(ctx, first)
    second, opened = _newcomer(ctx, container, second_policy, kw.get("second_desire", True))
    if not kw.get("second_desire", True):
        _strong(opened)
    _assert_refused(ctx, second, opened)
    _assert_still_open(ctx, first, "first connection")


def _strong_or_unsupported(ctx: Any, first: Probe) -> None:
    assert first.conn is not None and first.conn.remote_open is not None
    _strong(first.conn.remote_open)


@case(
    "2.7.1/sole-connection-refuse-new",
    MODEL,
    "refuse-connection: a second connection of the same container-id is refused (open with "
    "amqp:connection-establishment-failed, close with amqp:invalid-field naming container-id); "
    "the first stays open (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def refuse_new(probe, ctx):
    """Counters Qpid Broker-J's RefuseConnectionPolicyTest.newConnectionRefused: two
    connections of one container-id, both asking for policy 0: the second is refused; a
    begin on the first is still answered."""
    _refused_second(ctx, REFUSE, REFUSE)


@case(
    "2.7.1/sole-connection-refuse-default",
    MODEL,
    "Without an enforcement policy, refuse-connection applies: a second connection of the "
    "same container-id is refused (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def refuse_default(probe, ctx):
    """Counters Qpid Broker-J's RefuseConnectionPolicyTest.refuseIsDefault: two connections
    asking for the capability without the policy property: the second is refused."""
    _refused_second(ctx, None, None)


@case(
    "2.7.1/sole-connection-strong-detection-refuse",
    MODEL,
    "Strong detection, refuse-connection: a second connection of the container that does not "
    "ask for the capability is refused too (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def strong_detection_refuse(probe, ctx):
    """Counters Qpid Broker-J's RefuseConnectionPolicyTest.strongDetection: the first asks
    for policy 0; the second, of the same container-id, does not ask for the capability:
    refused (UNSUPPORTED when the broker reports weak detection)."""
    _refused_second(ctx, REFUSE, None, second_desire=False)


@case(
    "2.7.1/sole-connection-strong-detection-first-without-capability-refuse",
    MODEL,
    "Strong detection: a first connection that did not ask for the capability counts; a "
    "second asking for refuse-connection is refused (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def strong_detection_first_without_refuse(probe, ctx):
    """Counters Qpid Broker-J's RefuseConnectionPolicyTest.
    strongDetectionWhenConnectionWithoutSoleConnectionCapabilityOpened: a first connection
    without the capability, a second of its container-id asking for policy 0: refused
    (UNSUPPORTED when the broker reports weak detection)."""
    _refused_second(ctx, None, REFUSE, first_desire=False)


def _replaced_first(ctx: Any, first_policy: int | None, second_policy: int | None, **kw: Any):
    """A first connection, then a second of the same container: the first is closed with
    resource-locked, the second opened."""
    container = _container(ctx)
    first_desire = kw.get("first_desire", True)
    second_desire = kw.get("second_desire", True)
    first = _first(ctx, container, first_policy, desire=first_desire)
    if not first_desire:
        _strong_or_unsupported(ctx, first)
    second, opened = _newcomer(ctx, container, second_policy, second_desire)
    if not second_desire:
        _strong(opened)
    _assert_admitted(ctx, opened, second_policy if second_desire else None)
    _assert_replaced(ctx, first)
    return container, second


@case(
    "2.7.1/sole-connection-close-existing",
    MODEL,
    "close-existing: a second connection of the same container-id is opened and the first "
    "closed with amqp:resource-locked, info {sole-connection-enforcement: true} (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def close_existing(probe, ctx):
    """Counters Qpid Broker-J's CloseExistingPolicyTest.existingConnectionClosed: two
    connections of one container-id asking for policy 1: the first is closed, the second
    opened with policy 1 echoed."""
    _replaced_first(ctx, CLOSE, CLOSE)


@case(
    "2.7.1/sole-connection-strong-detection-close-existing",
    MODEL,
    "Strong detection, close-existing: a second connection of the container that does not "
    "ask for the capability closes the first (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def strong_detection_close_existing(probe, ctx):
    """Counters Qpid Broker-J's CloseExistingPolicyTest.strongDetection: the first asks for
    policy 1; the second, of the same container-id, does not ask for the capability: the
    first is closed, the second opened (UNSUPPORTED when the broker reports weak
    detection)."""
    _replaced_first(ctx, CLOSE, None, second_desire=False)


@case(
    "2.7.1/sole-connection-strong-detection-first-without-capability-close-existing",
    MODEL,
    "Strong detection: a first connection that did not ask for the capability counts; a "
    "second asking for close-existing closes it (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def strong_detection_first_without_close_existing(probe, ctx):
    """Counters Qpid Broker-J's CloseExistingPolicyTest.
    strongDetectionWhenConnectionWithoutSoleConnectionCapabilityOpened: a first connection
    without the capability, a second of its container-id asking for policy 1: the first is
    closed (UNSUPPORTED when the broker reports weak detection)."""
    _replaced_first(ctx, None, CLOSE, first_desire=False)


@case(
    "2.7.1/sole-connection-mixed-close-then-refuse",
    MODEL,
    "The open connection's policy decides: close-existing held, a refuse-connection newcomer "
    "closes it; then the newcomer's refuse-connection refuses a close-existing third "
    "(soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def mixed_close_then_refuse(probe, ctx):
    """Counters Qpid Broker-J's MixedPolicyTest.firstCloseThenRefuse: first policy 1, second
    policy 0: the first is closed, the second opened; a third asking for policy 1 is
    refused (the second's policy decides)."""
    container, second = _replaced_first(ctx, CLOSE, REFUSE)
    third, opened = _newcomer(ctx, container, CLOSE)
    _assert_refused(ctx, third, opened)
    _assert_still_open(ctx, second, "second connection")


@case(
    "2.7.1/sole-connection-mixed-refuse-then-close",
    MODEL,
    "The open connection's policy decides: refuse-connection held, a close-existing "
    "newcomer is refused (soleconn).",
    model=SOLECONN,
    requires=REQUIRES,
    pipelined=False,
)
def mixed_refuse_then_close(probe, ctx):
    """Counters Qpid Broker-J's MixedPolicyTest.firstRefuseThenClose: first policy 0,
    second policy 1: the second is refused, the first stays open."""
    _refused_second(ctx, REFUSE, CLOSE)
