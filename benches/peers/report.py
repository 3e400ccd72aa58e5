"""Medians and ratios of benches/peers/run.sh's runs (standard library only).

Usage: python3 report.py OUT_DIR VERSIONS_JSON CONFIG_JSON
Reads OUT_DIR/runs/*.json (one oka-load report per run, plus measure.sh's fields) and
writes OUT_DIR/results.json and OUT_DIR/results.md.
"""

import json
import os
import re
import statistics
import sys

FIELDS = {
    "rps": lambda r: r["rps"],
    "p50_ms": lambda r: r["latency_ms"]["p50"],
    "p99_ms": lambda r: r["latency_ms"]["p99"],
    "p99_9_ms": lambda r: r["latency_ms"]["p99_9"],
    "max_ms": lambda r: r["latency_ms"]["max"],
    "server_cpu_us_per_request": lambda r: r["server_tree_cpu_s_per_request"] * 1e6,
    "server_plus_redis_cpu_us_per_request": lambda r: r["server_plus_redis_cpu_s_per_request"] * 1e6,
    "server_cores_used": lambda r: r["server_tree_cpu_s"] / r["duration_s"],
    "redis_cpu_s": lambda r: r["redis_cpu_s"],
    "other_cpu_s": lambda r: r["other_cpu_s"],
    "client_cpu_s": lambda r: r["client_cpu_s"],
    "idle_server_cpu_s": lambda r: r["idle_server_tree_cpu_s"],
}


def main() -> None:
    out, versions, config = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    runs = {}
    for name in sorted(os.listdir(os.path.join(out, "runs"))):
        with open(os.path.join(out, "runs", name)) as f:
            runs[name[: -len(".json")]] = json.load(f)

    # Measured runs are r<round>-<system>-<scenario>; scenario is closed-cN or open-rR.
    groups: dict = {}
    for name, run in runs.items():
        m = re.fullmatch(r"r(\d+)-(oka|feast)-(closed-c\d+|open-r\d+)", name)
        if m:
            groups.setdefault(m.group(3), {}).setdefault(m.group(2), []).append(run)

    def order(s: str):
        kind, n = s.split("-")[0], int(s.split("-")[1][1:])
        return (kind != "closed", n)

    scenarios = []
    for scenario in sorted(groups, key=order):
        row = {"scenario": scenario}
        for system in ("oka", "feast"):
            rs = groups[scenario].get(system, [])
            med = {k: round(statistics.median(f(r) for r in rs), 3) for k, f in FIELDS.items()} if rs else {}
            med["runs"] = len(rs)
            med["rps_min"] = min((r["rps"] for r in rs), default=None)
            med["rps_max"] = max((r["rps"] for r in rs), default=None)
            med["requests"] = sum(r["requests"] for r in rs)
            med["errors"] = sum(r["errors"] for r in rs)
            row[system] = med
        o, f = row["oka"], row["feast"]
        if o.get("rps") is not None and f.get("rps"):
            row["oka_over_feast"] = {
                k: (round(o[k] / f[k], 4) if f[k] else None)
                for k in ("rps", "p50_ms", "p99_ms", "p99_9_ms", "server_cpu_us_per_request",
                          "server_plus_redis_cpu_us_per_request")
            }
        scenarios.append(row)

    targets = []
    for row in scenarios:
        ratio = row.get("oka_over_feast", {})
        if row["scenario"].startswith("closed") and ratio.get("rps") is not None:
            targets.append({"target": f"{row['scenario']}: Oka RPS >= 30x Feast's",
                            "value": ratio["rps"], "met": ratio["rps"] >= 30})
        if row["scenario"].startswith("open") and ratio.get("p99_ms") is not None:
            targets.append({"target": f"{row['scenario']}: Oka p99 <= Feast's / 10",
                            "value": ratio["p99_ms"], "met": ratio["p99_ms"] <= 0.1})

    prerun = [
        {"run": name, "rps": r["rps"], "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"],
         "errors": r["errors"], "server_cores_used": round(r["server_tree_cpu_s"] / r["duration_s"], 2)}
        for name, r in runs.items() if name.startswith("pre-")
    ]
    results = {"versions": versions, "config": config, "medians": scenarios, "targets": targets,
               "prerun": prerun, "runs": runs}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    md = ["| scenario | system | RPS (min–max) | p50 ms | p99 ms | p99.9 ms | server CPU µs/req | "
          "+ Redis µs/req | server cores | errors |",
          "|---|---|---|---|---|---|---|---|---|---|"]
    for row in scenarios:
        label = row["scenario"].replace("closed-c", "closed, ").replace("open-r", "open, ")
        label = label + (" conns" if label.startswith("closed") else " req/s")
        for system in ("oka", "feast"):
            m = row[system]
            if "rps" not in m:
                continue
            md.append(f"| {label} | {'Oka' if system == 'oka' else 'Feast'} | {m['rps']:,.0f} "
                      f"({m['rps_min']:,.0f}–{m['rps_max']:,.0f}) | {m['p50_ms']:.3f} | "
                      f"{m['p99_ms']:.3f} | {m['p99_9_ms']:.3f} | {m['server_cpu_us_per_request']:,.0f} | "
                      f"{m['server_plus_redis_cpu_us_per_request']:,.0f} | "
                      f"{m['server_cores_used']:.2f} | {m['errors']} |")
        ratio = row.get("oka_over_feast")
        if ratio:
            md.append(f"| {label} | **Oka/Feast** | **{ratio['rps']:.1f}×** | {ratio['p50_ms']:.3f} | "
                      f"{ratio['p99_ms']:.3f} | {ratio['p99_9_ms']:.3f} | {ratio['server_cpu_us_per_request']:.3f} | "
                      f"{ratio['server_plus_redis_cpu_us_per_request']:.3f} | | |")
    md.append("")
    md.append(f"Medians of {config['rounds']} rounds of {config['duration_s']} s per system and scenario; "
              f"Feast: {config['feast']['command']}, on-demand view in {config['feast']['odfv_mode']} mode.")
    md.append("")
    for t in targets:
        md.append(f"- {t['target']}: {t['value']} — {'met' if t['met'] else 'NOT met'}")
    md.append("")
    md.append("Feast pre-run (closed loop, one run each):")
    md.append("")
    md.append("| run | RPS | p50 ms | p99 ms | errors | server cores |")
    md.append("|---|---|---|---|---|---|")
    for p in prerun:
        md.append(f"| {p['run']} | {p['rps']:,.0f} | {p['p50_ms']:.3f} | {p['p99_ms']:.3f} | {p['errors']} | "
                  f"{p['server_cores_used']} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
