"""Draw the peer comparison (median bars, min-max whiskers) from run.py's JSON.

.envs/bench/bin/python chart.py results/latest.json peers.png
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PANELS = [
    ("burn-down jobs/s", "burn-down of 20,000 no-op jobs\n(jobs/s, higher is better)"),
    ("latency p50 ms", "enqueue-to-start p50\n(ms, lower is better)"),
    ("latency p99 ms", "enqueue-to-start p99\n(ms, lower is better)"),
    ("bulk enqueue jobs/s", "bulk enqueue of 100,000 jobs\n(jobs/s, higher is better)"),
]


def main(source: str, target: str) -> None:
    with open(source) as f:
        report = json.load(f)
    summary = report["summary"]
    peers = list(summary)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 4.2))
    for ax, (label, title) in zip(axes, PANELS, strict=True):
        medians, low, high, names = [], [], [], []
        for peer in peers:
            cell = summary[peer][label]
            names.append(peer)
            if "median" in cell:
                medians.append(cell["median"])
                low.append(cell["median"] - cell["min"])
                high.append(cell["max"] - cell["median"])
            else:
                medians.append(0.0)
                low.append(0.0)
                high.append(0.0)
        colors = ["#1f77b4" if n == "jobvisor" else "#999999" for n in names]
        ax.bar(names, medians, yerr=[low, high], color=colors, capsize=4)
        for i, cell in enumerate(summary[p][label] for p in peers):
            if "median" not in cell:
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelrotation=35, labelsize=8)
    settings = report["settings"]
    fig.suptitle(f"jobvisor and peers on one local PostgreSQL, {settings['workers']} worker "
                 f"processes x concurrency {settings['concurrency']}: median of "
                 f"{settings['runs']} runs, whiskers min-max", fontsize=11)  # fmt: skip
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
