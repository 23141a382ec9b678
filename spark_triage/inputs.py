"""Input discovery: command-line paths -> the trace files of a triage run, each with its kind.

Owns: `discover(paths) -> list[InputFile]`, `local_path`, `unreadable` and `InputError` (bad
input: the CLI exits 2 naming the file). Paths are made absolute against the caller's working
directory and checked readable before anything else: a Spark executor runs in its worker's
directory, where a relative path names another file, and every input the driver cannot read
is named at once, before a job starts. A `file:` URL is its path; a URL of another scheme
(`hdfs:`, `s3a:`, ...) is not rewritten and is bad input (the capture readers map local
files into memory: mount the file system at the same path on every node). Kinds are decided
by magic bytes, never by name: classic pcap (either byte order, micro- or nanosecond),
pcapng, Parquet frame log (traces/framelog.py schema), each possibly gzip'd. Directories are
walked recursively. A conformance results dir (`index.json` + `traces/<broker>/`)
contributes the captures under traces/ (not the allure copies), labelled with the broker
named in index.json; a fuzz output dir (`findings.json`, `findings/<id>/`) is walked like
any directory. Inside directories, files that are not traces (text traces, JSON, reports)
are skipped, but a file whose name says it is a capture or frame log and is not one is bad
input. Reads only file heads; writes nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amqpspec.traces.pcap_reader import capture_kind

PCAP, PCAPNG, FRAMELOG = "pcap", "pcapng", "framelog"
_TRACE_SUFFIXES = tuple(
    name + gz for name in (".pcap", ".pcapng", ".cap", ".parquet") for gz in ("", ".gz")
)
_GZIP_MAGIC = b"\x1f\x8b"
# a URL's scheme: two characters at least, so that a Windows drive (C:) is a path
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


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


def local_path(given: str) -> str:
    """The absolute local path of a command-line input, as typed relative to the working
    directory, or of a `file:` URL; InputError for a URL of any other scheme."""
    if _SCHEME.match(given):
        parts = urlsplit(given)
        if parts.scheme.lower() != "file":
            raise InputError(
                f"{given}: a {parts.scheme}: URL; triage reads local paths and file: URLs "
                "(the capture readers map files into memory): mount the file system at the "
                "same path on the driver and every executor"
            )
        if parts.netloc not in ("", "localhost"):
            raise InputError(f"{given}: a file: URL must name a local path (file:///...)")
        return os.path.normpath(unquote(parts.path))
    return os.path.abspath(os.path.expanduser(given))


def unreadable(path: str, given: str | None = None) -> str | None:
    """Why `path` cannot be read here (None when it can), naming it as it was typed."""
    shown = path if given in (None, path) else f"{given} (= {path})"
    if not os.path.exists(path):
        return f"{shown}: no such file or directory"
    mode = os.R_OK | os.X_OK if os.path.isdir(path) else os.R_OK
    if not os.access(path, mode):
        return f"{shown}: permission denied"
    return None


def discover(paths: list[str]) -> list[InputFile]:
    """Every trace file under `paths`, by absolute path, sorted (so runs are reproducible).
    Every input that cannot be read is named in the one InputError."""
    problems: list[str] = []
    resolved: list[str] = []
    for given in paths:
        try:
            path = local_path(given)
        except InputError as exc:
            problems.append(str(exc))
            continue
        problem = unreadable(path, given)
        if problem:
            problems.append(problem)
        else:
            resolved.append(path)
    if problems:
        raise InputError("; ".join(problems))
    found: dict[str, InputFile] = {}
    for path in resolved:
        if os.path.isdir(path):
            _walk(Path(path), found, None)
        else:
            found[path] = _explicit(path, None)
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
