"""Durable message log: framing, group commit (one fsync per batch), recovery, torn tails,
compaction, SIGKILL safety, and the asyncio group committer."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from amqpspec.reference_broker.queues.store import (
    LOG_NAME,
    DefinitionsFile,
    GroupCommit,
    MessageStore,
    encode_record,
    read_records,
)
from amqpspec.reference_broker.runtime.pump import LoopScheduler
from amqpspec.reference_broker.runtime.scheduler import ManualScheduler


def test_records_round_trip_and_crc_detects_damage():
    data = encode_record(1, "q", 7, b"payload") + encode_record(2, "q", 7)
    records, end = read_records(data)
    assert [(r.kind, r.queue, r.msg_id, r.payload) for r in records] == [
        (1, "q", 7, b"payload"),
        (2, "q", 7, b""),
    ]
    assert end == len(data)
    damaged = bytearray(data)
    damaged[12] ^= 0xFF  # inside the first record's body
    assert read_records(bytes(damaged)) == ([], 0)


def test_group_commit_one_fsync_for_many_appends(tmp_path):
    store = MessageStore.open(tmp_path)
    tokens = [store.append_publish("q", i, b"x" * 10) for i in range(1, 101)]
    assert tokens == list(range(1, 101))
    assert not store.is_durable(tokens[0])
    fsyncs_before = store.fsync_count
    assert store.flush() == 100
    assert store.fsync_count == fsyncs_before + 1
    assert all(store.is_durable(t) for t in tokens)
    assert store.flush() == 100 and store.fsync_count == fsyncs_before + 1  # nothing pending
    store.close()


def test_recovery_applies_acks_and_purges(tmp_path):
    store = MessageStore.open(tmp_path)
    for i in range(1, 6):
        store.append_publish("a", i, b"a%d" % i)
        store.append_publish("b", i, b"b%d" % i)
    store.append_ack("a", 2)
    store.append_purge("b")
    store.append_publish("b", 9, b"b9")
    store.close()
    again = MessageStore.open(tmp_path)
    rec = again.recovered
    assert rec.messages["a"] == [(1, b"a1"), (3, b"a3"), (4, b"a4"), (5, b"a5")]
    assert rec.messages["b"] == [(9, b"b9")]
    assert rec.highest_ids == {"a": 5, "b": 9}
    assert rec.truncated_bytes == 0
    again.close()


@pytest.mark.parametrize("cut", [1, 4, 8, 9, 20])
def test_torn_tail_is_ignored_and_truncated(tmp_path, cut):
    store = MessageStore.open(tmp_path)
    for i in range(1, 4):
        store.append_publish("q", i, b"m%d" % i * 10)
    store.close()
    path = tmp_path / LOG_NAME
    whole = path.read_bytes()
    last = encode_record(1, "q", 3, b"m3" * 10)
    path.write_bytes(whole[: len(whole) - len(last) + cut])  # part of the last record
    again = MessageStore.open(tmp_path)
    assert [m for m, _ in again.recovered.messages["q"]] == [1, 2]
    assert again.recovered.truncated_bytes == cut
    again.append_publish("q", 4, b"after")  # appends go after the valid prefix
    again.close()
    third = MessageStore.open(tmp_path)
    assert [m for m, _ in third.recovered.messages["q"]] == [1, 2, 4]
    third.close()


def test_garbage_tail_is_ignored(tmp_path):
    store = MessageStore.open(tmp_path)
    store.append_publish("q", 1, b"ok")
    store.close()
    rng = random.Random(7)
    with open(tmp_path / LOG_NAME, "ab") as out:
        out.write(bytes(rng.randrange(256) for _ in range(300)))
    again = MessageStore.open(tmp_path)
    assert again.recovered.messages == {"q": [(1, b"ok")]}
    assert again.recovered.truncated_bytes == 300
    again.close()


def test_compaction_keeps_live_messages_and_shrinks(tmp_path):
    store = MessageStore.open(tmp_path)
    for i in range(1, 1001):
        store.append_publish("q", i, b"x" * 100)
    for i in range(1, 1001):
        if i % 10:
            store.append_ack("q", i)
    store.flush()
    assert store.should_compact(min_dead_bytes=1000)
    result = store.compact()
    assert result.live_records == 100
    assert result.bytes_after < result.bytes_before / 5
    assert os.path.getsize(tmp_path / LOG_NAME) == result.bytes_after
    store.append_ack("q", 10)  # index offsets are valid after compaction
    store.append_publish("q", 2000, b"new")
    store.close()
    again = MessageStore.open(tmp_path)
    ids = [m for m, _ in again.recovered.messages["q"]]
    assert ids == [i for i in range(20, 1001, 10)] + [2000]
    assert not (tmp_path / "messages.compact").exists()
    again.close()


def test_leftover_compaction_file_is_discarded(tmp_path):
    store = MessageStore.open(tmp_path)
    store.append_publish("q", 1, b"a")
    store.close()
    (tmp_path / "messages.compact").write_bytes(b"half-written")
    again = MessageStore.open(tmp_path)
    assert again.recovered.messages == {"q": [(1, b"a")]}
    assert not (tmp_path / "messages.compact").exists()
    again.close()


def test_definitions_file_atomic_round_trip(tmp_path):
    defs = DefinitionsFile(tmp_path)
    assert defs.load() == {"queues": [], "exchanges": [], "bindings": []}
    defs.save({"queues": [{"name": "q"}], "exchanges": [], "bindings": []})
    assert DefinitionsFile(tmp_path).load()["queues"] == [{"name": "q"}]
    assert not (tmp_path / "definitions.tmp").exists()


WRITER = textwrap.dedent(
    """
    import sys
    from amqpspec.reference_broker.queues.store import MessageStore
    store = MessageStore.open(sys.argv[1])
    msg_id = 0
    while True:
        for _ in range(20):
            msg_id += 1
            store.append_publish("q", msg_id, b"p" * 200 + str(msg_id).encode())
            if msg_id % 7 == 0:
                store.append_ack("q", msg_id)
        store.flush()
        print(msg_id, flush=True)
    """
)


@pytest.mark.parametrize("round_", range(3))
def test_sigkill_during_appends_loses_nothing_that_was_flushed(tmp_path, round_):
    """A writer appends and group-commits; after each flush it reports the highest durable
    msg id. SIGKILL it mid-way: recovery must yield every record whose flush completed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    durable = 0
    try:
        assert proc.stdout is not None
        for _ in range(30 + 20 * round_):
            line = proc.stdout.readline()
            assert line, "writer died"
            durable = int(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    store = MessageStore.open(tmp_path)
    recovered = dict(store.recovered.messages.get("q", []))
    expected = [i for i in range(1, durable + 1) if i % 7]
    missing = [i for i in expected if i not in recovered]
    assert missing == []
    assert all(recovered[i] == b"p" * 200 + str(i).encode() for i in expected)
    assert all(i % 7 for i in recovered)  # acked ones stay gone
    store.close()


class _Waiters:
    """Futures resolved by a GroupCommit's callbacks: what a publisher awaits."""

    def __init__(self, commit: GroupCommit) -> None:
        self.commit = commit
        self.waiting: list[tuple[int, asyncio.Future[int]]] = []
        commit.on_durable.append(self._durable)
        commit.on_failed.append(self._failed)

    def wait(self, token: int) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append((token, future))
        self.commit.kick()
        return future

    def _durable(self, now: float, durable: int) -> None:
        for token, future in self.waiting:
            if token <= durable and not future.done():
                future.set_result(durable)
        self.waiting = [(t, f) for t, f in self.waiting if not f.done()]

    def _failed(self, now: float, exc: BaseException) -> None:
        for _, future in self.waiting:
            if not future.done():
                future.set_exception(exc)
        self.waiting = []


def test_group_commit_batches_concurrent_publishers(tmp_path):
    store = MessageStore.open(tmp_path)

    async def publisher(commit: _Waiters, n: int, base: int) -> int:
        confirmed = 0
        for i in range(n):
            token = store.append_publish("q", base + i, b"x")
            await commit.wait(token)
            assert store.is_durable(token)
            confirmed += 1
        return confirmed

    async def main() -> list[int]:
        commit = _Waiters(GroupCommit(store, LoopScheduler(asyncio.get_running_loop())))
        return await asyncio.wait_for(
            asyncio.gather(*(publisher(commit, 20, p * 1000) for p in range(20))), 60
        )

    fsyncs_before = store.fsync_count
    assert asyncio.run(main()) == [20] * 20
    fsyncs = store.fsync_count - fsyncs_before
    assert 1 <= fsyncs < 400  # 400 confirms, far fewer fsyncs
    assert fsyncs <= 40  # each round of 20 publishers shares an fsync
    store.close()


def test_group_commit_fails_waiters_when_flush_fails(tmp_path):
    store = MessageStore.open(tmp_path)

    def broken_flush() -> int:
        raise OSError(28, "No space left on device")

    store.flush = broken_flush  # type: ignore[method-assign]

    async def main() -> None:
        commit = _Waiters(GroupCommit(store, LoopScheduler(asyncio.get_running_loop())))
        token = store.append_publish("q", 1, b"x")
        with pytest.raises(OSError):
            await asyncio.wait_for(commit.wait(token), 10)

    asyncio.run(main())


def test_group_commit_in_memory_runs_when_the_scheduler_does(tmp_path):
    store = MessageStore.open(tmp_path)
    scheduler = ManualScheduler()
    commit = GroupCommit(store, scheduler)
    durable: list[int] = []
    commit.on_durable.append(lambda now, through: durable.append(through))
    token = store.append_publish("q", 1, b"x")
    commit.kick()
    commit.kick()  # one flush covers both
    assert durable == [] and not store.is_durable(token)
    assert scheduler.run_due() == 1
    assert durable == [store.durable_through] and store.is_durable(token)
    store.close()
