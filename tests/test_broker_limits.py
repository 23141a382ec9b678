"""The reference broker's handshake timeout and its session / link limits over a real
socket, broker in a subprocess started with the options under test.

Owns: tests of `--handshake-timeout` / `[limits] handshake_timeout` (a peer that sends no
open within the bound: a bare TCP close before the AMQP headers are exchanged, open +
close with amqp:resource-limit-exceeded after), and of `--channel-max` / `--handle-max`
(sessions per connection, links per session: advertised in open / begin as N-1, a begin
or attach beyond them closes the connection with amqp:connection:framing-error, 2.7.1,
2.7.2). The peer is frame-level (broker_support.raw_peer). Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest
from broker_support.raw_peer import WAIT, RawPeer

from amqpspec.amqp10.composites import Attach, Begin, Close, Source
from amqpspec.amqp10.frames import AMQP_HEADER, SASL_HEADER, encode_frame
from amqpspec.amqp10.spec import Cond
from amqpspec.reference_broker.config import ConfigError, from_args, from_mapping
from amqpspec.reference_broker.runtime.process import BrokerProcess

HANDSHAKE_S = 1  # --handshake-timeout of the broker under test
SESSIONS, LINKS = 2, 2  # --channel-max, --handle-max


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    options = ("--handshake-timeout", HANDSHAKE_S, "--channel-max", SESSIONS, "--handle-max", LINKS)
    with BrokerProcess(*map(str, options)) as process:
        yield process


@pytest.fixture
def peer(broker: BrokerProcess) -> Iterator[RawPeer]:
    with contextlib.closing(RawPeer(broker.port)) as client:
        yield client


def begin(channel: int) -> bytes:
    return encode_frame(
        Begin(next_outgoing_id=0, incoming_window=10, outgoing_window=10), channel=channel
    )


# --- configuration ---------------------------------------------------------------------


def test_handshake_timeout_option_and_config_key(tmp_path) -> None:
    assert from_args([]).limits.handshake_timeout == 10.0  # RabbitMQ's handshake_timeout
    assert from_args(["--handshake-timeout", "2.5"]).limits.handshake_timeout == 2.5
    assert from_args(["--handshake-timeout", "0"]).limits.handshake_timeout == 0
    assert from_mapping({"limits": {"handshake_timeout": 3}}).limits.handshake_timeout == 3
    path = tmp_path / "broker.toml"
    path.write_text("[limits]\nhandshake_timeout = 4.0\n")
    assert from_args(["--config", str(path)]).limits.handshake_timeout == 4.0
    assert (
        from_args(["--config", str(path), "--handshake-timeout", "1"]).limits.handshake_timeout == 1
    )
    with pytest.raises(ConfigError):
        from_args(["--handshake-timeout", "-1"])


def test_sasl_timeout_option_and_config_key() -> None:
    assert from_args([]).limits.sasl_timeout == 0  # none: the handshake time-out alone
    assert from_args(["--sasl-timeout", "2"]).limits.sasl_timeout == 2
    assert from_mapping({"limits": {"sasl_timeout": 3}}).limits.sasl_timeout == 3
    with pytest.raises(ConfigError):
        from_args(["--sasl-timeout", "-1"])


def test_session_and_link_limit_options() -> None:
    limits = from_args(["--channel-max", "3", "--handle-max", "7"]).limits
    assert (limits.channel_max, limits.handle_max) == (3, 7)
    assert (from_args([]).limits.channel_max, from_args([]).limits.handle_max) == (64, 256)


# --- handshake timeout -----------------------------------------------------------------


def test_a_silent_tcp_client_is_dropped_without_a_byte(peer: RawPeer) -> None:
    peer.wait_eof()
    assert peer.header is None and peer.frames == []


def test_no_open_after_the_amqp_header_gets_open_then_close(peer: RawPeer) -> None:
    """The headers are exchanged, so a frame can say why: the broker's open (2.4.1: the
    first frame), then close with amqp:resource-limit-exceeded; answered, the socket goes."""
    peer.send(AMQP_HEADER.encode())
    close = peer.wait_frame("close")
    assert peer.header == AMQP_HEADER and peer.names() == ["open", "close"]
    assert close.performative.error.condition == Cond.RESOURCE_LIMIT_EXCEEDED
    assert "handshake" in close.performative.error.description
    peer.send(encode_frame(Close()))
    peer.wait_eof()


def test_no_sasl_init_is_dropped_without_a_close_frame(peer: RawPeer) -> None:
    """In the SASL layer there is no close frame (5.3): a TCP close after the mechanisms."""
    peer.send(SASL_HEADER.encode())
    peer.wait_eof()
    assert peer.header == SASL_HEADER and peer.names() == ["sasl-mechanisms"]


def test_an_open_in_time_is_not_timed_out(peer: RawPeer) -> None:
    peer.open()
    peer.read(HANDSHAKE_S + 0.5)  # past the bound: nothing comes
    peer.read(0.5)
    assert peer.names() == ["open"] and not peer.eof


def test_handshake_timeout_zero_keeps_a_silent_client() -> None:
    process = BrokerProcess("--handshake-timeout", "0")
    try:
        with socket.create_connection(("127.0.0.1", process.port), timeout=WAIT) as sock:
            sock.settimeout(1.5)
            with pytest.raises(TimeoutError):
                sock.recv(1)  # no bytes and no close: nothing bounds the handshake
    finally:
        process.stop()


# --- sessions per connection, links per session ----------------------------------------


def test_a_session_beyond_channel_max_closes_with_framing_error(peer: RawPeer) -> None:
    """2.7.1: channel-max is the highest channel number; sessions on channels 0..N-1
    begin, one more is a framing error of the connection."""
    assert peer.open().channel_max == SESSIONS - 1
    for channel in range(SESSIONS):
        peer.send(begin(channel))
    deadline = time.monotonic() + WAIT
    while peer.names().count("begin") < SESSIONS:
        assert time.monotonic() < deadline and not peer.eof, peer.names()
        peer.read(0.1)
    peer.send(begin(SESSIONS))
    close = peer.wait_frame("close")
    assert close.performative.error.condition == Cond.FRAMING_ERROR
    assert peer.names().count("begin") == SESSIONS


def test_a_link_beyond_handle_max_closes_with_framing_error(peer: RawPeer) -> None:
    """2.7.2 handle-max: a peer that receives a handle outside the supported range MUST
    close the connection with the framing-error error-code."""
    peer.open()
    peer.send(begin(0))
    assert peer.wait_frame("begin").performative.handle_max == LINKS - 1
    for handle in range(LINKS + 1):
        attach = Attach(
            name=f"link-{handle}",
            handle=handle,
            role=True,
            source=Source(address="amq.topic"),
        )
        peer.send(encode_frame(attach))
    close = peer.wait_frame("close")
    assert close.performative.error.condition == Cond.FRAMING_ERROR
    assert f"handle {LINKS}" in close.performative.error.description
