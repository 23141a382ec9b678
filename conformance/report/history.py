"""What changed between runs: the history a report opens with (`amqpspec report DIR --since
OLD_DIR [--since OLDER_DIR ...]`).

Owns: `History` (earlier runs' results, newest first, each paired broker by broker with the
current run: by name, or the only broker of each side when both hold one, so that two
versions of a broker run under different names still compare) and `changes()`: for each
broker, the new failures (a case now FAILED, ERROR or NON-STRICT that was not, or a worse
one than before), the fixed cases (FAILED, ERROR or NON-STRICT before, OK now), the newly
flaky (retried attempts that differ now, not before), the other verdict changes, and the
cases new or gone; `timeline()`: every case whose verdict changed across all the runs, a
verdict per run. Its renderings are the first section of the matrix (markdown.py,
html.py). Pure apart from loading the results directories it is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from amqpspec.conformance.report.matrix import Matrix, is_flaky

BAD = ("FAILED", "ERROR", "NON-STRICT")
RANK = {"NON-STRICT": 1, "ERROR": 2, "FAILED": 3}  # worse is larger


@dataclass
class Changes:
    broker: str
    before: str  # the earlier run's broker name, its product and start
    new_failures: list[tuple[str, str, str]] = field(default_factory=list)  # case, was, now
    fixed: list[tuple[str, str, str]] = field(default_factory=list)
    newly_flaky: list[tuple[str, str, str]] = field(default_factory=list)
    other: list[tuple[str, str, str]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.new_failures or self.fixed or self.newly_flaky or self.other
            or self.added or self.gone
        )  # fmt: skip


@dataclass
class History:
    runs: list[Matrix]  # earlier runs, newest first
    labels: list[str]  # each earlier run's directory as given

    @classmethod
    def load(cls, dirs: list[str | Path]) -> History:
        return cls([Matrix.load([d]) for d in dirs], [str(d) for d in dirs])

    def pair(self, current: Matrix, broker: str, earlier: Matrix) -> str | None:
        """The broker of `earlier` that `broker` of `current` compares with."""
        if broker in earlier.brokers:
            return broker
        if len(current.brokers) == 1 and len(earlier.brokers) == 1:
            return earlier.brokers[0]
        return None

    def changes(self, current: Matrix) -> list[Changes]:
        """Against the newest earlier run, one Changes per broker of `current` it has."""
        if not self.runs:
            return []
        earlier = self.runs[0]
        found = []
        for broker in current.brokers:
            old = self.pair(current, broker, earlier)
            if old is None:
                continue
            info = earlier.runs[old]
            label = f"{old}" + (f" ({info.product})" if info.product else "")
            label += f", {info.started}" if info.started else f", {self.labels[0]}"
            change = Changes(broker, label)
            now = {
                c: current.cells[(broker, c)] for c in current.cases if (broker, c) in current.cells
            }
            was = {c: earlier.cells[(old, c)] for c in earlier.cases if (old, c) in earlier.cells}
            for case_id, cell in now.items():
                before = was.get(case_id)
                if before is None:
                    change.added.append(case_id)
                    continue
                _classify(change, case_id, before, cell)
            change.gone = [c for c in was if c not in now]
            found.append(change)
        return found

    def timeline(self, current: Matrix, broker: str) -> list[tuple[str, list[str]]]:
        """Each case whose verdict differs between any two runs: its verdict in every earlier
        run (oldest first) and now ("" where it did not run)."""
        runs = list(reversed(self.runs))
        names = [self.pair(current, broker, run) for run in runs]
        rows = []
        for case_id in current.cases:
            now = current.cells.get((broker, case_id), {}).get("verdict", "")
            verdicts = [
                run.cells.get((name, case_id), {}).get("verdict", "") if name else ""
                for run, name in zip(runs, names, strict=True)
            ] + [now]
            if len(set(verdicts)) > 1:
                rows.append((case_id, verdicts))
        return rows


def _classify(change: Changes, case_id: str, before: dict, cell: dict) -> None:
    was, now = before["verdict"], cell["verdict"]
    if is_flaky(cell) and not is_flaky(before):
        change.newly_flaky.append((case_id, was, now))
    if was == now:
        return
    if now in BAD and RANK.get(now, 0) > RANK.get(was, 0):
        change.new_failures.append((case_id, was, now))
    elif was in BAD and now == "OK":
        change.fixed.append((case_id, was, now))
    else:
        change.other.append((case_id, was, now))


HEADINGS = (
    ("new_failures", "New failures"),
    ("fixed", "Fixed"),
    ("newly_flaky", "Newly flaky"),
    ("other", "Other verdict changes"),
)


def render_history_markdown(history: History, current: Matrix) -> list[str]:
    lines = ["## What changed", ""]
    for change in history.changes(current):
        lines.append(
            f"**{change.broker}** against {change.before}: {len(change.new_failures)} new "
            f"failures, {len(change.fixed)} fixed, {len(change.newly_flaky)} newly flaky, "
            f"{len(change.other)} other changes, {len(change.added)} new cases, "
            f"{len(change.gone)} gone."
        )
        lines.append("")
        for attribute, heading in HEADINGS:
            items = getattr(change, attribute)
            if items:
                lines.append(
                    f"- {heading}: " + ", ".join(f"`{c}` ({was} → {now})" for c, was, now in items)
                )
        if change.added:
            lines.append("- New cases: " + ", ".join(f"`{c}`" for c in change.added))
        if change.gone:
            lines.append("- Gone: " + ", ".join(f"`{c}`" for c in change.gone))
        lines.append("")
        if len(history.runs) > 1:
            timeline = history.timeline(current, change.broker)
            if timeline:
                heads = [*reversed(history.labels), "now"]
                lines.append("| case | " + " | ".join(heads) + " |")
                lines.append("| --- |" + " --- |" * len(heads))
                lines += [f"| `{c}` | " + " | ".join(v) + " |" for c, v in timeline]
                lines.append("")
    if len(lines) == 2:
        lines += ["No broker of this run is in the earlier runs.", ""]
    return lines


def render_history_html(history: History, current: Matrix) -> str:
    import html

    from amqpspec.conformance.report.matrix import anchor

    esc = html.escape
    out = ['<h2 id="changes">What changed</h2>']
    changes = history.changes(current)
    if not changes:
        out.append("<p>No broker of this run is in the earlier runs.</p>")
    for change in changes:
        out.append(
            f"<p><b>{esc(change.broker)}</b> against {esc(change.before)}: "
            f"{len(change.new_failures)} new failures, {len(change.fixed)} fixed, "
            f"{len(change.newly_flaky)} newly flaky, {len(change.other)} other changes, "
            f"{len(change.added)} new cases, {len(change.gone)} gone.</p><ul>"
        )
        for attribute, heading in HEADINGS:
            items = getattr(change, attribute)
            if items:
                links = ", ".join(
                    f'<a href="#c-{anchor(current.row_of(c))}">{esc(c)}</a> '
                    f"({esc(was)} → {esc(now)})"
                    for c, was, now in items
                )
                out.append(f"<li>{esc(heading)}: {links}</li>")
        if change.added:
            out.append(f"<li>New cases: {esc(', '.join(change.added))}</li>")
        if change.gone:
            out.append(f"<li>Gone: {esc(', '.join(change.gone))}</li>")
        out.append("</ul>")
        if len(history.runs) > 1:
            timeline = history.timeline(current, change.broker)
            if timeline:
                heads = "".join(f"<th>{esc(h)}</th>" for h in [*reversed(history.labels), "now"])
                rows = "".join(
                    f"<tr><td>{esc(c)}</td>" + "".join(f"<td>{esc(v)}</td>" for v in vs) + "</tr>"
                    for c, vs in timeline
                )
                out.append(f"<table><tr><th>case</th>{heads}</tr>{rows}</table>")
    return "".join(out)
