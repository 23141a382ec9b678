"""The matrix as a report (`amqpspec report DIR...`): failures first with their reasons and
links, the run header, pipelined twins folded into their base row, regression, flaky and the
two kinds of UNSUPPORTED per cell, sections with anchors, no dead link, colours of 4.5:1 at
least; and the page as a browser shows it (headless Chromium: a screenshot in the tests'
artefacts, the failure's reason and evidence two clicks from the top).

A synthetic results directory (tests/report_support.py) holds one cell of each kind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_support import REPO, run_amqpspec
from report_support import (
    BROKER,
    contrast,
    dead_links,
    dead_markdown_links,
    expectations_file,
    synthetic_results,
)

from amqpspec.conformance.report.html import render_html
from amqpspec.conformance.report.markdown import render_markdown
from amqpspec.conformance.report.matrix import OPTED_OUT, PALETTE, Matrix

ARTEFACTS = Path(os.environ.get("AMQPSPEC_ARTEFACTS", REPO / "reports" / "_artefacts"))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return synthetic_results(tmp_path / "results")


def _report(results: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_amqpspec("report", str(results), "--out", str(out), *extra, timeout=120)


def test_every_colour_pair_has_contrast_at_least_4_5() -> None:
    for verdict, (background, text) in {**PALETTE, "opted out": OPTED_OUT}.items():
        assert contrast(text, background) >= 4.5, (verdict, contrast(text, background))
    assert contrast("#ffffff", "#f9a825") < 2.0  # white on amber, as it was: unreadable


def test_markdown_summary_first_then_failures_by_severity(results: Path, tmp_path: Path) -> None:
    matrix = Matrix.load([results], {BROKER: expectations_file(tmp_path / "acme.toml")})
    markdown = render_markdown(matrix, tmp_path)
    lines = markdown.splitlines()
    assert lines[0] == "# AMQP 1.0 conformance matrix"
    summary = lines[2]
    assert summary.startswith("> **acme** (AcmeMQ 9.1.2): 4 FAILED, 0 ERROR, 1 NON-STRICT")
    assert "2 UNSUPPORTED (1 profile opted out, 1 broker lacks it)" in summary
    assert "(1 checker rows); 2 differ from the expectations; 1 flaky" in summary
    # the run header: product and version from the broker's open, the command, the date
    assert "| acme | AcmeMQ 9.1.2 | acme | 0.1.0 (abc123) | 2026-11-26T10:00:00Z |" in markdown
    # failures first: FAILED before NON-STRICT before DIFFERS, each reason as text, links
    failed = markdown.index("### FAILED: a MUST broken (4)")
    non_strict = markdown.index("### NON-STRICT: a SHOULD not met (1)")
    differs = markdown.index("### DIFFERS: a model's behaviour, not required by the spec (1)")
    cases = markdown.index("## Cases by section")
    assert failed < non_strict < differs < cases
    drain = next(line for line in lines if line.startswith("- **acme** `2.6.7/drain-exact` "))
    assert "**≠ expected OK**" in drain
    assert "observed end (frame #38)" in drain
    assert "[trace](results/traces/acme/2_6_7_drain-exact.txt)" in drain
    assert "[pcap](results/traces/acme/2_6_7_drain-exact.pcap)" in drain
    # twins folded: no row of their own; a badge where the twin differs, none where not
    assert "| `2.6.7/credit-single-grant/pipelined` |" not in markdown
    grant = next(line for line in lines if line.startswith("| `2.6.7/credit-single-grant` |"))
    assert "[pipelined: FAILED](results/traces/acme/2_6_7_credit-single-grant_pipelined.txt)" in (
        grant
    )
    assert "≠expected" in grant  # expected FAILED, got OK: differs from the expectations
    drain_row = next(line for line in lines if line.startswith("| `2.6.7/drain-exact` |"))
    assert "pipelined" not in drain_row
    # UNSUPPORTED split, flaky
    opted = next(line for line in lines if line.startswith("| `2.6.7/drain-empty-queue` |"))
    lacks = next(line for line in lines if line.startswith("| `2.6.7/credit-1` |"))
    assert "(opted out)" in opted and "(opted out)" not in lacks
    flaky = next(line for line in lines if line.startswith("| `2.6.7/credit-2` |"))
    assert "⟳flaky" in flaky
    # sections, the checker rows apart, the model's cases apart
    assert "### 2.6.7 Flow Control" in markdown and "### Checker rows" in markdown
    model = markdown.split("## Model behaviour (not required by the spec)")[1]
    assert "`2.6.6/requeue-after-detach-closed`" in model


def test_html_sections_anchors_filters_and_no_dead_link(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _report(results, out)
    assert done.returncode == 0, done.stderr
    page = out / "conformance-matrix.html"
    text = page.read_text()
    assert dead_links(page) == []
    assert dead_markdown_links(out / "conformance-matrix.md") == []
    assert '<details class="sec" id="s-2.6.7" open>' in text
    assert 'id="c-2.6.7-drain-exact"' in text and 'href="#c-2.6.7-drain-exact"' in text
    assert 'id="f-verdict"' in text and 'id="f-section"' in text and 'id="f-broker"' in text
    assert "AcmeMQ 9.1.2" in text
    # the failure's reason as text on the page, its trace one click away
    first = text.index('<li class="fail"')
    assert text.index("observed end (frame #38)") > first
    assert 'href="../results/traces/acme/2_6_7_drain-exact.txt"' in text
    # no white on amber: NON-STRICT cells have dark text
    assert "background:#f9a825;color:#000000" in text


def test_results_without_run_headers_read_the_product_from_a_trace(tmp_path: Path) -> None:
    results = synthetic_results(tmp_path / "old", runs=False)
    matrix = Matrix.load([results])
    assert matrix.runs[BROKER].product == "AcmeMQ 9.1.2"
    assert "(not recorded)" in render_markdown(matrix, tmp_path)  # no command recorded


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="apt-get install chromium (headless screenshots)")
def test_chromium_renders_failures_reachable_from_the_top(results: Path, tmp_path: Path) -> None:
    """Headless Chromium loads the page (its DOM after the script ran: filters wired, no
    error) and takes a screenshot, kept in the tests' artefacts; the first failure's reason
    is on the page and its trace one click away."""
    out = tmp_path / "out"
    assert _report(results, out).returncode == 0
    page = out / "conformance-matrix.html"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / "conformance-matrix.png"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "observed end (frame #38)" in dom.stdout and 'class="fail"' in dom.stdout
    done = subprocess.run(
        [*common, "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.stat().st_size > 10_000, done.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the second click: the failure's page, its offending frame marked
    first = dom.stdout[dom.stdout.index('<li class="fail"') :]
    page_href = first.split('href="', 1)[1].split('"', 1)[0]
    assert page_href.startswith("cases/"), first[:500]
    case_page = out / page_href
    evidence = subprocess.run(
        [*common, "--dump-dom", case_page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert 'class="broker hit"' in evidence.stdout or 'class="probe hit"' in evidence.stdout
    subprocess.run(
        [*common, "--window-size=1280,1200", f"--screenshot={ARTEFACTS / 'case-page.png'}",
         case_page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )  # fmt: skip


def test_render_html_is_the_same_page_as_the_cli_writes(results: Path, tmp_path: Path) -> None:
    matrix = Matrix.load([results])
    assert render_html(matrix, tmp_path).startswith("<!DOCTYPE html>")


# --- the conformance statement -----------------------------------------------------------

LEDGER = """broker = "acme"

[case."2.6.7/drain-exact"]
verdict = "FAILED"
sentence = "2.6.7/flow-control.12"
evidence = "#38 <- @end [amqp:internal-error]"
rationale = "drain answered with an end: the sender never advanced its delivery-count"

[case."2.2/header-not-amqp"]
verdict = "OK"
sentence = "2.2/version-negotiation.9"
evidence = "stale"
rationale = "reviewed for another verdict: not quoted"
"""


def test_statement_quotes_the_ledger_lists_unsupported_once_counts_parts(
    results: Path, tmp_path: Path
) -> None:
    from amqpspec.conformance.report.statement import (
        Statement,
        render_statement_html,
        render_statement_markdown,
    )

    ledger = tmp_path / "acme-ledger.toml"
    ledger.write_text(LEDGER)
    statement = Statement.build(Matrix.load([results]), BROKER, tmp_path, ledger)
    text = render_statement_markdown(statement)
    assert text.startswith("# AMQP 1.0 conformance statement: AcmeMQ 9.1.2\n")
    # per part: 2.2 and 2.6.7 cases and the 2.7.4 checker row are Part 2 (the model case too)
    assert "| Part 2: Transport | 10 | 7 | 2 | 4 | 1 | 0 | 1 | 2 | 28.6 % |" in text, text[:1500]
    # unsupported: the profile's capability once, the broker's lack with its case
    assert "- `streams` (the profile says the broker lacks it): 1 case(s)" in text
    assert (
        "the broker showed it lacks it: the broker refuses dynamic sources (`2.6.7/credit-1`)"
        in (text)
    )
    deviations = text.split("## Deviations, section by section")[1]
    flow = deviations.split("### 2.6.7 Flow Control")[1]
    # the reviewed entry: the ledger's sentence, evidence and rationale; the twin folded
    drain = flow.split("- **FAILED** `2.6.7/drain-exact` [MUST] (reviewed)")[1].split("\n\n")[0]
    assert "2.6.7/flow-control.12: \"If the Sender's drain flag is set" in drain
    assert "evidence: #38 <- @end [amqp:internal-error]" in drain
    assert "rationale: drain answered with an end" in drain
    assert "the same with pipelined frames: [trace](results/traces/acme/" in drain
    assert "`2.6.7/drain-exact/pipelined`" not in text
    # a twin whose verdict differs from its base case is its own deviation
    assert "- **FAILED** `2.6.7/credit-single-grant/pipelined` [MUST]\n" in flow
    # a ledger entry for another verdict is not quoted
    header = deviations.split("- **NON-STRICT** `2.2/header-not-amqp` [SHOULD]")[1]
    assert "reviewed for another verdict" not in text and "(reviewed)" not in header[:5]
    assert "### Checker rows" in deviations
    model = text.split("## Model behaviour (DIFFERS: not required by the specification)")[1]
    assert "`2.6.6/requeue-after-detach-closed`" in model
    page = tmp_path / "statement.html"
    page.write_text(render_statement_html(statement))
    assert dead_links(page) == [] and "rationale" in page.read_text()


def test_report_statement_option_writes_one_per_broker(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _report(results, out, "--statement")
    assert done.returncode == 0, done.stderr
    for suffix in (".md", ".html"):
        page = out / f"conformance-statement-{BROKER}{suffix}"
        assert page.exists(), done.stdout
    assert dead_links(out / f"conformance-statement-{BROKER}.html") == []
    assert dead_markdown_links(out / f"conformance-statement-{BROKER}.md") == []


# --- a page per case ---------------------------------------------------------------------


def test_a_page_per_failure_with_the_offending_frame_marked(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _report(results, out)
    assert done.returncode == 0, done.stderr
    pages = sorted(p.name for p in (out / "cases" / BROKER).iterdir())
    # FAILED, NON-STRICT, DIFFERS get a page (the default --pages failures); OK does not
    assert "2_6_7_credit-single-grant_pipelined.html" in pages
    assert "2_2_header-not-amqp.html" in pages and "2_6_7_credit-2.html" not in pages
    page = out / "cases" / BROKER / "2_6_7_credit-single-grant_pipelined.html"
    text = page.read_text()
    assert dead_links(page) == []
    assert "<th>expected</th><td>what the case expects</td>" in text
    assert "<th>observed</th><td>expected 1 transfer; observed 2 (frame #12)</td>" in text
    assert '<span id="c1-f12" class="broker hit">' in text  # the frame named by the reason
    assert 'The offending frame(s): <a href="#c1-f12">conn 1 #12</a>' in text
    assert "tshark -r &#x27;../../../results/traces/acme/" in text
    assert "-d tcp.port==5672,amqp -V" in text
    assert "AcmeMQ 9.1.2" in text
    # the matrix's failure entry and the twin's badge lead to the page
    matrix = (out / "conformance-matrix.html").read_text()
    badge = 'href="cases/acme/2_6_7_credit-single-grant_pipelined.html" title="expected 1'
    assert badge in matrix and 'observed 2 (frame #12)">pipelined: FAILED</a>' in matrix
    assert dead_links(out / "conformance-matrix.html") == []
    none = _report(results, tmp_path / "none", "--pages", "none")
    assert none.returncode == 0 and not (tmp_path / "none" / "cases").exists()


def test_committed_reports_and_docs_have_no_dead_link() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "reports", "docs", "README.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dead = {}
    for name in tracked:
        path = REPO / name
        if path.suffix == ".md":
            found = dead_markdown_links(path)
        elif path.suffix == ".html":
            found = dead_links(path)
        else:
            continue
        if found:
            dead[name] = found
    assert dead == {}


# --- history: what changed since earlier runs ----------------------------------------------


def _earlier(root: Path, verdicts: dict[str, str], name: str = BROKER) -> Path:
    """A synthetic run whose verdicts are `verdicts` where given, under broker `name`."""
    import json

    from amqpspec.conformance.run.results import case_file_stem

    synthetic_results(root)
    index = json.loads((root / "index.json").read_text())
    entries = index.pop(BROKER)
    for case_id, verdict in verdicts.items():
        entries[case_id]["verdict"] = verdict
        entries[case_id].pop("attempts", None)
    entries.pop("2.6.7/credit-1")  # a case new since then
    entries["2.6.7/old-case"] = {"verdict": "OK", "level": "MUST", "trace": "", "reason": ""}
    index[name] = entries
    (root / "index.json").write_text(json.dumps(index))
    header = json.loads((root / "runs" / f"{BROKER}.json").read_text())
    (root / "runs" / f"{BROKER}.json").unlink()
    header["started"] = "2026-11-01T00:00:00Z"
    (root / "runs" / f"{case_file_stem(name)}.json").write_text(json.dumps(header))
    return root


def test_history_opens_the_report_with_what_changed(results: Path, tmp_path: Path) -> None:
    older = _earlier(tmp_path / "older", {"2.6.7/drain-exact": "FAILED"})
    old = _earlier(
        tmp_path / "old",
        {"2.6.7/drain-exact": "OK", "2.6.7/credit-2": "FAILED", "2.2/header-not-amqp": "OK"},
        name="acme-9.0",  # another name: the only broker of each run still pairs
    )
    out = tmp_path / "out"
    done = _report(results, out, "--since", str(old), "--since", str(older))
    assert done.returncode == 0, done.stderr
    markdown = (out / "conformance-matrix.md").read_text()
    changes = markdown.split("## What changed")[1].split("## Run")[0]
    assert "**acme** against acme-9.0 (AcmeMQ 9.1.2), 2026-11-01T00:00:00Z: 2 new failures, " in (
        changes
    )
    assert "- New failures: `2.2/header-not-amqp` (OK → NON-STRICT), `2.6.7/drain-exact`" in (
        changes
    )
    assert "- Fixed: `2.6.7/credit-2` (FAILED → OK)" in changes
    assert "- Newly flaky: `2.6.7/credit-2` (FAILED → OK)" in changes
    assert "- New cases: `2.6.7/credit-1`" in changes and "- Gone: `2.6.7/old-case`" in changes
    # the timeline over three runs: drain-exact FAILED, OK, FAILED
    assert "| `2.6.7/drain-exact` | FAILED | OK | FAILED |" in changes
    page = out / "conformance-matrix.html"
    assert '<h2 id="changes">What changed</h2>' in page.read_text()
    assert dead_links(page) == []
    assert _report(results, out, "--since", str(tmp_path / "nowhere")).returncode == 2


def test_a_page_shows_the_checkers_hex_numbers_in_decimal() -> None:
    from amqpspec.conformance.report.case_page import decimal

    assert decimal("delivery-id 0x6 beyond (horizon 0x1F)") == (
        "delivery-id 6 (0x6) beyond (horizon 31 (0x1F))"
    )


def test_links_none_for_a_committed_report(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = _report(results, out, "--links", "none")
    assert done.returncode == 0, done.stderr
    markdown = (out / "conformance-matrix.md").read_text()
    assert "](" not in markdown.replace("](#", "")  # no link to a file
    assert "| `2.6.7/drain-exact` | MUST | FAILED ≠expected |" not in markdown  # no expect
    assert "| `2.6.7/drain-exact` | MUST | FAILED |" in markdown
    assert "observed end (frame #38)\n" in markdown  # the reason, no (trace, pcap) after it
    assert not (out / "cases").exists()
