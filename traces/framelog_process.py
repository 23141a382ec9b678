"""The frame-log builder that runs beside the recording proxy, in its own process.

Owns: `FrameLogProcess`, a child process that follows the pcap the proxy is writing
(`follow_pcap`), reassembles and decodes it with the same reader as any foreign capture,
and streams the rows to the Parquet frame log. Decoding is the expensive part of
recording (~20 us a frame in Python); doing it here keeps it off the relaying event
loop, so the proxy only copies bytes and appends pcap records. The pcap on disk is the
queue between the two: memory stays bounded however far the builder lags; `finish()`
tells it the pcap is complete and waits until the Parquet file is closed.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import sys

from amqpspec.amqp10.monitor import DEFAULT_MAX_FRAME_SIZE
from amqpspec.traces.framelog import FrameLogWriter
from amqpspec.traces.pcap_reader import follow_pcap, tcp_segments
from amqpspec.traces.reassembly import PcapTraceReader


def build_frame_log(
    pcap_path: str,
    parquet_path: str,
    trace_id: str,
    done: multiprocessing.synchronize.Event | None = None,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    rows_per_group: int = 16384,
) -> int:
    """Convert a (possibly still growing) pcap to a frame log; returns the rows written."""
    finished = done.is_set if done is not None else (lambda: True)
    reader = PcapTraceReader(pcap_path, ports=(), max_frame_size=max_frame_size)
    writer = FrameLogWriter(parquet_path, trace_id, rows_per_group)
    try:
        for item in reader.items(tcp_segments(follow_pcap(pcap_path, finished))):
            writer.add(item, reader.connections.get(item.connection_id))
    finally:
        writer.close(reader.connections.values())
    return writer.rows_written


def _child(
    pcap_path: str,
    parquet_path: str,
    trace_id: str,
    done: multiprocessing.synchronize.Event,
    max_frame_size: int,
) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        build_frame_log(pcap_path, parquet_path, trace_id, done, max_frame_size)
    except Exception as exc:  # pragma: no cover - reported, then the parent sees exit 1
        print(f"amqpspec capture: frame log builder failed: {exc!r}", file=sys.stderr)
        raise SystemExit(1) from exc


class FrameLogProcess:
    def __init__(
        self,
        pcap_path: str,
        parquet_path: str,
        trace_id: str,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self._done = context.Event()
        self._process = context.Process(
            target=_child,
            args=(pcap_path, parquet_path, trace_id, self._done, max_frame_size),
            name="amqpspec-framelog",
            daemon=True,
        )
        self._process.start()

    def finish(self, timeout: float | None = None) -> int | None:
        """The pcap is complete: let the builder reach its end; returns its exit code."""
        self._done.set()
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)
        return self._process.exitcode
