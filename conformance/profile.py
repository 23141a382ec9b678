"""Broker profiles: what the suite may assume about the broker under test (TOML data).

Owns: `Profile` (address templates, capabilities, connection settings, admin adapter and
timeouts) and `load_profile(name_or_path)`, which reads `conformance/profiles/<name>.toml`
or any TOML file path. A new broker needs a new file only, never code. Touches nothing
else. Capability names are lower-case with hyphens (e.g. `drain-reply`).

File layout (every table optional except `name`):

    name = "mybroker"
    description = "..."
    model = "rabbitmq4"        # the model(s) of behaviour beyond the spec it claims (MODELS;
                               # a string or a list; none by default)
    [connection]   sasl = "PLAIN" | "ANONYMOUS" | "none"; username; password; hostname
    [addresses]    queue_source, queue_target ("{queue}"), exchange_target ("{exchange}",
                   "{key}"), unroutable_target, topic_source (the topic a JMS subscription
                   is made on); declare_queues = true|false
    [capabilities] <name> = true|false ...   (see CAPABILITIES)
    [limits]       max_frame_size, channel_max, handle_max, idle_timeout_ms,
                   handshake_timeout_ms, sasl_timeout_ms (broker's)
    [admin]        adapter = "rabbitmq-http" | "management-node" | "rabbitmqctl" | "none";
                   url (http://, or amqp:// for management-node: default the broker's);
                   alarm = "http" | "rabbitmqctl"; restart = "http" (the reference
                   broker's POST /api/restart) | "none"; rabbitmqctl = command; env_script = path
    [timeouts]     wait (seconds per wait), case_budget (seconds per case), transaction
                   (seconds after its declare the broker times a transaction out: the
                   one it is configured with, or the one the admin adapter sets for the
                   case's connection; with the transaction-timeout capability)
    [jobs]         concurrent = [case ids]: cases registered `serial` because other brokers
                   race beside them, which this broker runs beside others under --jobs N;
                   beside_serial = [case ids]: cases this broker runs while the serial ones
                   do (nothing those change on it reaches them)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

PROFILE_DIR = Path(__file__).parent / "profiles"

# Every capability a case may require, with what it means.
CAPABILITIES: dict[str, str] = {
    "queues": "named queues reachable through the queue address templates",
    "declare-queues": "the admin adapter can declare and delete queues",
    "queue-depth": "the admin adapter can report a queue's depth",
    "drain-reply": "a drain request is answered with a flow (2.6.7)",
    "echo": "a flow with echo=true is answered (2.7.4)",
    "available": "the broker reports `available` on its sender flows",
    "requeue-on-detach": "unsettled deliveries return to the queue when a link goes away",
    "redelivery-marks": "redelivered messages carry header delivery-count / first-acquirer",
    "unsettled-deliveries": "the broker sends deliveries unsettled (at-least-once)",
    "exchanges": "exchange addresses route messages",
    "released-unroutable": "an unroutable message is answered with released",
    "rejected-outcome": "a rejected delivery is dead-lettered or dropped, not redelivered",
    "modified-outcome": "modified outcomes are honoured",
    "alarms": "the admin adapter can raise/clear a resource alarm",
    "sasl-anonymous": "SASL ANONYMOUS is accepted",
    "sasl-plain": "SASL PLAIN is accepted",
    "heartbeats": "the broker sends empty frames within our idle-time-out",
    "window-enforced": "transfers beyond the session window end the session",
    "multi-frame": "deliveries larger than max-frame-size are accepted and delivered",
    "sender-spends-credit": "a sender's flow that spends its link-credit (delivery-count "
    "advanced, 2.6.7) leaves the broker granting credit to other links",
    "empty-transfer": "a transfer carrying no payload at all (no message section) leaves "
    "the broker serving other connections",
    "streams": "stream queues (x-queue-type stream, declared through the admin adapter) read "
    "from the rabbitmq:stream-offset-spec filter's offset",
    "quorum": "quorum queues (x-queue-type quorum, declared through the admin adapter): "
    "x-delivery-limit counted by the header delivery-count, dead-lettering at the limit and "
    "on rejected",
    "user-admin": "the admin adapter can create a user without rights and delete it "
    "(restricted_user / delete_user)",
    "anonymous-terminus": "a sender attached with a null target is routed per message by its "
    "`to` (the anonymous terminus; RabbitMQ 4's v2 `to` addresses)",
    "sole-connection": "the broker enforces one connection per client container-id when "
    "asked (OASIS soleconn v1.0: sole-connection-for-container offered in its open, the "
    "refuse-connection and close-existing enforcement policies)",
    "properties-filter": "the OASIS AMQP Filter Expressions property filters "
    "(amqp:properties-filter, amqp:application-properties-filter) in a receiver's source "
    "filter-set on a stream queue (RabbitMQ 4.1+)",
    "sql-filter": "the OASIS AMQP Filter Expressions SQL filter (amqp:sql-filter, 0x120) in "
    "a receiver's source filter-set on a stream queue (RabbitMQ 4.2+)",
    "topic-subscriptions": "the AMQP JMS mapping's topic subscriptions: a receiver whose "
    "source carries the topic capability on the profile's topic_source subscribes to it, "
    "durable (expiry-policy never) or volatile, shared by link name (sub|global) when "
    "SHARED-SUBS is offered",
    "selector-filter": "the JMS selector filter (apache.org:selector-filter:string) in a "
    "receiver's source filter-set on a queue (Qpid Broker-J, ActiveMQ Artemis): the "
    "receiver is handed the messages the selector accepts, the others stay queued",
    "link-recovery": "a source with expiry-policy never outlives its link (detach with "
    "closed=false) and its connection with its unsettled deliveries, and the same link "
    "attached again resumes them (2.6.13)",
    "transaction-timeout": "local transactions (Part 4) time out: rolled back by the broker "
    "[timeouts] transaction seconds after their declare (amqp:transaction:timeout, 4.5.8)",
    "restart": "the admin adapter can restart the broker (stop it, start it again on the "
    "same ports and data, wait until it listens): the durability cases (3.2.1)",
    "websocket": "AMQP over WebSocket (OASIS AMQP WebSocket Binding v1.0, subprotocol amqp): "
    "the binding's cases run when the run's --broker is a ws:// or wss:// URL",
    "volatile-queues": "the admin adapter declares a queue that cannot keep durable messages "
    "(queue argument x-amqpspec-volatile = true: the reference broker's volatile queue), "
    "which 3.2.1 forbids to accept a message with header durable=true",
    "management-node": "RabbitMQ 4's /management node (HTTP-over-AMQP on a link pair) on the "
    "AMQP port: queues declared exclusive to the asking connection, 409 to a conflicting "
    "redeclaration",
}


# Models of behaviour the spec does not require, which MODEL cases check (a broker that
# behaves otherwise is DIFFERS, never FAILED); a profile claims the ones its broker's own
# documentation promises (`model = "rabbitmq4"`), and `amqpspec run --gate-differs` then
# fails the run on a DIFFERS of a claimed model.
MODELS: dict[str, str] = {
    "rabbitmq4": "RabbitMQ 4's documented AMQP 1.0 behaviour where the spec leaves it open: "
    "unsettled deliveries return to the queue when their link, session or connection goes "
    "away (released as the source's default outcome), a rejected message leaves the queue, "
    "resource alarms block publishers through session flow control (a flow with "
    "incoming-window 0 on every publishing session, reopened when the alarm clears) and "
    "everything else keeps working, transfers beyond the session's incoming-window end it "
    "with amqp:session:window-violation, a flow with echo=true is answered, a client "
    "silent in the middle of SASL has its connection closed when the broker's handshake "
    "(or SASL) time-out expires, a user without rights is refused a link or its message "
    "with amqp:unauthorized-access, and a message whose sections break 3.2's order or "
    "cannot be decoded is refused with amqp:decode-error",
    "filtex": "OASIS 'AMQP Filter Expressions' v1.0 (CSD01) property filters, which a "
    "broker claims with the properties-filter capability: a receiver whose source carries "
    "amqp:properties-filter / amqp:application-properties-filter gets exactly the messages "
    "whose fields match every entry (filtex 4.1.1, 4.2.4, 4.2.5)",
    "filtex-sql": "OASIS 'AMQP Filter Expressions' v1.0 (CSD01) SQL filter, which a broker "
    "claims with the sql-filter capability: a receiver whose source carries amqp:sql-filter "
    "gets exactly the messages its expression selects by the JMS selector rules it takes "
    "over (Jakarta Messaging 3.1 section 3.8.1: three-valued logic, LIKE with ESCAPE, "
    "BETWEEN, IN, IS NULL, arithmetic; header. and properties. fields)",
    "jms-selector": "the JMS selector filter (apache.org:selector-filter:string, Qpid's AMQP "
    "filter registry), which a broker claims with the selector-filter capability: a "
    "receiver gets exactly the messages its selector selects (Jakarta Messaging 3.1 section "
    "3.8.1), JMS header fields read as the AMQP JMS mapping maps them",
    "wsb": "OASIS 'AMQP WebSocket Binding (WSB)' v1.0 (CS01, 2016), which a broker claims by "
    "serving AMQP over WebSocket: the upgrade names the subprotocol amqp (one without it is "
    "refused), the AMQP byte stream travels in binary messages whatever their boundaries "
    "(a frame split across many messages, many frames in one), a text message is refused",
    "txn-timeout": "a transaction timeout, which a broker claims with the "
    "transaction-timeout capability: a local transaction (Part 4) still live [timeouts] "
    "transaction seconds after its declare is rolled back when the time comes, its work "
    "undone (a retirement's message back at its queue), and its commit refused with "
    "amqp:transaction:timeout (4.5.8: 'The work represented by this transaction took too "
    "long'), or its control link or connection ended with that error (Qpid Broker-J closes "
    "the connection)",
    "anonterm": "OASIS 'Using the AMQP Anonymous Terminus for Message Routing' v1.0 (CS01, "
    "2018), which a broker claims by offering ANONYMOUS-RELAY in its open: a sender with a "
    "null target has each message routed to the node its properties.to names",
    "scram": "RFC 7677 SCRAM-SHA-256 (the SCRAM of RFC 5802), which a broker claims by "
    "offering the mechanism in its sasl-mechanisms: our sasl-init's client-first is answered "
    "with a sasl-challenge (server-first, extending our nonce), a response with the right "
    "proof gets sasl-outcome ok whose additional-data is the server's signature, one with a "
    "wrong proof is refused (RFC 5802 3, 5)",
    "jms-temporary": "the AMQP JMS mapping's temporary destinations (bindmap-jms working draft "
    "5.3, as Qpid Broker-J's TemporaryDestinationTest checks them), which a broker claims by "
    "echoing temporary-queue or temporary-topic in the dynamic target it creates: only the "
    "creating connection may receive from the node (another's receiver is refused with "
    "amqp:resource-locked, JMS 2.0 6.2.2), any connection may send to it",
    "jms-topics": "the AMQP JMS mapping's topic subscriptions (bindmap-jms working draft, as "
    "Qpid JMS and Qpid Broker-J's TopicDestinationTest use them), which a broker claims with "
    "the topic-subscriptions capability: a receiver with source capability topic is "
    "attached as the subscription's sender; shared ones (capabilities shared, global) are "
    "named by the link name up to its first |; a durable one (expiry-policy never, durable "
    "configuration) outlives links detached with closed=false, is found again by a "
    "null-source attach of its link name and removed by a detach with closed=true, which "
    "is refused with amqp:resource-locked while another link is attached",
    "termdur": "terminus-durability (3.5.5) and terminus-expiry-policy (3.5.6), which state "
    "without a normative word what is kept, read as a promise: a dynamic node asked for by a "
    "terminus with expiry-policy never and durable configuration (or unsettled-state), which "
    "the broker reports back as created, outlives its connection (the link is suspended, its "
    "terminus never expires) and a broker restart (its existence is retained durably), as "
    "Qpid Broker-J's DeleteOnCloseTest.dynamicNodeIsPersisted checks",
    "soleconn": "OASIS 'AMQP Enforcing Connection Uniqueness' v1.0 (CS01, 2018), which a "
    "broker claims with the sole-connection capability: sole-connection-for-container "
    "offered in its open, a second connection of a client container-id refused "
    "(refuse-connection) or the first closed (close-existing), as Qpid Broker-J's soleconn "
    "tests check it",
}

ADMIN_ADAPTERS = ("rabbitmq-http", "management-node", "rabbitmqctl", "none")


@dataclass(frozen=True, slots=True)
class AdminSettings:
    adapter: str = "none"
    url: str | None = None
    alarm: str = "http"
    restart: str = "none"  # "http": POST /api/restart (the reference broker's, in place)
    rabbitmqctl: str = "/usr/lib/rabbitmq/bin/rabbitmqctl"
    env_script: str | None = None


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    description: str = ""
    sasl: str = "PLAIN"
    username: str | None = "guest"
    password: str | None = "guest"
    hostname: str | None = None
    queue_source: str = "{queue}"
    queue_target: str = "{queue}"
    exchange_target: str | None = None
    unroutable_target: str | None = None
    topic_source: str | None = None  # a topic subscriptions are made on (cases/s3_5_jms_topics.py)
    declare_queues: bool = False
    capabilities: frozenset[str] = frozenset()
    limits: dict[str, int] = field(default_factory=dict)
    admin: AdminSettings = AdminSettings()
    wait: float = 5.0
    case_budget: float = 60.0
    transaction_timeout: float | None = None  # [timeouts] transaction
    concurrent: frozenset[str] = frozenset()  # [jobs] concurrent: serial cases run beside
    beside_serial: frozenset[str] = frozenset()  # [jobs] beside_serial: run with serial ones
    models: frozenset[str] = frozenset()  # `model`: the MODELS it claims
    path: str = ""

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def claims(self, model: str | None) -> bool:
        """The profile claims `model` (its broker's documentation promises it)."""
        return model is not None and model in self.models

    def source(self, queue: str) -> str:
        return self.queue_source.format(queue=quote(queue, safe=""))

    def target(self, queue: str) -> str:
        return self.queue_target.format(queue=quote(queue, safe=""))

    def exchange(self, exchange: str, key: str) -> str:
        if self.exchange_target is None:
            raise KeyError("profile has no exchange_target")
        return self.exchange_target.format(
            exchange=quote(exchange, safe=""), key=quote(key, safe="")
        )


class ProfileError(ValueError):
    pass


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a TOML file by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml" or not path.exists():
        path = PROFILE_DIR / f"{name_or_path}.toml"
    if not path.exists():
        raise ProfileError(
            f"no profile {name_or_path!r} (shipped: {', '.join(available_profiles())}; "
            "or give a path to a .toml file)"
        )
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    return profile_from_dict(data, str(path))


def profile_from_dict(data: dict[str, Any], path: str = "") -> Profile:
    if "name" not in data:
        raise ProfileError(f"{path}: a profile needs a name")
    conn = data.get("connection", {})
    addresses = data.get("addresses", {})
    caps = data.get("capabilities", {})
    unknown = sorted(set(caps) - set(CAPABILITIES))
    if unknown:
        raise ProfileError(f"{path}: unknown capabilities {unknown}; known: {sorted(CAPABILITIES)}")
    admin = data.get("admin", {})
    if admin.get("adapter", "none") not in ADMIN_ADAPTERS:
        raise ProfileError(f"{path}: admin adapter must be one of {', '.join(ADMIN_ADAPTERS)}")
    timeouts = data.get("timeouts", {})
    claimed = data.get("model", [])
    claimed = [claimed] if isinstance(claimed, str) else list(claimed)
    unknown_models = sorted(set(claimed) - set(MODELS))
    if unknown_models:
        raise ProfileError(f"{path}: unknown model {unknown_models}; known: {sorted(MODELS)}")
    return Profile(
        name=data["name"],
        description=data.get("description", ""),
        sasl=conn.get("sasl", "PLAIN"),
        username=conn.get("username"),
        password=conn.get("password"),
        hostname=conn.get("hostname"),
        queue_source=addresses.get("queue_source", "{queue}"),
        queue_target=addresses.get("queue_target", "{queue}"),
        exchange_target=addresses.get("exchange_target"),
        unroutable_target=addresses.get("unroutable_target"),
        topic_source=addresses.get("topic_source"),
        declare_queues=bool(addresses.get("declare_queues", False)),
        capabilities=frozenset(name for name, on in caps.items() if on),
        limits=dict(data.get("limits", {})),
        admin=AdminSettings(**admin),
        wait=float(timeouts.get("wait", 5.0)),
        case_budget=float(timeouts.get("case_budget", 60.0)),
        transaction_timeout=(float(timeouts["transaction"]) if "transaction" in timeouts else None),
        concurrent=frozenset(data.get("jobs", {}).get("concurrent", [])),
        beside_serial=frozenset(data.get("jobs", {}).get("beside_serial", [])),
        models=frozenset(claimed),
        path=path,
    )
