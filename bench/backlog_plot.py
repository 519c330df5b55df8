"""Plot a `bench/backlog.py` CSV: the service's rate against the backlog left.

    python bench/backlog_plot.py RESULTS.csv OUT.png [--small JOBS_PER_S] [--title TEXT]

Needs only the standard library and matplotlib, so `backlog.py` runs it with
the interpreter of the plotting venv (bench/requirements-bench.txt). The
backlog falls from left to right, as time runs; `--small` draws the rate of
the same service on a 50,000-job table and 80% of it.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from matplotlib.figure import Figure


def plot(csv_path: Path, png_path: Path, small: float | None, title: str) -> None:
    with csv_path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{csv_path}: no samples to plot")
    left = [int(r["backlog"]) / 1e6 for r in rows]
    rate = [float(r["started_per_s"]) for r in rows]

    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    ax.plot(left, rate, marker=".", linewidth=1, label="claimed and run, jobs/s (5 s samples)")
    if small:
        ax.axhline(small, color="tab:green", linestyle="--", label="50,000-job table")
        ax.axhline(0.8 * small, color="tab:red", linestyle=":", label="80% of it")
    ax.set_xlim(max(left) * 1.02, 0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("pending jobs left (millions)")
    ax.set_ylabel("jobs/s")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--small", type=float)
    parser.add_argument("--title", default="jobvisor backlog")
    args = parser.parse_args()
    plot(args.csv, args.png, args.small, args.title)


if __name__ == "__main__":
    main()
