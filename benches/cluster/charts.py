"""Charts and tables from benches/cluster/out/results.json (written by run.sh):

    locust/.venv/bin/python benches/cluster/charts.py [RESULTS] [OUT_DIR]

Writes OUT_DIR (default docs/scaling/) ramp.png, scaling.png and faults.png, and
prints the Markdown tables docs/scaling.md holds.
"""

from __future__ import annotations

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def ramp(doc: dict, path: str) -> None:
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    chosen = [r for r in doc["runs"] if r.get("median")] or doc["runs"]  # the median rounds
    for run in chosen:
        st = run["steps"]
        label = f"{run['nodes']} node{'s' if run['nodes'] > 1 else ''}"
        a.plot([s["offered_rps"] for s in st], [s["rps"] for s in st], marker="o", label=label)
        b.plot([s["offered_rps"] for s in st], [s["p95_ms"] for s in st], marker="o", label=label + " p95")
        b.plot([s["offered_rps"] for s in st], [s["p50_ms"] for s in st], ls=":", color=b.lines[-1].get_color())
    top = max(s["offered_rps"] for r in chosen for s in r["steps"])
    a.plot([0, top], [0, top], color="grey", lw=0.8, ls="--", label="offered")
    a.set(xlabel="offered RPS (ramp step)", ylabel="achieved RPS", title="Throughput over the ramp")
    b.axhline(doc["settings"]["slo_p95_ms"], color="red", lw=0.8, ls="--", label="p95 SLO")
    b.set(xlabel="offered RPS (ramp step)", ylabel="ms", title="Latency over the ramp (p95; p50 dotted)",
          yscale="log")
    a.legend(fontsize=8)
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def scaling(doc: dict, path: str) -> None:
    rows = doc["scaling"]
    base = next((r["rps"] for r in rows if r["nodes"] == 1), None)
    fig, ax = plt.subplots(figsize=(6, 4))
    ns = [r["nodes"] for r in rows]
    ax.plot(ns, [r["rps"] for r in rows], marker="o", label="sustainable RPS")
    if base:
        ax.plot(ns, [n * base for n in ns], ls="--", color="grey", label="linear (n × 1 node)")
    for r in rows:
        if r.get("efficiency"):
            ax.annotate(f"{r['efficiency']:.2f}", (r["nodes"], r["rps"]), textcoords="offset points",
                        xytext=(4, -12), fontsize=8)
    sat = [s["nodes"] for s in doc.get("saturation", []) if s["saturated"]]
    if sat:
        ax.axvspan(min(sat) - 0.3, max(ns) + 0.3, color="orange", alpha=0.15, label="generator or machine saturated")
    ax.set(xlabel="nodes", ylabel="RPS", title=f"Scaling at {doc['settings']['quota']:g} CPU a node")
    ax.set_xticks(ns)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def faults(doc: dict, path: str) -> None:
    fl = {k: v for k, v in doc.get("faults", {}).items() if "samples" in v}
    if not fl:
        return
    fig, axes = plt.subplots(len(fl), 1, figsize=(9, 2.8 * len(fl)), squeeze=False)
    for ax, (name, f) in zip(axes[:, 0], fl.items()):
        s = f["samples"]
        t0 = s[0]["t"]
        ax.plot([x["t"] - t0 for x in s], [x.get("rps") or 0 for x in s], label="RPS")
        ax.bar([x["t"] - t0 for x in s], [x.get("fail_rps") or 0 for x in s], color="red", label="failed/s")
        if "t_fault" in f:
            ax.axvline(f["t_fault"] - t0, color="black", ls="--", lw=0.8, label="fault")
        for e in f.get("events", []):
            ax.axvspan(e["sigterm"] - t0, e["up"] - t0, color="grey", alpha=0.15)
        ax.set(title=name.replace("_", " "), xlabel="s", ylabel="per second")
        ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt(v, spec=".1f"):
    return "–" if v is None else format(v, spec)


def tables(doc: dict) -> str:
    out = ["| nodes | sustainable RPS | p50 ms | p95 ms | efficiency | node CPU (each) | generator CPU | HAProxy CPU | Redis CPU | machine busy | generator saturated |",
           "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    sat = {s["nodes"]: s for s in doc.get("saturation", [])}
    for r in doc["scaling"]:
        cpu = ", ".join(fmt(c, ".3f") for c in r.get("node_cpu") or [])
        out.append(f"| {r['nodes']} | {fmt(r['rps'], '.0f')} | {fmt(r['p50_ms'], '.2f')} | {fmt(r['p95_ms'], '.2f')} | "
                   f"{fmt(r['efficiency'], '.2f')} | {cpu} | {fmt(r['generator_cpu'], '.2f')} | "
                   f"{fmt(r['balancer_cpu'], '.2f')} | {fmt(r['store_cpu'], '.2f')} | "
                   f"{fmt(r['machine_busy'], '.2f')} | {'yes' if sat.get(r['nodes'], {}).get('saturated') else 'no'} |")
    out += ["", "| fault | figures |", "|---|---|"]
    for name, f in doc.get("faults", {}).items():
        figs = ", ".join(f"{k} {v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{k} {v}"
                         for k, v in f.items() if k not in ("samples", "events", "t_fault"))
        out.append(f"| {name} | {figs} |")
    return "\n".join(out)


def main() -> int:
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "results.json")
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "scaling")
    with open(src) as f:
        doc = json.load(f)
    if "scaling" not in doc:
        print(f"charts: {src} has no scaling results (the run stopped early: see its settings and the log)",
              file=sys.stderr)
        return 1
    os.makedirs(dst, exist_ok=True)
    ramp(doc, os.path.join(dst, "ramp.png"))
    scaling(doc, os.path.join(dst, "scaling.png"))
    faults(doc, os.path.join(dst, "faults.png"))
    print(tables(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
