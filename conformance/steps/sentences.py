"""Spec sentences and outcome sets that several case modules check against: each case's
expectation in a line (the registry folds white space, so the text is the same whichever
module spells it) and the manifest ids of the normative sentences they rest on
(`amqpspec.conformance.manifest`; a case's level follows from them, registry.py).

Owns the constants only; registers no case. Touches nothing else.
"""

from __future__ import annotations

# 2.2 protocol header negotiation
NEGOTIATION = (
    "If the requested protocol version is not supported, the server MUST send a protocol "
    "header with a supported protocol version and then close the socket."
)
VERSION_SUPPORTED = "2.2/version-negotiation.6"  # supported: answer with the requested one
VERSION_UNSUPPORTED = "2.2/version-negotiation.7"  # a supported header, then close
VERSION_HIGHEST_BELOW = "2.2/version-negotiation.8"  # SHOULD: highest <= requested
VERSION_HIGHEST = "2.2/version-negotiation.9"  # SHOULD: else the highest supported
VERSION_UNPARSED = "2.2/version-negotiation.10"  # cannot parse: a supported header, close
PROTOCOL_ID_UNACCEPTABLE = "2.2/version-negotiation.11"  # an acceptable id, close
# 2.4.3: a close frame before the connection closes (a TCP close alone breaks it)
CLOSE_FIRST = "2.4.3/closing-a-connection.1"
# 2.3.2: the performative MUST be one of those defined, encoded as a described type (binds
# the sender: the probe's malformed frames break it; no sentence prescribes the answer)
PERFORMATIVE_ENCODED = "2.3.2/amqp-frames.1"
# 2.5.4: a session unable to process input issues an end with an error
SESSION_ERROR = "2.5.4/session-errors.1"
# AMQP 1.0 or SASL 1.0; another protocol's header (RabbitMQ answers AMQP 0-9-1) is lenient
SUPPORTED_HEADERS = {"header:0.1.0.0", "header:3.1.0.0"}

# 2.6.7 link flow control
LINK_CREDIT_ILLEGAL = "2.6.7/flow-control.11"  # no transfer at or below zero link-credit
CREDIT_FORMULA = "2.6.7/flow-control.4"  # link-credit = delivery-count(rcv) + credit - ...
CREDIT_DECREMENT = "2.6.7/flow-control.6"  # delivery-count up, link-credit down, equally
DRAIN_ADVANCE = "2.6.7/flow-control.12"  # drain, nothing available: advance, send the state
CREDIT_BEFORE_ATTACH = "2.6.7/flow-control.5"  # no delivery-count yet: the initial one
FLOW_DELIVERY_COUNT_SENDER = "2.7.4/flow.delivery-count.2"  # the sender's current count
CREDIT = (LINK_CREDIT_ILLEGAL, CREDIT_FORMULA)  # what every grant case rests on
DRAINING = (DRAIN_ADVANCE, LINK_CREDIT_ILLEGAL, CREDIT_FORMULA)  # what every drain case rests on
CREDIT_LIMIT = (
    "If the link-credit is less than or equal to zero, i.e., the delivery-count is the same "
    "as or greater than the delivery-limit, it is illegal to send more messages."
)
DRAIN = (
    "drain: if set, the sender will (after sending all available messages) advance the "
    "delivery-count as much as possible, consuming all link-credit, and send the flow state "
    "to the receiver."
)
# 2.7.4 flow
ECHO = (
    "echo: if set to true then the receiver SHOULD send its state at the earliest convenient "
    "opportunity."
)
AVAILABLE = "available: the number of messages awaiting credit at the link sender endpoint."

# 2.6.6 / 3.4 requeue of unsettled deliveries: RabbitMQ 4's model, no sentence requires it
# (3.3: the source's default-outcome decides; source expiry-policy session-end keeps the
# terminus until the session ends)
RABBITMQ4 = "rabbitmq4"  # profile.MODELS
REQUEUE = (
    "A delivery the receiver never settled goes back to the queue when its link, session or "
    "connection goes away, and the queue delivers it again (RabbitMQ 4's model: released as "
    "the source's default outcome, 3.3)."
)
NOT_RESENT = "3.5.2/distribution-modes.1"  # an accepted message is never sent again
REQUEUE_NEEDS = {"queues", "requeue-on-detach", "unsettled-deliveries"}

# 2.6.2 handles: the broker ends the session (or more) on a frame for a handle it lacks
UNATTACHED = {"end:amqp:session:unattached-handle", "close:amqp:session:unattached-handle"}
UNATTACHED_INPUT = (
    "If set to a handle that is not currently associated with an attached Link, the "
    "recipient MUST respond by ending the session with an unattached-handle session error."
)
FLOW_UNATTACHED = "2.7.4/flow.handle.1"
# the broker noticed (ended something) but not with the condition the spec names
ANY_END = {"end:*", "close:*", "tcp-close"}
