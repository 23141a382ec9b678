"""Plots of arrows runs (matplotlib, Agg): receive rate over time and the end-to-end latency
CDF, every run of a report side by side in one figure each.

Owns: `plot_runs(runs, prefix) -> [paths]`. Writes PNG files only.
"""

from __future__ import annotations

import pathlib
import textwrap


def plot_runs(runs: list[dict], prefix: pathlib.Path, title: str) -> list[pathlib.Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        series = run["receive_rate_series"]
        ax.plot(
            [t for t, _ in series],
            [r for _, r in series],
            marker="o",
            markersize=3,
            label=run["label"],
        )
    ax.set_xlabel("seconds into the run (last point: its partial second)")
    ax.set_ylabel("messages received per second")
    ax.set_title(textwrap.fill(f"rate over time: {title}", 110), fontsize=8)
    paths.append(_save(fig, ax, prefix.with_name(prefix.name + "-rate.png")))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        points = run["latency_cdf"]
        if points:
            ax.plot([max(ms, 1e-3) for ms, _ in points], [f for _, f in points], label=run["label"])
    ax.set_xscale("log")
    ax.set_xlabel("end-to-end latency (ms, log scale)")
    ax.set_ylabel("fraction of messages at or below")
    ax.set_title(textwrap.fill(f"latency CDF: {title}", 110), fontsize=8)
    for level in (0.5, 0.99, 0.999):
        ax.axhline(level, color="grey", linewidth=0.5, linestyle=":")
    paths.append(_save(fig, ax, prefix.with_name(prefix.name + "-latency.png")))
    return paths


def _save(fig, ax, path: pathlib.Path) -> pathlib.Path:
    import matplotlib.pyplot as plt

    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
