"""Capture files named by URL (`s3:`, `s3a:`, `gs:`, `hdfs:`, ...), opened through pyarrow.fs.

Owns: `is_url(text)` (a scheme other than `file:`), `filesystem(url)` (pyarrow's
`FileSystem.from_uri`, called for every file a task opens, so it reads the environment of
the process it runs in; `s3a:` and `s3n:`, Hadoop's names, are read as `s3:`), `UrlError`
(a URL this machine cannot open, said in one line with what is missing), `open_file` /
`open_stream`, `read_ranges` (byte ranges of one file into one buffer, one ranged read
each: what a split of a capture holds, never the whole file), `Pages` (small reads at
rising offsets through one page buffer: the split planner's header walk, one ranged read
per page, not per record), `child_url` and `unreadable`.
Local paths never come here: the capture readers map local files into memory
(traces/pcap_vector.py), and that path is left as it is.

Settings are pyarrow's own (docs/triage.md, 'Inputs by URL'): for S3 the AWS SDK's
environment, AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) for an S3-compatible server,
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_REGION or
AWS_DEFAULT_REGION, AWS_PROFILE and ~/.aws, or options in the URL's query
(`?endpoint_override=host:port&scheme=http&region=...`); for GCS the Google application
default credentials; for HDFS libhdfs (ARROW_LIBHDFS_DIR or HADOOP_HOME) and the Hadoop
jars on CLASSPATH.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

# a URL's scheme: two characters at least, so that a Windows drive (C:) is a path
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_ALIASES = {"s3a": "s3", "s3n": "s3"}  # Hadoop's names for S3
_HINTS = {
    "hdfs": "pyarrow's HDFS needs libhdfs (ARROW_LIBHDFS_DIR or HADOOP_HOME) and the Hadoop "
    "jars on CLASSPATH (CLASSPATH=$(hadoop classpath --glob))",
    "viewfs": "pyarrow's HDFS needs libhdfs (ARROW_LIBHDFS_DIR or HADOOP_HOME) and the Hadoop "
    "jars on CLASSPATH (CLASSPATH=$(hadoop classpath --glob))",
}
PAGE_BYTES = 8 * 1024 * 1024


class UrlError(Exception):
    """A URL that cannot be opened here (the message names it and what is missing)."""


def is_url(text: str) -> bool:
    """A URL of a scheme other than `file:` (those are local paths)."""
    match = SCHEME.match(text)
    return bool(match) and match.group(0).lower() != "file:"


def _from_uri(url: str) -> str:
    parts = urlsplit(url)
    scheme = _ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, parts.fragment))


def filesystem(url: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, path in it) for `url`; UrlError when pyarrow cannot open it."""
    import pyarrow.fs as pafs

    parts = urlsplit(url)
    try:
        fs, path = pafs.FileSystem.from_uri(_from_uri(url))
    except Exception as exc:  # ArrowInvalid (unknown scheme), OSError (no libhdfs) ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        hint = _HINTS.get(parts.scheme.lower())
        raise UrlError(
            f"{url}: pyarrow cannot open {parts.scheme}: URLs here ({first})"
            + (f"; {hint}" if hint else "")
        ) from None
    return fs, path


def _error(url: str, exc: Exception) -> UrlError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return UrlError(f"{url}: {first}")


def open_file(url: str) -> Any:
    """A pyarrow RandomAccessFile on `url` (ranged reads; `.size()`)."""
    fs, path = filesystem(url)
    try:
        return fs.open_input_file(path)
    except Exception as exc:
        raise _error(url, exc) from None


def open_stream(url: str) -> Any:
    """A pyarrow input stream on `url`, read front to back (gunzipping, copying)."""
    fs, path = filesystem(url)
    try:
        return fs.open_input_stream(path, compression=None)
    except Exception as exc:
        raise _error(url, exc) from None


def read_ranges(file: Any, ranges: Sequence[tuple[int, int]]) -> bytearray:
    """The bytes of (offset, length) ranges of an open file, one after the other, in one
    buffer of their total length (no copy in between)."""
    out = bytearray(sum(length for _offset, length in ranges))
    view = memoryview(out)
    at = 0
    for offset, length in ranges:
        file.seek(offset)
        end = at + length
        while at < end:
            got = file.readinto(view[at:end])
            if not got:
                raise EOFError(f"file ends before byte {offset + length}")
            at += got
    view.release()
    return out


class Pages:
    """Small reads at (mostly) rising offsets of an open file, served from one buffer of
    `page` bytes refilled by one ranged read: a header walk costs a read per page."""

    def __init__(self, file: Any, page: int = PAGE_BYTES) -> None:
        self.file = file
        self.size = file.size()
        self.page = page
        self.base = 0
        self.data = b""

    def read(self, offset: int, length: int) -> bytes:
        start = offset - self.base
        if start < 0 or start + length > len(self.data):
            self.base = offset
            self.data = self.file.read_at(min(max(self.page, length), self.size - offset), offset)
            start = 0
        return self.data[start : start + length]


def child_url(root_url: str, root_path: str, child_path: str) -> str:
    """The URL of `child_path` (a path in the file system, under `root_path`) spelt as the
    user spelt `root_url`: same scheme (s3a: stays s3a:), authority and query."""
    parts = urlsplit(root_url)
    suffix = child_path[len(root_path.rstrip("/")) :]
    path = parts.path.rstrip("/") + quote(suffix, safe="/")
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def unreadable(urls: Sequence[str]) -> list[str]:
    """Why each of `urls` that cannot be read here cannot (empty: all can): the file
    system cannot be opened, or the file is not there (one metadata request per file)."""
    import pyarrow.fs as pafs

    problems: list[str] = []
    by_fs: dict[tuple[str, str, str], tuple[Any, list[tuple[str, str]]]] = {}
    for url in urls:
        parts = urlsplit(url)
        key = (parts.scheme.lower(), parts.netloc, parts.query)
        try:
            fs, path = filesystem(url)
        except UrlError as exc:
            problems.append(str(exc))
            continue
        by_fs.setdefault(key, (fs, []))[1].append((url, path))
    for fs, entries in by_fs.values():
        try:
            infos = fs.get_file_info([path for _url, path in entries])
        except Exception as exc:
            problems.append(str(_error(entries[0][0], exc)))
            continue
        for (url, _path), info in zip(entries, infos):
            if info.type == pafs.FileType.NotFound:
                problems.append(f"{url}: no such file or directory")
    return problems
