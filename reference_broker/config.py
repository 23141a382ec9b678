"""Broker configuration: every option of `amqpspec broker`, from TOML and the command line.

Owns: the `BrokerConfig` / `Limits` / `User` dataclasses, their defaults (RabbitMQ 4's where
it has one), loading a TOML file, the argparse options and CLI overrides (CLI wins over
the file, the file over the defaults). Touches nothing else.

TOML layout (every key optional)::

    host = "127.0.0.1"
    port = 5672
    admin_port = 15672          # 0 = any free port, -1 = no admin API
    data_dir = "/var/lib/amqpspec-broker"
    log_level = "info"
    faults = ["ignore-drain"]
    sasl_anonymous = "loopback"   # "loopback" | "always" | "never"
    loopback_users = ["guest"]
    tls_cert = "cert.pem"
    tls_key = "key.pem"
    tls_ca = "ca.pem"             # verify client certificates: SASL EXTERNAL, user = the CN
    tls_port = 5671
    ws_port = 15673               # AMQP over WebSocket (runtime/websocket.py); -1 = none (default)
    ws_path = "/"
    ws_tls = false                # true: wss:// with tls_cert / tls_key
    idle_timeout = 60             # seconds advertised in open.idle-time-out; 0 = none
    settle_second = true          # rcv-settle-mode second for publishers asking for it
    [users.guest]
    password = "guest"
    tags = ["administrator"]
    [users.reader]                # configure / write / read regexes on vhost "/"
    password = "secret"
    tags = []
    permissions = { configure = "^$", write = "^$", read = "^orders$" }
    [limits]
    max_frame_size = 131072
    channel_max = 64              # sessions per connection
    handle_max = 256              # links per session
    handshake_timeout = 10.0      # seconds from TCP accept to the client's open; 0 = none
    sasl_timeout = 0.0            # seconds from the SASL header to its outcome; 0 = none
    transaction_timeout = 0.0     # seconds a transaction may live; 0 = none
    ...
    [alarms]
    memory_high_watermark = 0.4          # fraction of RAM, or
    memory_high_watermark_bytes = 0      # absolute (wins when > 0)
    disk_free_limit_bytes = 50000000
    check_interval = 0.2                 # seconds between memory/disk readings
"""

from __future__ import annotations

import argparse
import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .faults.catalog import Faults, parse_faults
from .protocol.permissions import FULL, NOTHING, Permissions

LOG_LEVELS = ("debug", "info", "warning", "error")
ANONYMOUS_MODES = ("loopback", "always", "never")
# idle-time-out is a uint of milliseconds, and the threshold we enforce is twice it
MAX_IDLE_TIME_OUT_MS = 0x7FFFFFFF


class ConfigError(ValueError):
    """An invalid option value or config file."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    password: str
    tags: tuple[str, ...] = ("administrator",)
    # configure / write / read regexes on vhost "/" (RabbitMQ-style; default: everything)
    permissions: Permissions = FULL


@dataclass(frozen=True, slots=True)
class Limits:
    max_frame_size: int = 131072  # open.max-frame-size (2.7.1); minimum 512
    channel_max: int = 64  # sessions per connection (RabbitMQ session_max_per_connection)
    handle_max: int = 256  # links per session (RabbitMQ link_max_per_session)
    max_message_size: int = 16 * 1024 * 1024  # -> amqp:link:message-size-exceeded
    max_incoming_window: int = 400  # session incoming-window, frames (2.5.6)
    max_link_credit: int = 170  # credit granted to publishers, re-granted below half
    max_queue_credit: int = 256
    max_unconfirmed: int = 1000  # no re-grant while this many publishes await confirm
    # our open.idle-time-out (0 = none, never expire); a peer silent for twice this is
    # closed with amqp:resource-limit-exceeded (2.4.5: advertise half the real threshold)
    idle_time_out_ms: int = 60_000
    alarm_window_margin: int = 400  # transfers tolerated after incoming-window 0
    admin_max_body: int = 1 << 20  # admin API request body, bytes (413 beyond)
    # seconds: an admin connection idle this long, or a request head not complete, is closed;
    # a request body not complete within it gets 408 (admin/http_server.py)
    admin_timeout: float = 30.0
    # open connections in all / per user (0 = no limit); beyond: open then close with
    # amqp:resource-limit-exceeded (RabbitMQ's connection_max, per-user max-connections)
    max_connections: int = 0
    max_connections_per_user: int = 0
    # seconds from TCP accept to the peer's open (0 = no bound); beyond it the connection
    # is closed: with open + close (amqp:resource-limit-exceeded) once the AMQP protocol
    # headers were exchanged, with a bare TCP close before (RabbitMQ's handshake_timeout)
    handshake_timeout: float = 10.0
    # seconds from the client's SASL header to the SASL outcome (0 = no bound, the handshake
    # time-out alone); beyond it a TCP close (5.3 has no close frame; Qpid Broker-J's
    # authentication timeout)
    sasl_timeout: float = 0.0
    # seconds a transaction may live before its commit is refused with
    # amqp:transaction:timeout (4.5.8; 0 = none): reference_broker/features/transactions.py
    transaction_timeout: float = 0.0

    @property
    def link_credit_regrant_below(self) -> int:
        return self.max_link_credit // 2


@dataclass(frozen=True, slots=True)
class AlarmConfig:
    memory_high_watermark: float = 0.4  # fraction of physical memory
    memory_high_watermark_bytes: int = 0  # absolute; wins over the fraction when > 0
    disk_free_limit_bytes: int = 50_000_000  # RabbitMQ's default 50 MB
    check_interval: float = 0.2  # at 100 MB/s a 1 s interval let 100 MB past the watermark

    def memory_limit(self, total_memory: int) -> int:
        if self.memory_high_watermark_bytes > 0:
            return self.memory_high_watermark_bytes
        return int(total_memory * self.memory_high_watermark)


DEFAULT_USERS: tuple[User, ...] = (User("guest", "guest"),)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 5672
    admin_host: str = "127.0.0.1"
    admin_port: int = 15672
    data_dir: str | None = None  # None: no durable storage (everything in memory)
    config_file: str | None = None
    log_level: str = "info"
    users: tuple[User, ...] = DEFAULT_USERS
    loopback_users: tuple[str, ...] = ("guest",)
    sasl_anonymous: str = "loopback"
    # RabbitMQ 4's anonymous_login_user: whose permissions a SASL ANONYMOUS client gets
    anonymous_login_user: str = "guest"
    tls_cert: str | None = None
    tls_key: str | None = None
    # CA certificates (PEM) for client certificates: with it the amqps listener asks for
    # one and offers SASL EXTERNAL, whose user is the certificate's subject CN
    tls_ca: str | None = None
    tls_port: int = 5671
    # AMQP over WebSocket (runtime/websocket.py): -1 = no WebSocket listener, 0 = any free port
    ws_port: int = -1
    ws_path: str = "/"
    ws_tls: bool = False  # the WebSocket listener over TLS (wss://) with tls_cert / tls_key
    fsync: bool = True
    # rcv-settle-mode second for publishers asking for it (2.8.3,
    # features/publisher_recovery.py); False: every publisher gets first
    settle_second: bool = True
    faults: Faults = field(default_factory=Faults)
    limits: Limits = field(default_factory=Limits)
    alarms: AlarmConfig = field(default_factory=AlarmConfig)
    # users created through the admin API (PUT /api/users/{name}): in memory only, looked up
    # before `users`, gone at restart; the one mutable part of the config
    runtime_users: dict[str, User] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check(self.log_level in LOG_LEVELS, f"log_level must be one of {LOG_LEVELS}")
        _check(self.sasl_anonymous in ANONYMOUS_MODES, f"sasl_anonymous: one of {ANONYMOUS_MODES}")
        _check(0 <= self.port <= 65535, "port must be 0..65535")
        _check(-1 <= self.admin_port <= 65535, "admin_port must be -1..65535")
        _check(-1 <= self.ws_port <= 65535, "ws_port must be -1..65535")
        _check(self.ws_path.startswith("/"), "ws_path must start with /")
        _check(not self.ws_tls or self.tls_cert is not None, "ws_tls needs tls_cert and tls_key")
        _check(self.limits.max_frame_size >= 512, "max_frame_size must be at least 512 (2.7.1)")
        _check(1 <= self.limits.channel_max <= 65535, "channel_max must be 1..65535")
        _check(self.limits.handle_max >= 1, "handle_max must be at least 1")
        _check(self.limits.max_link_credit >= 1, "max_link_credit must be at least 1")
        _check(self.limits.max_incoming_window >= 1, "max_incoming_window must be at least 1")
        _check(
            0 <= self.limits.idle_time_out_ms <= MAX_IDLE_TIME_OUT_MS,
            "idle timeout must be 0 (none) .. 2147483 s (open.idle-time-out: milliseconds)",
        )
        _check(self.limits.admin_timeout > 0, "admin_timeout must be positive (seconds)")
        _check(self.limits.handshake_timeout >= 0, "handshake_timeout must be >= 0 (seconds)")
        _check(self.limits.sasl_timeout >= 0, "sasl_timeout must be >= 0 (seconds)")
        _check(self.limits.transaction_timeout >= 0, "transaction_timeout must be >= 0 (seconds)")
        _check((self.tls_cert is None) == (self.tls_key is None), "tls_cert needs tls_key")
        _check(self.tls_ca is None or self.tls_cert is not None, "tls_ca needs tls_cert")

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def user(self, name: str) -> User | None:
        if name in self.runtime_users:
            return self.runtime_users[name]
        for user in self.users:
            if user.name == name:
                return user
        return None

    def permissions_of(self, name: str | None) -> Permissions:
        """An authenticated user's permissions. SASL ANONYMOUS ("anonymous" or None) gets
        those of `anonymous_login_user` (everything when no such user is configured, as
        before permissions existed); a name no user has gets nothing."""
        if name is None or name == "anonymous":
            login = self.user(self.anonymous_login_user)
            return login.permissions if login is not None else FULL
        user = self.user(name)
        return user.permissions if user is not None else NOTHING

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


# ---------------------------------------------------------------------- TOML
def _users_from(table: Mapping[str, Any]) -> tuple[User, ...]:
    users = []
    for name, entry in table.items():
        if not isinstance(entry, Mapping) or "password" not in entry:
            raise ConfigError(f"users.{name} needs a password")
        try:
            permissions = Permissions(**dict(entry.get("permissions", {})))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"users.{name}.permissions: {exc}") from None
        tags = tuple(entry.get("tags", ("administrator",)))
        users.append(User(name, str(entry["password"]), tags, permissions))
    return tuple(users)


def _section(cls: type, table: Mapping[str, Any], where: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"unknown option(s) in [{where}]: {', '.join(sorted(unknown))}")
    return cls(**table)


# the command-line options that set the top-level key of their name as given
_PLAIN_OPTIONS = (
    "host",
    "port",
    "admin_host",
    "admin_port",
    "data_dir",
    "tls_cert",
    "tls_key",
    "tls_ca",
    "tls_port",
    "ws_port",
    "ws_path",
    "ws_tls",
    "log_level",
)
_TOP_LEVEL = {
    *_PLAIN_OPTIONS,
    "loopback_users",
    "sasl_anonymous",
    "anonymous_login_user",
    "fsync",
    "settle_second",
    "faults",
    "users",
    "limits",
    "alarms",
    "idle_timeout",
}


def idle_timeout_ms(seconds: Any) -> int:
    """`--idle-timeout` / `idle_timeout` (seconds, fractions allowed) -> milliseconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise ConfigError(f"idle timeout: seconds >= 0 (0 = none), got {seconds!r}")
    return round(seconds * 1000)


def from_mapping(data: Mapping[str, Any], base: BrokerConfig | None = None) -> BrokerConfig:
    unknown = set(data) - _TOP_LEVEL
    if unknown:
        raise ConfigError(f"unknown option(s): {', '.join(sorted(unknown))}")
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key == "idle_timeout":
            continue  # applied to the limits below, after a [limits] table
        if key == "users":
            changes["users"] = _users_from(value)
        elif key == "limits":
            changes["limits"] = _section(Limits, value, "limits")
        elif key == "alarms":
            changes["alarms"] = _section(AlarmConfig, value, "alarms")
        elif key == "faults":
            changes["faults"] = parse_faults(value)
        elif key == "loopback_users":
            changes["loopback_users"] = tuple(value)
        else:
            changes[key] = value
    if "idle_timeout" in data:
        limits = changes.get("limits", (base or BrokerConfig()).limits)
        changes["limits"] = dataclasses.replace(
            limits, idle_time_out_ms=idle_timeout_ms(data["idle_timeout"])
        )
    try:
        return dataclasses.replace(base or BrokerConfig(), **changes)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def load_toml(path: str | Path, base: BrokerConfig | None = None) -> BrokerConfig:
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return from_mapping(data, base).replace(config_file=str(path))


# ---------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `amqpspec broker`; every default is None so only given ones override."""
    add = parser.add_argument
    add("--host", help="AMQP listen address (default 127.0.0.1)")
    add("--port", type=int, help="AMQP port (default 5672)")
    add("--admin-host", help="admin HTTP API listen address (default 127.0.0.1)")
    add("--admin-port", type=int, help="admin HTTP API port (default 15672; -1 = off)")
    add("--data-dir", help="directory for durable queues (default: in memory only)")
    add("--config", dest="config_file", help="TOML config file")
    add(
        "--user",
        action="append",
        default=None,
        metavar="NAME:PASSWORD",
        help="add a user (repeatable); replaces the users of the config file",
    )
    add("--tls-cert", help="TLS certificate (PEM) for amqps")
    add("--tls-key", help="TLS private key (PEM)")
    add(
        "--tls-ca",
        help="CA certificates (PEM) for client certificates: amqps asks for one and offers "
        "SASL EXTERNAL (the user is the certificate's CN)",
    )
    add("--tls-port", type=int, help="amqps port (default 5671)")
    add(
        "--ws-port",
        type=int,
        help="AMQP over WebSocket port (OASIS WebSocket binding, subprotocol amqp; default -1 "
        "= none, 0 = any free port)",
    )
    add("--ws-path", help="the WebSocket listener's path (default /)")
    add(
        "--ws-tls",
        action="store_true",
        default=None,
        help="serve the WebSocket listener over TLS (wss://) with --tls-cert / --tls-key",
    )
    add("--log-level", choices=LOG_LEVELS)
    add(
        "--fault",
        action="append",
        default=None,
        metavar="NAME",
        help="switch on a deliberate bug (repeatable; 'help' lists them)",
    )
    add("--no-fsync", action="store_true", default=None, help="skip fsync (unsafe; benchmarks)")
    add(
        "--no-settle-second",
        action="store_true",
        default=None,
        help="answer every publisher with rcv-settle-mode first, also one asking for second",
    )
    add_limit_arguments(parser)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The limits and resource alarms of `amqpspec broker` (after the other options, in the
    same group of --help)."""
    add = parser.add_argument
    add("--max-frame-size", type=int)
    add(
        "--channel-max",
        type=int,
        metavar="N",
        help="sessions per connection (default 64): open.channel-max N-1; a begin on a "
        "higher channel closes the connection with amqp:connection:framing-error (2.7.1)",
    )
    add(
        "--handle-max",
        type=int,
        metavar="N",
        help="links per session (default 256): begin.handle-max N-1; an attach on a higher "
        "handle closes the connection with amqp:connection:framing-error (2.7.2)",
    )
    add("--max-message-size", type=int)
    add("--max-incoming-window", type=int)
    add("--max-link-credit", type=int)
    add("--max-connections", type=int, help="open connections in all (0 = no limit)")
    add("--max-connections-per-user", type=int, help="open connections per user (0 = none)")
    add(
        "--handshake-timeout",
        type=float,
        metavar="SECONDS",
        help="seconds from TCP accept to the client's open (default 10; 0 = none); then "
        "closed: open + close with amqp:resource-limit-exceeded after the AMQP header, "
        "TCP close before",
    )
    add(
        "--sasl-timeout",
        type=float,
        metavar="SECONDS",
        help="seconds from the client's SASL header to the SASL outcome (default 0 = none); "
        "then a TCP close",
    )
    add(
        "--transaction-timeout",
        type=float,
        metavar="SECONDS",
        help="seconds a transaction may live (default 0 = none); a later commit is refused "
        "with amqp:transaction:timeout and the transaction rolled back (4.5.8)",
    )
    add(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="idle-time-out advertised in our open (default 60; 0 = none, never expire); "
        "a peer silent for twice this is closed with amqp:resource-limit-exceeded (2.4.5)",
    )
    add("--memory-high-watermark", type=float, help="fraction of RAM (default 0.4)")
    add("--memory-high-watermark-bytes", type=int)
    add("--disk-free-limit", type=int, dest="disk_free_limit_bytes", help="bytes")


_LIMIT_OPTIONS = (
    "max_frame_size",
    "channel_max",
    "handle_max",
    "max_message_size",
    "max_incoming_window",
    "max_link_credit",
    "max_connections",
    "max_connections_per_user",
    "handshake_timeout",
    "sasl_timeout",
    "transaction_timeout",
)
_ALARM_OPTIONS = ("memory_high_watermark", "memory_high_watermark_bytes", "disk_free_limit_bytes")


def parse_user(spec: str) -> User:
    name, sep, password = spec.partition(":")
    if not sep or not name:
        raise ConfigError(f"--user wants NAME:PASSWORD, got {spec!r}")
    return User(name, password)


def from_args(args: argparse.Namespace | Sequence[str]) -> BrokerConfig:
    """Defaults <- config file (if --config) <- command-line options."""
    if not isinstance(args, argparse.Namespace):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        args = parser.parse_args(list(args))
    get = vars(args).get
    config = load_toml(get("config_file")) if get("config_file") else BrokerConfig()
    changes: dict[str, Any] = {}
    for key in _PLAIN_OPTIONS:
        if get(key) is not None:
            changes[key] = get(key)
    if get("user"):
        changes["users"] = tuple(parse_user(spec) for spec in get("user"))
    if get("fault"):
        changes["faults"] = parse_faults(list(config.faults.enabled) + list(get("fault")))
    if get("no_fsync"):
        changes["fsync"] = False
    if get("no_settle_second"):
        changes["settle_second"] = False
    limit_changes = {k: get(k) for k in _LIMIT_OPTIONS if get(k) is not None}
    if get("idle_timeout") is not None:
        limit_changes["idle_time_out_ms"] = idle_timeout_ms(get("idle_timeout"))
    if limit_changes:
        changes["limits"] = dataclasses.replace(config.limits, **limit_changes)
    alarm_changes = {k: get(k) for k in _ALARM_OPTIONS if get(k) is not None}
    if alarm_changes:
        changes["alarms"] = dataclasses.replace(config.alarms, **alarm_changes)
    return config.replace(**changes)
