"""Spec sentences and outcome sets that several case modules check against (the registry
folds white space, so a case's sentence text is the same whichever module spells it).

Owns the constants only; registers no case. Touches nothing else.
"""

from __future__ import annotations

# 2.2 protocol header negotiation
NEGOTIATION = (
    "If the requested protocol version is not supported, the server MUST send a protocol "
    "header with a supported protocol version and then close the socket."
)
# AMQP 1.0 or SASL 1.0; another protocol's header (RabbitMQ answers AMQP 0-9-1) is lenient
SUPPORTED_HEADERS = {"header:0.1.0.0", "header:3.1.0.0"}

# 2.6.7 link flow control
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

# 2.6.6 / 3.4 requeue of unsettled deliveries
REQUEUE = (
    "A delivery that was never settled by the receiver has no terminal outcome: when the "
    "link ends, the message is not consumed and the queue delivers it again (at-least-once; "
    "2.6.6 closing a link, 3.4 delivery state)."
)
REQUEUE_NEEDS = {"queues", "requeue-on-detach", "unsettled-deliveries"}

# 2.6.2 handles: the broker ends the session (or more) on a frame for a handle it lacks
UNATTACHED = {"end:amqp:session:unattached-handle", "close:amqp:session:unattached-handle"}
UNATTACHED_INPUT = (
    "If any input (other than an attach) related to a handle is received by an endpoint "
    "while the handle is not associated with a link, the endpoint MUST respond with an end "
    "carrying the error amqp:session:unattached-handle"
)
# the broker noticed (ended something) but not with the condition the spec names
ANY_END = {"end:*", "close:*", "tcp-close"}
