"""Message-level validation a broker does on a publish, past 3.2's section order
(s3_2_message.py): annotation keys 3.2.10 reserves, and the properties' user-id (3.2.4).

- 3.2.10 annotations (MUST, the broker as the receiving container): "On receiving an
  annotations map containing keys or values which it does not recognize, and for which the
  key does not begin with the string "x-opt-" an AMQP container MUST detach the link with
  the not-implemented amqp-error." A message-annotations key that 3.2.10 reserves (a symbol
  not beginning with "x-", a ulong) is one no container recognizes: the specification
  defines no such key for these maps. RabbitMQ 4 detaches with amqp:decode-error (its
  reserved_annotation test): the link detached, not with the condition the MUST names.
- 3.2.4 user-id: "The client sets this value, and it MAY be authenticated by
  intermediaries." No sentence says what a broker answers a user-id naming someone else:
  RabbitMQ 4 refuses it with amqp:unauthorized-access (its user_id test), the rabbitmq4
  model. What binds is 3.2.4's "The properties section is part of the bare message and thus
  must, if retransmitted by an intermediary, remain completely unaltered": a user-id the
  broker takes comes out as it was sent.

Owns the cases `3.2.10/annotations-*` and `3.2.4/user-id-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Data, Properties
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol, ulong
from amqpspec.conformance.run.registry import MODEL, MUST, case, case_function
from amqpspec.conformance.steps.links import consumer, publisher
from amqpspec.conformance.steps.messages import bare_changes, check_bare_unchanged
from amqpspec.conformance.steps.refusals import published_answer
from amqpspec.conformance.steps.sentences import RABBITMQ4
from amqpspec.conformance.verdicts import Unsupported

RESERVED_DETACH = "3.2.10/annotations.2"  # MUST detach with not-implemented
PROPERTIES_UNALTERED = "3.2.4/properties.1"  # retransmitted: completely unaltered

# slug -> (the message-annotations map, what its key is)
RESERVED = {
    "symbol": ({symbol("amqpspec-reserved"): "v"}, "a symbolic key not beginning with x-"),
    "ulong": ({ulong(7): "v"}, "a ulong key"),
}


def _reserved(annotations: dict):
    def run(probe, ctx):
        queue = ctx.queue()
        _, sender = publisher(probe, ctx, queue)
        message = Message(message_annotations=annotations, body=[Data(b"reserved key")])
        ctx.outcome(published_answer(probe, sender, message))

    return run


for _slug, (_annotations, _what) in RESERVED.items():
    _run = case_function(
        _reserved(_annotations),
        f"annotations_reserved_{_slug}_key",
        f"Counters RabbitMQ's reserved_annotation: a message whose message-annotations "
        f"carry {_what} (3.2.10 reserves it; no container recognizes it), published "
        "unsettled to a queue: the link is detached with amqp:not-implemented.",
        __name__,
    )
    case(
        f"3.2.10/annotations-reserved-{_slug}-key",
        MUST,
        "A message-annotations map with a reserved key the broker cannot recognize: the "
        "link detached with amqp:not-implemented.",
        sentences=(RESERVED_DETACH,),
        role="receiver",
        requires={"queues"},
        outcomes={"detach:amqp:not-implemented"},
    )(_run)


def _authenticated_user(ctx) -> str:
    """The user the case's connections authenticate as (SASL PLAIN), or UNSUPPORTED."""
    user = ctx.target.username or ctx.profile.username
    if ctx.profile.sasl != "PLAIN" or not user:
        raise Unsupported(
            f"the probe authenticates with SASL {ctx.profile.sasl}: no user a user-id could "
            "name or contradict"
        )
    return user


def _user_message(user_id: str, tag: str) -> Message:
    properties = Properties(message_id=tag, user_id=user_id.encode())
    return Message(properties=properties, body=[Data(tag.encode())])


def _delivered_payload(probe, ctx, queue: str) -> bytes:
    """The payload of the one message on `queue`, consumed on a receiver of its own."""
    _, link = consumer(probe, ctx, queue, credit=1)
    delivery = probe.next_transfer(link)
    if not delivery.settled:
        probe.settle(link, delivery)
    return delivery.payload


@case(
    "3.2.4/user-id-authenticated-kept",
    MUST,
    "A message whose user-id names the authenticated user is taken, and its properties "
    "come out completely unaltered.",
    sentences=(PROPERTIES_UNALTERED,),
    model=RABBITMQ4,
    requires={"queues"},
)
def user_id_authenticated_kept(probe, ctx):
    """Counters RabbitMQ's user_id (its first message): properties.user-id set to the
    connection's own user, published unsettled: accepted (the rabbitmq4 model: DIFFERS
    otherwise), and delivered with its bare message byte for byte (3.2.4 MUST)."""
    user = _authenticated_user(ctx)
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    sent = _user_message(user, "own-user")
    answer = published_answer(probe, sender, sent)
    ctx.model(
        answer == "accepted",
        f"expected the message accepted (its user-id names the authenticated user "
        f"{user!r}); observed {answer}",
    )
    check_bare_unchanged(ctx, sent, _delivered_payload(probe, ctx, queue))


@case(
    "3.2.4/user-id-other-user-refused",
    MODEL,
    "A message whose user-id names a user other than the authenticated one is refused with "
    "amqp:unauthorized-access (RabbitMQ 4: 3.2.4 lets an intermediary authenticate "
    "user-id); taken, its properties come out unaltered (3.2.4 MUST).",
    model=RABBITMQ4,
    requires={"queues"},
    outcomes={"rejected:amqp:unauthorized-access", "detach:amqp:unauthorized-access"},
)
def user_id_other_user_refused(probe, ctx):
    """Counters RabbitMQ's user_id (its second message): properties.user-id naming another
    user than the connection's, published unsettled: rejected or its link detached with
    amqp:unauthorized-access. A broker that accepts it must deliver the user-id as sent
    (FAILED otherwise, 3.2.4), and differs from the model."""
    user = _authenticated_user(ctx)
    queue = ctx.queue()
    _, sender = publisher(probe, ctx, queue)
    sent = _user_message(f"amqpspec-not-{user}", "other-user")
    answer = published_answer(probe, sender, sent)
    if answer == "accepted":
        changes = bare_changes(sent.encode(), _delivered_payload(probe, ctx, queue))
        ctx.must(
            not changes,
            "the broker took the message and changed its bare message: " + "; ".join(changes),
            PROPERTIES_UNALTERED,
        )
    ctx.outcome(answer)
