"""A broker's own view of a run, read from its management API (RabbitMQ's, or the reference
broker's admin API, which answers the same paths): memory alarm, memory used, queue depth and
messages paged out to disk, every `interval` seconds.

Owns: `BrokerWatch` (a thread polling GET /api/nodes and GET /api/queues/%2F/QUEUE). Touches
only that HTTP API; an unanswered poll is skipped, never retried in a loop.
"""

from __future__ import annotations

import itertools
import threading
import time

from amqpspec.reference_broker.admin.client import ManagementClient, ManagementError

INTERVAL = 0.5  # seconds between polls


class BrokerWatch:
    """Samples [seconds since `origin`, queue depth, memory used MiB, alarm 0/1, paged out]."""

    def __init__(self, admin_url: str, queue: str, origin: float, interval: float = INTERVAL):
        self.admin_url = admin_url
        self.queue = queue
        self.origin = origin
        self.interval = interval
        self.samples: list[list[float]] = []
        self._alarm_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _poll(self, admin: ManagementClient) -> None:
        try:
            node = admin.call("GET", "/api/nodes")[0]
            queue = admin.queue(self.queue)
        except (OSError, ManagementError, ValueError, IndexError, KeyError):
            return
        now = time.monotonic()
        alarm = bool(node.get("mem_alarm"))
        if alarm and self._alarm_since is None:
            self._alarm_since = now
        elif not alarm:
            self._alarm_since = None
        self.samples.append(
            [
                round(now - self.origin, 2),
                int(queue.get("messages") or 0),
                round((node.get("mem_used") or 0) / 2**20, 1),
                int(alarm),
                int(queue.get("messages_paged_out") or 0),  # RabbitMQ classic queues only
            ]
        )

    def _run(self) -> None:
        with ManagementClient(self.admin_url, timeout=5.0) as admin:
            while True:
                self._poll(admin)
                if self._stop.wait(self.interval):
                    return

    def start(self) -> BrokerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def alarm_seconds(self) -> float:
        """How long the memory alarm has been on without a break (0: it is off)."""
        since = self._alarm_since
        return 0.0 if since is None else time.monotonic() - since

    def alarm_total(self) -> float:
        """Seconds the alarm was on over the run, counted between consecutive samples."""
        pairs = itertools.pairwise(self.samples)
        return round(sum(b[0] - a[0] for a, b in pairs if a[3]), 2)
