"""Input discovery: command-line paths and URLs -> the trace files of a triage run, each with
its kind.

Owns: `discover(paths) -> list[InputFile]`, `local_path`, `unreadable` and `InputError` (bad
input: the CLI exits 2 naming the file). Local paths are made absolute against the caller's
working directory and checked readable before anything else: a Spark executor runs in its
worker's directory, where a relative path names another file, and every input the driver
cannot read is named at once, before a job starts. A `file:` URL is its path. A URL of
another scheme (`s3a:`, `s3:`, `gs:`, `hdfs:` ...) is passed as given: the driver opens it
through pyarrow.fs (traces/urlfs.py), lists a prefix ("directory") recursively, reads each
object's head for its kind and takes its size from the listing; the executors open the URL
themselves and read their splits by byte range (traces/pcap_vector.py). A scheme pyarrow
cannot open here (`hdfs:` without libhdfs, an unknown one) is bad input, named with what is
missing. Kinds are decided by magic bytes, never by name: classic pcap (either byte order,
micro- or nanosecond), pcapng, Parquet frame log (traces/framelog.py schema), each possibly
gzip'd. Directories are walked recursively. A conformance results dir (`index.json` +
`traces/<broker>/`) contributes the captures under traces/ (not the allure copies),
labelled with the broker named in index.json, on a file system or under a URL prefix; a
fuzz output dir (`findings.json`, `findings/<id>/`) is walked like any directory. Inside
directories, files that are not traces (text traces, JSON, reports) are skipped, but a file
whose name says it is a capture or frame log and is not one is bad input. Reads only file
heads; writes nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amqpspec.traces import urlfs
from amqpspec.traces.pcap_reader import capture_kind

PCAP, PCAPNG, FRAMELOG = "pcap", "pcapng", "framelog"
_TRACE_SUFFIXES = tuple(
    name + gz for name in (".pcap", ".pcapng", ".cap", ".parquet") for gz in ("", ".gz")
)
_GZIP_MAGIC = b"\x1f\x8b"
_SCHEME = urlfs.SCHEME
_HEAD_THREADS = 16  # objects whose heads are read at once under a URL prefix


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
    """(kind, gzipped) from the file's magic bytes, or None when it is no trace; `path`: a
    local path or a URL (traces/urlfs.py)."""
    try:
        if urlfs.is_url(path):
            return _kind(*_url_head(path))
        with open(path, "rb") as file:
            head = file.read(4)
            gzipped = head[:2] == _GZIP_MAGIC
        if gzipped:
            with gzip.open(path, "rb") as file:
                head = file.read(4)
    except (OSError, EOFError, zlib.error, urlfs.UrlError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    return _kind(head, gzipped)


def _kind(head: bytes, gzipped: bool) -> tuple[str, bool] | None:
    if head == b"PAR1":
        return FRAMELOG, gzipped
    kind = capture_kind(head)
    return (kind, gzipped) if kind else None


def _url_head(url: str) -> tuple[bytes, bool]:
    """The first four (gunzipped) bytes of the object at `url`, and whether it is gzip'd."""
    with urlfs.open_stream(url) as stream:
        head = stream.read(4)
        if head[:2] != _GZIP_MAGIC:
            return head, False
        with urlfs.open_stream(url) as again, gzip.open(again, "rb") as file:
            return file.read(4), True


def local_path(given: str) -> str:
    """The absolute local path of a command-line input, as typed relative to the working
    directory, or of a `file:` URL; InputError for a URL of any other scheme (those are
    passed as given: `discover`)."""
    if _SCHEME.match(given):
        parts = urlsplit(given)
        if parts.scheme.lower() != "file":
            raise InputError(f"{given}: a {parts.scheme}: URL, not a local path")
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
    """Every trace file under `paths`, by absolute path or URL, sorted (so runs are
    reproducible). Every input that cannot be read is named in the one InputError."""
    problems: list[str] = []
    resolved: list[str] = []
    urls: list[str] = []
    for given in paths:
        if urlfs.is_url(given):
            urls.append(given)
            continue
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
    problems += urlfs.unreadable(urls)
    if problems:
        raise InputError("; ".join(problems))
    found: dict[str, InputFile] = {}
    for path in resolved:
        if os.path.isdir(path):
            _walk(Path(path), found, None)
        else:
            found[path] = _explicit(path, None)
    for url in urls:
        _walk_url(url, found)
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
        text = index.read_text()
    except OSError as exc:
        raise InputError(f"{index}: not a readable results index ({exc})") from None
    return _brokers(text, str(index))


def _brokers(text: str, index: str) -> dict[str, str]:
    """traces/ subdirectory name -> broker name, from a results index's text."""
    try:
        brokers = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{index}: not a readable results index ({exc})") from None
    from amqpspec.conformance.run.results import case_file_stem  # the results layout's own naming

    return {case_file_stem(name): name for name in brokers} if isinstance(brokers, dict) else {}


def _walk_url(url: str, found: dict[str, InputFile]) -> None:
    """The trace files at or under `url` (a prefix is listed recursively, as a directory is
    walked), by URL spelt as the user spelt `url`."""
    import pyarrow.fs as pafs

    fs, root = urlfs.filesystem(url)
    try:
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.File:
            listing = [info]
        else:
            listing = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except OSError as exc:
        raise InputError(f"{url}: cannot list ({str(exc).splitlines()[0]})") from None
    if info.type == pafs.FileType.File:
        kind = kind_of(url)
        if kind is None:
            raise InputError(f"{url}: not a pcap, pcapng or Parquet frame log (gzip'd or not)")
        found[url] = InputFile(url, kind[0], kind[1], None, info.size)
        return
    files = {entry.path: entry.size for entry in listing if entry.type == pafs.FileType.File}
    results = _url_results_dirs(url, root, files)
    chosen: list[tuple[str, str | None, int]] = []  # (path in fs, broker, size)
    for path in sorted(files):
        keep, broker = _in_results_dirs(path, results)
        if keep:
            chosen.append((path, broker, files[path]))
    named = [(urlfs.child_url(url, root, path), broker, size) for path, broker, size in chosen]

    def head(item: tuple[str, str | None, int]) -> tuple[str, BaseException | tuple | None]:
        try:
            return item[0], kind_of(item[0])
        except InputError as exc:
            return item[0], exc

    with ThreadPoolExecutor(_HEAD_THREADS) as pool:
        kinds = dict(pool.map(head, named))
    for child, broker, size in named:
        kind = kinds[child]
        claims = child.lower().endswith(_TRACE_SUFFIXES)
        if isinstance(kind, InputError):
            if claims:
                raise kind
            continue  # an unreadable object that does not claim to be a trace
        if kind is not None:
            found[child] = InputFile(child, kind[0], kind[1], broker, size)
        elif claims:
            raise InputError(f"{child}: not a pcap, pcapng or Parquet frame log")


def _url_results_dirs(url: str, root: str, files: dict[str, int]) -> dict[str, dict[str, str]]:
    """Results dirs under a URL prefix (an `index.json` naming brokers): dir -> traces/
    subdirectory name -> broker."""
    found = {}
    for path in files:
        if path.rsplit("/", 1)[-1] != "index.json":
            continue
        child = urlfs.child_url(url, root, path)
        try:
            with urlfs.open_stream(child) as stream:
                text = stream.read().decode()
        except (OSError, urlfs.UrlError, UnicodeDecodeError) as exc:
            raise InputError(f"{child}: not a readable results index ({exc})") from None
        brokers = _brokers(text, child)
        if brokers:
            found[path.rsplit("/", 1)[0]] = brokers
    return found


def _in_results_dirs(path: str, results: dict[str, dict[str, str]]) -> tuple[bool, str | None]:
    """Whether `path` is taken (a results dir contributes its traces/<broker>/ files only)
    and its broker label, as `_walk` decides for a local tree."""
    broker = None
    for folder in sorted(results, key=len):
        if not path.startswith(folder + "/"):
            continue
        parts = path[len(folder) + 1 :].split("/")
        if len(parts) < 3 or parts[0] != "traces":
            return False, None
        broker = results[folder].get(parts[1])
    return True, broker
