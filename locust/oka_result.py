"""Shared by run.py and plot.py: the result file's schema and the derived figures.

A result file (`result.json`, written by run.py) is

    {"schema": "oka-locust-result/1",
     "run_metadata": {...},         # who/what/when; see run.py
     "summary": {...},              # whole-run figures
     "checks": {...},               # value checks done by the locustfile
     "samples": [ {...}, ... ],     # one per second, client and server side
     "server_samples": [ {...} ]}   # raw Oka /stats answers, with "t"

Every latency is in milliseconds. Per-second sample fields:

    t, elapsed_s      epoch second, seconds since the first sample
    users             the shape's target user count in the middle of that second
                      (users start within milliseconds; else Locust's count)
    offered_rps       users × per-user rate (paced users only, else null)
    rps, ok_rps, fail_rps   requests completed in that second (exact count)
    client_p50 … client_p99_9, client_max, client_mean
                      client latency of requests completed in that second
                      (locustfile histogram, ~1 % resolution)
    co_p50, co_p95, co_p99   the same measured from each request's intended send time
                      (paced users; corrects for coordinated omission)
    locust_rps, locust_fail_s, locust_p50, locust_p95, locust_p99
                      Locust's own view from --csv-full-history: RPS averaged over ~10 s,
                      percentiles over a 5 s window, whole milliseconds
    server_qps, server_p50, server_p75, server_p95, server_p99, server_avg,
    db_qps, db_p50, db_p95, db_p99, db_avg
                      Oka's /stats sampled in that second (a trailing 5 s window)
"""

from __future__ import annotations

import json
import math

RESULT_SCHEMA = "oka-locust-result/1"

# Defaults of the "peak sustainable RPS" rule; run.py and plot.py take flags for them.
DEFAULT_WINDOW_S = 5
DEFAULT_MAX_FAIL_RATIO = 0.001
DEFAULT_SLO_P99_MS = 100.0
DEFAULT_MIN_OFFERED_RATIO = 0.95


def load(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    if doc.get("schema") != RESULT_SCHEMA:
        raise ValueError(f"{path}: not an Oka Locust result ({doc.get('schema')!r})")
    return doc


def _num(x):
    return x if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else None


def peak_sustainable(samples: list[dict], window_s: int = DEFAULT_WINDOW_S,
                     max_fail_ratio: float = DEFAULT_MAX_FAIL_RATIO,
                     slo_p99_ms: float = DEFAULT_SLO_P99_MS,
                     min_offered_ratio: float = DEFAULT_MIN_OFFERED_RATIO) -> dict | None:
    """The highest mean RPS over `window_s` consecutive seconds in which

    - failures are at most `max_fail_ratio` of requests,
    - the client p99 of every second is at most `slo_p99_ms`,
    - and, where the offered rate is known (paced users), the achieved rate is at least
      `min_offered_ratio` of it (below that the server no longer keeps up).

    The first and last second (partial) are left out. None if no window qualifies.
    """
    s = [x for x in samples[1:-1] if _num(x.get("rps")) is not None]
    best = None
    for i in range(0, len(s) - window_s + 1):
        w = s[i:i + window_s]
        if w[-1]["t"] - w[0]["t"] != window_s - 1:  # not consecutive seconds
            continue
        reqs = sum(x["rps"] for x in w)
        fails = sum(x.get("fail_rps") or 0 for x in w)
        if reqs <= 0 or fails > max_fail_ratio * reqs:
            continue
        p99s = [_num(x.get("client_p99")) for x in w]
        if any(p is None or p > slo_p99_ms for p in p99s):
            continue
        offered = [_num(x.get("offered_rps")) for x in w]
        if all(o is not None for o in offered):
            if reqs < min_offered_ratio * sum(offered):
                continue
        rps = reqs / window_s
        if best is None or rps > best["rps"]:
            best = {"rps": round(rps, 2), "t": w[0]["t"], "elapsed_s": w[0].get("elapsed_s"),
                    "client_p99": max(p99s),
                    "client_p50": max(_num(x.get("client_p50")) or 0 for x in w),
                    "server_p99": max((_num(x.get("server_p99")) or 0) for x in w),
                    "users": w[-1].get("users")}
    return best


def workers_of(doc: dict) -> tuple[float | None, str]:
    """The worker count to plot a run against, and where it came from."""
    md = doc.get("run_metadata", {})
    if md.get("workers_label") not in (None, ""):
        return float(md["workers_label"]), "label"
    if md.get("server_workers"):
        return float(md["server_workers"]), "server /metrics"
    ids = md.get("server_ids_seen") or []
    if ids:
        return float(len(ids)), "server_id values seen"
    return None, "unknown"


def client_limited(doc: dict) -> bool:
    """Locust reported high CPU on a load generator: the client, not Oka, may have been
    the limit, so the run's peak is a lower bound of what the server sustains."""
    return bool(doc.get("run_metadata", {}).get("locust_cpu_warning"))


def peak_label(doc: dict, ps: dict | None, unit: str = "RPS") -> str:
    """"N RPS", or "≥ N RPS (client-limited)" when the client was the limit."""
    if not ps:
        return "none"
    if client_limited(doc):
        return f"≥ {ps['rps']:.0f} {unit} (client-limited)"
    return f"{ps['rps']:.0f} {unit}"


def run_label(doc: dict, path: str = "") -> str:
    md = doc.get("run_metadata", {})
    return md.get("name") or path
