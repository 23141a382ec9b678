"""Input discovery: command-line paths -> the trace files of a triage run, each with its kind.

Owns: `discover(paths) -> list[InputFile]` and `InputError` (bad input: the CLI exits 2
naming the file). Kinds are decided by magic bytes, never by name: classic pcap (either
byte order, micro- or nanosecond), pcapng, Parquet frame log (traces/framelog.py schema),
each possibly gzip'd. Directories are walked recursively. A conformance results dir
(`index.json` + `traces/<broker>/`) contributes the captures under traces/ (not the
allure copies), labelled with the broker named in index.json; a fuzz output dir
(`findings.json`, `findings/<id>/`) is walked like any directory. Inside directories,
files that are not traces (text traces, JSON, reports) are skipped, but a file whose name
says it is a capture or frame log and is not one is bad input. Reads only file heads;
writes nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

from amqpspec.traces.pcap_reader import capture_kind

PCAP, PCAPNG, FRAMELOG = "pcap", "pcapng", "framelog"
_TRACE_SUFFIXES = tuple(
    name + gz for name in (".pcap", ".pcapng", ".cap", ".parquet") for gz in ("", ".gz")
)
_GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """An input that is not a readable trace (the message names the file)."""


@dataclass(frozen=True, slots=True)
class InputFile:
    path: str
    kind: str  # pcap, pcapng or framelog
    gzip: bool = False
    broker: str | None = None  # from a conformance results dir's index.json
    size: int = 0


def kind_of(path: str) -> tuple[str, bool] | None:
    """(kind, gzipped) from the file's magic bytes, or None when it is no trace."""
    try:
        with open(path, "rb") as file:
            head = file.read(4)
            gzipped = head[:2] == _GZIP_MAGIC
        if gzipped:
            with gzip.open(path, "rb") as file:
                head = file.read(4)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if head == b"PAR1":
        return FRAMELOG, gzipped
    kind = capture_kind(head)
    return (kind, gzipped) if kind else None


def discover(paths: list[str]) -> list[InputFile]:
    """Every trace file under `paths`, sorted by path (so runs are reproducible)."""
    found: dict[str, InputFile] = {}
    for path in paths:
        if os.path.isdir(path):
            _walk(Path(path), found, None)
        elif os.path.exists(path):
            found[path] = _explicit(path, None)
        else:
            raise InputError(f"{path}: no such file or directory")
    if not found:
        raise InputError(f"{' '.join(paths)}: no pcap, pcapng or Parquet frame log found")
    return [found[key] for key in sorted(found)]


def _explicit(path: str, broker: str | None) -> InputFile:
    kind = kind_of(path)
    if kind is None:
        raise InputError(f"{path}: not a pcap, pcapng or Parquet frame log (gzip'd or not)")
    return InputFile(path, kind[0], kind[1], broker, os.path.getsize(path))


def _walk(root: Path, found: dict[str, InputFile], broker: str | None) -> None:
    brokers = _results_brokers(root)
    if brokers:  # a results dir: its traces/ only (allure/ holds copies of the same pcaps)
        if (root / "traces").is_dir():
            _walk_traces(root / "traces", found, brokers)
        return
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            _walk(entry, found, broker)
        elif entry.is_file():
            name = entry.name.lower()
            try:
                kind = kind_of(str(entry))
            except InputError:
                if name.endswith(_TRACE_SUFFIXES):
                    raise
                continue  # an unreadable file that does not claim to be a trace
            if kind is not None:
                found[str(entry)] = InputFile(
                    str(entry), kind[0], kind[1], broker, entry.stat().st_size
                )
            elif name.endswith(_TRACE_SUFFIXES):
                raise InputError(f"{entry}: not a pcap, pcapng or Parquet frame log")


def _walk_traces(traces: Path, found: dict[str, InputFile], brokers: dict[str, str]) -> None:
    for entry in sorted(traces.iterdir()):
        label = brokers.get(entry.name)
        if entry.is_dir():
            _walk(entry, found, label)


def _results_brokers(root: Path) -> dict[str, str]:
    """traces/ subdirectory name -> broker name, for a conformance results dir."""
    index = root / "index.json"
    if not index.is_file():
        return {}
    try:
        brokers = json.loads(index.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{index}: not a readable results index ({exc})") from None
    from amqpspec.conformance.results import case_file_stem  # the results layout's own naming

    return {case_file_stem(name): name for name in brokers} if isinstance(brokers, dict) else {}
