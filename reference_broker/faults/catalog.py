"""Fault catalog: deliberate, switchable bugs modelled on real broker bugs (off by default).

Owns: the frozen registry of fault names (one-line description, real-world origin and the
layer that implements each, the engine rule it relaxes), the `Faults` set object (its
attributes and the broker engine's `EndpointPolicy` both derived from the catalog), and
parsing of `--fault NAME`. Touches nothing else. Every fault is a plain boolean attribute
of `Faults` (`faults.overdeliver_on_regrant`), so an off path costs one attribute load.

Where each fault lives:
- queue layer (`reference_broker.queues.classic`, implemented there): overdeliver-on-regrant,
  transfer-before-credit, ignore-drain, excess-credit-after-drain, no-requeue-on-detach,
  redeliver-undeliverable-here, durable-messages-in-memory, consume-on-delivery (shown by a
  restart: conformance/cases/s3_2_1_durability.py); and the faults that show only with two
  consumers of one queue (CONCURRENCY_FAULTS: `python -m amqpspec.fuzz.detection` finds them with
  multi-party cases): shared-credit-across-links, lose-requeue-on-concurrent-detach,
  deliver-to-two-consumers.
- protocol layer (the connection/session code that drives the engine; wired there):
  no-drain-reply, no-echo, ignore-alarm, negative-window-after-alarm, credit-per-frame,
  skip-window-check, insert-properties, sasl-answers-as-client,
  scram-accepts-any-proof (protocol/sasl.py), publish-without-write-permission
  (protocol/permissions.py), no-sasl-timeout (protocol/connection.py),
  accept-misordered-sections (protocol/delivery_handler.py),
  accept-reserved-annotations and accept-any-user-id (features/message_checks.py),
  relay-error-without-delivery-tag (features/relay.py),
  keep-dynamic-nodes and forget-persistent-nodes (features/dynamic_nodes.py),
  close-shared-subscription-with-links and forget-durable-subscriptions
  (features/topic_subscriptions.py),
  sole-connection-weak-detection
  (features/sole_connection.py), forget-unsettled-on-reattach (features/recovery.py),
  accept-new-after-incomplete-map (protocol/delivery_handler.py, features/publisher_recovery.py),
  report-unknown-filters and properties-filter-ignores-subject (features/filters.py),
  selector-like-escape-ignored (features/selectors.py),
  session-scoped-delivery-tags (protocol/delivery_handler.py, publishers' transfers),
  keep-publishers-of-deleted-nodes (protocol/context.py, features/deleted_targets.py),
  accept-durable-on-volatile (protocol/delivery_handler.py, features/volatile_nodes.py),
  ws-drop-short-messages and ws-close-without-handshake (runtime/websocket.py); the
  transaction faults (Part 4, in `reference_broker.features.transactions`):
  txn-post-immediately, txn-discharge-unknown-accepted, txn-timeout-never-fires.
- parser layer (`reference_broker.faults.parser`, called for every engine event while one
  is on): the parser and state-machine faults modelled on fuzzers' findings —
  die-on-nested-descriptor, exit-on-compound-overrun, leak-on-declared-count,
  hang-on-serial-wrap, exit-on-illegal-sasl, hang-on-disposition-range,
  die-on-channel-reuse, die-on-credit-overflow. They die, exit, hang or leak as the real
  bug did; `python -m amqpspec.fuzz.detection` measures how fast the fuzzer finds each.
- wire layer (`reference_broker.faults.wire`, the broker's outgoing session frames edited as
  the buggy broker sent them, while one is on): the field-rule faults of 2.7.3-2.7.5 —
  flow-without-delivery-count, stale-receiver-delivery-count,
  sender-flow-without-delivery-count, session-flow-with-link-fields,
  attach-without-initial-delivery-count, attach-unsettled-null-key,
  transfer-without-message-format. Each breaks one rule the checker enforces on every
  frame (conformance/manifest/links.toml names the rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from amqpspec.amqp10.engine.policy import EndpointPolicy

QUEUE_LAYER = "queue"
PROTOCOL_LAYER = "protocol"
PARSER_LAYER = "parser"
WIRE_LAYER = "wire"
# faults of the WebSocket listener (runtime/websocket.py): they show only in a run over ws://
WEBSOCKET_FAULTS = ("ws-drop-short-messages", "ws-close-without-handshake")
# queue-layer faults that only two consumers of one queue can show (fuzz.multiparty cases)
CONCURRENCY_FAULTS = (
    "shared-credit-across-links",
    "lose-requeue-on-concurrent-detach",
    "deliver-to-two-consumers",
)


@dataclass(frozen=True, slots=True)
class FaultInfo:
    """`relaxes`: the `EndpointPolicy` switch the broker's engine must turn off for the
    fault to reach the wire (e.g. "check_credit" for a fault that sends past the grant)."""

    name: str
    description: str
    origin: str
    layer: str
    where: str
    relaxes: str | None = None

    @property
    def attribute(self) -> str:
        return self.name.replace("-", "_")


def _fault(
    name: str, description: str, origin: str, layer: str, where: str, relaxes: str | None = None
) -> FaultInfo:
    return FaultInfo(name, description, origin, layer, where, relaxes)


CATALOG: Mapping[str, FaultInfo] = MappingProxyType(
    {
        info.name: info
        for info in (
            _fault(
                "overdeliver-on-regrant",
                "a new link-credit grant is added to the remaining credit instead of replacing "
                "it (2.6.7), so a receiver that re-grants gets more transfers than granted",
                "RabbitMQ #2597 (fixed by PR #9022, credit API v2)",
                QUEUE_LAYER,
                "queues.credit.apply_flow",
                "check_credit",
            ),
            _fault(
                "transfer-before-credit",
                "a new consumer gets one delivery before the receiver granted any credit",
                "rabbitmq-amqp1.0#43",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.add_consumer",
                "check_credit",
            ),
            _fault(
                "ignore-drain",
                "the drain flag of a flow is ignored: no delivery-count advance, credit kept, "
                "no drain reply",
                "go-amqp#255 (ActiveMQ and the Qpid example brokers never drain)",
                QUEUE_LAYER,
                "queues.credit.apply_flow",
            ),
            _fault(
                "no-drain-reply",
                "drain is applied but the flow that must answer it is never sent",
                "go-amqp#255",
                PROTOCOL_LAYER,
                "protocol layer: drop CreditReply events whose drain is True",
            ),
            _fault(
                "excess-credit-after-drain",
                "after a drain the reply says link-credit 0 but the queue keeps the old credit "
                "and goes on delivering beyond the grant",
                "DISPATCH-1090 / DISPATCH-1496",
                QUEUE_LAYER,
                "queues.credit.complete_drain",
                "check_credit",
            ),
            _fault(
                "no-requeue-on-detach",
                "deliveries still unsettled when a link detaches are dropped instead of requeued",
                "RabbitMQ PR #9022 item 27 (3.x did not requeue in-flight deliveries)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.remove_consumer",
            ),
            _fault(
                "shared-credit-across-links",
                "the consumers of one queue draw on one credit: a delivery goes to the next "
                "consumer in turn, charged to whichever link has credit, so a link gets "
                "transfers beyond its own grant (2.6.7: credit is per link); shows only with "
                "two consumers of one queue",
                "2.6.7 link-credit (a queue that pools its consumers' credit; the class of "
                "RabbitMQ #2597)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue._deliver_shared_credit",
                "check_credit",
            ),
            _fault(
                "lose-requeue-on-concurrent-detach",
                "the unsettled deliveries of a detaching consumer wait in one requeue buffer "
                "until a consumer with credit takes them; a second consumer detaching before "
                "then replaces the buffer, losing the first one's messages (3.3.1); shows only "
                "when two consumers of one queue leave together",
                "3.3.1 message states (a requeue buffer replaced, not merged, when two links "
                "detach at once)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.remove_consumer",
            ),
            _fault(
                "deliver-to-two-consumers",
                "a consumer attaching while another holds unsettled deliveries also gets a copy "
                "of the oldest of them: one message acquired by two links at once (3.3.1); "
                "shows only with two consumers of one queue",
                "3.3.1 message states (a queue that re-offers acquired messages when its "
                "consumer set changes)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.add_consumer",
            ),
            _fault(
                "ignore-alarm",
                "a resource alarm does not close the publishers' session incoming-window",
                "RabbitMQ PR #9953 (3.x never blocked AMQP 1.0 publishers on alarm)",
                PROTOCOL_LAYER,
                "protocol layer: alarm observer does not send incoming-window 0",
            ),
            _fault(
                "negative-window-after-alarm",
                "the incoming-window computed after an alarm overshoot goes negative (wraps) "
                "instead of being clamped at 0",
                "RabbitMQ #12904",
                PROTOCOL_LAYER,
                "protocol layer: session incoming-window computation",
            ),
            _fault(
                "credit-per-frame",
                "link credit is counted per transfer frame instead of per delivery, so "
                "multi-frame messages consume several credits",
                "azure-uamqp-c PR #383",
                PROTOCOL_LAYER,
                "protocol layer: outgoing multi-frame transfer accounting",
                "check_credit",
            ),
            _fault(
                "redeliver-undeliverable-here",
                "a delivery modified with undeliverable-here is redelivered to the same link",
                "ARTEMIS-794",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.settle",
            ),
            _fault(
                "no-echo",
                "a flow with echo=true gets no flow in reply",
                "2.6.7 echo (several client libraries and brokers ignore it)",
                PROTOCOL_LAYER,
                "protocol layer: drop CreditReply events requested only by echo",
            ),
            _fault(
                "skip-window-check",
                "incoming transfers beyond the session incoming-window are accepted instead of "
                "ending the session with amqp:session:window-violation (2.5.6)",
                "2.5.6 session flow control (brokers that never enforce their window)",
                PROTOCOL_LAYER,
                "protocol layer: incoming transfer window check",
                "enforce_window",
            ),
            _fault(
                "die-on-nested-descriptor",
                "a described value whose descriptor is itself described kills the connection's "
                "task (no close frame) instead of a close with amqp:decode-error (1.2)",
                "Qpid Proton OSS-Fuzz: unbounded recursion on nested descriptors",
                PARSER_LAYER,
                "faults.parser.inspect: decode error on a nested descriptor",
            ),
            _fault(
                "exit-on-compound-overrun",
                "a list, map or array whose size runs past the frame makes the broker process "
                "exit (the read beyond the buffer crashes it)",
                "Qpid Proton OSS-Fuzz: compound length beyond the buffer (heap overflow)",
                PARSER_LAYER,
                "faults.parser.inspect: decode error on a compound size",
            ),
            _fault(
                "leak-on-declared-count",
                "a list declaring more fields than it carries makes the connection allocate "
                "memory for the declared count (up to 96 MiB) and keep it",
                "go-amqp fuzz: unbounded slice creation from a declared count",
                PARSER_LAYER,
                "faults.parser.inspect: decode error on a declared count",
            ),
            _fault(
                "hang-on-serial-wrap",
                "a delivery-count, delivery-id or next-outgoing-id at or past 2^31 (read as a "
                "signed int) makes the connection spin: no reply, no close",
                "Qpid Proton OSS-Fuzz: signed sequence-number wrap",
                PARSER_LAYER,
                "faults.parser.inspect: flow, transfer and begin sequence numbers",
            ),
            _fault(
                "exit-on-illegal-sasl",
                "a SASL frame out of sequence (a second init, a response nobody asked for, an "
                "AMQP frame in the SASL layer) makes the broker process exit",
                "Qpid Proton OSS-Fuzz: illegal SASL sequence",
                PARSER_LAYER,
                "faults.parser.inspect: protocol error before the AMQP open",
            ),
            _fault(
                "hang-on-disposition-range",
                "a disposition over 2^16 or more delivery ids makes the connection walk the "
                "whole range: no reply, no close",
                "Qpid Proton OSS-Fuzz: disposition over arbitrary ranges",
                PARSER_LAYER,
                "faults.parser.inspect: disposition first..last",
            ),
            _fault(
                "die-on-channel-reuse",
                "a begin on a channel already in use kills the connection's task instead of a "
                "close with amqp:illegal-state (2.5.1)",
                "state-machine crashes on reused channels found by AMQP fuzzers (Proton, go-amqp)",
                PARSER_LAYER,
                "faults.parser.inspect: protocol error on a reused channel",
            ),
            _fault(
                "die-on-credit-overflow",
                "a link-credit at or past 2^31 (delivery-count + credit overflows a signed "
                "int) kills the connection's task",
                "go-amqp / Qpid Proton fuzz: credit arithmetic overflow",
                PARSER_LAYER,
                "faults.parser.inspect: flow link-credit",
            ),
            _fault(
                "insert-properties",
                "a message sent without a properties section is delivered with one: an "
                "intermediary inserting a bare-message section (3.2)",
                "RabbitMQ 3.10 (adds properties to a bare message that had none)",
                PROTOCOL_LAYER,
                "protocol.links.ConsumerLink.deliver (faults.wire.insert_properties)",
            ),
            _fault(
                "flow-without-delivery-count",
                "the broker's flows for a link it receives on carry no delivery-count, though "
                "it has seen the sender's attach (2.7.4)",
                "RabbitMQ 3.10 (its flows as a receiver never carry delivery-count)",
                WIRE_LAYER,
                "faults.wire.editor: flow of a receiving link",
            ),
            _fault(
                "stale-receiver-delivery-count",
                "the broker's flows for a link it receives on keep the sender's "
                "initial-delivery-count: the messages received are never counted (2.7.4)",
                "2.7.4 flow delivery-count (a receiver that copies the attach's value)",
                WIRE_LAYER,
                "faults.wire.editor: flow of a receiving link",
            ),
            _fault(
                "sender-flow-without-delivery-count",
                "the broker's flows for a link it sends on (drain and echo replies, available) "
                "carry no delivery-count (2.7.4)",
                "2.7.4 flow delivery-count (a sender reporting only credit and available)",
                WIRE_LAYER,
                "faults.wire.editor: flow of a sending link",
            ),
            _fault(
                "session-flow-with-link-fields",
                "the broker's session flows (no handle) carry link-credit and delivery-count "
                "0 (2.7.4)",
                "2.7.4 flow (an encoder that fills the link fields of every flow)",
                WIRE_LAYER,
                "faults.wire.editor: flow without handle",
            ),
            _fault(
                "relay-error-without-delivery-tag",
                "a message the anonymous relay cannot route is rejected (or its link detached) "
                "with an error whose info lacks the delivery-tag (anonterm 2.2.2)",
                "OASIS anonterm v1.0 2.2.2 routing errors (a relay that does not name the "
                "delivery; Qpid Broker-J's AnonymousTerminusTest checks it)",
                PROTOCOL_LAYER,
                "protocol.delivery_handler.DeliveryHandler._publish_refused (relay.routing_error)",
            ),
            _fault(
                "ws-drop-short-messages",
                "over WebSocket, a binary message shorter than a frame header (8 bytes) is "
                "dropped, as by a broker that takes each message for the start of a frame",
                "OASIS AMQP WebSocket Binding v1.0 (frames need not align with WebSocket "
                "messages; Qpid Broker-J's WebSocketTest.amqpFramesSplitOverManyWebSocketFrames)",
                PROTOCOL_LAYER,
                "runtime.websocket._serve",
            ),
            _fault(
                "sasl-answers-as-client",
                "the SASL layer plays whichever role the peer's frame calls for: a client's "
                "sasl-mechanisms is answered with a sasl-init, its sasl-challenge with a "
                "sasl-response (5.3.2: the SASL server MUST be the TCP server)",
                "a SASL layer shared by both roles, the confusion Qpid Broker-J's "
                "SaslTest.clientSendsSaslMechanisms / clientSendsSaslChallenge guard against",
                PROTOCOL_LAYER,
                "protocol.sasl.answer_as_sasl_client (BrokerConnection._on_protocol_error)",
            ),
            _fault(
                "publish-without-write-permission",
                "a sender's target is never checked against the user's write permission, so "
                "a user without rights attaches a sender and publishes to any queue",
                "an authorization check made for consumers only (Qpid Broker-J's "
                "SystemPrivilegeEscalationGuardTest."
                "guestCannotSendToQueueEvenIfSystemRuleWouldAllow "
                "guards the publishing side)",
                PROTOCOL_LAYER,
                "protocol.permissions.ConnectionAccess.check_address (skip_write)",
            ),
            _fault(
                "no-sasl-timeout",
                "the SASL time-out is never armed: a client that sends the SASL header and "
                "then nothing keeps its connection until the handshake time-out (if any)",
                "Qpid Broker-J's SaslAuthenticationTimeoutTest (SASL started, then silence: "
                "the broker closes within its authentication timeout)",
                PROTOCOL_LAYER,
                "protocol.connection.BrokerConnection.receive (Deadlines.start_sasl)",
            ),
            _fault(
                "accept-misordered-sections",
                "a message whose sections break 3.2's order (a properties section after the "
                "body, a second header) or run past its end is taken and queued as it came",
                "a broker that stores payloads without parsing them (Qpid Broker-J's "
                "DecodeErrorTest.illegalMessage and RabbitMQ's sections_out_of_order expect "
                "amqp:decode-error)",
                PROTOCOL_LAYER,
                "protocol.delivery_handler.DeliveryHandler.on_transfer",
            ),
            _fault(
                "accept-reserved-annotations",
                "a message whose delivery- or message-annotations carry a key 3.2.10 reserves "
                "(a ulong key, a symbol not beginning with x-) is taken and queued with it, "
                "not refused by detaching the link with amqp:not-implemented",
                "a broker that passes annotations through unread (RabbitMQ's "
                "reserved_annotation test expects the link detached)",
                PROTOCOL_LAYER,
                "features.message_checks.refusal",
            ),
            _fault(
                "accept-any-user-id",
                "a message whose properties.user-id names a user other than the "
                "connection's authenticated one is taken as it came",
                "a broker that leaves user-id unauthenticated (RabbitMQ's user_id test "
                "expects amqp:unauthorized-access)",
                PROTOCOL_LAYER,
                "features.message_checks.refusal",
            ),
            _fault(
                "scram-accepts-any-proof",
                "the SCRAM-SHA-256 exchange (RFC 7677) challenges a known user and then "
                "accepts whatever client proof follows, a wrong password included",
                "RFC 5802 section 3 (the server verifies the ClientProof; an authentication "
                "bypass of the kind Qpid Broker-J's SaslTest guards against with its "
                "challenge/response and unsuccessful-authentication tests)",
                PROTOCOL_LAYER,
                "protocol.sasl.ProoflessScram (server_sasl)",
            ),
            _fault(
                "ws-close-without-handshake",
                "over WebSocket, the broker ends a connection by closing the TCP connection, "
                "without the WebSocket close handshake (no close frame)",
                "OASIS AMQP WebSocket Binding v1.0 4 Closing a Connection (the WebSocket "
                "closing handshake of RFC 6455 7.1.2)",
                PROTOCOL_LAYER,
                "runtime.websocket._write",
            ),
            _fault(
                "keep-dynamic-nodes",
                "dynamic nodes ignore their lifetime policy (3.5.10) and live until their "
                "connection ends, though the attach reported delete-on-close & co.",
                "3.5.10 lifetime policies (temporary queues scoped to the connection, as JMS "
                "temporary destinations are, whatever policy the attach reported)",
                PROTOCOL_LAYER,
                "features.dynamic_nodes.DynamicNodes.sweep",
            ),
            _fault(
                "forget-persistent-nodes",
                "a dynamic node whose terminus never expires and is kept durably (expiry-"
                "policy never, durable configuration) is a temporary queue all the same: gone "
                "with its connection and at a restart",
                "Qpid Broker-J's DeleteOnCloseTest.dynamicNodeIsPersisted (3.5.5 / 3.5.6 "
                "read as a promise: the termdur model)",
                PROTOCOL_LAYER,
                "features.dynamic_nodes.DynamicNodes._persistent",
            ),
            _fault(
                "close-shared-subscription-with-links",
                "a durable shared topic subscription detached with closed=true while other "
                "links are still attached to it is removed all the same, without an error",
                "Qpid Broker-J's TopicDestinationTest.sharedGlobalDurableSubscriptionClose"
                "WithActiveLink (the JMS mapping's subscriptions: amqp:resource-locked)",
                PROTOCOL_LAYER,
                "features.topic_subscriptions.TopicSubscriptions.detached",
            ),
            _fault(
                "forget-durable-subscriptions",
                "a durable topic subscription (source expiry-policy never, durable "
                "configuration) is volatile all the same: gone with its last link, whether "
                "it detached with closed=false or not, and what the topic got meanwhile lost",
                "JMS 2.0 6.11.1 durable subscriptions as the AMQP JMS mapping makes them "
                "(Qpid Broker-J's TopicDestinationTest.sharedGlobalDurableSubscriptionLink"
                "AttachDetach)",
                PROTOCOL_LAYER,
                "features.topic_subscriptions.TopicSubscriptions._create",
            ),
            _fault(
                "sole-connection-weak-detection",
                "the broker reports strong sole-connection detection but lets a connection "
                "that does not ask for sole-connection-for-container through unchecked and "
                "uncounted (soleconn)",
                "OASIS soleconn v1.0 detection policy (a broker detecting weakly while it "
                "says strong; Qpid Broker-J's strongDetection tests check it)",
                PROTOCOL_LAYER,
                "features.sole_connection.SoleConnections.admit",
            ),
            _fault(
                "forget-unsettled-on-reattach",
                "a suspended consumer link attached again resumes its kept terminus but its "
                "attach carries a null unsettled map and its unsettled deliveries are never "
                "resumed (2.6.13, 2.6.3)",
                "2.6.3 / 2.6.13 link recovery (a broker that keeps the terminus and forgets "
                "its unsettled state; Qpid Broker-J's resume tests are disabled upstream)",
                PROTOCOL_LAYER,
                "features.recovery.Recovery.unsettled_map / plan",
            ),
            _fault(
                "accept-new-after-incomplete-map",
                "a publisher link resumed with an incomplete unsettled map (the broker's or "
                "the sender's) takes a transfer without resume as a new publish instead of "
                "detaching with an error (2.7.3 incomplete-unsettled)",
                "2.7.3 incomplete-unsettled, the receiving endpoint's MUST (Qpid Broker-J's "
                "ResumeDeliveriesTest.rejectNewDeliveryWhilstUnsettledIncomplete, disabled "
                "upstream)",
                PROTOCOL_LAYER,
                "protocol.delivery_handler.DeliveryHandler._resumed",
            ),
            _fault(
                "session-scoped-delivery-tags",
                "the broker remembers every delivery-tag its publishers used on a session and "
                "drops, never settling, a delivery whose tag it has seen on that session: "
                "the same tag on another link, or again after settlement (2.6.12 scopes a "
                "tag to the unsettled deliveries of one link)",
                "2.6.12 delivery-tag uniqueness (a receiver deduplicating by tag across its "
                "session; Qpid Broker-J's TransferTest checks both reuses are taken)",
                PROTOCOL_LAYER,
                "protocol.delivery_handler.DeliveryHandler.on_transfer",
            ),
            _fault(
                "report-unknown-filters",
                "the broker's attach echoes every filter of the receiver's source, those it "
                "does not apply too (3.5.3 filter, 2.6.3: report the terminus as created)",
                "3.5.3 filter (a broker that copies the source it was asked for into its "
                "attach; Qpid Broker-J's FilterTest.unsupportedFilter checks it)",
                PROTOCOL_LAYER,
                "features.filters.in_place",
            ),
            _fault(
                "properties-filter-ignores-subject",
                "an amqp:properties-filter is applied without its subject entry: messages "
                "with any subject pass (OASIS Filter Expressions 4.2.4)",
                "filtex 4.2.4 (an evaluator that skips one field of the expression)",
                PROTOCOL_LAYER,
                "features.filters.in_place",
            ),
            _fault(
                "selector-like-escape-ignored",
                "an amqp:sql-filter or JMS selector LIKE pattern is compiled without its "
                "ESCAPE character: an escaped % or _ stays a wildcard (Jakarta Messaging "
                "3.8.1.1 LIKE)",
                "JMS selector LIKE ... ESCAPE (an evaluator that drops the ESCAPE clause)",
                PROTOCOL_LAYER,
                "features.selectors.compile_expression",
            ),
            _fault(
                "attach-without-initial-delivery-count",
                "the broker's attach for a link it sends on has no initial-delivery-count (2.7.3)",
                "2.7.3 attach initial-delivery-count (a sender leaving the default unset)",
                WIRE_LAYER,
                "faults.wire.editor: attach of a sending link",
            ),
            _fault(
                "attach-unsettled-null-key",
                "the broker's attaches carry an unsettled map with a null key (2.7.3)",
                "2.7.3 attach unsettled (a map keyed by a delivery-tag that was never set)",
                WIRE_LAYER,
                "faults.wire.editor: every attach",
            ),
            _fault(
                "transfer-without-message-format",
                "the first transfer of each delivery the broker sends has no message-format "
                "(2.7.5)",
                "2.7.5 transfer message-format (an encoder dropping the default 0)",
                WIRE_LAYER,
                "faults.wire.editor: first transfer of a delivery",
            ),
            _fault(
                "txn-post-immediately",
                "a transactional transfer is enqueued on arrival: the message is available "
                "before the discharge and a rollback keeps it (4.4.1)",
                "4.4.1 (a resource that publishes a transfer at once, ignoring its "
                "transactional-state)",
                PROTOCOL_LAYER,
                "features.transactions.Transactions.post",
            ),
            _fault(
                "txn-discharge-unknown-accepted",
                "a discharge naming a txn-id that was never declared (or is already "
                "discharged) is accepted instead of refused with amqp:transaction:unknown-id",
                "4.3 / 4.5.8 (a coordinator that answers every discharge with accepted)",
                PROTOCOL_LAYER,
                "features.transactions.Transactions._discharge",
            ),
            _fault(
                "txn-timeout-never-fires",
                "the transaction timeout (--transaction-timeout, or the connection's through "
                "the admin API) is never applied: a transaction outlives it and commits",
                "4.5.8 transaction-timeout (a resource that configures a timeout and never "
                "times a transaction out)",
                PROTOCOL_LAYER,
                "features.transactions.Transactions._declare",
            ),
            _fault(
                "durable-messages-in-memory",
                "a durable queue confirms each publish without writing it to the store: "
                "accepted durable messages are gone after a restart (3.2.1)",
                "3.2.1 durable (a broker that acknowledges before, or instead of, the write "
                "to disk; what bench/overload/kill_soak.py looks for)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue.publish",
            ),
            _fault(
                "keep-publishers-of-deleted-nodes",
                "a sender whose target queue or exchange is deleted stays attached: its "
                "messages released (queue) or rejected with amqp:not-found (exchange), the "
                "link never detached (2.6.5; RabbitMQ 4 detaches it)",
                "RabbitMQ 4's amqp_client_SUITE server_closes_link_exchange_* and "
                "link_target_queue_deleted (the publisher detached when its node is deleted); "
                "this broker before features/deleted_targets.py",
                PROTOCOL_LAYER,
                "protocol.context.BrokerContext._on_vhost_event",
            ),
            _fault(
                "accept-durable-on-volatile",
                "a volatile queue (x-amqpspec-volatile) accepts messages with header "
                "durable=true, which it cannot keep across a restart (3.2.1 MUST NOT)",
                "3.2.1 header durable (Qpid Broker-J's TransferTest.durableTransferWith"
                "RejectedOutcome / WithoutRejectedOutcome; a broker whose non-durable nodes "
                "take durable messages)",
                PROTOCOL_LAYER,
                "protocol.delivery_handler.DeliveryHandler._refused_durable",
            ),
            _fault(
                "consume-on-delivery",
                "a durable message is written off in the store when it is sent to a "
                "consumer, not when the consumer settles it: a delivery still unsettled at "
                "a restart is gone (3.2.1)",
                "3.2.1 durable (a broker that records the consumption at delivery, not at "
                "the consumer's outcome)",
                QUEUE_LAYER,
                "queues.classic.ClassicQueue._deliver_round_robin",
            ),
        )
    }
)


class UnknownFaultError(ValueError):
    """A --fault name that is not in CATALOG."""

    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(CATALOG))
        super().__init__(f"unknown fault {name!r}; known faults: {known}")
        self.name = name


class Faults:
    """An immutable set of enabled faults with one boolean attribute per catalog entry."""

    __slots__ = ("_enabled", *sorted(info.attribute for info in CATALOG.values()))

    def __init__(self, names: Iterable[str] = ()) -> None:
        enabled = frozenset(names)
        for name in enabled:
            if name not in CATALOG:
                raise UnknownFaultError(name)
        for info in CATALOG.values():
            object.__setattr__(self, info.attribute, info.name in enabled)
        object.__setattr__(self, "_enabled", enabled)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Faults is immutable")

    def endpoint_policy(self, *, auto_echo: bool = True) -> EndpointPolicy:
        """The broker engine's `EndpointPolicy`: every rule kept except those an enabled
        fault relaxes (its catalog entry's `relaxes`) to reach the wire."""
        relaxed = {CATALOG[name].relaxes for name in self._enabled}
        return EndpointPolicy(
            enforce_window="enforce_window" not in relaxed,
            check_credit="check_credit" not in relaxed,
            auto_echo=auto_echo,
        )

    @property
    def parser(self) -> bool:
        """Any parser-layer fault on (the connection then shows it every engine event)."""
        return any(CATALOG[name].layer == PARSER_LAYER for name in self._enabled)

    @property
    def wire(self) -> bool:
        """Any wire-layer fault on (the connection's outgoing frames then go through
        wire_faults.editor)."""
        return any(CATALOG[name].layer == WIRE_LAYER for name in self._enabled)

    @property
    def enabled(self) -> frozenset[str]:
        return self._enabled

    def __contains__(self, name: object) -> bool:
        return name in self._enabled

    def __bool__(self) -> bool:
        return bool(self._enabled)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Faults) and other._enabled == self._enabled

    def __hash__(self) -> int:
        return hash(self._enabled)

    def __repr__(self) -> str:
        return f"Faults({sorted(self._enabled)!r})"


NO_FAULTS = Faults()


def parse_faults(values: Iterable[str]) -> Faults:
    """Parse repeated `--fault NAME` values (also accepting comma-separated lists)."""
    names: list[str] = []
    for value in values:
        names.extend(part.strip() for part in value.split(",") if part.strip())
    return Faults(names)


def describe_catalog() -> str:
    """One line per fault, for `--fault help` and the docs."""
    width = max(len(name) for name in CATALOG)
    return "\n".join(
        f"{info.name:<{width}}  [{info.layer}] {info.description} ({info.origin})"
        for info in CATALOG.values()
    )
