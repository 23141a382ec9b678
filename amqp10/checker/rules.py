"""The rule catalog of the checker: one `Rule` per checked spec sentence, and `Violation`.

Owns: rule ids (hierarchical, stable: "<area>.<subject>.<what>"), the spec section and
MUST/SHOULD level of each, the sentence the rule enforces, quoted exactly from the spec XML
(conformance/spec/amqp-1.0/, white space folded; a test checks it), and `sentences`: the ids
of the normative manifest (conformance/manifest/) the rule enforces. A rule with no id checks
something the text states without a normative word; conformance/manifest/links.toml [rules]
says what and why. Touches nothing else; the checker modules look rules up by id.
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
    sentences: tuple[str, ...] = ()  # manifest ids (conformance/manifest) it enforces


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


# (rule id, section, level, title, sentence quoted from the XML, manifest sentence ids)
_CATALOG: tuple[tuple[str, str, Level, str, str, tuple[str, ...]], ...] = (
    # --- framing (2.2, 2.3, 5.3) ---
    (
        "framing.header-first",
        "2.2",
        "MUST",
        "protocol header first",
        "Prior to sending any Frames on a Connection, each peer MUST start by sending a protocol "
        "header that indicates the protocol version used on the Connection.",
        ("2.2/version-negotiation.1",),
    ),
    (
        "framing.unexpected-header",
        "2.2",
        "MUST",
        "protocol header where a frame is due",
        "Any data appearing beyond the protocol header MUST match the version indicated by the "
        "protocol header.",
        ("2.2/version-negotiation.2", "5.3.3.5/sasl-outcome.1"),
    ),
    (
        "framing.doff",
        "2.3.1",
        "MUST",
        "DOFF at least 2 and inside the frame",
        "Due to the mandatory 8 byte frame header, the frame is malformed if the value is less "
        "than 2.",
        ("2.3.1/frame-layout.3",),
    ),
    (
        "framing.wrong-frame-type",
        "2.3.2",
        "MUST",
        "performative on the wrong frame type",
        "The performative MUST be one of those defined in performatives and is encoded as a "
        "described type in the AMQP type system.",
        ("2.3.2/amqp-frames.1", "5.3.1/sasl-frames.3"),
    ),
    (
        "framing.pre-open-frame-size",
        "2.7.1",
        "MUST",
        "frames before open at most 512 bytes",
        "A peer MUST NOT send frames larger than its partner can handle.",
        ("2.7.1/open.max-frame-size.1",),
    ),
    (
        "framing.max-frame-size",
        "2.7.1",
        "MUST",
        "frame within the partner's max-frame-size",
        "A peer MUST NOT send frames larger than its partner can handle.",
        ("2.7.1/open.max-frame-size.1",),
    ),
    (
        "security.sasl-order",
        "5.3.3.5",
        "MUST",
        "SASL frames only inside the SASL layer",
        "Upon successful completion of the SASL dialog the Security Layer has been established, "
        "and the peers must exchange protocol headers to either start a nested Security Layer, or "
        "to establish the AMQP Connection.",
        ("5.3.3.5/sasl-outcome.1", "5.3.2/sasl-negotiation.1", "5.3.2/sasl-negotiation.2"),
    ),
    # --- connection (2.4, 2.7.1, 2.7.9) ---
    (
        "connection.open-first",
        "2.4.1",
        "MUST",
        "open is the first frame",
        "After establishing or accepting a TCP Connection and sending the protocol header, each "
        "peer must send an open frame before sending any other Frames.",
        ("2.4.1/opening-a-connection.1", "2.7.1/open.1"),
    ),
    (
        "connection.open-channel",
        "2.4.1",
        "MUST",
        "open on channel 0 only, once",
        "The open frame can only be sent on channel 0.",
        ("2.4.1/opening-a-connection.2",),
    ),
    (
        "connection.container-id",
        "1.3",
        "MUST",
        "open carries a container-id",
        "The mandatory attribute of a field description controls whether a null element value is "
        "permitted in the representation.",
        ("1.3/composite-types.1",),
    ),
    (
        "connection.channel-max",
        "2.7.1",
        "MUST",
        "begin within the partner's channel-max",
        "A peer MUST not use channel numbers outside the range that its partner can handle.",
        ("2.7.1/open.channel-max.1",),
    ),
    (
        "connection.idle-timeout",
        "2.4.5",
        "SHOULD",
        "send within the partner's idle-time-out",
        "If during operation a peer exceeds the remote peer's idle time-out's threshold, e.g. "
        "because it is heavily loaded, it SHOULD gracefully close the connection by using a close "
        "frame with an error explaining why.",
        ("2.4.5/idle-time-out-of-a-connection.8",),
    ),
    (
        "connection.frame-after-close",
        "2.7.9",
        "MUST",
        "nothing after close",
        "It is illegal to send any more frames (or bytes of any other kind) after sending a close "
        "frame.",
        ("2.7.9/close.2", "2.4.3/closing-a-connection.2", "2.4.6/connection-states.1"),
    ),
    (
        "connection.close-unanswered",
        "2.4.3",
        "MUST",
        "close is answered with close",
        "Prior to closing a Connection, each peer MUST write a close frame with a code indicating "
        "the reason for closing.",
        ("2.4.3/closing-a-connection.1",),
    ),
    # --- session (2.5, 2.7.2, 2.7.4, 2.7.8) ---
    (
        "session.no-session",
        "2.5.5",
        "MUST",
        "session frames need a begun session",
        "In this state an endpoint cannot send or receive frames.",
        ("2.5.5/session-states.1",),
    ),
    (
        "session.channel-in-use",
        "2.5.1",
        "MUST",
        "begin on a free channel",
        "Sessions are established by creating a Session Endpoint, assigning it to an unused "
        "channel number, and sending a begin announcing the association of the Session Endpoint "
        "with the outgoing channel.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    (
        "session.remote-channel",
        "2.7.2",
        "MUST",
        "remote-channel of the answering begin",
        "When an endpoint responds to a remotely initiated Session, the remote-channel MUST be "
        "set to the channel on which the remote Session sent the begin.",
        ("2.7.2/begin.remote-channel.2", "2.5.1/establishing-a-session.1"),
    ),
    (
        "session.window-violation",
        "2.5.6",
        "MUST",
        "transfer within the incoming-window",
        "The remote-incoming-window reflects the maximum number of outgoing transfers that can be "
        "sent without exceeding the remote endpoint's incoming-window. This value MUST be "
        "decremented after every transfer frame is sent, and recomputed when informed of the "
        "remote session endpoint state.",
        ("2.5.6/session-flow-control.1",),
    ),
    (
        "session.next-outgoing-id",
        "2.5.6",
        "MUST",
        "next-outgoing-id counts transfer frames",
        "When the endpoint receives a flow frame from its peer, it MUST update the "
        "next-incoming-id directly from the next-outgoing-id of the frame, as well as copy the "
        "remote-outgoing-window directly from the outgoing-window of the frame.",
        ("2.5.6/session-flow-control.3",),
    ),
    (
        "session.frame-after-end",
        "2.5.5",
        "MUST",
        "nothing on a session after its end",
        "The endpoint may receive frames, but cannot send them.",
        ("2.5.5/session-states.3",),
    ),
    # --- link lifecycle (2.6, 2.7.3, 2.7.5, 2.7.7) ---
    (
        "link.attach.handle-in-use",
        "2.7.3",
        "MUST",
        "attach on a free handle",
        "The handle MUST NOT be used for other open Links.",
        ("2.7.3/attach.handle.1",),
    ),
    (
        "link.attach.handle-max",
        "2.7.2",
        "MUST",
        "handle within the partner's handle-max",
        "A peer MUST NOT attempt to attach a Link using a handle value outside the range that its "
        "partner can handle.",
        ("2.7.2/begin.handle-max.1",),
    ),
    (
        "link.attach.role",
        "2.6.3",
        "MUST",
        "the answering attach takes the other role",
        "Links are established and/or resumed by creating a Link Endpoint associated with a local "
        "Terminus, assigning it to an unused handle, and sending an attach Frame. This frame "
        "carries the state of the newly created Link Endpoint, including the local and remote "
        "termini, one being the source and one being the target depending on the directionality "
        "of the Link Endpoint.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    (
        "link.unattached-handle",
        "2.7.4",
        "MUST",
        "frames on attached handles only",
        "If set to a handle that is not currently associated with an attached Link, the recipient "
        "MUST respond by ending the session with an unattached-handle session error.",
        ("2.7.4/flow.handle.1",),
    ),
    (
        "link.frame-after-detach",
        "2.7.4",
        "MUST",
        "nothing on a link after its detach",
        "If set to a handle that is not currently associated with an attached Link, the recipient "
        "MUST respond by ending the session with an unattached-handle session error.",
        ("2.7.4/flow.handle.1",),
    ),
    (
        "link.transfer.wrong-role",
        "2.6.7",
        "MUST",
        "only the sender transfers",
        "Only the Sender may independently modify this field.",
        ("2.6.7/flow-control.1",),
    ),
    (
        "link.transfer.first-frame-fields",
        "2.7.5",
        "MUST",
        "first transfer has id and tag",
        "The delivery-id MUST be supplied on the first transfer of a multi-transfer delivery. On "
        "continuation transfers the delivery-id MAY be omitted. It is an error if the delivery-id "
        "on a continuation transfer differs from the delivery-id on the first transfer of a "
        "delivery.",
        (
            "2.7.5/transfer.delivery-id.1",
            "2.7.5/transfer.delivery-id.2",
            "2.7.5/transfer.delivery-tag.1",
        ),
    ),
    (
        "link.attach.initial-delivery-count",
        "2.7.3",
        "MUST",
        "a sender's attach carries initial-delivery-count",
        "This MUST NOT be null if role is sender, and it is ignored if the role is receiver.",
        ("2.7.3/attach.initial-delivery-count.1",),
    ),
    (
        "link.attach.unsettled-null-key",
        "2.7.3",
        "MUST",
        "no null key in an attach's unsettled map",
        "The unsettled map MUST NOT contain null valued keys.",
        ("2.7.3/attach.unsettled.3",),
    ),
    (
        "link.transfer.first-frame-message-format",
        "2.7.5",
        "MUST",
        "first transfer has message-format",
        "This field MUST be specified for the first transfer of a multi transfer message and "
        "may only be omitted for continuation transfers.",
        ("2.7.5/transfer.message-format.1",),
    ),
    # --- flow fields (2.7.4) ---
    (
        "session.flow.link-fields",
        "2.7.4",
        "MUST",
        "no link fields in a session flow",
        "When the handle field is not set, this field MUST NOT be set.",
        (
            "2.7.4/flow.delivery-count.1",
            "2.7.4/flow.link-credit.2",
            "2.7.4/flow.available.2",
            "2.7.4/flow.drain.1",
        ),
    ),
    (
        "link.flow.sender-delivery-count-missing",
        "2.7.4",
        "MUST",
        "a sender's link flow carries delivery-count",
        "When the handle identifies that the flow state is being sent from the Sender Link "
        "Endpoint to Receiver Link Endpoint this field MUST be set to the current "
        "delivery-count of the Link Endpoint.",
        ("2.7.4/flow.delivery-count.2",),
    ),
    (
        "link.flow.receiver-delivery-count-missing",
        "2.7.4",
        "MUST",
        "a receiver's link flow carries delivery-count once it saw the sender's attach",
        "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint "
        "this field MUST be set to the last known value of the corresponding Sending Endpoint.",
        ("2.7.4/flow.delivery-count.3",),
    ),
    (
        "link.flow.receiver-delivery-count-before-attach",
        "2.7.4",
        "MUST",
        "no delivery-count from a receiver before the sender's attach",
        "In the event that the Receiving Link Endpoint has not yet seen the initial attach "
        "frame from the Sender this field MUST NOT be set.",
        ("2.7.4/flow.delivery-count.4",),
    ),
    (
        "link.flow.receiver-delivery-count-behind",
        "2.7.4",
        "MUST",
        "a receiver's delivery-count not behind what it knows of the sender's",
        "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint "
        "this field MUST be set to the last known value of the corresponding Sending Endpoint.",
        ("2.7.4/flow.delivery-count.3",),
    ),
    # --- link credit (2.6.7) ---
    (
        "link.credit.transfer-without-credit",
        "2.6.7",
        "MUST",
        "no transfer without credit",
        "If the link-credit is less than or equal to zero, i.e. the delivery-count is the same as "
        "or greater than the delivery-limit, it is illegal to send more messages.",
        ("2.6.7/flow-control.11",),
    ),
    (
        "link.credit.transfer-beyond-credit",
        "2.6.7",
        "MUST",
        "transfer beyond every grant",
        "If the link-credit is less than or equal to zero, i.e. the delivery-count is the same as "
        "or greater than the delivery-limit, it is illegal to send more messages.",
        ("2.6.7/flow-control.11",),
    ),
    (
        "link.credit.receiver-delivery-count-ahead",
        "2.7.4",
        "MUST",
        "receiver's delivery-count not ahead of the sender's",
        "When the flow state is being sent from the Receiver Endpoint to the Sender Endpoint this "
        "field MUST be set to the last known value of the corresponding Sending Endpoint.",
        ("2.7.4/flow.delivery-count.3", "2.6.7/flow-control.1"),
    ),
    (
        "link.credit.sender-delivery-count-regressed",
        "2.7.4",
        "MUST",
        "sender's delivery-count never goes back",
        "When the handle identifies that the flow state is being sent from the Sender Link "
        "Endpoint to Receiver Link Endpoint this field MUST be set to the current delivery-count "
        "of the Link Endpoint.",
        ("2.7.4/flow.delivery-count.2",),
    ),
    (
        "link.drain.transfer-after-drain",
        "2.6.7",
        "MUST",
        "no transfer after a drain",
        "If the link-credit is less than or equal to zero, i.e. the delivery-count is the same as "
        "or greater than the delivery-limit, it is illegal to send more messages.",
        ("2.6.7/flow-control.11", "2.6.7/flow-control.12"),
    ),
    (
        "link.drain.no-reply",
        "2.6.7",
        "MUST",
        "a drain request gets a flow back",
        "If the Sender's drain flag is set and there are no available messages, the Sender MUST "
        "advance its delivery-count until link-credit is zero, and send its updated flow state to "
        "the Receiver.",
        ("2.6.7/flow-control.12", "2.6.7/flow-control.9"),
    ),
    (
        "link.echo.unanswered",
        "2.6.10",
        "SHOULD",
        "echo is answered with a flow",
        "The echo field of the flow frame may be used to request the Sender's flow state be "
        "echoed back.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    (
        "link.liveness.stall",
        "2.6.7",
        "SHOULD",
        "credit and messages mean deliveries",
        "The drain flag indicates how the Sender should behave when insufficient messages are "
        "available to consume the current link-credit.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    # --- settlement (2.6.12, 2.7.6, 2.8.2, 2.8.3) ---
    (
        "settlement.disposition-range",
        "2.7.6",
        "MUST",
        "disposition first <= last",
        "Identifies the upper bound of delivery-ids for the deliveries in this set.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    (
        "settlement.unknown-delivery",
        "2.7.6",
        "MUST",
        "disposition of sent deliveries only",
        "The disposition frame may reference deliveries from many different links associated with "
        "a session, although all links MUST have the directionality indicated by the specified "
        "role.",
        ("2.7.6/disposition.1",),
    ),
    (
        "settlement.settled-again-unsettled",
        "2.6.12",
        "MUST",
        "settled means forgotten",
        "Note that this amounts to the Sender announcing that it is forever forgetting everything "
        "about the delivery-tag in question, and as such it is only possible to make such an "
        "announcement once, since after the Sender forgets, it has no way of remembering to make "
        "the announcement again.",
        (),  # no normative sentence: conformance/manifest/links.toml [rules] says why
    ),
    (
        "settlement.snd-settle-mode",
        "2.7.5",
        "MUST",
        "transfers follow snd-settle-mode",
        "If the negotiated value for snd-settle-mode at attachment is unsettled, then this field "
        "MUST be false (or unset) on every transfer frame for a delivery (unless the delivery is "
        "aborted).",
        ("2.7.5/transfer.settled.4", "2.7.5/transfer.settled.3"),
    ),
    (
        "settlement.rcv-settle-mode",
        "2.7.5",
        "MUST",
        "no rcv-settle-mode second on a first link",
        "If the negotiated link value is first, then it is illegal to set this field to second.",
        ("2.7.5/transfer.rcv-settle-mode.3",),
    ),
)

RULES: dict[str, Rule] = {entry[0]: Rule(*entry) for entry in _CATALOG}


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
        "AMQP 1.0 core specification; sentences are quoted from its XML, and the ids are",
        "those of the normative manifest (`conformance/manifest/`). A rule without an id",
        "checks what the text states without a normative word (`links.toml` [rules]).",
        "",
        f"{len(RULES)} rules.",
        "",
        "| rule id | section | level | title | spec sentence | manifest ids |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rule in RULES.values():
        ids = ", ".join(f"`{i}`" for i in rule.sentences) or "none"
        lines.append(
            f"| `{rule.rule_id}` | {rule.section} | {rule.level} | {rule.title} | "
            f"{rule.sentence} | {ids} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(catalog_markdown(), end="")
