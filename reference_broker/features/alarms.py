"""Resource alarms: memory (process RSS vs a watermark) and disk (free space vs a limit).

Owns: alarm state and its observers. Readings come from injectable functions (defaults read
/proc/self/statm and shutil.disk_usage; while the memory alarm is on, free C-heap pages are
handed back first, glibc malloc_trim); time is passed in (`check(now)`), never read here;
the server schedules `check` every `interval` seconds, and the protocol layer reports bytes
read (`bytes_received`) so a reading is also taken after every 1/32 of the memory watermark
has arrived. An alarm is active while its
resource is over the limit OR it was raised by hand (admin API `PUT /api/alarms/{kind}`);
`clear` removes the manual part only, as a resource alarm clears when the resource does.

Observers are called as `observer(kind, active, any_active)` on every change. The
protocol layer's observer sends every session a flow with incoming-window 0 when
`any_active` becomes True and restores the windows when it becomes False (RabbitMQ 4,
PR #9022 item 22); consuming, attaching and new connections go on.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass

MEMORY = "memory"
DISK = "disk"
KINDS = (MEMORY, DISK)

Observer = Callable[[str, bool, bool], None]


def read_process_rss() -> int:
    """Resident set size of this process in bytes (/proc/self/statm, field 2 * page size)."""
    with open("/proc/self/statm", "rb") as statm:
        fields = statm.read().split()
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc `malloc_trim(0)`; nothing
    where it is missing). CPython frees large objects with free(), which leaves the heap
    pages in the process: without this the RSS of a broker whose queues drained stays over
    the watermark and the memory alarm never clears (bench/overload/alarm_flood.py)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


def read_total_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def disk_free_reader(path: str | os.PathLike[str]) -> Callable[[], int]:
    def read() -> int:
        return shutil.disk_usage(path).free

    return read


@dataclass(slots=True)
class AlarmState:
    kind: str
    limit: int  # memory: high watermark in bytes; disk: minimum free bytes
    reading: int | None = None
    resource: bool = False  # the resource is over its limit
    manual: bool = False  # raised through the admin API
    raised_count: int = 0

    @property
    def active(self) -> bool:
        return self.resource or self.manual

    def as_json(self) -> dict[str, object]:
        return {
            "resource": self.kind,
            "active": self.active,
            "manual": self.manual,
            "triggered_by_resource": self.resource,
            "limit": self.limit,
            "reading": self.reading,
        }


class ResourceAlarms:
    def __init__(
        self,
        *,
        memory_limit: int,
        disk_free_limit: int,
        read_memory: Callable[[], int] = read_process_rss,
        release_memory: Callable[[], None] = release_free_heap,
        read_disk_free: Callable[[], int] | None = None,
        data_dir: str | os.PathLike[str] = ".",
        interval: float = 1.0,
    ) -> None:
        self.states = {
            MEMORY: AlarmState(MEMORY, memory_limit),
            DISK: AlarmState(DISK, disk_free_limit),
        }
        self._read_memory = read_memory
        self._release_memory = release_memory
        self._read_disk_free = read_disk_free or disk_free_reader(data_dir)
        self.interval = interval
        self._next_check: float | None = None
        # memory grows with what peers send: read it again after this many bytes arrive,
        # whatever the timer says, so a fast publisher on a loaded machine cannot outrun the
        # interval (a 1/32 of the watermark between readings)
        self.bytes_between_readings = max(1, memory_limit // 32) if memory_limit > 0 else 0
        self._bytes_since_reading = 0
        self._observers: list[Observer] = []

    # ------------------------------------------------------------------ observers
    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    @property
    def any_active(self) -> bool:
        return any(state.active for state in self.states.values())

    def active_kinds(self) -> list[str]:
        return [kind for kind, state in self.states.items() if state.active]

    def _change(self, kind: str, *, resource: bool | None = None, manual: bool | None = None):
        state = self.states[kind]
        before = state.active
        if resource is not None:
            state.resource = resource
        if manual is not None:
            state.manual = manual
        after = state.active
        if after == before:
            return False
        if after:
            state.raised_count += 1
        any_active = self.any_active
        for observer in list(self._observers):
            observer(kind, after, any_active)
        return True

    # ------------------------------------------------------------------ manual
    def _kind(self, kind: str) -> str:
        if kind not in self.states:
            raise ValueError(f"unknown alarm {kind!r}; known: {', '.join(KINDS)}")
        return kind

    def raise_alarm(self, kind: str) -> bool:
        """Raise by hand; returns True if the alarm became active."""
        return self._change(self._kind(kind), manual=True)

    def clear_alarm(self, kind: str) -> bool:
        """Clear the manual part; returns True if the alarm became inactive."""
        return self._change(self._kind(kind), manual=False)

    # ------------------------------------------------------------------ periodic check
    def check(self, now: float) -> list[str]:
        """Take readings and update resource alarms. Returns kinds whose state changed.
        Does nothing before `next_check_at(now)` unless it was never run."""
        if self._next_check is not None and now < self._next_check:
            return []
        self._next_check = now + self.interval
        self._bytes_since_reading = 0
        if self.states[MEMORY].resource:  # over the watermark: free pages back first
            self._release_memory()
        return self.apply_readings(memory=self._read_memory(), disk_free=self._read_disk_free())

    def bytes_received(self, count: int, now: float) -> list[str]:
        """Count bytes read from peers; once `bytes_between_readings` arrived since the last
        reading, take one now (the memory alarm bounds RSS by bytes, not only by time)."""
        if not self.bytes_between_readings:
            return []
        self._bytes_since_reading += count
        if self._bytes_since_reading < self.bytes_between_readings:
            return []
        self._next_check = None
        return self.check(now)

    def apply_readings(self, *, memory: int | None = None, disk_free: int | None = None):
        """Update from given readings: memory alarm while RSS >= watermark, disk alarm while
        free space < limit (RabbitMQ's rules)."""
        changed: list[str] = []
        if memory is not None:
            state = self.states[MEMORY]
            state.reading = memory
            if self._change(MEMORY, resource=memory >= state.limit):
                changed.append(MEMORY)
        if disk_free is not None:
            state = self.states[DISK]
            state.reading = disk_free
            if self._change(DISK, resource=disk_free < state.limit):
                changed.append(DISK)
        return changed

    def next_check_at(self) -> float | None:
        return self._next_check

    def as_json(self) -> dict[str, object]:
        return {kind: state.as_json() for kind, state in self.states.items()}


def alarms_from_config(
    memory_high_watermark: float,
    memory_high_watermark_bytes: int,
    disk_free_limit_bytes: int,
    check_interval: float,
    data_dir: str | os.PathLike[str] | None,
) -> ResourceAlarms:
    """Build from the fields of config.AlarmConfig: `alarms_from_config(**asdict(cfg.alarms),
    data_dir=cfg.data_dir)`; the memory limit is absolute when given, else a fraction of RAM."""
    if memory_high_watermark_bytes > 0:
        memory_limit = memory_high_watermark_bytes
    else:
        memory_limit = int(read_total_memory() * memory_high_watermark)
    return ResourceAlarms(
        memory_limit=memory_limit,
        disk_free_limit=disk_free_limit_bytes,
        data_dir=data_dir or ".",
        interval=check_interval,
    )
