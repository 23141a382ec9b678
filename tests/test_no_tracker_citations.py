"""No tracked file outside reports/ cites an issue of this project's own tracker.

Code, comments, docs and scripts cite what holds the reasoning instead: the AMQP 1.0 spec
section (e.g. 2.6.7), the doc (docs/conformance.md, bench/README.md, ...) or a plain
description. Upstream references stay allowed: an issue number right after an upstream
project's name ("RabbitMQ issue #2597") or written '#' with three or more digits. Checked
over every file `git ls-files` lists (README.md and bench/README.md included), with line
breaks and comment markers folded so that a citation wrapped over two lines is still found.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# "issue" or "issues", a space or an underscore (identifiers), an optional '#' and a number;
# or a section mark with a lone number (the tracker's issue sections; spec sections are
# dotted: 2.6.7).
CITATION = re.compile(r"(?<![a-z])issues?[ _]#?\d+|§\s*\d+(?![.\d])", re.IGNORECASE)
# The allow-list: an upstream project named just before the match, or '#' and 3+ digits.
UPSTREAM_PROJECTS = ("rabbitmq", "proton", "qpid", "artemis", "activemq", "solace", "azure")
UPSTREAM_BEFORE = re.compile(rf"\b(?:{'|'.join(UPSTREAM_PROJECTS)})\b[\w'.-]*\s*$", re.I)
UPSTREAM_NUMBER = re.compile(r"#\d{3,}$")
# A line break with the next line's indentation and comment marker ("#", "//", " * ").
LINE_BREAK = re.compile(r"[ \t]*\r?\n[ \t]*(?:(?:#+|//|\*)[ \t]+)?")


def tracker_citations(text: str) -> list[str]:
    """The citations of the project's tracker in `text` (each with a little context)."""
    flat = LINE_BREAK.sub(" ", text)
    found = []
    for match in CITATION.finditer(flat):
        before = flat[max(0, match.start() - 40) : match.start()]
        if UPSTREAM_BEFORE.search(before) or UPSTREAM_NUMBER.search(match.group()):
            continue
        found.append(flat[max(0, match.start() - 30) : match.end() + 10])
    return found


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    paths = [name for name in listed.split("\0") if name and not name.startswith("reports/")]
    return [ROOT / name for name in paths]


def test_matcher_flags_tracker_citations_and_allows_upstream_ones():
    issue = "issue"  # spelled apart so that this file does not match itself
    for cited in (
        f"(see {issue} 12)",
        f"{issue.title()} 4 acceptance",
        f"({issue} 13 \N{SECTION SIGN}2)",
        f"{issue}s 12 and 13",
        f"def test_defaults_match_{issue}_4():",
        f"a faster __init__ ({issue}\n    # 12: one per message)",
        "pipelined (\N{SECTION SIGN}1)",
    ):
        assert tracker_citations(cited), cited
    for upstream in (
        f"RabbitMQ {issue} #2597",
        f"the qpid-proton {issue} 2345",
        f"see {issue} #1234 upstream",
        "the 2.6.7 rule (\N{SECTION SIGN}2.6.7)",
        "example/issue#1",
        "known_issue(signature)",
    ):
        assert not tracker_citations(upstream), upstream


def test_no_tracked_file_cites_the_project_tracker():
    files = tracked_files()
    assert len(files) > 100  # the listing worked
    offenders = []
    for path in files:
        if not path.is_file():
            continue  # deleted in the work tree, not yet committed
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary (captures, compiled files)
        for citation in tracker_citations(data.decode("utf-8", errors="replace")):
            offenders.append(f"{path.relative_to(ROOT)}: ...{citation}...")
    assert not offenders, "cite the spec section or the doc instead:\n" + "\n".join(offenders)
