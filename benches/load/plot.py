"""Latency against offered load, from benches/load/run.sh's results.json.

    python3 benches/load/plot.py benches/load/out/results.json out.png

One panel per store: p50, p90, p99 and p99.9 of each open-loop run (latency from the
scheduled send time) against its offered rate, the bare ceiling server's p99 under the
same kind of load, and the closed-loop maximum and the ceiling's as vertical lines.
Needs matplotlib.
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(results_path: str, out_path: str) -> None:
    with open(results_path) as f:
        results = json.load(f)
    runs = results["runs"]
    stores = results["stores"].split()
    fig, axes = plt.subplots(1, len(stores), figsize=(6 * len(stores), 4.5), squeeze=False)
    for ax, store in zip(axes[0], stores):
        prefix = f"oka {store} seed open"
        open_runs = sorted(
            (r for r in runs if r["label"].startswith(prefix)), key=lambda r: r["offered_rps"]
        )
        rates = [r["offered_rps"] for r in open_runs]
        for key, name in [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99_9", "p99.9")]:
            ax.plot(rates, [r["latency_ms"][key] for r in open_runs], marker="o", label=name)
        ceiling_open = sorted(
            (r for r in runs if r["label"].startswith("ceiling open")),
            key=lambda r: r["offered_rps"],
        )
        if ceiling_open:
            ax.plot(
                [r["offered_rps"] for r in ceiling_open],
                [r["latency_ms"]["p99"] for r in ceiling_open],
                color="black",
                linestyle="--",
                marker="x",
                label="ceiling p99",
            )
        closed = next((r for r in runs if r["label"] == f"oka {store} seed closed"), None)
        if closed:
            ax.axvline(closed["rps"], color="grey", linestyle="--", label="closed-loop max")
        ax.axvline(results["ceiling_rps"], color="black", linestyle=":", label="ceiling")
        ax.axhline(2.0, color="red", linewidth=0.8, alpha=0.5, label="2 ms (p99 target)")
        ax.set_yscale("log")
        ax.set_xlabel("offered load, requests/s (1 key, simple_feature)")
        ax.set_ylabel("latency from scheduled send, ms")
        ax.set_title(f"Oka on {store}, {results['oka_workers']} workers, {results['cpus']} CPUs")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Latency vs offered load ({results['date']})")
    fig.tight_layout()
    fig.savefig(out_path, dpi=100)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
