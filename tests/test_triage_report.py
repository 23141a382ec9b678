"""The triage report (spark_triage/report.py) from a job's results, without Spark: the run
header and the inputs listed, known issues and reproducers as links that lead somewhere,
each cluster with a violation's text, the counts per rule and broker as a table, and plots
only where they say more than the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from report_support import dead_links, dead_markdown_links

pd = pytest.importorskip("pandas", reason="pip install 'amqpspec[spark]'")
pytest.importorskip("matplotlib", reason="pip install 'amqpspec[spark]'")

from amqpspec.spark_triage import report  # noqa: E402 - after the extras' check

SIG = "MUST+link.credit.transfer-without-credit"
SUMMARY = {
    "connections": 3,
    "frames": 40,
    "must_connections": 1,
    "must_violations": 2,
    "should_violations": 0,
    "defect_connections": 0,
    "unchecked": 0,
    "brokers": [
        {
            "broker": "RabbitMQ 3.10.8",
            "connections": 3,
            "frames": 40,
            "must_connections": 1,
            "should_only": 0,
            "unchecked": 0,
        }
    ],
    "defects": {},
    "inputs": [
        {"path": "captures/a.pcap", "kind": "pcap", "broker": "rabbitmq3", "size": 1234},
    ],
}


def _violations(rules: int, times: int) -> pd.DataFrame:
    rows = []
    for n in range(max(rules, times)):
        rule = f"rule.{n % rules}" if n else "link.credit.transfer-without-credit"
        rows.append(
            {
                "signature": SIG if n == 0 else f"MUST+{rule}",
                "rule": rule,
                "reason": "transfer delivery-id 0x0 on handle 0 before any credit (frame 7)"
                if n == 0
                else "another",
                "time": 1_700_000_000.0 + n,
                "broker_product": "RabbitMQ",
                "broker_version": "3.10.8",
            }
        )
    return pd.DataFrame(rows)


def _clusters(out: Path) -> list[dict]:
    (out / "reproducers").mkdir(parents=True)
    (out / "reproducers" / f"{SIG}.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    (out / "reproducers" / f"{SIG}.txt").write_text("# reproducer\n")
    return [
        {
            "signature": SIG,
            "level": "MUST",
            "section": "2.6.7",
            "count": 2,
            "connections": 1,
            "brokers": ["RabbitMQ 3.10.8"],
            "known_issue": {
                "issue": "rabbitmq-amqp1.0#43",
                "url": "https://github.com/rabbitmq/rabbitmq-amqp1.0/issues/43",
            },
            "reproducer": {
                "pcap": f"reproducers/{SIG}.pcap",
                "text": f"reproducers/{SIG}.txt",
                "frames": 9,
                "rechecked": True,
            },
        }
    ]


def test_links_texts_tables_and_no_plot_that_says_nothing(tmp_path: Path) -> None:
    report.write(tmp_path, _clusters(tmp_path), _violations(1, 1), SUMMARY)
    markdown = (tmp_path / "report.md").read_text()
    page = tmp_path / "report.html"
    text = page.read_text()
    assert "[rabbitmq-amqp1.0#43](https://github.com/rabbitmq/rabbitmq-amqp1.0/issues/43)" in (
        markdown
    )
    assert f"[9 frames (re-checked)](reproducers/{SIG}.txt)" in markdown
    assert f"[reproducers/{SIG}.pcap](reproducers/{SIG}.pcap)" in markdown
    assert "before any credit (frame 7)" in markdown and "before any credit (frame 7)" in text
    assert "| captures/a.pcap | pcap | rabbitmq3 | 1234 |" in markdown  # the inputs
    assert "- amqpspec: " in markdown and "- made: " in markdown  # the run header
    assert "| link.credit.transfer-without-credit | 1 |" in markdown  # the table, not a plot
    assert not (tmp_path / "plots" / "per-rule-broker.png").exists()
    assert not (tmp_path / "plots" / "over-time.png").exists()
    assert "<img" not in text
    assert dead_links(page) == [] and dead_markdown_links(tmp_path / "report.md") == []


def test_plots_where_there_is_enough_to_plot(tmp_path: Path) -> None:
    report.write(tmp_path, _clusters(tmp_path), _violations(20, 40), SUMMARY)
    assert (tmp_path / "plots" / "per-rule-broker.png").exists()
    assert (tmp_path / "plots" / "over-time.png").exists()
    assert "<img" in (tmp_path / "report.html").read_text()
