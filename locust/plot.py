#!/usr/bin/env python3
"""Charts from one or many run.py result files (PNG, matplotlib Agg).

    python plot.py out/run-a out/run-b/result.json -o out/plots

Arguments are result.json files or run directories holding one. Writes into --out
(default: the run's directory for one run, else locust/out/plots):

  <run>_timeline.png   per run: offered / achieved / server RPS, failures and users over
                       time; client p50/p95/p99 (and p99 from the intended send time, when
                       users are paced) against Oka's server and store p50/p99
  latency_vs_rps.png   all runs: client p50/p95/p99 against achieved RPS, one point per
                       load level (the seconds at one user count, the first one dropped)
  scaling.png          all runs with a known worker count: peak sustainable RPS (and peak
                       5 s RPS) against workers; worker count from the run's
                       --workers-label, else the server's /metrics, else the server_ids seen.
                       Only when the runs cover at least two worker counts.

A chart with no data is not drawn (a note says why): no scaling chart for one worker
count, no latency chart when no run has a load level with requests, no timeline for a
run without samples. A run whose load generator ran hot (run.py's
`run_metadata.locust_cpu_warning`) was limited by the client, not by Oka: its peak is
labelled "≥ N RPS (client-limited)", a lower bound, never "peak sustainable".

"Peak sustainable RPS" is the rule in oka_result.peak_sustainable: the best 5 s mean with
failures ≤ 0.1 %, every second's client p99 ≤ the SLO, and (paced users) ≥ 95 % of the
offered rate achieved. The flags below change it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oka_result  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def resolve(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        if os.path.isdir(p):
            p = os.path.join(p, "result.json")
        if not os.path.exists(p):
            raise SystemExit(f"plot.py: no result file at {p}")
        out.append(p)
    return out


def slug(doc: dict, path: str) -> str:
    d = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", d or oka_result.run_label(doc, path))


def series(samples, key):
    xs, ys = [], []
    for s in samples:
        v = s.get(key)
        if v is not None:
            xs.append(s["elapsed_s"])
            ys.append(v)
    return xs, ys


def positive(samples, key):
    xs, ys = series(samples, key)
    pairs = [(x, y) for x, y in zip(xs, ys) if y > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def timeline(doc: dict, path: str, out_png: str, rule: dict) -> None:
    s = doc["samples"]
    md = doc["run_metadata"]
    o = md.get("oka_options", {})
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True)
    title = (f"{md.get('name')}: {o.get('oka_shape')} shape, {o.get('oka_api')} API, "
             f"batch {o.get('oka_batch')}, server workers {md.get('server_workers') or '?'}")
    if oka_result.client_limited(doc):
        title += "\nclient-limited: Locust ran hot, so the server may sustain more"
    fig.suptitle(title)

    x, y = series(s, "offered_rps")
    if x:
        ax1.plot(x, y, "--", color="grey", label="offered (users × per-user rate)")
    x, y = series(s, "rps")
    ax1.plot(x, y, color="C0", lw=1.8, label="achieved (client, per second)")
    x, y = series(s, "server_qps")
    if x:
        ax1.plot(x, y, color="C2", lw=1.2, label="server qps (/stats, 5 s window)")
    x, y = series(s, "fail_rps")
    if any(y):
        ax1.plot(x, y, color="C3", lw=1.2, label="failures/s")
    ps = oka_result.peak_sustainable(s, **rule)
    if ps:
        label = (f"peak {oka_result.peak_label(doc, ps)}" if oka_result.client_limited(doc)
                 else f"peak sustainable {oka_result.peak_label(doc, ps)}")
        ax1.axhline(ps["rps"], color="C1", lw=0.8, ls=":", label=label)
    ax1.set_ylabel("requests / s")
    ax1.set_ylim(bottom=0)
    ax1.grid(alpha=0.3)
    axu = ax1.twinx()
    x, y = series(s, "users")
    axu.step(x, y, where="post", color="black", alpha=0.25, lw=1, label="users")
    axu.set_ylabel("users")
    axu.set_ylim(bottom=0)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = axu.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8)

    styles = [("client_p50", "C0", "-", 1.0, "client p50"),
              ("client_p95", "C0", "-", 1.6, "client p95"),
              ("client_p99", "C3", "-", 1.6, "client p99"),
              ("co_p99", "C3", ":", 1.2, "client p99 from intended send"),
              ("server_p50", "C2", "--", 1.0, "server p50"),
              ("server_p99", "C2", "--", 1.6, "server p99"),
              ("db_p99", "C4", "-.", 1.0, "store p99")]
    for key, color, ls, lw, label in styles:
        x, y = positive(s, key)
        if x:
            ax2.plot(x, y, color=color, ls=ls, lw=lw, label=label)
    ax2.set_yscale("log")
    ax2.set_ylabel("latency, ms (log)")
    ax2.set_xlabel("seconds since start")
    ax2.grid(alpha=0.3, which="both")
    ax2.legend(loc="upper left", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)


def levels(samples: list[dict]) -> list[dict]:
    """One point per load level: the seconds at one user count, first second dropped."""
    groups, cur, prev = [], [], None
    for smp in samples[1:-1]:
        if smp.get("users") != prev:
            if cur:
                groups.append(cur)
            cur, prev = [], smp.get("users")
            continue  # transition second
        cur.append(smp)
    if cur:
        groups.append(cur)
    pts = []
    for g in groups:
        g = [x for x in g if x.get("rps")]
        if not g:
            continue

        def med(key):
            v = sorted(x[key] for x in g if x.get(key) is not None)
            return v[len(v) // 2] if v else None

        pts.append({"rps": sum(x["rps"] for x in g) / len(g), "users": g[0].get("users"),
                    "p50": med("client_p50"), "p95": med("client_p95"),
                    "p99": med("client_p99"), "server_p99": med("server_p99")})
    return sorted(pts, key=lambda p: p["rps"])


def latency_vs_rps(docs, out_png: str) -> str | None:
    """Draws the chart; returns why not when no run has a load level with requests."""
    all_pts = [levels(doc["samples"]) for doc, _ in docs]
    if not any(any(p[k] for p in pts for k in ("p50", "p95", "p99")) for pts in all_pts):
        return "no run has a load level with client percentiles; latency_vs_rps.png not drawn"
    fig, ax = plt.subplots(figsize=(10, 6))
    for i, ((doc, path), pts) in enumerate(zip(docs, all_pts)):
        if not pts:
            continue
        c = f"C{i % 10}"
        name = oka_result.run_label(doc, path)
        if oka_result.client_limited(doc):
            name += " (client-limited)"
        x = [p["rps"] for p in pts]
        for key, ls, lw, lab in (("p50", ":", 1.0, "p50"), ("p95", "--", 1.2, "p95"),
                                 ("p99", "-", 1.8, "p99")):
            y = [p[key] for p in pts]
            xy = [(a, b) for a, b in zip(x, y) if b]
            if xy:
                ax.plot([a for a, _ in xy], [b for _, b in xy], ls=ls, lw=lw, color=c,
                        marker="o", ms=3, label=f"{name} client {lab}")
        xy = [(p["rps"], p["server_p99"]) for p in pts if p["server_p99"]]
        if xy:
            ax.plot([a for a, _ in xy], [b for _, b in xy], ls="-.", lw=0.8, color=c, alpha=0.6,
                    label=f"{name} server p99")
    ax.set_yscale("log")
    ax.set_xlabel("achieved RPS (mean over a load level)")
    ax.set_ylabel("latency, ms (log; median of the level's seconds)")
    ax.set_title("Latency percentiles vs throughput")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return None


def scaling(docs, out_png: str, rule: dict) -> tuple[list[str], bool]:
    """Draws the chart when the runs cover two or more worker counts; (notes, drawn)."""
    by_w = defaultdict(list)
    notes = []
    w_key = oka_result.DEFAULT_WINDOW_S if "window_s" not in rule else rule["window_s"]
    for doc, path in docs:
        w, src = oka_result.workers_of(doc)
        if w is None:
            notes.append(f"{path}: no worker count, left out of scaling.png")
            continue
        ps = oka_result.peak_sustainable(doc["samples"], **rule)
        peak = doc.get("summary", {}).get(f"peak_rps_{w_key}s")
        by_w[w].append((ps["rps"] if ps else None, peak or 0.0, src, oka_result.client_limited(doc)))
    if len(by_w) < 2:
        notes.append("scaling.png not drawn: " + (
            f"all runs have {next(iter(by_w)):g} workers; it needs runs at two or more worker counts"
            if by_w else "no run has a known worker count (give run.py --workers-label)"))
        return notes, False
    fig, ax = plt.subplots(figsize=(9, 6))
    ws = sorted(by_w)
    peaks = [max(v[1] for v in by_w[w]) for w in ws]
    # The best run per worker count (runs without a qualifying window have no point); it
    # is a lower bound when that run was client-limited.
    best = {}
    for w in ws:
        runs = [v for v in by_w[w] if v[0] is not None]
        if runs:
            best[w] = max(runs, key=lambda v: v[0])
        for v in runs:
            ax.plot(w, v[0], "^" if v[3] else "o", color="C0", alpha=0.3, ms=5)
    bw = sorted(best)
    if bw:
        ax.plot(bw, [best[w][0] for w in bw], "-o", color="C0", lw=2,
                label="peak sustainable RPS (best run)")
    limited = [(w, best[w][0]) for w in bw if best[w][3]]
    if limited:
        ax.plot([x for x, _ in limited], [y for _, y in limited], "^", color="C3", ms=9, mfc="none",
                label="client-limited: at least this (Locust ran hot)")
    ax.plot(ws, peaks, "--s", color="C1", mfc="none", label=f"peak {w_key} s RPS (any latency)")
    if len(bw) >= 2 and best[bw[0]][0] > 0:
        b0 = best[bw[0]][0]
        ax.plot(bw, [b0 * w / bw[0] for w in bw], ":", color="grey",
                label=f"linear from {bw[0]:g} workers")
    for w in bw:
        b, limited_run = best[w][0], best[w][3]
        ge = "≥ " if limited_run else ""
        tail = " (client-limited)" if limited_run else ""
        ax.annotate(f"{ge}{b:.0f}{tail}\n({ge}{b / w:.0f}/worker)", (w, b), textcoords="offset points",
                    xytext=(6, -18), fontsize=8)
    for w, pk in zip(ws, peaks):
        if w not in best:
            ax.annotate("no sustainable window", (w, pk), textcoords="offset points",
                        xytext=(6, 6), fontsize=8, color="grey")
            notes.append(f"{w:g} workers: no run has a {w_key} s window within the rule; only "
                         f"its peak {w_key} s RPS is drawn")
    srcs = sorted({v[2] for w in ws for v in by_w[w]})
    ax.set_xlabel(f"workers ({', '.join(srcs)})")
    ax.set_ylabel("requests / s")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.set_title(f"Scaling: peak sustainable RPS (client p99 ≤ {rule['slo_p99_ms']:g} ms, "
                 f"failures ≤ {rule['max_fail_ratio']:.1%})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return notes, True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="result.json files or run directories")
    p.add_argument("-o", "--out", default="", help="output directory")
    p.add_argument("--slo-p99-ms", type=float, default=oka_result.DEFAULT_SLO_P99_MS)
    p.add_argument("--max-fail-ratio", type=float, default=oka_result.DEFAULT_MAX_FAIL_RATIO)
    p.add_argument("--window-s", type=int, default=oka_result.DEFAULT_WINDOW_S)
    args = p.parse_args(argv)
    paths = resolve(args.results)
    docs = [(oka_result.load(x), x) for x in paths]
    out = args.out or (os.path.dirname(os.path.abspath(paths[0])) if len(paths) == 1
                       else os.path.join(HERE, "out", "plots"))
    os.makedirs(out, exist_ok=True)
    rule = {"slo_p99_ms": args.slo_p99_ms, "max_fail_ratio": args.max_fail_ratio,
            "window_s": args.window_s}
    written = []
    for doc, path in docs:
        if not doc.get("samples"):
            print(f"plot.py: {path}: no per-second samples; its timeline is not drawn")
            continue
        f = os.path.join(out, f"{slug(doc, path)}_timeline.png")
        timeline(doc, path, f, rule)
        written.append(f)
        if oka_result.client_limited(doc):
            print(f"plot.py: {path}: client-limited (Locust reported high CPU): its peak is a "
                  f"lower bound; add --processes or Locust workers")
    f = os.path.join(out, "latency_vs_rps.png")
    why = latency_vs_rps(docs, f)
    if why:
        print(f"plot.py: {why}")
    else:
        written.append(f)
    f = os.path.join(out, "scaling.png")
    notes, drawn = scaling(docs, f, rule)
    for n in notes:
        print(f"plot.py: {n}")
    if drawn:
        written.append(f)
    elif os.path.exists(f):  # an older chart would now mislead
        os.remove(f)
        print(f"plot.py: removed the older {f}")
    for f in written:
        print(f"plot.py: wrote {f} ({os.path.getsize(f)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
