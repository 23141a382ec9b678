"""The rule catalog of the checker: one `Rule` per checked spec sentence, and `Violation`.

Owns: rule ids (hierarchical, stable: "<area>.<subject>.<what>"), the spec section and
MUST/SHOULD level of each, and the sentence (paraphrased from the OASIS AMQP 1.0 core spec)
the rule enforces. Touches nothing else; the checker modules look rules up by id.
Section numbers are those of the OASIS AMQP 1.0 core specification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["MUST", "SHOULD"]


@dataclass(frozen=True, slots=True)
class Rule:
    rule_id: str
    section: str
    level: Level
    title: str
    sentence: str


@dataclass(frozen=True, slots=True)
class Violation:
    rule_id: str
    section: str
    level: Level
    frame_index: int
    origin: str
    reason: str

    def __str__(self) -> str:
        return (
            f"[{self.level} {self.section} {self.rule_id}] frame {self.frame_index} "
            f"({self.origin}): {self.reason}"
        )


_CATALOG: tuple[tuple[str, str, Level, str, str], ...] = (
    # --- framing (2.2, 2.3, 5.3) ---
    (
        "framing.header-first",
        "2.2",
        "MUST",
        "protocol header first",
        "Prior to sending any frames on a connection, each peer MUST start by sending a "
        "protocol header that indicates the protocol version used on the connection.",
    ),
    (
        "framing.unexpected-header",
        "2.2",
        "MUST",
        "protocol header where a frame is due",
        "After the protocol header exchange only frames follow, except the AMQP header that "
        "follows a completed SASL (or TLS) layer.",
    ),
    (
        "framing.doff",
        "2.3.1",
        "MUST",
        "DOFF at least 2 and inside the frame",
        "DOFF gives the size of the frame header in 4-byte words; it MUST be at least 2 and "
        "the header cannot extend beyond SIZE.",
    ),
    (
        "framing.wrong-frame-type",
        "2.3",
        "MUST",
        "performative on the wrong frame type",
        "Frame type 0x00 carries AMQP performatives and 0x01 carries SASL frames; other types "
        "and bodies of the other kind are not allowed.",
    ),
    (
        "framing.pre-open-frame-size",
        "2.4.1",
        "MUST",
        "frames before open at most 512 bytes",
        "Prior to any explicit negotiation, the maximum frame size is 512 (MIN-MAX-FRAME-SIZE).",
    ),
    (
        "framing.max-frame-size",
        "2.7.1",
        "MUST",
        "frame within the partner's max-frame-size",
        "max-frame-size: the largest frame size that the sending peer is able to accept on "
        "this connection; a peer MUST NOT send frames larger than its partner can handle.",
    ),
    (
        "security.sasl-order",
        "5.3.2",
        "MUST",
        "SASL frames only inside the SASL layer",
        "SASL frames are exchanged after the SASL protocol header and before the outcome; "
        "the AMQP header and AMQP frames follow only after the SASL layer.",
    ),
    # --- connection (2.4, 2.7.1, 2.7.9) ---
    (
        "connection.open-first",
        "2.4.1",
        "MUST",
        "open is the first frame",
        "After the protocol header each peer MUST send an open frame before any other frame.",
    ),
    (
        "connection.open-channel",
        "2.7.1",
        "MUST",
        "open on channel 0 only, once",
        "The open performative is sent once per connection, on channel 0.",
    ),
    (
        "connection.container-id",
        "2.7.1",
        "MUST",
        "open carries a container-id",
        "container-id is mandatory: the id of the source container.",
    ),
    (
        "connection.channel-max",
        "2.7.1",
        "MUST",
        "begin within the partner's channel-max",
        "channel-max: the highest channel number that can be used on the connection; a peer "
        "MUST NOT begin a session on a channel above its partner's channel-max.",
    ),
    (
        "connection.idle-timeout",
        "2.4.5",
        "SHOULD",
        "send within the partner's idle-time-out",
        "A peer that advertised idle-time-out T closes the connection if nothing arrives for "
        "T; its partner sends frames (empty ones if need be) more often than T.",
    ),
    (
        "connection.frame-after-close",
        "2.7.9",
        "MUST",
        "nothing after close",
        "Sending a close signals that the sender will not be sending any more frames (or "
        "bytes of any other kind) on the connection.",
    ),
    (
        "connection.close-unanswered",
        "2.4.3",
        "MUST",
        "close is answered with close",
        "A peer that receives a close MUST respond with a close of its own before it "
        "closes the socket.",
    ),
    # --- session (2.5, 2.7.2, 2.7.4, 2.7.10) ---
    (
        "session.no-session",
        "2.5.1",
        "MUST",
        "session frames need a begun session",
        "attach, flow, transfer, disposition, detach and end are sent on a channel on which "
        "the sender has begun a session.",
    ),
    (
        "session.channel-in-use",
        "2.5.1",
        "MUST",
        "begin on a free channel",
        "A peer begins a session on an outgoing channel that is not in use by one of its sessions.",
    ),
    (
        "session.remote-channel",
        "2.7.2",
        "MUST",
        "remote-channel of the answering begin",
        "When an endpoint responds to a remotely initiated session, the remote-channel MUST "
        "be set to the channel on which the remote session sent the begin.",
    ),
    (
        "session.window-violation",
        "2.5.6",
        "MUST",
        "transfer within the incoming-window",
        "A sender MUST NOT send a transfer frame when the remote-incoming-window is zero; "
        "transfers beyond the receiver's incoming-window are a window-violation.",
    ),
    (
        "session.next-outgoing-id",
        "2.5.6",
        "MUST",
        "next-outgoing-id counts transfer frames",
        "next-outgoing-id is the transfer-id the sender will assign to its next transfer "
        "frame; every transfer frame increments it by one.",
    ),
    (
        "session.frame-after-end",
        "2.7.10",
        "MUST",
        "nothing on a session after its end",
        "end signals the end of the session; the endpoint sends no further frames on that "
        "channel until a new begin.",
    ),
    # --- link lifecycle (2.6, 2.7.3, 2.7.5, 2.7.7) ---
    (
        "link.attach.handle-in-use",
        "2.7.3",
        "MUST",
        "attach on a free handle",
        "A handle MUST NOT be used for a new link while it is in use for an attached link "
        "(session error handle-in-use).",
    ),
    (
        "link.attach.handle-max",
        "2.7.2",
        "MUST",
        "handle within the partner's handle-max",
        "A peer MUST NOT attempt to attach a link using a handle value outside the range "
        "that its partner can handle (handle-max).",
    ),
    (
        "link.attach.role",
        "2.6.3",
        "MUST",
        "the answering attach takes the other role",
        "A link has a sender end and a receiver end: the attach answering a sender's attach "
        "comes from a receiver, and vice versa.",
    ),
    (
        "link.unattached-handle",
        "2.6.2",
        "MUST",
        "frames on attached handles only",
        "A frame (other than attach) referencing a handle which is not currently in use "
        "for an attached link is a session error unattached-handle.",
    ),
    (
        "link.frame-after-detach",
        "2.7.7",
        "MUST",
        "nothing on a link after its detach",
        "After sending detach the endpoint releases the handle; it sends no further "
        "frames on that handle until it attaches it again.",
    ),
    (
        "link.transfer.wrong-role",
        "2.6.1",
        "MUST",
        "only the sender transfers",
        "Messages are transferred from the sending link endpoint to the receiving one; "
        "the receiver never sends transfers on its link.",
    ),
    (
        "link.transfer.first-frame-fields",
        "2.7.5",
        "MUST",
        "first transfer has id and tag",
        "The delivery-id MUST be supplied on the first transfer of a delivery; the "
        "delivery-tag MUST be specified for the first transfer; continuation frames, "
        "when they carry them, repeat the same values.",
    ),
    # --- link credit (2.6.7) ---
    (
        "link.credit.transfer-without-credit",
        "2.6.7",
        "MUST",
        "no transfer without credit",
        "If the link-credit is less than or equal to zero, a sender MUST NOT send more "
        "messages; the receiver had granted no credit at all.",
    ),
    (
        "link.credit.transfer-beyond-credit",
        "2.6.7",
        "MUST",
        "transfer beyond every grant",
        "If the link-credit is less than or equal to zero, i.e. the delivery-count is the "
        "same as or greater than the delivery-limit, a sender MUST NOT send more messages.",
    ),
    (
        "link.credit.receiver-delivery-count-ahead",
        "2.6.7",
        "MUST",
        "receiver's delivery-count not ahead of the sender's",
        "The receiver's delivery-count is calculated from the last known value from the "
        "sender and the messages received since: it cannot be ahead of the sender's.",
    ),
    (
        "link.credit.sender-delivery-count-regressed",
        "2.6.7",
        "MUST",
        "sender's delivery-count never goes back",
        "delivery-count is incremented whenever a message is sent; only the sender MAY "
        "independently modify it, and only forwards.",
    ),
    (
        "link.drain.transfer-after-drain",
        "2.6.7",
        "MUST",
        "no transfer after a drain",
        "After a drain the sender's link-credit is zero: it sends nothing more until the "
        "receiver grants new credit.",
    ),
    (
        "link.drain.no-reply",
        "2.6.7",
        "MUST",
        "a drain request gets a flow back",
        "If the sender's drain flag is set and there are no available messages, the sender "
        "MUST advance its delivery-count until link-credit is zero, and send its updated "
        "flow state to the receiver.",
    ),
    (
        "link.echo.unanswered",
        "2.7.4",
        "SHOULD",
        "echo is answered with a flow",
        "echo: if set to true then the receiver of the flow SHOULD send its state at the "
        "earliest convenient opportunity.",
    ),
    (
        "link.liveness.stall",
        "2.6.7",
        "SHOULD",
        "credit and messages mean deliveries",
        "A sender with link-credit and available messages sends them; credit outstanding, "
        "messages available and nothing delivered within the bound is a stall.",
    ),
    # --- settlement (2.6.12, 2.7.6, 2.8.2, 2.8.3) ---
    (
        "settlement.disposition-range",
        "2.7.6",
        "MUST",
        "disposition first <= last",
        "first and last delimit an inclusive range of delivery-ids; last, when set, is not "
        "before first.",
    ),
    (
        "settlement.unknown-delivery",
        "2.7.6",
        "MUST",
        "disposition of sent deliveries only",
        "A disposition refers to deliveries of the session (by delivery-id) that were "
        "actually transferred in the direction its role says.",
    ),
    (
        "settlement.settled-again-unsettled",
        "2.6.12",
        "MUST",
        "settled means forgotten",
        "Once a delivery is settled the endpoint forgets it: a delivery sent settled, or "
        "settled by this endpoint, is never disposed of again as unsettled.",
    ),
    (
        "settlement.snd-settle-mode",
        "2.8.2",
        "MUST",
        "transfers follow snd-settle-mode",
        "snd-settle-mode unsettled: the sender will send all deliveries initially "
        "unsettled; settled: the sender will send all deliveries settled to the receiver.",
    ),
    (
        "settlement.rcv-settle-mode",
        "2.7.5",
        "MUST",
        "no rcv-settle-mode second on a first link",
        "rcv-settle-mode on transfer: if the negotiated link value is first, then it is "
        "illegal to set this field to second.",
    ),
)

RULES: dict[str, Rule] = {
    rule_id: Rule(rule_id, section, level, title, sentence)
    for rule_id, section, level, title, sentence in _CATALOG
}


def violation(rule_id: str, frame_index: int, origin: str, reason: str) -> Violation:
    """A Violation of a catalog rule (KeyError for an unknown id: ids are stable)."""
    rule = RULES[rule_id]
    return Violation(rule_id, rule.section, rule.level, frame_index, origin, reason)


def catalog_markdown() -> str:
    """The catalog as Markdown (docs/rules.md is this text:
    `python -m amqpspec.amqp10.checker.rules`)."""
    lines = [
        "# Checker rule catalog",
        "",
        "Generated from `amqp10/checker/rules.py` by `python -m amqpspec.amqp10.checker.rules`;",
        "a test keeps this file in step with the code. Sections are those of the OASIS",
        "AMQP 1.0 core specification; sentences are paraphrased.",
        "",
        f"{len(RULES)} rules.",
        "",
        "| rule id | section | level | title | spec sentence |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule in RULES.values():
        lines.append(
            f"| `{rule.rule_id}` | {rule.section} | {rule.level} | {rule.title} | {rule.sentence} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(catalog_markdown(), end="")
