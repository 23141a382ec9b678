"""Resource alarms (observers, watermarks with injected readings, manual raise/clear),
configuration (defaults, TOML, CLI overrides, validation) and the fault catalog."""

from __future__ import annotations

import argparse

import pytest

from amqpspec.amqp10.engine import EndpointPolicy
from amqpspec.reference_broker.config import (
    BrokerConfig,
    ConfigError,
    Limits,
    add_arguments,
    from_args,
    load_toml,
)
from amqpspec.reference_broker.faults.catalog import (
    CATALOG,
    NO_FAULTS,
    PARSER_LAYER,
    PROTOCOL_LAYER,
    QUEUE_LAYER,
    WIRE_LAYER,
    Faults,
    UnknownFaultError,
    describe_catalog,
    parse_faults,
)
from amqpspec.reference_broker.features.alarms import DISK, MEMORY, ResourceAlarms, read_process_rss


# ---------------------------------------------------------------------- alarms
class Readings:
    def __init__(self) -> None:
        self.memory = 100
        self.disk_free = 10_000


def make_alarms(readings: Readings) -> tuple[ResourceAlarms, list[tuple[str, bool, bool]]]:
    alarms = ResourceAlarms(
        memory_limit=1000,
        disk_free_limit=5000,
        read_memory=lambda: readings.memory,
        read_disk_free=lambda: readings.disk_free,
        interval=1.0,
    )
    seen: list[tuple[str, bool, bool]] = []
    alarms.add_observer(lambda kind, active, any_active: seen.append((kind, active, any_active)))
    return alarms, seen


def test_memory_watermark_raises_and_clears():
    readings = Readings()
    alarms, seen = make_alarms(readings)
    assert alarms.check(0.0) == [] and seen == []
    readings.memory = 1000  # at the watermark: alarm (RabbitMQ: used >= limit)
    assert alarms.check(1.0) == [MEMORY]
    assert seen == [(MEMORY, True, True)] and alarms.any_active
    assert alarms.check(2.0) == []  # no repeated notification
    readings.memory = 999
    assert alarms.check(3.0) == [MEMORY]
    assert seen[-1] == (MEMORY, False, False) and not alarms.any_active


def test_memory_is_read_again_after_a_32nd_of_the_watermark_arrives_between_timer_checks():
    readings = Readings()
    alarms, seen = make_alarms(readings)  # watermark 1000: a reading per 31 bytes read
    alarms.check(0.0)
    readings.memory = 1000
    assert alarms.bytes_received(30, 0.1) == [] and seen == []  # under the budget: no reading
    assert alarms.bytes_received(1, 0.2) == [MEMORY]  # 31 bytes: read now, not at 1.0
    assert seen == [(MEMORY, True, True)]
    assert alarms.next_check_at() == 1.2  # the timer counts from that reading
    readings.memory = 10
    assert alarms.bytes_received(30, 0.3) == []  # the count restarted at the reading
    assert alarms.check(1.2) == [MEMORY] and not alarms.any_active


def test_disk_limit_and_check_interval():
    readings = Readings()
    alarms, seen = make_alarms(readings)
    alarms.check(0.0)
    readings.disk_free = 4999
    assert alarms.check(0.5) == []  # before the next check time: no reading taken
    assert alarms.check(1.0) == [DISK]
    assert seen == [(DISK, True, True)]
    assert alarms.states[DISK].reading == 4999
    assert alarms.next_check_at() == 2.0


def test_any_active_tracks_both_alarms():
    readings = Readings()
    alarms, seen = make_alarms(readings)
    alarms.apply_readings(memory=2000, disk_free=1)
    assert seen == [(MEMORY, True, True), (DISK, True, True)]
    alarms.apply_readings(memory=1)
    assert seen[-1] == (MEMORY, False, True)  # disk still on
    alarms.apply_readings(disk_free=10**9)
    assert seen[-1] == (DISK, False, False)


def test_manual_raise_and_clear():
    readings = Readings()
    alarms, seen = make_alarms(readings)
    assert alarms.raise_alarm(MEMORY) is True
    assert alarms.raise_alarm(MEMORY) is False  # already active
    assert alarms.check(0.0) == []  # the resource is fine, the manual alarm stays
    assert alarms.states[MEMORY].active and alarms.states[MEMORY].manual
    assert alarms.clear_alarm(MEMORY) is True
    assert seen == [(MEMORY, True, True), (MEMORY, False, False)]
    with pytest.raises(ValueError):
        alarms.raise_alarm("cpu")


def test_manual_clear_does_not_clear_a_resource_alarm():
    readings = Readings()
    alarms, _ = make_alarms(readings)
    readings.disk_free = 0
    alarms.check(0.0)
    alarms.raise_alarm(DISK)
    assert alarms.clear_alarm(DISK) is False
    assert alarms.states[DISK].active
    json = alarms.as_json()
    assert json[DISK]["active"] is True and json[DISK]["triggered_by_resource"] is True


def test_real_rss_reading_is_plausible():
    rss = read_process_rss()
    assert 1 << 20 < rss < 1 << 36  # more than 1 MiB, less than 64 GiB


# ---------------------------------------------------------------------- config
def test_default_config_and_limits():
    config = BrokerConfig()
    assert (config.host, config.port, config.admin_port) == ("127.0.0.1", 5672, 15672)
    limits = config.limits
    assert limits.max_frame_size == 131072 and limits.channel_max == 64
    assert limits.handle_max == 256 and limits.max_message_size == 16 * 1024 * 1024
    assert limits.max_incoming_window == 400 and limits.max_link_credit == 170
    assert limits.link_credit_regrant_below == 85
    assert config.user("guest") is not None and config.loopback_users == ("guest",)
    assert config.faults == NO_FAULTS


def test_toml_then_cli_overrides(tmp_path):
    path = tmp_path / "broker.toml"
    path.write_text(
        """
port = 6000
log_level = "debug"
faults = ["ignore-drain"]
[users.alice]
password = "secret"
[limits]
max_frame_size = 4096
channel_max = 8
[alarms]
memory_high_watermark_bytes = 123456
"""
    )
    config = load_toml(path)
    assert config.port == 6000 and config.log_level == "debug"
    assert config.user("alice").password == "secret" and config.user("guest") is None
    assert config.limits.max_frame_size == 4096 and config.limits.handle_max == 256
    assert config.alarms.memory_limit(10**12) == 123456
    assert config.faults.ignore_drain

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--config", str(path), "--port", "7000", "--fault", "no-echo", "--max-link-credit", "10"]
    )
    merged = from_args(args)
    assert merged.port == 7000  # CLI wins over the file
    assert merged.log_level == "debug"  # the file wins over the default
    assert merged.faults.enabled == {"ignore-drain", "no-echo"}
    assert merged.limits.max_link_credit == 10 and merged.limits.max_frame_size == 4096
    assert merged.config_file == str(path)


def test_cli_users_and_fsync():
    config = from_args(["--user", "bob:pw", "--user", "eve:x:y", "--no-fsync"])
    assert config.user("bob").password == "pw" and config.user("eve").password == "x:y"
    assert config.fsync is False
    with pytest.raises(ConfigError):
        from_args(["--user", "nopassword"])


@pytest.mark.parametrize(
    "toml",
    [
        "bogus = 1",
        "[limits]\nmax_frame_size = 100",  # below 512 (2.7.1)
        "[limits]\nunknown = 1",
        'log_level = "loud"',
        "[users.x]\ntags = []",
        'tls_cert = "c.pem"',  # without a key
        "port = 70000",
        "this is not toml",
    ],
)
def test_invalid_config_is_rejected(tmp_path, toml):
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError):
        load_toml(path)


def test_limits_are_frozen():
    with pytest.raises(AttributeError):
        Limits().channel_max = 1  # type: ignore[misc]


# ---------------------------------------------------------------------- faults
BROKER_FAULTS = {
    "overdeliver-on-regrant",
    "transfer-before-credit",
    "ignore-drain",
    "no-drain-reply",
    "excess-credit-after-drain",
    "no-requeue-on-detach",
    "ignore-alarm",
    "negative-window-after-alarm",
    "credit-per-frame",
    "redeliver-undeliverable-here",
    "no-echo",
    "skip-window-check",
    "insert-properties",
    "relay-error-without-delivery-tag",
    "keep-dynamic-nodes",
    "close-shared-subscription-with-links",
    "forget-durable-subscriptions",
    "forget-persistent-nodes",
    "durable-messages-in-memory",
    "consume-on-delivery",
    "keep-publishers-of-deleted-nodes",
    "accept-durable-on-volatile",
    "sole-connection-weak-detection",
    "forget-unsettled-on-reattach",
    "accept-new-after-incomplete-map",
    "session-scoped-delivery-tags",
    "sasl-answers-as-client",
    "scram-accepts-any-proof",
    "publish-without-write-permission",
    "no-sasl-timeout",
    "accept-misordered-sections",
    "accept-reserved-annotations",
    "accept-any-user-id",
    "report-unknown-filters",
    "properties-filter-ignores-subject",
    "selector-like-escape-ignored",
    "ws-drop-short-messages",  # the WebSocket listener's (tests/test_websocket.py)
    "ws-close-without-handshake",
    "txn-post-immediately",
    "txn-discharge-unknown-accepted",
    "txn-timeout-never-fires",
    # only two consumers of one queue show these (tests/test_fuzz_multiparty.py)
    "shared-credit-across-links",
    "lose-requeue-on-concurrent-detach",
    "deliver-to-two-consumers",
}

# the broker's outgoing frames edited on the wire, one per field rule of 2.7.3-2.7.5 (checker)
WIRE_FAULTS = {
    "flow-without-delivery-count",
    "stale-receiver-delivery-count",
    "sender-flow-without-delivery-count",
    "session-flow-with-link-fields",
    "attach-without-initial-delivery-count",
    "attach-unsettled-null-key",
    "transfer-without-message-format",
}


# parser and state-machine faults modelled on fuzzers' findings
PARSER_FAULTS = {
    "die-on-nested-descriptor",
    "exit-on-compound-overrun",
    "leak-on-declared-count",
    "hang-on-serial-wrap",
    "exit-on-illegal-sasl",
    "hang-on-disposition-range",
    "die-on-channel-reuse",
    "die-on-credit-overflow",
}


def test_catalog_covers_every_fault_with_origins():
    assert set(CATALOG) == BROKER_FAULTS | PARSER_FAULTS | WIRE_FAULTS
    for info in CATALOG.values():
        assert info.description and info.origin and info.where
        if info.name in PARSER_FAULTS:
            assert info.layer == PARSER_LAYER
        elif info.name in WIRE_FAULTS:
            assert info.layer == WIRE_LAYER
        else:
            assert info.layer in (QUEUE_LAYER, PROTOCOL_LAYER)
    assert len(describe_catalog().splitlines()) == len(CATALOG)


def test_faults_attributes_and_parsing():
    faults = parse_faults(["ignore-drain", "no-echo,skip-window-check"])
    assert faults.ignore_drain and faults.no_echo and faults.skip_window_check
    assert not faults.overdeliver_on_regrant
    assert "no-echo" in faults and bool(faults) and not bool(NO_FAULTS)
    for info in CATALOG.values():
        assert getattr(NO_FAULTS, info.attribute) is False
        assert getattr(Faults([info.name]), info.attribute) is True
    with pytest.raises(AttributeError):
        faults.no_echo = False  # type: ignore[misc]


def test_faults_slots_and_engine_policy_come_from_the_catalog():
    assert set(Faults.__slots__) == {"_enabled"} | {i.attribute for i in CATALOG.values()}
    assert NO_FAULTS.endpoint_policy() == EndpointPolicy()
    relaxing = {"credit-per-frame", "excess-credit-after-drain", "overdeliver-on-regrant"}
    relaxing |= {"skip-window-check", "transfer-before-credit", "shared-credit-across-links"}
    assert {name for name, info in CATALOG.items() if info.relaxes} == relaxing
    for name in CATALOG:
        policy = Faults([name]).endpoint_policy(auto_echo=False)
        assert policy.auto_echo is False
        assert policy.check_credit is (CATALOG[name].relaxes != "check_credit"), name
        assert policy.enforce_window is (name != "skip-window-check"), name


def test_unknown_fault_is_a_clear_error():
    with pytest.raises(UnknownFaultError) as info:
        parse_faults(["overdeliver"])
    assert "overdeliver-on-regrant" in str(info.value)  # lists the known names
    with pytest.raises(UnknownFaultError):
        from_args(["--fault", "nope"])


def test_alarms_from_config_uses_absolute_or_relative_watermark(tmp_path):
    from dataclasses import asdict

    from amqpspec.reference_broker.config import AlarmConfig
    from amqpspec.reference_broker.features.alarms import alarms_from_config, read_total_memory

    absolute = alarms_from_config(
        **asdict(AlarmConfig(memory_high_watermark_bytes=5000)), data_dir=tmp_path
    )
    assert absolute.states[MEMORY].limit == 5000
    relative = alarms_from_config(**asdict(AlarmConfig(memory_high_watermark=0.5)), data_dir=None)
    assert relative.states[MEMORY].limit == read_total_memory() // 2
    assert MEMORY not in relative.check(0.0)  # this test process is far below half the RAM
    assert relative.states[DISK].reading is not None and relative.states[DISK].reading > 0
