"""The benchmarks' result table: rich when it is installed, aligned plain text otherwise.

Owns: `print_table` (shared by bench/codec_bench.py and bench/broker_bench.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def print_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    title: str,
    left_columns: Collection[str],
) -> None:
    """Print `rows` under `headers`; `left_columns` (header names) are left-justified,
    the others (the numbers) right-justified. The plain-text fallback right-justifies all."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
        print(title)
        for line in [headers, *rows]:
            print("  ".join(str(x).rjust(w) for x, w in zip(line, widths)))
        return
    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="left" if header in left_columns else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=max(Console().width, 110)).print(table)
