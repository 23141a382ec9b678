"""`amqpspec fuzz report DIR`: a campaign's findings as report.md / report.html, with the run
header, each finding's violation text and links to its reproducer files that lead somewhere
(tests/report_support.dead_links), on a committed campaign directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from fuzz_support import run_fuzz
from report_support import dead_links, dead_markdown_links

REPO = Path(__file__).resolve().parent.parent
CAMPAIGN = REPO / "reports" / "fuzz-brokers" / "rabbitmq3"


def test_fuzz_report_links_every_reproducer(tmp_path: Path) -> None:
    campaign = tmp_path / "campaign"
    shutil.copytree(CAMPAIGN, campaign)
    (campaign / "report.md").unlink(missing_ok=True)
    done = run_fuzz("report", str(campaign), timeout=120)
    assert done.returncode == 0, done.stderr
    markdown = (campaign / "report.md").read_text()
    assert "- broker: amqp://127.0.0.1:6072" in markdown and "- amqpspec: " in markdown
    assert "| `555af030d17a` | error-missing | decode-refusal (2.3.1) | amqp:decode-error" in (
        markdown
    )
    assert "[pcap](findings/555af030d17a/reproducer.pcap)" in markdown
    assert markdown.count("[json](findings/") == 12
    assert dead_markdown_links(campaign / "report.md") == []
    assert dead_links(campaign / "report.html") == []


def test_fuzz_report_needs_a_campaign_directory(tmp_path: Path) -> None:
    done = run_fuzz("report", str(tmp_path), timeout=120)
    assert done.returncode == 2 and "findings.json" in done.stderr
