"""The cluster bench (issue 45): Oka nodes behind HAProxy, on a Redis Cluster, driven
by Locust in distributed mode; scaling per node count, then faults under load.

Run through `bash benches/cluster/run.sh`, which installs what is missing and builds
Oka; the parameters are environment variables (see run.sh). Writes
benches/cluster/out/results.json (and work files under benches/cluster/out/work/).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import faults
from loadgen import Locust, rate_shape, steps, sustainable
from parts import (Balancer, OkaNode, Parts, RedisCluster, Sampler, SetupError, cpu_between,
                   dump, free_ports, machine_busy_between)

HERE = os.path.dirname(os.path.abspath(__file__))
# The latency goal at the top step; every run also reports the highest step
# that kept p95 within it.
TIGHT_P95_MS = 10.0


def env_list(name: str, default: str) -> list[int]:
    text = os.environ.get(name, default)
    try:
        out = [int(x) for x in text.split()]
    except ValueError:
        raise SetupError(f"{name}={text!r}: expected whole numbers separated by spaces, e.g. \"1 2 4\"") from None
    if not out or min(out) < 1:
        raise SetupError(f"{name}={text!r}: give at least one node count, each at least 1")
    return out


def env_num(name: str, default: float, least: float = 0.0) -> float:
    text = os.environ.get(name, str(default))
    try:
        v = float(text)
    except ValueError:
        raise SetupError(f"{name}={text!r}: expected a number") from None
    if v < least:
        raise SetupError(f"{name}={text!r}: must be at least {least:g}")
    return v


def settings() -> dict:
    nodes = env_list("NODES", "1 2 4")
    quota = env_num("QUOTA", 0.1)
    fault_nodes = int(env_num("FAULT_NODES", max(2, min(3, max(nodes))), 2))
    return {
        "nodes": nodes,
        "quota": quota,
        # The shortest CFS period the kernel's least quota (1 ms) allows, at least 5 ms:
        # a throttled node waits at most one period.
        "period_us": int(env_num("PERIOD_US", max(5000, 1000 / quota) if quota > 0 else 5000, 1000)),
        "node_workers": int(env_num("NODE_WORKERS", 1, 1)),
        "step_s": env_num("STEP_S", 10, 4),
        "duration": env_num("DURATION", 1800, 60),
        "step_rps": env_num("STEP_RPS", 0),
        "steps": int(env_num("STEPS", 10, 2)),
        "rounds": int(env_num("ROUNDS", 3, 1)),
        "user_rps": env_num("USER_RPS", 10, 1),
        "gen_workers": int(env_num("GEN_WORKERS", 2, 1)),
        "slo_p95_ms": env_num("SLO_P95_MS", 50, 1),
        "fault_nodes": fault_nodes,
        "faults": os.environ.get("FAULTS", "node_kill rolling_restart redis_failover").split(),
        "fault_load": env_num("FAULT_LOAD", 0.5, 0.05),
        "fault_s": env_num("FAULT_S", 40, 10),
        "check": {"interval_s": env_num("CHECK_INTERVAL_S", 5, 1),
                  "timeout_s": env_num("CHECK_TIMEOUT_S", 3, 1),
                  "healthy": int(env_num("HEALTHY", 2, 1)),
                  "unhealthy": int(env_num("UNHEALTHY", 2, 1))},
        "redis_node_timeout_ms": int(env_num("REDIS_NODE_TIMEOUT_MS", 2000, 100)),
    }


def load_data(bin_: str, spec: str, store: str, work: str, keys: int = 10000) -> None:
    path = os.path.join(work, "test_feature.jsonl")
    now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    with open(path, "w") as f:
        for i in range(keys):
            f.write(json.dumps({"id": f"test-id-{i}", "value": float(i), "timestamp": now}) + "\n")
    r = subprocess.run([bin_, "ingest", "--spec", spec, "--store", store, "--feature",
                        "test_feature", "--file", path], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SetupError(f"oka ingest into the Redis Cluster failed: {r.stderr[-600:]}")


class Cluster:
    """The started parts and what the phases share."""

    def __init__(self, parts: Parts, cfg: dict, bin_: str, python: str):
        self.cfg = cfg
        self.parts = parts
        work = parts.work
        spec = os.path.join(HERE, "spec.yaml")
        self.redis = RedisCluster(self.parts, cfg["redis_node_timeout_ms"])
        load_data(bin_, spec, self.redis.url(), work)
        count = max(max(cfg["nodes"]), cfg["fault_nodes"])
        port, admin = free_ports(2)
        # Each node's shutdown delay outlasts the balancer's detection of a failing
        # /readyz (unhealthy × interval, plus one check's timeout), as the chart's does.
        c = cfg["check"]
        self.shutdown_delay_s = int(c["unhealthy"] * c["interval_s"] + c["timeout_s"] + 1)
        self.nodes = [OkaNode(self.parts, i, bin_, spec, self.redis.url(), cfg["quota"],
                              cfg["period_us"], cfg["node_workers"], self.shutdown_delay_s,
                              port, admin) for i in range(count)]
        for n in self.nodes:
            n.start()
        for n in self.nodes:
            n.wait_ready()
        self.balancer = Balancer(self.parts, self.nodes, cfg["check"])
        self.gen_cg = self.parts.cgroup("generator")
        self.locust = Locust(self.parts, python, cfg["gen_workers"], self.gen_cg)
        self.sampler = Sampler([*(n.cg for n in self.nodes), self.balancer.cg,
                                self.redis.cg, self.gen_cg], self.balancer)
        self.sampler.start()

    def use(self, n: int) -> None:
        """Only the first n nodes take traffic (the others are disabled in HAProxy, as
        targets not registered); waits until those n are UP."""
        for i, node in enumerate(self.nodes):
            verb = "enable" if i < n else "disable"
            self.balancer.command(f"{verb} server nodes/{node.name}")
        deadline = time.time() + 60
        while time.time() < deadline:
            st = self.balancer.stats() or {}
            if all(st.get(x.name, {}).get("status", "").startswith("UP") for x in self.nodes[:n]):
                return
            time.sleep(0.2)
        raise SetupError(f"haproxy: the first {n} nodes were not all UP within 60 s; see "
                         f"{self.parts.work}/haproxy.log and the nodes' logs there")


def bytes_per_request(before: dict, after: dict) -> float | None:
    """Bytes in and out of the balancer's backend per request (what an ALB bills as
    processed bytes, headers included)."""
    def n(row, k):
        return int(row.get(k) or 0)
    key = "req_tot" if after.get("req_tot") else "stot"
    reqs = n(after, key) - n(before, key)
    moved = n(after, "bin") + n(after, "bout") - n(before, "bin") - n(before, "bout")
    return round(moved / reqs, 1) if reqs > 0 else None


def ramp(cl: Cluster, n: int, levels: list[float], name: str) -> dict:
    """One ramp against the first n nodes: its steps with each cgroup's CPU, its
    sustainable step (by the seed's p95 and by 10 ms) and the bytes per request."""
    cfg = cl.cfg
    before = (cl.balancer.stats() or {}).get("BACKEND", {})
    res = cl.locust.run(name, cl.balancer.url, rate_shape(levels, cfg["step_s"], cfg["user_rps"]),
                        timeout=cfg["step_s"] * cfg["steps"] + 30)
    after = (cl.balancer.stats() or {}).get("BACKEND", {})
    st = steps(res, cfg["user_rps"])
    if not st:
        raise SetupError(f"locust run {name}: no per-second samples; see {cl.parts.work}/locust/{name}/locust.log")
    samples = cl.sampler.samples
    for s in st:
        s["node_cpu"] = [cpu_between(samples, x.name, s["t0"], s["t1"]) for x in cl.nodes[:n]]
        for part in ("generator", "balancer", "store"):
            s[f"{part}_cpu"] = cpu_between(samples, part, s["t0"], s["t1"])
        s["machine_busy"] = machine_busy_between(samples, s["t0"], s["t1"])
    return {"nodes": n, "levels": levels, "steps": st, "sustainable": sustainable(st, cfg["slo_p95_ms"]),
            "sustainable_tight": sustainable(st, TIGHT_P95_MS),
            "bytes_per_request": bytes_per_request(before, after)}


def scaling(cl: Cluster) -> tuple[list[dict], list[dict]]:
    """For each node count, ROUNDS ramps; the round with the median sustainable RPS
    stands for the node count (marked `median` in the runs)."""
    cfg = cl.cfg
    per_node = cfg["step_rps"] or 2500 * cfg["quota"]
    runs, chosen = [], []
    for n in cfg["nodes"]:
        cl.use(n)
        levels = [per_node * n * (k + 1) for k in range(cfg["steps"])]
        rounds = []
        for r in range(cfg["rounds"]):
            run = ramp(cl, n, levels, f"scale-{n}-{r + 1}")
            run["round"] = r + 1
            rounds.append(run)
            best = run["sustainable"]
            print(f"cluster: {n} node(s), round {r + 1}: " +
                  (f"sustainable {best['rps']:.0f} RPS" if best else "no step kept up"), flush=True)
        rounds.sort(key=lambda x: x["sustainable"]["rps"] if x["sustainable"] else 0.0)
        mid = rounds[len(rounds) // 2]
        mid["median"] = True
        runs += rounds
        chosen.append(mid)
    base = next((r["sustainable"]["rps"] for r in chosen if r["nodes"] == 1 and r["sustainable"]), None)
    out = []
    for r in chosen:
        b = r["sustainable"]
        row = {"nodes": r["nodes"], "rps": b["rps"] if b else 0.0,
               "rps_rounds": [x["sustainable"]["rps"] if x["sustainable"] else 0.0
                              for x in runs if x["nodes"] == r["nodes"]],
               "efficiency": (b["rps"] / (r["nodes"] * base)) if b and base else None,
               "top_offered_rps": r["levels"][-1],
               # The ramp's top step kept up: the node count's limit lies beyond the ramp.
               "ramp_top_sustained": bool(b and b["offered_rps"] == r["levels"][-1]),
               "rps_p95_within_10ms": r["sustainable_tight"]["rps"] if r["sustainable_tight"] else 0.0,
               "bytes_per_request": r["bytes_per_request"]}
        for k in ("p50_ms", "p95_ms", "node_cpu", "generator_cpu", "balancer_cpu", "store_cpu", "machine_busy"):
            row[k] = b[k] if b else None
        out.append(row)
    return out, chosen + [x for x in runs if not x.get("median")]


def saturated(cfg: dict, row: dict, run: dict) -> dict:
    """Whether the generator (or the machine it shares) ran out during the ramp: at
    its top step, the generator's processes near their cores or the machine busy. Then
    the client's latencies include its own wait for CPU, and the node count's figures
    are the generator's limit, not the nodes'."""
    top = max(run["steps"], key=lambda s: s["offered_rps"])
    gen = top.get("generator_cpu") or 0.0
    busy = top.get("machine_busy") or 0.0
    nodes = [c for c in top.get("node_cpu") or [] if c is not None]
    node_share = (sum(nodes) / (len(nodes) * cfg["quota"])) if nodes and cfg["quota"] > 0 else None
    gen_full = gen >= 0.85 * cfg["gen_workers"]
    machine_full = busy >= 0.95
    return {"nodes": row["nodes"], "generator_cpu": gen, "machine_busy": busy,
            "node_quota_used": node_share, "saturated": bool(gen_full or machine_full)}


def main() -> int:
    cfg = settings()
    bin_, python = sys.argv[1], sys.argv[2]
    out_dir = os.path.abspath(os.environ.get("OUT") or os.path.join(HERE, "out"))
    work = os.path.join(out_dir, "work")
    subprocess.run(["rm", "-rf", work], check=True)
    os.makedirs(work)
    started = time.time()

    def out_of_time(*_):
        raise SetupError(f"DURATION={cfg['duration']:g} s reached; stopped (results.json keeps what was measured)")

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(cfg["duration"]))
    parts = Parts(work)
    cl = None
    doc: dict = {"settings": cfg, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))}
    try:
        cl = Cluster(parts, cfg, bin_, python)
        rows, runs = scaling(cl)
        sat = [saturated(cfg, r, run) for r, run in zip(rows, runs)]  # the median rounds come first
        doc.update({"scaling": rows, "generator_saturated": any(s["saturated"] for s in sat),
                    "saturation": sat, "runs": runs})
        dump(os.path.join(out_dir, "results.json"), doc)
        per_node = max((r["rps"] / r["nodes"] for r in rows if r["rps"]), default=0.0)
        doc["faults"] = faults.run_all(cl, cfg, per_node)
        doc["timeline"] = [{"t": round(x["t"], 2), "cpu": {k: round(v, 3) for k, v in x["cpu"].items()},
                            "status": {k: v["status"] for k, v in x.get("servers", {}).items()}}
                           for x in cl.sampler.samples[::10]]
    except SetupError as e:
        print(f"cluster: {e}", file=sys.stderr)
        doc["stopped"] = str(e)
        return 2
    finally:
        signal.alarm(0)
        if cl is not None:
            cl.sampler.stop()
        doc["elapsed_s"] = round(time.time() - started, 1)
        dump(os.path.join(out_dir, "results.json"), doc)
        parts.stop_all()
    print(f"cluster: results in {os.path.join(out_dir, 'results.json')} ({doc['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    sys.exit(main())
