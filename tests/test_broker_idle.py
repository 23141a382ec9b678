"""The reference broker's idle time-out (2.4.5) over a real socket, broker in a subprocess.

Owns: tests of `--idle-timeout` / `idle_timeout` (config), the idle-time-out the broker
advertises, its heartbeats (at half the peer's idle-time-out), and its close with
amqp:resource-limit-exceeded for a silent peer. The peer is frame-level: bytes built and
decoded with the amqp10 core (no engine), so we decide exactly when it is silent. Every
wait is bounded; nothing asserts on how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from broker_support.raw_peer import WAIT, RawPeer

from amqpspec.amqp10.composites import Begin, Close
from amqpspec.amqp10.frames import EMPTY_FRAME, encode_frame
from amqpspec.amqp10.spec import Cond
from amqpspec.reference_broker.config import ConfigError, from_args, from_mapping
from amqpspec.reference_broker.runtime.process import BrokerProcess

BROKER_IDLE_S = 1  # --idle-timeout: advertised 1,000 ms, a silent peer closed after 2 s


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    process = BrokerProcess("--idle-timeout", str(BROKER_IDLE_S))
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def peer(broker: BrokerProcess) -> Iterator[RawPeer]:
    client = RawPeer(broker.port)
    try:
        yield client
    finally:
        client.close()


# --- configuration ---------------------------------------------------------------------


def test_idle_timeout_option_and_config_key() -> None:
    assert from_args([]).limits.idle_time_out_ms == 60_000  # the default stays 60 s
    assert from_args(["--idle-timeout", "2.5"]).limits.idle_time_out_ms == 2500
    assert from_args(["--idle-timeout", "0"]).limits.idle_time_out_ms == 0
    assert from_mapping({"idle_timeout": 10}).limits.idle_time_out_ms == 10_000
    # the top-level key wins over the [limits] table's milliseconds
    both = from_mapping({"idle_timeout": 0, "limits": {"idle_time_out_ms": 5000}})
    assert both.limits.idle_time_out_ms == 0
    for bad in (-1, "ten", True):
        with pytest.raises(ConfigError):
            from_mapping({"idle_timeout": bad})
    with pytest.raises(ConfigError):
        from_args(["--idle-timeout", "-3"])


def test_idle_timeout_from_a_config_file(tmp_path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text("idle_timeout = 1.5\n")
    assert from_args(["--config", str(path)]).limits.idle_time_out_ms == 1500
    assert from_args(["--config", str(path), "--idle-timeout", "3"]).limits.idle_time_out_ms == 3000


# --- over the wire ---------------------------------------------------------------------


def test_open_advertises_the_configured_idle_timeout(peer: RawPeer) -> None:
    broker_open = peer.open()
    assert broker_open.idle_time_out == BROKER_IDLE_S * 1000


def test_silent_peer_is_closed_with_resource_limit_exceeded(peer: RawPeer) -> None:
    peer.open()  # we advertise no idle-time-out: the broker owes us no heartbeats
    close = peer.wait_frame("close")  # ...and we never send another byte
    assert close.performative.error is not None
    assert close.performative.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
    assert peer.names(1) == ["close"]  # nothing but the close after the open
    peer.send(encode_frame(Close()))  # answer it: the broker then drops the socket
    deadline = time.monotonic() + WAIT
    while not peer.eof and time.monotonic() < deadline:
        peer.read(0.1)
    assert peer.eof


def test_broker_heartbeats_within_our_idle_timeout(peer: RawPeer) -> None:
    """We advertise 1,000 ms and keep the broker's timer happy with our own empty
    frames: the broker sends empty frames (at half our idle-time-out), nothing else."""
    peer.open(idle_time_out=1000)
    start = len(peer.frames)
    deadline = time.monotonic() + WAIT
    while peer.names(start).count("empty") < 4:
        assert time.monotonic() < deadline and not peer.eof, f"got {peer.names(start)}"
        peer.send(EMPTY_FRAME)
        peer.read(0.2)
    assert set(peer.names(start)) == {"empty"}
    assert all(f.channel == 0 for f in peer.frames[start:])  # 2.4.5: SHOULD use channel 0


def test_peer_that_heartbeats_stays_open(peer: RawPeer) -> None:
    """Empty frames every 0.2 s for more than twice the 2 s threshold: no close, and a
    session can still begin afterwards."""
    peer.open()
    start = len(peer.frames)
    until = time.monotonic() + 2.5 * 2 * BROKER_IDLE_S
    while time.monotonic() < until:
        peer.send(EMPTY_FRAME)
        peer.read(0.2)
        assert not peer.eof and "close" not in peer.names(start), peer.names(start)
    peer.send(encode_frame(Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10)))
    begin = peer.wait_frame("begin", start)
    assert begin.performative.remote_channel == 0
    assert "close" not in peer.names(start)


def test_idle_timeout_zero_advertises_none_and_keeps_a_silent_peer() -> None:
    process = BrokerProcess("--idle-timeout", "0")
    try:
        peer = RawPeer(process.port)
        try:
            broker_open = peer.open()
            assert broker_open.idle_time_out is None
            peer.read(0.5)  # a short silence: nothing comes (no timer to expire)
            assert peer.names(1) == [] and not peer.eof
        finally:
            peer.close()
    finally:
        process.stop()
