"""3.2.1 header durable at a target that cannot keep durable messages (Qpid Broker-J's
TransferTest.durableTransferWithRejectedOutcome / durableTransferWithoutRejectedOutcome,
@BrokerSpecific there: a broker-specific non-durable store).

3.2.1: "Durable Messages MUST NOT be lost even if an intermediary is unexpectedly
terminated and restarted. A target which is not capable of fulfilling this guarantee MUST
NOT accept messages where the durable header is set to true: if the source allows the
rejected outcome then the message should be rejected with the precondition-failed error,
otherwise the link must be detached by the receiver with the same error." The target is a
volatile queue the profile's admin adapter declares (capability `volatile-queues`: the
queue argument x-amqpspec-volatile = true, the reference broker's
reference_broker/features/volatile_nodes.py); a profile without one is UNSUPPORTED (no
sentence makes a broker offer such a node: a broker whose every node keeps durable
messages has nothing to refuse).

Graded: the durable message not accepted (the MUST NOT: FAILED when accepted); on a link
whose source offers no rejected outcome (3.5.3 outcomes: only amqp:accepted:list), the link
detached (the sentence's "must", FAILED when the broker answers otherwise); the condition
(precondition-failed as the sentence names it) and, where the source offers rejected, the
form of the refusal (the sentence's lowercase "should": rejected) are recorded. A
non-durable message to the same queue goes first and must be accepted, or the node refuses
everything (UNSUPPORTED).

Owns the cases `3.2.1/durable-refused-*`.
"""

from __future__ import annotations

from amqpspec.amqp10.composites import Header, Source, Target
from amqpspec.amqp10.engine import Link
from amqpspec.amqp10.message import Message
from amqpspec.amqp10.types import symbol
from amqpspec.conformance.probe import Probe
from amqpspec.conformance.run.context import CaseContext
from amqpspec.conformance.run.registry import MUST, case
from amqpspec.conformance.steps.refusals import published_answer
from amqpspec.conformance.verdicts import CaseFailed, Unsupported

DURABLE_REFUSED = "3.2.1/header.durable.2"  # a target that cannot keep them MUST NOT accept
# the reference broker's volatile queue (capability volatile-queues)
VOLATILE_ARGUMENTS = {"x-amqpspec-volatile": True}
ACCEPTED = symbol("amqp:accepted:list")
REJECTED = symbol("amqp:rejected:list")
PRECONDITION = "amqp:precondition-failed"
ENDINGS = ("detach:", "end:", "close:", "tcp-close")


def _volatile_sender(probe: Probe, ctx: CaseContext, outcomes: list) -> Link:
    """A sender (its source offering `outcomes`) to a fresh volatile queue, which accepts a
    non-durable message (UNSUPPORTED when it does not)."""
    queue = ctx.queue(arguments=VOLATILE_ARGUMENTS)
    session = probe.open_session()
    sender = session.attach_sender(
        f"amqpspec-volatile-{probe.mark()}",
        Source(outcomes=outcomes),
        Target(address=ctx.target_address(queue)),
    )
    probe.flush()
    probe.wait_attached(sender)
    transient = Message.of(b"amqpspec-transient", header=Header(durable=False))
    answer = published_answer(probe, sender, transient)
    if answer != "accepted":
        raise Unsupported(f"the volatile queue answered a non-durable message with {answer}")
    return sender


def _durable_answer(probe: Probe, ctx: CaseContext, sender: Link) -> str:
    """One unsettled message with header durable=true: the broker's answer; FAILED when it
    accepted it (3.2.1 MUST NOT)."""
    durable = Message.of(b"amqpspec-durable", header=Header(durable=True))
    answer = published_answer(probe, sender, durable)
    ctx.note(f"the durable message to the volatile queue: {answer}")
    if answer == "accepted":
        raise CaseFailed(
            "expected the durable message refused by a queue that cannot keep durable "
            "messages; observed accepted"
        )
    return answer


# both cases: the 3.2.1 MUST NOT on the node, a volatile queue the profile offers; no
# pipelined variant (the durable message goes after the non-durable one's answer)
GRADED = {
    "sentences": (DURABLE_REFUSED,),
    "requires": {"queues", "declare-queues", "volatile-queues"},
    "pipelined": False,
}


@case(
    "3.2.1/durable-refused-rejected-outcome",
    MUST,
    "A target which is not capable of fulfilling this guarantee MUST NOT accept messages "
    "where the durable header is set to true (rejected with precondition-failed when the "
    "source allows it: recorded).",
    **GRADED,
)
def durable_refused_rejected_outcome(probe, ctx):
    """Counters Qpid Broker-J's TransferTest.durableTransferWithRejectedOutcome: a sender
    whose source offers accepted and rejected, to a volatile queue: a non-durable message
    accepted, then a durable one (unsettled) not accepted; rejected with
    amqp:precondition-failed is the sentence's "should" (another refusal recorded)."""
    sender = _volatile_sender(probe, ctx, [ACCEPTED, REJECTED])
    answer = _durable_answer(probe, ctx, sender)
    if answer != f"rejected:{PRECONDITION}":
        ctx.note(f"not rejected with {PRECONDITION} (3.2.1: should): {answer}")


@case(
    "3.2.1/durable-refused-no-rejected-outcome",
    MUST,
    "A target which is not capable of fulfilling this guarantee MUST NOT accept messages "
    "where the durable header is set to true: where the source does not allow the rejected "
    "outcome the link must be detached by the receiver (with precondition-failed).",
    **GRADED,
)
def durable_refused_no_rejected_outcome(probe, ctx):
    """Counters Qpid Broker-J's TransferTest.durableTransferWithoutRejectedOutcome: a
    sender whose source offers only amqp:accepted:list, to a volatile queue: a non-durable
    message accepted, then a durable one (unsettled): the broker detaches the link (ending
    the session or connection ends it too); its condition recorded (3.2.1 names
    precondition-failed)."""
    sender = _volatile_sender(probe, ctx, [ACCEPTED])
    answer = _durable_answer(probe, ctx, sender)
    ctx.check(
        answer.startswith(ENDINGS),
        f"expected the link detached (its source offers no rejected outcome); observed {answer}",
    )
    if not answer.endswith(PRECONDITION):
        ctx.note(f"ended without {PRECONDITION}: {answer}")
