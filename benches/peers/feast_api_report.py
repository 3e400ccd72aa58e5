"""The report of benches/peers/feast_api.sh: medians over the rounds of each
(scenario, connections, system), Oka ÷ Feast ratios, and the gRPC runs.

    python feast_api_report.py OUT RATE FEAST_WORKERS OKA_COMMIT REDIS_VERSION

Writes OUT/results.json and OUT/results.md.
"""

import glob
import json
import os
import re
import statistics
import sys


def median(xs):
    return statistics.median(xs) if xs else None


def main() -> None:
    out, rate, workers, commit, redis = sys.argv[1:6]
    runs = {}
    for path in glob.glob(os.path.join(out, "runs", "r*.json")):
        name = os.path.basename(path)[:-5]
        m = re.fullmatch(r"r(\d+)-(oka|okapy|feast|grpc)-(\w+?)-(c\d+|open)", name)
        if m:
            runs.setdefault(m.group(2, 3, 4), []).append(json.load(open(path)))
    rows, table = [], []
    head = ("| scenario | system | RPS | p50 ms | p99 ms | p99.9 ms | server CPU µs/req "
            "| + Redis µs/req | generator CPU µs/req | errors |")
    table += [head, "|" + "---|" * 10]
    for scenario in ("one", "odfv", "wide"):
        for conns in ("c8", "c32", "open"):
            medians = {}
            for system in ("oka", "okapy", "feast"):
                rs = runs.get((system, scenario, conns))
                if not rs:
                    continue
                m = {
                    "rps": median([r["rps"] for r in rs]),
                    "p50": median([r["latency_ms"]["p50"] for r in rs]),
                    "p99": median([r["latency_ms"]["p99"] for r in rs]),
                    "p999": median([r["latency_ms"]["p99_9"] for r in rs]),
                    "cpu_us": median([r["server_tree_cpu_s_per_request"] * 1e6 for r in rs]),
                    "cpu_redis_us": median([r["server_plus_redis_cpu_s_per_request"] * 1e6 for r in rs]),
                    "gen_us": median([r["client_cpu_s"] / max(r["requests"], 1) * 1e6 for r in rs]),
                    "errors": sum(r["errors"] for r in rs),
                    "rounds": len(rs),
                }
                medians[system] = m
                label = f"{scenario}, {'open ' + rate + ' req/s' if conns == 'open' else conns[1:] + ' conns'}"
                table.append(
                    f"| {label} | {system} | {m['rps']:,.0f} | {m['p50']:.3f} | {m['p99']:.3f} "
                    f"| {m['p999']:.3f} | {m['cpu_us']:,.0f} | {m['cpu_redis_us']:,.0f} "
                    f"| {m['gen_us']:,.0f} | {m['errors']} |")
            f = medians.get("feast")
            for system, label in (("oka", "Oka/Feast"), ("okapy", "Oka Python/Feast")):
                o = medians.get(system)
                if not o or not f:
                    continue
                ratio = {k: (o[k] / f[k] if f[k] else None) for k in ("rps", "p50", "p99", "p999", "cpu_us", "cpu_redis_us")}
                table.append(
                    f"| | **{label}** | **{ratio['rps']:.1f}×** | {ratio['p50']:.3f} | {ratio['p99']:.3f} "
                    f"| {ratio['p999']:.3f} | {ratio['cpu_us']:.3f} | {ratio['cpu_redis_us']:.3f} | | |")
                row = {"scenario": scenario, "connections": conns, "oka": o, "feast": f,
                       "oka_over_feast": ratio}
                if system == "okapy":
                    row = {**row, "runtime": "python"}
                rows.append(row)
    grpc = []
    for conns in ("c8", "c32"):
        rs = runs.get(("grpc", "one", conns))
        if not rs:
            continue
        g = {
            "rps": median([r["rps"] for r in rs]),
            "p50": median([r["latencyDistribution"][2]["latency"] / 1e6 for r in rs]),
            "p99": median([r["latencyDistribution"][-1]["latency"] / 1e6 for r in rs]),
            "cpu_us": median([r["server_cpu_s"] / max(r["count"], 1) * 1e6 for r in rs]),
            "errors": sum(sum(v for k, v in r.get("statusCodeDistribution", {}).items() if k != "OK") for r in rs),
        }
        grpc.append({"connections": conns, **g})
    if grpc:
        table += ["", "gRPC (Oka's ServingService, ghz; feast serve has no gRPC):", "",
                  "| scenario | RPS | p50 ms | p99 ms | server CPU µs/req | errors |", "|---|---|---|---|---|---|"]
        for g in grpc:
            table.append(f"| one, {g['connections'][1:]} conns | {g['rps']:,.0f} | {g['p50']:.3f} "
                         f"| {g['p99']:.3f} | {g['cpu_us']:,.0f} | {g['errors']} |")
    meta = {"open_rate_rps": int(rate), "feast_workers": int(workers), "oka": commit, "redis": redis}
    json.dump({"meta": meta, "http": rows, "grpc": grpc}, open(os.path.join(out, "results.json"), "w"), indent=1)
    md = [f"Oka {commit}, feast serve --workers {workers} --max-requests 0, Redis {redis}; "
          "medians over the rounds.", ""] + table
    open(os.path.join(out, "results.md"), "w").write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
