"""Plot a `bench/sustained.py` CSV: four panels sharing the time axis.

    python bench/sustained_plot.py RESULTS.csv OUT.png [--title TEXT]

Needs only the standard library and matplotlib, so `sustained.py` can run it
with the interpreter of its plotting venv (bench/requirements-bench.txt)
while the benchmark itself runs in the project's environment. The shaded
band is the time the horizon-holding transaction was open; dotted lines mark
the vacuums of the jobs table.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from matplotlib.figure import Figure


def plot(csv_path: Path, png_path: Path, title: str) -> None:
    with csv_path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{csv_path}: no samples to plot")

    def col(name: str) -> list[float]:
        return [float(r[name]) if r[name] != "" else float("nan") for r in rows]

    t = col("t_s")
    # The first sample after the transaction opened, to the first after it closed.
    held_at = [i for i, r in enumerate(rows) if r["holder_open"] == "1"]
    held = [t[held_at[0]], t[min(held_at[-1] + 1, len(t) - 1)]] if held_at else []
    vacuums = col("vacuums")
    vacuum_times = [t[i] for i in range(1, len(rows)) if vacuums[i] > vacuums[i - 1]]

    fig = Figure(figsize=(10, 11))
    axes = fig.subplots(4, 1, sharex=True)
    size, dead, latency, flow = axes

    size.plot(t, [b / 2**20 for b in col("total_bytes")], label="jobs table, total (MiB)")
    size.plot(t, [b / 2**20 for b in col("heap_bytes")], label="heap only (MiB)")
    size.set_ylabel("MiB")

    dead.plot(t, [n / 1000 for n in col("n_dead_tup")], label="n_dead_tup", color="tab:red")
    dead.plot(t, [n / 1000 for n in col("n_live_tup")], label="n_live_tup", color="tab:green")
    dead.set_ylabel("thousand rows")

    latency.plot(t, col("latency_p50_ms"), label="claim latency p50")
    latency.plot(t, col("latency_p99_ms"), label="claim latency p99")
    latency.plot(t, [s * 1000 for s in col("oldest_pending_s")], label="oldest pending job's age",
                 linestyle="--")  # fmt: skip
    latency.plot(t, col("head_probe_ms"), label="claim's head search (server time)",
                 color="tab:brown")  # fmt: skip
    latency.set_ylabel("ms")
    latency.set_yscale("symlog", linthresh=1)

    flow.plot(t, col("enqueued_per_s"), label="enqueued /s")
    flow.plot(t, col("completed_per_s"), label="completed /s")
    flow.set_ylabel("jobs/s")
    pending = flow.twinx()
    pending.plot(t, col("pending"), label="pending (right)", color="tab:gray", linestyle=":")
    pending.set_ylabel("pending jobs")
    flow.set_xlabel("seconds")

    # Samples where some other session of the cluster had a transaction open for
    # over 10 s: that too holds vacuum back in a busy database.
    others = [float(r.get("others_oldest_xact_s") or 0) for r in rows]
    foreign = [i for i, age in enumerate(others) if age > 10]
    for ax in axes:
        for n, i in enumerate(foreign):
            label = "another session's transaction > 10 s" if n == 0 else None
            ax.axvspan(t[max(i - 1, 0)], t[i], color="tab:gray", alpha=0.2, linewidth=0,
                       label=label)  # fmt: skip
        if held:
            ax.axvspan(min(held), max(held), color="tab:orange", alpha=0.15,
                       label="transaction open")  # fmt: skip
        for x in vacuum_times:
            ax.axvline(x, color="tab:purple", linestyle=":", linewidth=0.8)
        ax.grid(True, alpha=0.3)
    handles, labels = flow.get_legend_handles_labels()
    more_handles, more_labels = pending.get_legend_handles_labels()
    flow.legend(handles + more_handles, labels + more_labels, loc="upper left", fontsize="small")
    for ax in (size, dead, latency):
        ax.legend(loc="upper left", fontsize="small")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--title", default="jobvisor sustained load")
    args = parser.parse_args()
    plot(args.csv, args.png, args.title)


if __name__ == "__main__":
    main()
