"""Faults under load, through the balancer: a node killed (SIGKILL), a rolling restart
(SIGTERM and the drain, each node replaced before the next goes), a Redis primary
killed and its replica promoted (with a writer whose acknowledged records are read
back afterwards). Each runs Locust at a constant rate in a thread of its own while
the fault is made, and reads the outcome from Locust's per-second samples and the
sampler's timeline (HAProxy's view of each node, every 0.1 s)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import urllib.request

from loadgen import rate_shape
from parts import SetupError, http_status

WARM_S = 8  # seconds of load before the fault


class Load(threading.Thread):
    """One Locust run at `rps` for `seconds`, in the background."""

    def __init__(self, cl, name: str, rps: float, seconds: float):
        super().__init__(daemon=True)
        self.cl, self.name, self.rps, self.seconds = cl, name, rps, seconds
        self.result: dict | None = None
        self.error: Exception | None = None
        self.started = time.time()

    def run(self) -> None:
        try:
            shape = rate_shape([self.rps], self.seconds, self.cl.cfg["user_rps"])
            self.result = self.cl.locust.run(self.name, self.cl.balancer.url, shape,
                                             timeout=self.seconds + 30)
        except Exception as e:  # reported by finish()
            self.error = e

    def wait_warm(self) -> None:
        """Until Locust has sent WARM_S seconds of load (its workers take ~2 s to start)."""
        time.sleep(WARM_S + 3)

    def finish(self) -> dict:
        self.join(timeout=self.seconds + 120)
        if self.error is not None:
            raise self.error
        if self.result is None:
            raise SetupError(f"locust run {self.name}: did not finish")
        return self.result


KEPT = ("t", "users", "rps", "fail_rps", "client_p50", "client_p95", "client_p99")


def per_second(result: dict) -> list[dict]:
    """Locust's per-second samples of the run, with the fields a fault's figures and
    chart use."""
    return [{k: s.get(k) for k in KEPT} for s in result.get("samples", []) if s.get("users")]


def recovery(samples: list[dict], t_fault: float, ok_rps: float) -> float | None:
    """Seconds from the fault to the start of the first second after which every second
    has no failure and at least 95% of the rate before the fault (0: never dipped);
    None if it never got back."""
    after = [s for s in samples if s["t"] >= int(t_fault)][:-1]  # the last second is partial
    bad = [s["t"] for s in after if (s.get("fail_rps") or 0) > 0 or (s.get("rps") or 0) < 0.95 * ok_rps]
    if not bad:
        return 0.0
    if bad[-1] == after[-1]["t"]:
        return None
    return round(bad[-1] + 1 - t_fault, 2)


def rate_before(samples: list[dict], t_fault: float) -> float:
    before = [s.get("rps") or 0 for s in samples if int(t_fault) - 6 <= s["t"] < int(t_fault) - 1]
    return sorted(before)[len(before) // 2] if before else 0.0


def wait_status(cl, name: str, want: str, timeout: float) -> float | None:
    """When HAProxy's status of a node starts with `want`, or None after timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cl.balancer.status(name).startswith(want):
            return time.time()
        time.sleep(0.05)
    return None


def cut_on(cl, name: str) -> int:
    """Requests HAProxy saw a node cut off mid-answer so far (its response errors and
    the transfers the server aborted). Only a request in flight on a node when it died
    counts here: one sent to it afterwards finds no connection and is retried on
    another node (counted as a connection error and a redispatch instead)."""
    row = (cl.balancer.stats() or {}).get(name, {})
    # The larger of the two, not their sum: one request may count in both.
    return max(int(row.get("eresp") or 0), int(row.get("srv_abrt") or 0))


def node_kill(cl, cfg: dict, per_node: float) -> dict:
    n = cfg["fault_nodes"]
    cl.use(n)
    rps = cfg["fault_load"] * (n - 1) * per_node
    load = Load(cl, "node-kill", rps, cfg["fault_s"])
    load.start()
    load.wait_warm()
    victim = cl.nodes[n - 1]
    recent = [s for s in cl.sampler.samples if s["t"] >= time.time() - 1.0]
    before = cut_on(cl, victim.name)
    t_kill = time.time()
    victim.signal(signal.SIGKILL)
    sampled = max((s.get("servers", {}).get(victim.name, {}).get("scur", 0) for s in recent), default=0)
    t_down = wait_status(cl, victim.name, "DOWN", cfg["check"]["interval_s"] * 4 + 10)
    res = load.finish()
    cut = cut_on(cl, victim.name) - before
    victim.proc.wait()
    victim.start()
    victim.wait_ready()
    cl.use(n)
    samples = per_second(res)
    ok_rps = rate_before(samples, t_kill)
    failed = int(sum(s.get("fail_rps") or 0 for s in samples))
    return {"failed": failed, "in_flight_max": cut, "in_flight_sampled": sampled,
            "recovery_s": recovery(samples, t_kill, ok_rps),
            "down_after_s": round(t_down - t_kill, 2) if t_down else None,
            "check_interval_s": cfg["check"]["interval_s"], "offered_rps": rps,
            "rps_before": ok_rps, "requests": int(sum(s.get("rps") or 0 for s in samples)),
            "t_fault": t_kill, "samples": samples}


def rolling_restart(cl, cfg: dict, per_node: float) -> dict:
    n = cfg["fault_nodes"]
    cl.use(n)
    rps = cfg["fault_load"] * (n - 1) * per_node
    c = cfg["check"]
    per = cl.shutdown_delay_s + c["healthy"] * c["interval_s"] + c["timeout_s"] + 8
    load = Load(cl, "rolling-restart", rps, WARM_S + 5 + n * per)
    load.start()
    load.wait_warm()
    events = []
    for node in cl.nodes[:n]:
        t0 = time.time()
        node.signal(signal.SIGTERM)
        try:
            status = node.proc.wait(timeout=cl.shutdown_delay_s + 30)
        except subprocess.TimeoutExpired:
            raise SetupError(f"{node.name} did not exit within its drain after SIGTERM; see {node.log}") from None
        t_exit = time.time()
        node.start()
        node.wait_ready()
        t_up = wait_status(cl, node.name, "UP", c["interval_s"] * (c["healthy"] + 2) + 10)
        if t_up is None:
            raise SetupError(f"haproxy did not take {node.name} back after its restart; see "
                             f"{cl.parts.work}/haproxy.log and {node.log}")
        events.append({"node": node.name, "sigterm": t0, "exited": t_exit, "exit_status": status,
                       "up": t_up})
    res = load.finish()
    samples = per_second(res)
    return {"requests": int(sum(s.get("rps") or 0 for s in samples)),
            "failed": int(sum(s.get("fail_rps") or 0 for s in samples)),
            "offered_rps": rps, "events": events, "samples": samples}


class Writer(threading.Thread):
    """Writes one record at a time through the balancer (`POST /v1/ingest`), each key
    new (`w-<seq>`); remembers which were acknowledged (answered 200)."""

    def __init__(self, url: str, rate: float):
        super().__init__(daemon=True)
        self.url, self.interval = url + "/v1/ingest", 1.0 / rate
        self.acked: list[int] = []
        self.refused = 0
        self._halt = threading.Event()

    def run(self) -> None:
        seq = 0
        while not self._halt.is_set():
            body = json.dumps({"feature": "test_feature",
                               "records": [{"id": f"w-{seq}", "value": float(seq)}]}).encode()
            if http_status(self.url, timeout=2.0, body=body) == 200:
                self.acked.append(seq)
            else:
                self.refused += 1
            seq += 1
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def read_back(url: str, seqs: list[int]) -> int:
    """How many of the acknowledged records are missing or wrong when read back."""
    lost = 0
    for i in range(0, len(seqs), 100):
        chunk = seqs[i:i + 100]
        body = json.dumps({"target_features": ["test_feature"],
                           "keys": [{"id": f"w-{s}"} for s in chunk]}).encode()
        req = urllib.request.Request(url + "/v1/features", data=body,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            answer = json.load(r)
        for s, rows in zip(chunk, answer["results"]["test_feature"]):
            if not any(r.get("value") == float(s) for r in rows or []):
                lost += 1
    return lost


def redis_failover(cl, cfg: dict, per_node: float) -> dict:
    n = cfg["fault_nodes"]
    cl.use(n)
    rps = cfg["fault_load"] * n * per_node
    load = Load(cl, "redis-failover", rps, cfg["fault_s"])
    writer = Writer(cl.balancer.url, 20)
    load.start()
    writer.start()
    load.wait_warm()
    victim = cl.redis.primaries()[0]
    t_kill = time.time()
    cl.redis.procs[victim].kill()
    cl.redis.procs[victim].wait()
    t_ok = None
    deadline = time.time() + 60
    while time.time() < deadline:
        prim = cl.redis.primaries()
        if victim not in prim and len(prim) == 3 and cl.redis.all_ok():
            t_ok = time.time()
            break
        time.sleep(0.1)
    res = load.finish()
    writer.stop()
    samples = per_second(res)
    ok_rps = rate_before(samples, t_kill)
    return {"failed": int(sum(s.get("fail_rps") or 0 for s in samples)),
            "recovery_s": recovery(samples, t_kill, ok_rps),
            "promoted_after_s": round(t_ok - t_kill, 2) if t_ok else None,
            "acknowledged": len(writer.acked), "write_refused": writer.refused,
            "acknowledged_lost": read_back(cl.balancer.url, writer.acked),
            "node_timeout_ms": cfg["redis_node_timeout_ms"], "offered_rps": rps,
            "requests": int(sum(s.get("rps") or 0 for s in samples)),
            "t_fault": t_kill, "samples": samples}


def run_all(cl, cfg: dict, per_node: float) -> dict:
    out = {}
    for name, fn in (("node_kill", node_kill), ("rolling_restart", rolling_restart),
                     ("redis_failover", redis_failover)):
        if name not in cfg["faults"]:
            continue
        print(f"cluster: fault {name}", flush=True)
        out[name] = fn(cl, cfg, per_node)
        print(f"cluster: {name}: " + json.dumps({k: v for k, v in out[name].items()
                                                 if k not in ("samples", "events")}), flush=True)
    return out
