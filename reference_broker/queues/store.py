"""Durable storage: an append-only message log with group commit, compaction and recovery,
plus an atomically replaced definitions file (durable queues, exchanges, bindings).

Owns: files under the broker's data dir (`messages.log`, `definitions.json`). Messages are
opaque bytes (the encoded AMQP message as received); nothing here encodes AMQP.

Log record framing (crash-safe): `length u32 | crc32 u32 | body`, body =
`kind u8 | queue-name-length u16 | queue name (UTF-8) | msg-id u64 | payload`.
Recovery reads records in order and stops at the first record that is short or whose CRC
does not match (a torn tail from a crash); the file is truncated there.

Group commit: `append_*` only buffer and return a token (increasing int). `flush()` writes
everything pending and fsyncs once; afterwards every token <= `durable_through` is on disk,
so the caller may confirm those publishes (send accepted). `GroupCommit` runs flushes
where the injected scheduler runs blocking work (a worker thread behind the server) and
reports how far the log is durable, batching all publishers that appended while the
previous fsync ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime.scheduler import Scheduler

PUBLISH = 1
ACK = 2
PURGE = 3

_FRAME = struct.Struct(">II")  # body length, crc32(body)
_HEAD = struct.Struct(">BH")  # kind, queue-name length
_MSG_ID = struct.Struct(">Q")
MAX_RECORD = 1 << 30

LOG_NAME = "messages.log"
DEFINITIONS_NAME = "definitions.json"


def encode_record(kind: int, queue: str, msg_id: int, payload: bytes = b"") -> bytes:
    name = queue.encode("utf-8")
    body = b"".join((_HEAD.pack(kind, len(name)), name, _MSG_ID.pack(msg_id), payload))
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


@dataclass(slots=True)
class Record:
    kind: int
    queue: str
    msg_id: int
    payload: bytes
    offset: int
    size: int


def read_records(data: bytes | memoryview) -> tuple[list[Record], int]:
    """Parse records from the start of `data`; returns them and the end of the valid prefix."""
    view = memoryview(data)
    records: list[Record] = []
    pos = 0
    end = len(view)
    while pos + _FRAME.size <= end:
        length, crc = _FRAME.unpack_from(view, pos)
        start = pos + _FRAME.size
        if length < _HEAD.size + _MSG_ID.size or length > MAX_RECORD or start + length > end:
            break
        body = view[start : start + length]
        if zlib.crc32(body) != crc:
            break
        kind, name_len = _HEAD.unpack_from(body, 0)
        name_end = _HEAD.size + name_len
        if kind not in (PUBLISH, ACK, PURGE) or name_end + _MSG_ID.size > length:
            break
        try:
            queue = bytes(body[_HEAD.size : name_end]).decode("utf-8")
        except UnicodeDecodeError:
            break
        (msg_id,) = _MSG_ID.unpack_from(body, name_end)
        payload = bytes(body[name_end + _MSG_ID.size :])
        size = _FRAME.size + length
        records.append(Record(kind, queue, msg_id, payload, pos, size))
        pos += size
    return records, pos


@dataclass(slots=True)
class Recovered:
    """What `MessageStore.open` found: live messages per queue in msg-id order."""

    messages: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    highest_ids: dict[str, int] = field(default_factory=dict)
    records: int = 0
    truncated_bytes: int = 0

    def count(self) -> int:
        return sum(len(v) for v in self.messages.values())


@dataclass(slots=True)
class CompactionResult:
    bytes_before: int
    bytes_after: int
    live_records: int


class MessageStore:
    """One append-only log for all durable queues of a vhost."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOG_NAME
        self.do_fsync = fsync
        self._state_lock = threading.Lock()  # pending buffer, tokens, index
        self._io_lock = threading.Lock()  # file writes, fsync, compaction
        self._pending = bytearray()
        self._last_token = 0
        self._pending_token = 0
        self.durable_through = 0
        self._index: dict[tuple[str, int], tuple[int, int]] = {}  # live publish -> (off, size)
        self._live_bytes = 0
        self._logical_end = 0
        self.fsync_count = 0
        self.bytes_written = 0
        self.records_appended = 0
        self.compactions = 0
        self._file: Any = None
        self.recovered = Recovered()

    # ------------------------------------------------------------------ open / recovery
    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, fsync: bool = True) -> MessageStore:
        store = cls(directory, fsync=fsync)
        store._recover()
        return store

    def _recover(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        leftover = self.path.with_suffix(".compact")
        if leftover.exists():
            leftover.unlink()  # a compaction that never reached its rename
        data = self.path.read_bytes() if self.path.exists() else b""
        records, valid_end = read_records(data)
        live: dict[str, dict[int, bytes]] = {}
        highest: dict[str, int] = {}
        for rec in records:
            highest[rec.queue] = max(highest.get(rec.queue, 0), rec.msg_id)
            if rec.kind == PUBLISH:
                live.setdefault(rec.queue, {})[rec.msg_id] = rec.payload
                self._index[(rec.queue, rec.msg_id)] = (rec.offset, rec.size)
                self._live_bytes += rec.size
            elif rec.kind == ACK:
                if live.get(rec.queue, {}).pop(rec.msg_id, None) is not None:
                    _, size = self._index.pop((rec.queue, rec.msg_id))
                    self._live_bytes -= size
            else:  # PURGE
                for msg_id in live.pop(rec.queue, {}):
                    _, size = self._index.pop((rec.queue, msg_id))
                    self._live_bytes -= size
        self.recovered = Recovered(
            {q: sorted(m.items()) for q, m in live.items() if m},
            highest,
            len(records),
            len(data) - valid_end,
        )
        self._file = open(self.path, "ab")  # noqa: SIM115 - kept open for the store's life
        if valid_end < len(data):
            self._file.truncate(valid_end)
            self._fsync_file()
        self._logical_end = valid_end

    # ------------------------------------------------------------------ append
    def _append(self, kind: int, queue: str, msg_id: int, payload: bytes = b"") -> int:
        record = encode_record(kind, queue, msg_id, payload)
        with self._state_lock:
            offset = self._logical_end
            self._logical_end += len(record)
            self._pending += record
            self._last_token += 1
            self.records_appended += 1
            key = (queue, msg_id)
            if kind == PUBLISH:
                self._index[key] = (offset, len(record))
                self._live_bytes += len(record)
            elif kind == ACK:
                old = self._index.pop(key, None)
                if old is not None:
                    self._live_bytes -= old[1]
            else:
                for dead in [k for k in self._index if k[0] == queue]:
                    self._live_bytes -= self._index.pop(dead)[1]
            return self._last_token

    def append_publish(self, queue: str, msg_id: int, payload: bytes) -> int:
        return self._append(PUBLISH, queue, msg_id, payload)

    def append_ack(self, queue: str, msg_id: int) -> int:
        return self._append(ACK, queue, msg_id)

    def append_purge(self, queue: str) -> int:
        return self._append(PURGE, queue, 0)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Records appended inside reach the file in one write: no group-commit flush runs
        between them (a transaction's commit, Part 4, is all on disk or none of it)."""
        with self._io_lock:
            yield

    @property
    def has_pending(self) -> bool:
        return self._last_token != self.durable_through

    # ------------------------------------------------------------------ group commit
    def flush(self) -> int:
        """Write all pending records and fsync once. Returns `durable_through`: every token
        <= it is durable. Safe to call from a worker thread while the loop appends."""
        with self._io_lock:
            with self._state_lock:
                buf = self._pending
                upto = self._last_token
                self._pending = bytearray()
            if buf:
                self._file.write(buf)
                self._file.flush()
                self.bytes_written += len(buf)
                self._fsync_file()
            with self._state_lock:
                if upto > self.durable_through:
                    self.durable_through = upto
            return self.durable_through

    def is_durable(self, token: int) -> bool:
        return token <= self.durable_through

    def _fsync_file(self) -> None:
        if self.do_fsync:
            os.fsync(self._file.fileno())
        self.fsync_count += 1

    # ------------------------------------------------------------------ compaction
    @property
    def dead_bytes(self) -> int:
        return self._logical_end - self._live_bytes

    def should_compact(
        self, *, min_dead_bytes: int = 16 << 20, min_dead_ratio: float = 0.5
    ) -> bool:
        dead = self.dead_bytes
        return dead >= min_dead_bytes and dead >= min_dead_ratio * max(1, self._logical_end)

    def compact(self) -> CompactionResult:
        """Rewrite the log with only live publish records (crash-safe: temp file, fsync,
        rename, fsync dir). Appends wait while it runs."""
        self.flush()
        with self._io_lock, self._state_lock:
            if self._pending:  # appended after our flush: write them before copying
                self._file.write(self._pending)
                self._pending = bytearray()
                self.durable_through = self._last_token
            self._file.flush()
            before = self._logical_end
            tmp = self.path.with_suffix(".compact")
            new_index: dict[tuple[str, int], tuple[int, int]] = {}
            with open(self.path, "rb") as old, open(tmp, "wb") as new:
                pos = 0
                for key, (offset, size) in sorted(self._index.items(), key=lambda kv: kv[1][0]):
                    old.seek(offset)
                    chunk = old.read(size)
                    new.write(chunk)
                    new_index[key] = (pos, size)
                    pos += size
                new.flush()
                if self.do_fsync:
                    os.fsync(new.fileno())
            self._file.close()
            os.replace(tmp, self.path)
            self._fsync_dir()
            self._file = open(self.path, "ab")  # noqa: SIM115
            self._index = new_index
            self._logical_end = pos
            self._live_bytes = pos
            self.compactions += 1
            return CompactionResult(before, pos, len(new_index))

    def _fsync_dir(self) -> None:
        if not self.do_fsync:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None


class GroupCommit:
    """Confirm publishes after fsync, one fsync per batch, through an injected scheduler
    (scheduler.Scheduler: the event loop's executor behind the server, inline in memory).

    `kick()` makes sure a flush runs for everything appended so far; appends made while
    one runs are covered by the next single flush. After each flush every `on_durable`
    callback gets (now, durable_through); a flush that raises (disk full, I/O error) goes
    to every `on_failed` callback as (now, exception) instead.
    """

    def __init__(self, store: MessageStore, scheduler: Scheduler) -> None:
        self.store = store
        self.scheduler = scheduler
        self._running = False
        self.on_durable: list[Callable[[float, int], None]] = []
        self.on_failed: list[Callable[[float, BaseException], None]] = []

    def kick(self) -> None:
        if self._running:
            return  # appends made meanwhile are still pending after it: flushed next
        self._running = True
        self.scheduler.run_blocking(self.store.flush, self._flushed)

    def _flushed(self, now: float, result: int | BaseException) -> None:
        self._running = False
        if isinstance(result, BaseException):
            for failed in list(self.on_failed):
                failed(now, result)
            return
        for durable in list(self.on_durable):
            durable(now, result)
        if self.store.has_pending:
            self.kick()


class DefinitionsFile:
    """definitions.json: durable queues, exchanges and bindings, replaced atomically."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / DEFINITIONS_NAME

    def load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"queues": [], "exchanges": [], "bindings": []}
        return json.loads(self.path.read_text("utf-8"))

    def save(self, definitions: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(definitions, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
