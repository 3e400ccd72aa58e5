"""Locust load test for Oka, the seed (Volga) benchmark workload.

Each request asks for `simple_feature` (by default) of random demo keys
`test-id-0` … `test-id-{N-1}` with `udf_args.simple_feature.multiplier = M` and checks
every returned value: `simple_feature` must be `key number × M`. A wrong, missing or
non-`present` answer is a Locust failure, not a success.

Everything is set with Locust's custom-argument mechanism (`--oka-*`; all of them are in
README.md and `_add_options` below), so Locust's own flags keep their meaning:

  --oka-api native|volga      POST /v1/features, or Volga's GET /on_demand_compute/{json}
  --oka-keys 10000            key space; must match what the server holds (the demo: 10000)
  --oka-batch 1               keys per request
  --oka-targets simple_feature   comma-separated target features
  --oka-user-rps 10           pacing of each user (0 = unpaced closed loop)
  --oka-shape step|rate       the load shape (below)

This file is self-contained (no imports from this folder), so it can be shipped as a
single ConfigMap to a Locust deployment.

Shapes. Locust uses the first concrete `LoadTestShape` it finds in a locustfile (2.47
picks `list(shapes)[0]`; only the web UI's class picker chooses among several), so there
is exactly one concrete shape class, `OkaShape`, which delegates to `StepPlan` or
`RatePlan` by `--oka-shape`:

  step: start with --oka-step-users users, add as many every --oka-step-time seconds up
        to --oka-max-users, or until --oka-max-rps is offered (paced users) or measured
        (unpaced users); then hold for --oka-hold seconds. --oka-run-time caps it all.
  rate: constant arrival rate. Users are paced at --oka-user-rps each, so the offered
        rate is users × per-user rate; --oka-rate 2000 (or a list, 500,1000,2000, one
        level per --oka-rate-time seconds) is rounded to a whole number of users.

Pacing keeps a fixed schedule per user (request k is due at t0 + k / rate). When a
request goes out late because the previous one was slow, the lateness is recorded, and
`co_*` percentiles (latency measured from the intended send time, as wrk2 does) are
reported beside the plain ones: this is what closed-loop load hides (coordinated
omission).

Besides Locust's own stats (whole milliseconds), the file keeps its own log-bucketed
latency histograms (about 1 % resolution, microseconds) per second, gathers them from
workers with `report_to_master`, and writes them with the value-check counters to
--oka-report (JSON) when Locust quits. `run.py` reads that file.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import sys
import time
import urllib.parse
from collections import Counter

import gevent
import locust
import locust.stats
from locust import FastHttpUser, LoadTestShape, events, task
from locust.runners import MasterRunner, WorkerRunner

log = logging.getLogger("oka")

# Locust's "current" percentiles (the ones in the --csv-full-history file) use a sliding
# window of 10 s by default; Oka's /stats uses 5 s. Use the same window on both sides.
locust.stats.CURRENT_RESPONSE_TIME_PERCENTILE_WINDOW = 5

REPORT_SCHEMA = "oka-locust-report/1"
PERCENTILES = (50, 75, 90, 95, 99, 99.9)
# A second is summarised (and its histogram dropped) this long after it ended; workers
# report every 3 s, so later data only reaches the totals.
FINALIZE_AFTER_S = 15


# --------------------------------------------------------------------------- options


@events.init_command_line_parser.add_listener
def _add_options(parser):
    a = parser.add_argument
    a("--oka-api", choices=["native", "volga"], default="native",
      help="native: POST /v1/features; volga: Volga's /on_demand_compute route")
    a("--oka-volga-method", choices=["get", "post"], default="get",
      help="with --oka-api volga: GET /on_demand_compute/{url-encoded JSON} (the seed) or POST")
    a("--oka-keys", type=int, default=10000,
      help="key space: ids {prefix}0 … {prefix}N-1; must match what the server holds")
    a("--oka-key-prefix", default="test-id-", help="key id prefix")
    a("--oka-batch", type=int, default=1, help="keys per request")
    a("--oka-multiplier", type=float, default=2.0, help="udf_args.simple_feature.multiplier")
    a("--oka-targets", default="simple_feature",
      help="comma-separated target features (checked: simple_feature, chained_feature, "
           "test_feature, window_feature; others only for presence)")
    a("--oka-user-rps", type=float, default=10.0,
      help="requests per second per user on a fixed schedule; 0 = unpaced closed loop")
    a("--oka-shape", choices=["step", "rate"], default="step", help="load shape")
    a("--oka-step-users", type=int, default=10, help="step: users added per step")
    a("--oka-step-time", type=float, default=10.0, help="step: seconds per step")
    a("--oka-max-users", type=int, default=0, help="step: top of the ramp in users (0 = none)")
    a("--oka-max-rps", type=float, default=0.0,
      help="step: top of the ramp in RPS, offered (paced users) or measured (unpaced); 0 = none")
    a("--oka-hold", type=float, default=-1.0,
      help="step: seconds to hold at the top (default: one step time)")
    a("--oka-run-time", type=float, default=0.0,
      help="step/rate: hard cap on the shape's duration in seconds (0 = none)")
    a("--oka-rate", default="",
      help="rate: offered RPS, or a comma-separated list of levels (e.g. 500,1000,2000)")
    a("--oka-rate-time", type=float, default=30.0, help="rate: seconds per level")
    a("--oka-spawn-rate", type=float, default=0.0,
      help="users started per second when the count changes (default: the whole step at once)")
    a("--oka-report", default="",
      help="write the precise per-second latency and value-check report (JSON) here on quit")


def _targets(opts) -> list[str]:
    t = [x.strip() for x in str(opts.oka_targets).split(",") if x.strip()]
    if not t:
        raise ValueError("--oka-targets is empty")
    return t


def _rate_levels(opts) -> list[float]:
    return [float(x) for x in str(opts.oka_rate).split(",") if x.strip()]


def _validate(opts) -> None:
    _targets(opts)
    if opts.oka_keys < 1:
        raise ValueError("--oka-keys must be ≥ 1")
    if opts.oka_batch < 1:
        raise ValueError("--oka-batch must be ≥ 1")
    if opts.oka_user_rps < 0:
        raise ValueError("--oka-user-rps must be ≥ 0")
    if opts.oka_shape == "step":
        if opts.oka_step_users < 1 or opts.oka_step_time <= 0:
            raise ValueError("--oka-step-users must be ≥ 1 and --oka-step-time > 0")
        if not (opts.oka_max_users > 0 or opts.oka_max_rps > 0 or opts.oka_run_time > 0):
            raise ValueError("step shape: give --oka-max-users, --oka-max-rps or --oka-run-time")
    else:
        levels = _rate_levels(opts)
        if not levels or min(levels) <= 0:
            raise ValueError("rate shape: give --oka-rate N (or N1,N2,…), all > 0")
        if opts.oka_user_rps <= 0:
            raise ValueError("rate shape: --oka-user-rps must be > 0 (the offered rate is users × it)")
        if opts.oka_rate_time <= 0:
            raise ValueError("--oka-rate-time must be > 0")


# --------------------------------------------------------------------------- histograms

# Log buckets over microseconds: bucket b holds [e^(b/K), e^((b+1)/K)), about 1 % wide.
_K = 1.0 / math.log(1.01)


def _bucket(us: float) -> int:
    return int(math.log(us) * _K) if us >= 1.0 else 0


def _bucket_value_ms(b: int) -> float:
    return 0.0005 if b <= 0 else math.exp((b + 0.5) / _K) / 1000.0


def _hist_add(h: dict, b: int, n: int = 1) -> None:
    h[b] = h.get(b, 0) + n


def _hist_merge(into: dict, other: dict) -> None:
    for b, n in other.items():
        b = int(b)
        into[b] = into.get(b, 0) + n


def _hist_summary(h: dict) -> dict:
    """Count, percentiles (ms, ~1 % resolution), max and mean of a bucket histogram."""
    total = sum(h.values())
    if not total:
        return {"count": 0}
    out = {"count": total}
    items = sorted(h.items())
    targets = [(p, math.ceil(total * p / 100.0)) for p in PERCENTILES]
    seen, i = 0, 0
    for b, n in items:
        seen += n
        while i < len(targets) and seen >= targets[i][1]:
            out[f"p{targets[i][0]:g}".replace(".", "_")] = round(_bucket_value_ms(b), 4)
            i += 1
    out["max"] = round(_bucket_value_ms(items[-1][0]), 4)
    out["mean"] = round(sum(_bucket_value_ms(b) * n for b, n in items) / total, 4)
    return out


class _Agg:
    """What one process measured since its last report (workers) or overall (master)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.sec: dict[int, dict] = {}  # epoch second -> {"ok", "fail", "lat", "co"}
        self.checks = Counter()  # requests_checked, values_checked, failures by kind
        self.server_ids: set[str] = set()

    def _s(self, t: int) -> dict:
        s = self.sec.get(t)
        if s is None:
            s = self.sec[t] = {"ok": 0, "fail": 0, "lat": {}, "co": {}}
        return s

    def record(self, rt_ms: float, ok: bool, lag_ms: float | None) -> None:
        s = self._s(int(time.time()))
        s["ok" if ok else "fail"] += 1
        _hist_add(s["lat"], _bucket(rt_ms * 1000.0))
        if lag_ms is not None:
            _hist_add(s["co"], _bucket((rt_ms + lag_ms) * 1000.0))

    def drain(self) -> dict:
        """Serialisable (msgpack/JSON) snapshot, then reset."""
        data = {
            "sec": {str(t): {"ok": s["ok"], "fail": s["fail"],
                             "lat": {str(b): n for b, n in s["lat"].items()},
                             "co": {str(b): n for b, n in s["co"].items()}}
                    for t, s in self.sec.items()},
            "checks": dict(self.checks),
            "server_ids": sorted(self.server_ids)[:256],
        }
        self.reset()
        return data

    def merge(self, data: dict) -> None:
        for t, s in data.get("sec", {}).items():
            d = self._s(int(t))
            d["ok"] += s["ok"]
            d["fail"] += s["fail"]
            _hist_merge(d["lat"], s["lat"])
            _hist_merge(d["co"], s["co"])
        self.checks.update(data.get("checks", {}))
        self.server_ids.update(data.get("server_ids", []))


class _Collector:
    """On the master (or a local runner): merged totals and finished per-second rows."""

    def __init__(self):
        self.agg = _Agg()  # pending seconds
        self.rows: dict[int, dict] = {}
        self.total = {"lat": {}, "co": {}, "ok": 0, "fail": 0}
        self.checks = Counter()
        self.server_ids: set[str] = set()
        self.shape_log: list[list] = []  # [epoch time, target users] at each change

    def shape_target(self, users: int) -> None:
        if not self.shape_log or self.shape_log[-1][1] != users:
            self.shape_log.append([round(time.time(), 3), users])

    def merge(self, data: dict) -> None:
        self.agg.merge(data)
        self.checks.update(self.agg.checks)
        self.server_ids.update(self.agg.server_ids)
        self.agg.checks.clear()
        self.agg.server_ids.clear()

    def finalize(self, before: float) -> None:
        for t in sorted(t for t in self.agg.sec if t < before):
            s = self.agg.sec.pop(t)
            self.total["ok"] += s["ok"]
            self.total["fail"] += s["fail"]
            _hist_merge(self.total["lat"], s["lat"])
            _hist_merge(self.total["co"], s["co"])
            row = self.rows.setdefault(t, {"t": t, "ok": 0, "fail": 0})
            row["ok"] += s["ok"]
            row["fail"] += s["fail"]
            if "lat" in row:  # late data for a summarised second: counted, not in percentiles
                row["late"] = row.get("late", 0) + s["ok"] + s["fail"]
                continue
            row["lat"] = _hist_summary(s["lat"])
            if s["co"]:
                row["co"] = _hist_summary(s["co"])

    def report(self, environment) -> dict:
        self.finalize(float("inf"))
        opts = environment.parsed_options
        return {
            "schema": REPORT_SCHEMA,
            "locust_version": locust.__version__,
            "written_at": time.time(),
            "options": {k: v for k, v in vars(opts).items() if k.startswith("oka_")},
            "checks": dict(self.checks),
            "server_ids": sorted(self.server_ids),
            "shape_log": self.shape_log,
            "total": {"ok": self.total["ok"], "fail": self.total["fail"],
                      "lat": _hist_summary(self.total["lat"]),
                      "co": _hist_summary(self.total["co"])},
            "per_second": [self.rows[t] for t in sorted(self.rows)],
        }


_LOCAL = _Agg()
_COLLECTOR = _Collector()
_LOGGED = Counter()  # failure kinds logged so far by this process


@events.request.add_listener
def _on_request(request_type, name, response_time, response_length, exception=None,
                context=None, **_kw):
    lag = (context or {}).get("oka_lag_ms")
    _LOCAL.record(response_time or 0.0, exception is None, lag)


@events.report_to_master.add_listener
def _on_report_to_master(client_id, data):
    data["oka"] = _LOCAL.drain()


@events.worker_report.add_listener
def _on_worker_report(client_id, data):
    if "oka" in data:
        _COLLECTOR.merge(data["oka"])


@events.init.add_listener
def _on_init(environment, **_kw):
    opts = environment.parsed_options
    if opts is None or isinstance(environment.runner, WorkerRunner):
        return
    try:
        _validate(opts)
    except ValueError as e:
        log.error("oka: %s", e)
        sys.exit(2)

    def finalizer():
        while True:
            gevent.sleep(2)
            if not isinstance(environment.runner, MasterRunner):
                _COLLECTOR.merge(_LOCAL.drain())
            _COLLECTOR.finalize(time.time() - FINALIZE_AFTER_S)

    gevent.spawn(finalizer)


_ENV = []  # the Environment, for the `quit` listener (which is not given it)


@events.init.add_listener
def _keep_env(environment, **_kw):
    _ENV[:] = [environment]


# `quit` fires after runner.quit() has collected the workers' final reports (`quitting`
# fires before it), so the report is complete in master mode too.
@events.quit.add_listener
def _on_quit(exit_code, **_kw):
    if not _ENV or isinstance(_ENV[0].runner, WorkerRunner):
        return
    environment = _ENV[0]
    opts = environment.parsed_options
    _COLLECTOR.merge(_LOCAL.drain())
    path = getattr(opts, "oka_report", "") if opts else ""
    if path:
        rep = _COLLECTOR.report(environment)
        st = environment.runner.stats.total
        rep["locust_total"] = {"requests": st.num_requests, "failures": st.num_failures,
                               "exit_code": exit_code}
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(rep, f)
        os.replace(tmp, path)
        c = rep["checks"]
        log.info("oka: %d requests checked, %d values checked, %d check failures; report %s",
                 c.get("requests_checked", 0), c.get("values_checked", 0),
                 sum(v for k, v in c.items() if k.startswith("fail_")), path)


# --------------------------------------------------------------------------- checks

def _close(got, want) -> bool:
    return isinstance(got, (int, float)) and abs(got - want) <= 1e-9 * max(1.0, abs(want))


def _check_entry(target: str, n: int, kid: str, entry, mult: float) -> str | None:
    """None if the entry (the list of records for one key) is right, else a failure kind."""
    if entry is None:
        return "missing"
    if not isinstance(entry, list) or not entry:
        return "malformed"
    for rec in entry:
        if not isinstance(rec, dict) or rec.get("id") != kid:
            return "wrong_id"
    last = entry[-1]
    if target in ("simple_feature", "chained_feature"):  # chained: + offset, default 0
        return None if _close(last.get("value"), n * mult) else "wrong_value"
    if target == "test_feature":
        return None if all(_close(r.get("value"), float(n)) for r in entry) else "wrong_value"
    if target == "window_feature":
        ok = (isinstance(last.get("count"), int) and last["count"] >= 1
              and _close(last.get("min"), float(n)) and _close(last.get("max"), float(n)))
        return None if ok else "wrong_value"
    return None


# --------------------------------------------------------------------------- user


class OkaUser(FastHttpUser):
    """Sends the seed request and checks every value in the answer."""

    # Oka answers in well under a second; an ALB may not. Keep Locust's generous defaults
    # but do not let one stuck connection hide for a minute.
    network_timeout = 30.0
    connection_timeout = 10.0

    def on_start(self):
        o = self.environment.parsed_options
        self.api = o.oka_api
        self.volga_get = o.oka_volga_method == "get"
        self.nkeys = o.oka_keys
        self.prefix = o.oka_key_prefix
        self.batch = o.oka_batch
        self.mult = o.oka_multiplier
        self.targets = _targets(o)
        self.rate = o.oka_user_rps
        self.udf_args = {"simple_feature": {"multiplier": self.mult}}
        if self.api == "native":
            self.req_name = "POST /v1/features"
        elif self.volga_get:
            self.req_name = "GET /on_demand_compute/{json}"
        else:
            self.req_name = "POST /on_demand_compute"
        # Fixed schedule. Locust runs the first task right after on_start, so wait a random
        # part of one period here: users started together then stay out of phase.
        self._due = time.perf_counter()
        self._behind = False
        if self.rate > 0:
            self._due += random.random() / self.rate
            gevent.sleep(max(0.0, self._due - time.perf_counter()))

    def wait_time(self):
        """Called after each task: the time left until the next slot (0 when behind)."""
        if self.rate <= 0:
            return 0
        self._due += 1.0 / self.rate
        left = self._due - time.perf_counter()
        # Behind schedule: the next request goes out at once and its lateness counts. On
        # schedule, the sleep's own wake-up jitter (sub-ms) is not charged to the server.
        self._behind = left <= 0
        return max(0.0, left)

    @task
    def features(self):
        lag = None
        if self.rate > 0:
            lag = (time.perf_counter() - self._due) * 1000.0 if self._behind else 0.0
        nums = [random.randrange(self.nkeys) for _ in range(self.batch)]
        keys = [{"id": f"{self.prefix}{n}"} for n in nums]
        if self.api == "native":
            body = {"target_features": self.targets, "keys": keys, "udf_args": self.udf_args}
        else:
            body = {"target_features": self.targets,
                    "feature_keys": {t: keys for t in self.targets},
                    "query_args": None, "udf_args": self.udf_args}
        payload = json.dumps(body, separators=(",", ":"))
        ctx = {"oka_lag_ms": lag} if lag is not None else {}
        if self.api == "volga" and self.volga_get:
            path = "/on_demand_compute/" + urllib.parse.quote(payload, safe="")
            cm = self.client.get(path, name=self.req_name, catch_response=True, context=ctx)
        else:
            path = "/v1/features" if self.api == "native" else "/on_demand_compute"
            cm = self.client.post(path, data=payload, name=self.req_name, catch_response=True,
                                  context=ctx, headers={"content-type": "application/json"})
        with cm as resp:
            kind, detail = self._verify(resp, nums, keys)
            if kind is None:
                resp.success()
                _LOCAL.checks["requests_checked"] += 1
                _LOCAL.checks["values_checked"] += len(nums) * len(self.targets)
            else:
                _LOCAL.checks["fail_" + kind] += 1
                _LOGGED[kind] += 1
                if _LOGGED[kind] <= 3:  # the first three of each kind, per process
                    log.warning("oka: %s: %s", kind, detail)
                resp.failure(kind)

    def _verify(self, resp, nums, keys):
        if resp.status_code != 200:
            return f"http_{resp.status_code}", (resp.text or "")[:300]
        try:
            doc = json.loads(resp.content)
            results = doc["results"]
        except Exception as e:  # noqa: BLE001 - anything unparsable is a failure
            return "bad_json", f"{e}: {(resp.text or '')[:300]}"
        sid = doc.get("server_id")
        if sid is not None and len(_LOCAL.server_ids) < 256:
            _LOCAL.server_ids.add(str(sid))
        statuses = doc.get("statuses") or {}
        for t in self.targets:
            entries = results.get(t)
            if not isinstance(entries, list) or len(entries) != len(nums):
                return "wrong_shape", f"{t}: {str(entries)[:300]}"
            st = statuses.get(t)
            if st is not None and (len(st) != len(nums) or any(s != "present" for s in st)):
                bad = next((i for i, s in enumerate(st) if s != "present"), 0)
                return ("not_present",
                        f"{t}[{keys[bad]['id'] if bad < len(keys) else '?'}]: statuses {st[:10]}")
            for n, k, entry in zip(nums, keys, entries):
                kind = _check_entry(t, n, k["id"], entry, self.mult)
                if kind is not None:
                    return kind, f"{t}[{k['id']}] × {self.mult}: {str(entry)[:300]}"
        return None, ""


# --------------------------------------------------------------------------- shapes


class StepPlan:
    """Stepwise ramp: +step_users every step_time up to the top, then hold."""

    def __init__(self, opts):
        self.step_users = opts.oka_step_users
        self.step_time = opts.oka_step_time
        self.spawn_rate = opts.oka_spawn_rate or float(self.step_users)
        self.hold = opts.oka_hold if opts.oka_hold >= 0 else self.step_time
        self.run_time = opts.oka_run_time
        self.max_rps = opts.oka_max_rps
        self.user_rps = opts.oka_user_rps
        cap = opts.oka_max_users if opts.oka_max_users > 0 else None
        if self.max_rps > 0 and self.user_rps > 0:  # offered rate known: users × user_rps
            by_rps = max(1, math.ceil(self.max_rps / self.user_rps))
            cap = by_rps if cap is None else min(cap, by_rps)
        self.cap = cap
        self.top_users = None  # set when the top is reached
        self.top_at = None

    def tick(self, t: float, runner):
        if self.run_time > 0 and t >= self.run_time:
            return None
        if self.top_at is not None:
            return None if t >= self.top_at + self.hold else (self.top_users, self.spawn_rate)
        users = (int(t // self.step_time) + 1) * self.step_users
        reached = False
        if self.cap is not None and users >= self.cap:
            users, reached = self.cap, True
        elif self.max_rps > 0 and self.user_rps <= 0 and runner is not None:
            # unpaced users: the offered rate is unknown, stop adding at the measured rate
            if runner.stats.total.current_rps >= self.max_rps:
                users, reached = max(self.step_users, runner.user_count), True
        if reached:
            self.top_users, self.top_at = users, t
            log.info("oka: step shape reached the top: %d users at %.0f s", users, t)
        return users, self.spawn_rate


class RatePlan:
    """Constant arrival rate: paced users, users × user_rps per level."""

    def __init__(self, opts):
        self.user_rps = opts.oka_user_rps
        self.levels = [max(1, round(r / self.user_rps)) for r in _rate_levels(opts)]
        self.level_time = opts.oka_rate_time
        self.run_time = opts.oka_run_time
        self.spawn_rate = opts.oka_spawn_rate or float(max(self.levels))
        for want, users in zip(_rate_levels(opts), self.levels):
            if abs(users * self.user_rps - want) > 1e-9:
                log.info("oka: rate %g offered as %d users × %g = %g RPS",
                         want, users, self.user_rps, users * self.user_rps)

    def tick(self, t: float, runner):
        i = int(t // self.level_time)
        if i >= len(self.levels) or (self.run_time > 0 and t >= self.run_time):
            return None
        return self.levels[i], self.spawn_rate


class OkaShape(LoadTestShape):
    """The only concrete shape class here; --oka-shape picks the plan."""

    def __init__(self):
        super().__init__()
        self.plan = None

    def reset_time(self):
        super().reset_time()
        self.plan = None

    def tick(self):
        opts = self.runner.environment.parsed_options
        if self.plan is None:
            self.plan = StepPlan(opts) if opts.oka_shape == "step" else RatePlan(opts)
        res = self.plan.tick(self.get_run_time(), self.runner)
        _COLLECTOR.shape_target(res[0] if res else 0)
        return res


if __name__ == "__main__":  # `python locustfile.py` prints how to run it
    print(__doc__)
