"""The load generator: the project's locustfile in distributed mode (locust/run.py as
the master, `workers` Locust worker processes), all in the `generator` cgroup so its
CPU is measured like the nodes'. One run is one Locust shape against the balancer."""

from __future__ import annotations

import json
import os
import subprocess
import time

from parts import Cgroup, Parts, SetupError, free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCUST = os.path.join(ROOT, "locust")


class Locust:
    def __init__(self, parts: Parts, python: str, workers: int, cg: Cgroup):
        self.parts, self.python, self.workers, self.cg = parts, python, workers, cg

    def run(self, name: str, host: str, shape: list[str], timeout: float) -> dict:
        """Runs one shape (`--oka-*` options) to its end; the run's result.json."""
        out = os.path.join(self.parts.work, "locust", name)
        os.makedirs(out, exist_ok=True)
        port = free_ports(1)[0]
        master = self.parts.start(
            [self.python, os.path.join(LOCUST, "run.py"), "--master", "--expect-workers",
             str(self.workers), "--master-bind-port", str(port), "--host", host, "--out", out,
             "--name", name, "--timeout", str(int(timeout)), "--quiet", "--",
             "--oka-api", "native", *shape],
            f"locust-{name}.log", self.cg)
        time.sleep(1.0)  # the master binds its port before the workers connect
        workers = [self.parts.start(
            [self.python, "-m", "locust", "-f", os.path.join(LOCUST, "locustfile.py"),
             "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
            f"locust-{name}-worker{i}.log", self.cg, cwd=LOCUST) for i in range(self.workers)]
        try:
            master.wait(timeout=timeout + 60)
        except subprocess.TimeoutExpired:
            master.kill()
            master.wait()
        for w in workers:
            try:
                w.wait(timeout=15)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        path = os.path.join(out, "result.json")
        if not os.path.exists(path):
            log = os.path.join(self.parts.work, f"locust-{name}.log")
            raise SetupError(f"locust run {name}: no result ({path}); see {log} and {out}/locust.log")
        with open(path) as f:
            return json.load(f)


def rate_shape(levels: list[float], step_s: float, user_rps: float) -> list[str]:
    """Constant arrival rate, one level per step (Locust rounds to whole users)."""
    return ["--oka-shape", "rate", "--oka-rate", ",".join(f"{r:g}" for r in levels),
            "--oka-rate-time", f"{step_s:g}", "--oka-user-rps", f"{user_rps:g}"]


def steps(result: dict, user_rps: float, settle_s: int = 2) -> list[dict]:
    """The run's seconds grouped by the shape's user target: per step the offered rate,
    the achieved RPS (mean over the step, its first `settle_s` seconds and last second
    left out), failures, and p50/p95 (means of the per-second values), with the step's
    first and last epoch second."""
    groups: list[list[dict]] = []
    for s in result.get("samples", []):
        if not s.get("users"):
            continue
        if groups and groups[-1][0]["users"] == s["users"]:
            groups[-1].append(s)
        else:
            groups.append([s])
    out = []
    for g in groups:
        body = g[settle_s:-1] if len(g) > settle_s + 2 else g
        rps = [x.get("rps") or 0 for x in body]
        p50 = [x["client_p50"] for x in body if x.get("client_p50") is not None]
        p95 = [x["client_p95"] for x in body if x.get("client_p95") is not None]
        out.append({
            "users": g[0]["users"],
            "offered_rps": g[0]["users"] * user_rps,
            "rps": sum(rps) / len(rps) if rps else 0.0,
            "failed": sum(x.get("fail_rps") or 0 for x in g),
            "requests": sum(x.get("rps") or 0 for x in g),
            "p50_ms": sum(p50) / len(p50) if p50 else None,
            "p95_ms": sum(p95) / len(p95) if p95 else None,
            "t0": body[0]["t"], "t1": body[-1]["t"] + 1,
        })
    return out


def sustainable(step_list: list[dict], slo_p95_ms: float, keep_up: float = 0.95) -> dict | None:
    """The highest step that kept up: achieved ≥ `keep_up` × offered, no failures, and
    p95 within the SLO."""
    best = None
    for s in step_list:
        if (s["rps"] >= keep_up * s["offered_rps"] and s["failed"] == 0
                and s["p95_ms"] is not None and s["p95_ms"] <= slo_p95_ms):
            if best is None or s["rps"] > best["rps"]:
                best = s
    return best
