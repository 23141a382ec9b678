"""Recorder: relayed chunks -> pcap + Parquet frame log + connection index, streaming.

Owns: `Recorder`, a synchronous sink the proxy drives with `open_connection`, `data`
and `close_connection`. It writes each chunk to the pcap as it was relayed, keeps
per-direction byte counts and SHA-256 digests for the index. The Parquet frame log is
built from the pcap by `FrameLogProcess` in a separate process, off the relaying path.
`close()` flushes and closes every file.
Files written for a run with trace id T in DIR: T.pcap, T.parquet, T.connections.json.
No sockets, no event loop: the caller owns time and I/O scheduling.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

from amqpspec.amqp10.monitor import DEFAULT_MAX_FRAME_SIZE
from amqpspec.amqp10.origins import CLIENT, SERVER
from amqpspec.traces.framelog_process import FrameLogProcess
from amqpspec.traces.model import ConnectionInfo
from amqpspec.traces.pcap_writer import PcapWriter


@dataclass(slots=True)
class _Recording:
    info: ConnectionInfo
    digests: dict[str, object] = field(
        default_factory=lambda: {CLIENT: hashlib.sha256(), SERVER: hashlib.sha256()}
    )
    chunks: int = 0
    closed: bool = False


class Recorder:
    def __init__(
        self,
        out_dir: str,
        trace_id: str,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        os.makedirs(out_dir, exist_ok=True)
        self.trace_id = trace_id
        self.pcap_path = os.path.join(out_dir, f"{trace_id}.pcap")
        self.parquet_path = os.path.join(out_dir, f"{trace_id}.parquet")
        self.index_path = os.path.join(out_dir, f"{trace_id}.connections.json")
        self.max_frame_size = max_frame_size
        self._pcap = PcapWriter(self.pcap_path)
        self._pcap.flush()
        self._builder = FrameLogProcess(self.pcap_path, self.parquet_path, trace_id, max_frame_size)
        self.builder_exit_code: int | None = None
        self._open: dict[int, _Recording] = {}
        self._done: list[_Recording] = []
        self._closed = False
        self.write_index()

    def open_connection(self, connection_id: int, client: str, server: str, time: float) -> None:
        info = ConnectionInfo(connection_id, client, server, time)
        self._open[connection_id] = _Recording(info)
        self._pcap.open_connection(connection_id, client, server, time)

    def data(self, connection_id: int, direction: str, chunk: bytes, time: float) -> None:
        recording = self._open[connection_id]
        recording.info.byte_counts[direction] += len(chunk)
        recording.digests[direction].update(chunk)  # type: ignore[attr-defined]
        recording.chunks += 1
        self._pcap.data(connection_id, direction, chunk, time)

    def close_connection(self, connection_id: int, time: float, closer: str = CLIENT) -> None:
        recording = self._open.pop(connection_id, None)
        if recording is None:
            return
        recording.info.end_time = time
        recording.closed = True
        self._pcap.close_connection(connection_id, time, closer)
        self._done.append(recording)
        self.write_index()

    def flush(self) -> None:
        """Make what is recorded so far readable to the frame-log builder and to readers."""
        self._pcap.flush()

    def close(self, time: float) -> None:
        if self._closed:
            return
        self._closed = True
        for connection_id in list(self._open):
            self.close_connection(connection_id, time)
        self._pcap.close(time)
        self.write_index()
        self.builder_exit_code = self._builder.finish()

    def write_index(self) -> None:
        recordings = self._done + list(self._open.values())
        entries = []
        for recording in sorted(recordings, key=lambda r: r.info.connection_id):
            info = recording.info
            entries.append(
                {
                    "connection_id": info.connection_id,
                    "client": info.client,
                    "server": info.server,
                    "start_time": info.start_time,
                    "end_time": info.end_time,
                    "bytes": dict(info.byte_counts),
                    "sha256": {d: h.hexdigest() for d, h in recording.digests.items()},  # type: ignore[attr-defined]
                    "chunks": recording.chunks,
                    "closed": recording.closed,
                }
            )
        index = {
            "trace_id": self.trace_id,
            "pcap": os.path.basename(self.pcap_path),
            "parquet": os.path.basename(self.parquet_path),
            "connections": entries,
        }
        temporary = self.index_path + ".tmp"
        with open(temporary, "w") as file:
            json.dump(index, file, indent=1)
        os.replace(temporary, self.index_path)
