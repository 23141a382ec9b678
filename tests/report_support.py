"""Helpers of the report tests: a synthetic results directory with every kind of cell, an HTML
link checker (every href to a file exists, every #fragment names an element) and the WCAG 2.1
contrast ratio."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from amqpspec.conformance.run.results import case_file_stem, format_expectations

BROKER = "acme"
OPEN_LINE = (
    ' 0.002 [conn 1] #8 0 <- @open(16) [container-id="acme-1", max-frame-size=65536, '
    'properties={:product="AcmeMQ", :version="9.1.2"}]'
)

# case id -> (verdict, level, reason, extra entry fields)
CELLS: dict[str, tuple[str, str, str, dict]] = {
    "2.6.7/credit-single-grant": ("OK", "MUST", "", {}),
    "2.6.7/credit-single-grant/pipelined": (
        "FAILED", "MUST", "expected 1 transfer; observed 2 (frame #12)", {},
    ),
    "2.6.7/drain-exact": (
        "FAILED", "MUST", "expected a flow with link-credit 0; observed end (frame #38)", {},
    ),
    "2.6.7/drain-exact/pipelined": (
        "FAILED", "MUST", "expected a flow with link-credit 0; observed end (frame #40)", {},
    ),
    "2.2/header-not-amqp": ("NON-STRICT", "SHOULD", "the broker closed at once", {}),
    "2.6.6/requeue-after-detach-closed": (
        "DIFFERS", "MODEL", "differs from the rabbitmq4 model: nothing came back", {},
    ),
    "2.6.7/drain-empty-queue": (
        "UNSUPPORTED", "MUST", "profile 'acme' lacks streams", {},
    ),
    "2.6.7/credit-1": ("UNSUPPORTED", "MUST", "the broker refuses dynamic sources", {}),
    "2.6.7/credit-2": ("OK", "MUST", "", {"attempts": ["FAILED", "OK"]}),
    "checker/2.7.4/link.flow.receiver-delivery-count-missing": (
        "FAILED", "MUST", "checker: flow without delivery-count | offending frame: #13", {},
    ),
}  # fmt: skip


def synthetic_results(root: Path, *, runs: bool = True) -> Path:
    """A results DIR for BROKER with a trace (and a pcap) per cell."""
    traces = root / "traces" / BROKER
    traces.mkdir(parents=True)
    entries = {}
    for case_id, (verdict, level, reason, extra) in CELLS.items():
        stem = case_file_stem(case_id)
        (traces / f"{stem}.txt").write_text(
            f"case {case_id} [{level}] verdict {verdict}\nexpects: what the case expects\n"
            f"reason: {reason}\n\n== connection 1 127.0.0.1:40000 -> 127.0.0.1:5672\n"
            f"{OPEN_LINE}\n"
            " 0.004 [conn 1] #12 0 <- @transfer(20) [handle=0, delivery-id=1]\n"
            " 0.005 [conn 1] #38 0 <- @end(23) [error=@error(29) [condition=:amqp:internal-error]]"
            "\n"
        )
        (traces / f"{stem}.pcap").write_bytes(b"\x4d\x3c\xb2\xa1")
        entries[case_id] = {
            "verdict": verdict,
            "level": level,
            "duration": 0.5,
            "trace": f"traces/{BROKER}/{stem}.txt",
            "pcap": f"traces/{BROKER}/{stem}.pcap",
            "reason": reason,
            **extra,
        }
    index: dict = {BROKER: entries}
    if runs:
        (root / "runs").mkdir()
        header = {
            "broker": BROKER,
            "profile": "acme",
            "amqpspec_version": "0.1.0",
            "commit": "abc123",
            "started": "2026-11-26T10:00:00Z",
            "finished": "2026-11-26T10:02:00Z",
            "command": "amqpspec run --broker amqp://127.0.0.1:5672 --profile acme",
            "expectations": "",
            "broker_url": "amqp://127.0.0.1:5672",
            "identity": {"product": "AcmeMQ", "version": "9.1.2", "container-id": "acme-1"},
        }
        (root / "runs" / f"{BROKER}.json").write_text(json.dumps(header))
    (root / "index.json").write_text(json.dumps(index))
    return root


def expectations_file(path: Path) -> Path:
    """The synthetic run's verdicts, but credit-single-grant expected FAILED (a fix) and
    drain-exact expected OK (a regression)."""
    verdicts = {c: v[0] for c, v in CELLS.items()}
    verdicts["2.6.7/drain-exact"] = "OK"
    verdicts["2.6.7/credit-single-grant"] = "FAILED"
    path.write_text(format_expectations(BROKER, verdicts))
    return path


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name == "href" and value:
                self.hrefs.append(value)


def dead_links(page: Path) -> list[str]:
    """The links of an HTML page that lead nowhere: a relative file that does not exist, a
    fragment no element of the target page has."""
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    dead = []
    for href in parser.hrefs:
        parts = urlsplit(href)
        if parts.scheme in ("http", "https", "mailto"):
            continue
        target = page if not parts.path else (page.parent / unquote(parts.path))
        if not target.exists():
            dead.append(href)
            continue
        if parts.fragment and target.suffix == ".html":
            ids = parser.ids if target == page else _ids(target)
            if unquote(parts.fragment) not in ids:
                dead.append(href)
    return dead


def _ids(page: Path) -> set[str]:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.ids


def dead_markdown_links(page: Path) -> list[str]:
    """Relative file links of a Markdown file that lead to no file."""
    dead = []
    for href in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        path = urlsplit(href).path
        if urlsplit(href).scheme or not path:
            continue
        if not (page.parent / unquote(path)).exists():
            dead.append(href)
    return dead


def _luminance(colour: str) -> float:
    value = colour.lstrip("#")
    if len(value) == 3:
        value = "".join(c * 2 for c in value)
    channels = []
    for i in (0, 2, 4):
        c = int(value[i : i + 2], 16) / 255
        channels.append(c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4)
    r, g, b = channels
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: str, background: str) -> float:
    """The WCAG 2.1 contrast ratio of two colours (1 to 21)."""
    a, b = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (a + 0.05) / (b + 0.05)
