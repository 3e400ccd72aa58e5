"""Locust load test for Oka, for any workload.

What to ask for and what the answers must hold come from a **workload file** (YAML or
JSON, `--oka-workload PATH`; the format is in README.md, "Workload files"): the key
fields and how each is drawn, the targets, `udf_args`, `query_args`, keys per request,
and per target the checks of each answer (expected values as arithmetic over the key's
index `i`, the key values and `udf_args`, with a tolerance; or present / not_null /
min / max). The default is `workloads/seed.yaml` beside this file, the seed (Volga)
benchmark: `simple_feature` of random keys `test-id-0` … `test-id-9999`, which must be
`i × multiplier`. `--oka-workload registry` builds the workload from the server's own
`GET /v1/features` instead (targets from --oka-targets, keys from --oka-key patterns;
presence checks only). A non-200, a wrong shape, a status other than `present`, a wrong
key echo or a wrong value is a Locust failure named by its kind, not a success.

Everything is set with Locust's custom-argument mechanism (`--oka-*`; all of them are in
README.md and `_add_options` below), so Locust's own flags keep their meaning:

  --oka-workload PATH|registry   the workload (default: workloads/seed.yaml here)
  --oka-api native|volga      POST /v1/features, or Volga's GET /on_demand_compute/{json}
  --oka-targets a,b           override the workload's targets
  --oka-keys N, --oka-batch N override the key index range ([start, start+N)), keys per request
  --oka-udf-arg F.A=V, --oka-query-arg F.P=V, --oka-key FIELD=PATTERN   more overrides
  --oka-user-rps 10           pacing of each user (0 = unpaced closed loop)
  --oka-shape step|rate       the load shape (below)

Distributed runs: only the master reads the workload file (or the registry). It puts the
workload into a hidden option (`--oka-workload-content`), which Locust sends with every
spawn message to the workers, so a worker needs this file alone. This file imports
nothing from this folder; it needs PyYAML only to read a YAML workload (JSON needs
nothing).

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
workers with `report_to_master`, and writes them with the value-check counters and the
workload used to --oka-report (JSON) when Locust quits. `run.py` reads that file.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import json
import logging
import math
import operator
import os
import random
import string
import sys
import time
import urllib.parse
import urllib.request
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
    a("--oka-workload", default="",
      help="workload file (YAML or JSON; README.md, 'Workload files'), or `registry` to build "
           "one from the server's GET /v1/features; default: workloads/seed.yaml beside this file")
    a("--oka-workload-content", default="", include_in_web_ui=False, help=argparse.SUPPRESS)
    a("--oka-api", choices=["native", "volga"], default="native",
      help="native: POST /v1/features; volga: Volga's /on_demand_compute route")
    a("--oka-volga-method", choices=["get", "post"], default="get",
      help="with --oka-api volga: GET /on_demand_compute/{url-encoded JSON} (the seed) or POST")
    a("--oka-targets", default="", help="comma-separated target features (default: the workload's)")
    a("--oka-keys", type=int, default=0,
      help="key index range [start, start+N) (start: the workload's keys.range start; default: "
           "the workload's range); must match what the server holds")
    a("--oka-batch", type=int, default=0, help="keys per request (default: the workload's batch)")
    a("--oka-key", action="append", default=None, include_in_web_ui=False,
      help="FIELD=PATTERN (string key, e.g. id=test-id-{i}) or FIELD=int:EXPR (int key); sets "
           "how that key field is drawn; repeatable")
    a("--oka-key-prefix", default=None,
      help="the seed's form: a workload with one string key drawn as PREFIX{i}")
    a("--oka-udf-arg", action="append", default=None, include_in_web_ui=False,
      help="FEATURE.ARG=VALUE (VALUE as JSON, else a string): sets udf_args; repeatable")
    a("--oka-query-arg", action="append", default=None, include_in_web_ui=False,
      help="FEATURE.PARAM=VALUE: sets query_args (n, start, end); repeatable")
    a("--oka-multiplier", type=float, default=None,
      help="the seed's form of --oka-udf-arg simple_feature.multiplier=X")
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
    return [x.strip() for x in str(getattr(opts, "oka_targets", "") or "").split(",") if x.strip()]


def _rate_levels(opts) -> list[float]:
    return [float(x) for x in str(opts.oka_rate).split(",") if x.strip()]


def _validate(opts) -> None:
    if opts.oka_keys < 0:
        raise ValueError("--oka-keys must be ≥ 1 (or 0: the workload's key range)")
    if opts.oka_batch < 0:
        raise ValueError("--oka-batch must be ≥ 1 (or 0: the workload's batch)")
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
            "options": {k: v for k, v in vars(opts).items()
                        if k.startswith("oka_") and k != "oka_workload_content"},
            "workload": _RESOLVED.get("summary"),
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
        w = resolve_workload(environment)
    except ValueError as e:  # WorkloadError too: its message says where and what to do
        log.error("oka: %s", e)
        sys.exit(2)
    _RESOLVED["summary"] = w.summary()
    log.info("oka: workload %s from %s: targets %s, keys %s over i in [%d, %d), batch %d, "
             "value checks on %s", w.name, w.origin, ",".join(w.targets),
             ",".join(k.name for k in w.key_fields), w.lo, w.hi, w.batch,
             ",".join(sorted(w.checks)) or "none")

    def finalizer():
        while True:
            gevent.sleep(2)
            if not isinstance(environment.runner, MasterRunner):
                _COLLECTOR.merge(_LOCAL.drain())
            _COLLECTOR.finalize(time.time() - FINALIZE_AFTER_S)

    gevent.spawn(finalizer)


@events.test_start.add_listener
def _on_test_start(environment, **_kw):
    """Read the workload again at each start on the master: the web UI may have changed
    --oka-workload or an override since init. The spawn messages then carry it."""
    if environment.parsed_options is None or isinstance(environment.runner, WorkerRunner):
        return
    try:
        _RESOLVED["summary"] = resolve_workload(environment).summary()
    except ValueError as e:
        log.error("oka: %s", e)
        raise


_RESOLVED: dict = {}  # the workload in use (master or local run), for the report
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
        log.info("oka: %d requests checked, %d values checked (%d field checks, %d presence "
                 "only), %d check failures; report %s",
                 c.get("requests_checked", 0), c.get("values_checked", 0),
                 c.get("fields_checked", 0), c.get("presence_only", 0),
                 sum(v for k, v in c.items() if k.startswith("fail_")), path)


# --------------------------------------------------------------------------- workload
#
# A workload file (YAML or JSON; locust/README.md, "Workload files") says what to ask for
# and what the answers must hold:
#
#   version: 1
#   name: seed
#   keys:
#     range: [0, 10000]              # the key index i, uniform in [start, end)
#     fields:                        # one key object: its fields, each drawn per key
#       id: "test-id-{i}"            # string pattern ({…}: an expression of i)
#       user_id: {int: "1000 + i"}   # int: an expression of i
#       region: {values: [eu, us]}   # one of a list, drawn on its own (index i_region)
#       shard: {int: "i", range: [0, 8]}   # its own index in [0, 8) (i_shard)
#   targets: [simple_feature]
#   batch: 1
#   udf_args: {simple_feature: {multiplier: 2.0}}
#   query_args: {test_feature: {n: 3}}
#   checks:
#     simple_feature:
#       record: last | all           # which records the field checks read (default last)
#       records: {min: 1, max: 1}    # bounds on the number of records (default min 1)
#       key_echo: true               # the records carry the requested key values
#       fields:
#         value: {expect: "i * multiplier", tolerance: 1e-9}
#         label: not_null            # or present; or {pattern: "x-{i}"}, {min: …, max: …}
#
# Expressions (expect, min, max, int keys, the {…} of patterns) are parsed with `ast` and
# evaluated by a small closure interpreter: numbers, + - * / // %, parentheses, names
# (i, i_<field>, the key fields, the target's own udf_args) and udf_args.<feature>.<arg>.
# Nothing is passed to eval().

WORKLOAD_VERSION = 1
REGISTRY = "registry"
DEFAULT_WORKLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "seed.yaml")
DEFAULT_REGISTRY_KEYS = 10000
DEFAULT_TOLERANCE = 1e-9
WORKLOAD_HELP = 'locust/README.md, "Workload files"'

try:  # only needed to read a YAML workload file; JSON needs nothing
    import yaml as _yaml
except ImportError:  # pragma: no cover - the Locust image has no PyYAML
    _yaml = None


class WorkloadError(ValueError):
    """A problem with the workload or the options; the message names where and what to do."""


def _suggest(name, known) -> str:
    m = difflib.get_close_matches(str(name), [str(k) for k in known], n=1)
    return f" (did you mean `{m[0]}`?)" if m else ""


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_workload_text(text: str, origin: str) -> dict:
    """The workload document in `text` (JSON, or YAML when PyYAML is installed)."""
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{origin}: not valid JSON: {e}") from None
    elif _yaml is None:
        raise WorkloadError(
            f"{origin}: reading a YAML workload needs PyYAML (pip install -r "
            f"locust/requirements.txt), or write the workload as JSON")
    else:
        try:
            doc = _yaml.safe_load(text)
        except _yaml.YAMLError as e:
            raise WorkloadError(f"{origin}: not valid YAML: {e}") from None
    if not isinstance(doc, dict):
        raise WorkloadError(f"{origin}: a workload is a mapping with version, keys, targets, … "
                            f"({WORKLOAD_HELP}); this file holds a {type(doc).__name__}")
    return doc


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_GRAMMAR = "numbers, + - * / // %, parentheses, names and udf_args.<feature>.<arg>"


class Expr:
    """An arithmetic expression, checked and compiled once into closures.

    `names` are looked up per key at run time (the key's index and fields); `consts` are
    folded in when compiled (a target's own udf_args by bare name); `udf_args` serves
    `udf_args.<feature>.<arg>`.
    """

    def __init__(self, src, where: str, names, consts: dict | None = None,
                 udf_args: dict | None = None):
        if _is_num(src):
            src = repr(src)
        if not isinstance(src, str) or not src.strip():
            raise WorkloadError(f"{where}: expected an expression ({_GRAMMAR}), got {src!r}")
        self.src, self.where = src, where
        self.names, self.consts, self.udf_args = set(names), consts or {}, udf_args or {}
        try:
            tree = ast.parse(src.strip(), mode="eval")
        except SyntaxError as e:
            raise WorkloadError(f"{where}: `{src}` does not parse ({e.msg}); write {_GRAMMAR}") from None
        self.fn = self._build(tree.body)

    def __call__(self, env):
        return self.fn(env)

    def _known(self):
        return sorted(self.names | set(self.consts)) + [
            f"udf_args.{f}.{a}" for f, args in self.udf_args.items() for a in (args or {})]

    def _build(self, node):
        if isinstance(node, ast.Constant):
            if not _is_num(node.value):
                raise WorkloadError(f"{self.where}: `{self.src}`: only numbers may be written "
                                    f"literally, not {node.value!r}")
            v = node.value
            return lambda env: v
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.names:
                if n in self.consts:
                    raise WorkloadError(
                        f"{self.where}: `{self.src}`: `{n}` is both a key name and an argument in "
                        f"udf_args; write the argument as udf_args.<feature>.{n}")
                return lambda env: env[n]
            if n in self.consts:
                v = self.consts[n]
                return lambda env: v
            known = self._known()
            raise WorkloadError(f"{self.where}: `{self.src}`: unknown name `{n}`{_suggest(n, known)} "
                                f"(known: {', '.join(known) or 'none'})")
        if isinstance(node, ast.Attribute):
            parts, cur = [], node
            while isinstance(cur, ast.Attribute):
                parts.insert(0, cur.attr)
                cur = cur.value
            if not (isinstance(cur, ast.Name) and cur.id == "udf_args" and len(parts) == 2):
                raise WorkloadError(f"{self.where}: `{self.src}`: a dotted name must be "
                                    f"udf_args.<feature>.<arg>")
            f, a = parts
            args = self.udf_args.get(f)
            if not isinstance(args, dict) or a not in args:
                known = self._known()
                raise WorkloadError(
                    f"{self.where}: `{self.src}`: udf_args.{f}.{a} is not in the workload's "
                    f"udf_args{_suggest(f'udf_args.{f}.{a}', known)}; give it there (or with "
                    f"--oka-udf-arg {f}.{a}=VALUE) to use it")
            v = args[a]
            return lambda env: v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            op, lf, rf = _BINOPS[type(node.op)], self._build(node.left), self._build(node.right)
            return lambda env: op(lf(env), rf(env))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            op, f = _UNOPS[type(node.op)], self._build(node.operand)
            return lambda env: op(f(env))
        what = type(node.op).__name__ if isinstance(node, (ast.BinOp, ast.UnaryOp)) else type(node).__name__
        raise WorkloadError(f"{self.where}: `{self.src}`: {what} is not allowed; write {_GRAMMAR}")


class Pattern:
    """A string with {expression} or {expression:format} fields, e.g. "test-id-{i}"."""

    def __init__(self, src, where: str, names, consts=None, udf_args=None):
        if not isinstance(src, str):
            raise WorkloadError(f"{where}: expected a string pattern such as \"user-{{i}}\", got {src!r}")
        self.src, self.parts = src, []
        try:
            parsed = list(string.Formatter().parse(src))
        except ValueError as e:
            raise WorkloadError(f"{where}: pattern {src!r}: {e} (write {{{{ and }}}} for literal braces)") from None
        for literal, field, spec, conv in parsed:
            if literal:
                self.parts.append(literal)
            if field is None:
                continue
            if conv or not field.strip():
                raise WorkloadError(f"{where}: pattern {src!r}: each {{…}} holds an expression "
                                    f"such as {{i}} or {{i % 7}} (and an optional :format)")
            self.parts.append((Expr(field, f"{where} {{{field}}}", names, consts, udf_args), spec or ""))

    def __call__(self, env):
        return "".join(p if isinstance(p, str) else format(p[0](env), p[1]) for p in self.parts)


def _range(v, where: str) -> tuple[int, int]:
    if (not isinstance(v, list) or len(v) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)
            or v[0] >= v[1]):
        raise WorkloadError(f"{where}: expected [start, end] with integers start < end (the index "
                            f"is drawn from start … end-1), got {v!r}")
    return v[0], v[1]


def _only(d: dict, allowed, where: str) -> None:
    for k in d:
        if k not in allowed:
            raise WorkloadError(f"{where}: unknown field `{k}`{_suggest(k, allowed)}; expected one "
                                f"of {', '.join(allowed)}")


class KeyField:
    """How one field of the key object is drawn."""

    def __init__(self, name: str, spec, where: str):
        self.name = name
        self.values = None
        self.range = None
        if isinstance(spec, str):
            spec = {"pattern": spec}
        if not isinstance(spec, dict):
            raise WorkloadError(f"{where}: expected a pattern string (\"user-{{i}}\") or a mapping "
                                f"with pattern, int or values; got {spec!r}")
        _only(spec, ("pattern", "int", "values", "range"), where)
        forms = [k for k in ("pattern", "int", "values") if k in spec]
        if len(forms) != 1:
            raise WorkloadError(f"{where}: give exactly one of pattern (a string key), int (an int "
                                f"key) and values (a list to draw from); got {forms or 'none'}")
        if "range" in spec:
            if "values" in spec:
                raise WorkloadError(f"{where}: values are drawn on their own; range applies to pattern and int")
            self.range = _range(spec["range"], f"{where}.range")
        if "values" in spec:
            vals = spec["values"]
            ok = isinstance(vals, list) and vals and (
                all(isinstance(v, str) for v in vals)
                or all(isinstance(v, int) and not isinstance(v, bool) for v in vals))
            if not ok:
                raise WorkloadError(f"{where}.values: expected a non-empty list of strings, or of "
                                    f"integers, got {vals!r}")
            self.values = list(vals)
            self.kind = "string" if isinstance(vals[0], str) else "int"
        elif "int" in spec:
            self.kind = "int"
            self.gen = Expr(spec["int"], f"{where}.int", {"i"})
        else:
            self.kind = "string"
            self.gen = Pattern(spec["pattern"], f"{where}.pattern", {"i"})
        self.where = where

    def draw(self, i: int):
        """(value, index) for the shared key index i."""
        if self.values is not None:
            j = random.randrange(len(self.values))
            return self.values[j], j
        if self.range is not None:
            i = random.randrange(self.range[0], self.range[1])
        return self.gen({"i": i}), i

    def check(self, i: int) -> None:
        """Evaluate once at load, so a wrong type shows before the test starts."""
        if self.values is not None:
            return
        try:
            v, _ = self.draw(i if self.range is None else self.range[0])
        except Exception as e:  # noqa: BLE001 - any evaluation error is the workload's
            raise WorkloadError(f"{self.where}: does not evaluate for i = {i}: {e}") from None
        if self.kind == "int" and not (isinstance(v, int) and not isinstance(v, bool)):
            raise WorkloadError(f"{self.where}.int: gives {v!r} for i = {i}, not an integer "
                                f"(use // for integer division)")


_CHECK_WORDS = ("present", "not_null")


class FieldCheck:
    """One field of a record: present, not_null, expect (± tolerance), pattern, min/max."""

    def __init__(self, field: str, spec, where: str, names, consts, udf_args):
        self.field = field
        self.expect = self.pattern = self.lo = self.hi = None
        self.tol = DEFAULT_TOLERANCE
        self.not_null = True
        if _is_num(spec):
            spec = {"expect": spec}
        if isinstance(spec, str):
            if spec not in _CHECK_WORDS:
                raise WorkloadError(f"{where}: `{spec}` is not a check{_suggest(spec, _CHECK_WORDS)}: "
                                    f"write present, not_null, or a mapping such as {{expect: \"i * 2\"}}")
            self.not_null = spec == "not_null"
            return
        if not isinstance(spec, dict) or not spec:
            raise WorkloadError(f"{where}: expected present, not_null, or a mapping with expect, "
                                f"tolerance, pattern, min, max; got {spec!r}")
        _only(spec, ("expect", "tolerance", "pattern", "min", "max", "not_null"), where)
        if "expect" in spec:
            self.expect = Expr(spec["expect"], f"{where}.expect", names, consts, udf_args)
        if "tolerance" in spec:
            t = spec["tolerance"]
            if isinstance(t, str):  # YAML 1.1 (PyYAML) reads 1e-12, without a dot, as a string
                try:
                    t = float(t)
                except ValueError:
                    pass
            if not _is_num(t) or t < 0:
                raise WorkloadError(f"{where}.tolerance: expected a number ≥ 0, got {t!r}")
            self.tol = float(t)
        if "pattern" in spec:
            self.pattern = Pattern(spec["pattern"], f"{where}.pattern", names, consts, udf_args)
        if "min" in spec:
            self.lo = Expr(spec["min"], f"{where}.min", names, consts, udf_args)
        if "max" in spec:
            self.hi = Expr(spec["max"], f"{where}.max", names, consts, udf_args)
        if "not_null" in spec:
            if not isinstance(spec["not_null"], bool):
                raise WorkloadError(f"{where}.not_null: expected true or false")
            self.not_null = spec["not_null"]
        if self.expect is not None and self.pattern is not None:
            raise WorkloadError(f"{where}: give expect (a number) or pattern (a string), not both")

    def verify(self, rec: dict, env) -> str | None:
        """None if right, else what is wrong."""
        f = self.field
        if f not in rec:
            return f"no field `{f}`"
        got = rec[f]
        if got is None:
            return f"`{f}` is null" if self.not_null else None
        if self.pattern is not None:
            want = self.pattern(env)
            return None if got == want else f"`{f}` = {got!r}, expected {want!r}"
        if self.expect is None and self.lo is None and self.hi is None:
            return None
        if not _is_num(got):
            return f"`{f}` = {got!r}, expected a number"
        if self.expect is not None:
            want = self.expect(env)
            if abs(got - want) > self.tol * max(1.0, abs(want)):
                return f"`{f}` = {got!r}, expected {want!r} (`{self.expect.src}`)"
        if self.lo is not None:
            lo = self.lo(env)
            if got < lo:
                return f"`{f}` = {got!r}, below the minimum {lo!r}"
        if self.hi is not None:
            hi = self.hi(env)
            if got > hi:
                return f"`{f}` = {got!r}, above the maximum {hi!r}"
        return None


class TargetCheck:
    def __init__(self, target: str, spec, where: str, names, udf_args):
        if not isinstance(spec, dict):
            raise WorkloadError(f"{where}: expected a mapping with fields (and record, records, key_echo)")
        _only(spec, ("record", "records", "key_echo", "fields"), where)
        self.all = spec.get("record", "last") == "all"
        if spec.get("record", "last") not in ("last", "all"):
            raise WorkloadError(f"{where}.record: `last` (the newest record) or `all`, got {spec['record']!r}")
        rec = spec.get("records", {}) or {}
        if not isinstance(rec, dict):
            raise WorkloadError(f"{where}.records: expected {{min: N, max: N}}")
        _only(rec, ("min", "max"), f"{where}.records")
        for k in rec:
            if not isinstance(rec[k], int) or isinstance(rec[k], bool) or rec[k] < 0:
                raise WorkloadError(f"{where}.records.{k}: expected an integer ≥ 0, got {rec[k]!r}")
        self.rmin, self.rmax = rec.get("min", 1), rec.get("max")
        self.key_echo = spec.get("key_echo", True)
        if not isinstance(self.key_echo, bool):
            raise WorkloadError(f"{where}.key_echo: expected true or false")
        fields = spec.get("fields", {}) or {}
        if not isinstance(fields, dict):
            raise WorkloadError(f"{where}.fields: expected a mapping of record field → check")
        consts = dict(udf_args.get(target) or {})
        self.fields = [FieldCheck(f, c, f"{where}.fields.{f}", names, consts, udf_args)
                       for f, c in fields.items()]


class Workload:
    """A workload with the options' overrides applied, checked and compiled."""

    def __init__(self, raw: dict, origin: str):
        self.raw, self.origin = raw, origin
        _only(raw, ("version", "name", "description", "keys", "targets", "batch", "udf_args",
                    "query_args", "checks"), origin)
        if raw.get("version") != WORKLOAD_VERSION:
            raise WorkloadError(f"{origin}: version: expected {WORKLOAD_VERSION}, got "
                                f"{raw.get('version')!r}; the first line of a workload is `version: 1`")
        self.name = str(raw.get("name") or os.path.splitext(os.path.basename(origin))[0])
        keys = raw.get("keys")
        if not isinstance(keys, dict):
            raise WorkloadError(f"{origin}: keys: expected a mapping with range and fields "
                                f"(keys: {{range: [0, 1000], fields: {{id: \"user-{{i}}\"}}}})")
        _only(keys, ("range", "fields"), f"{origin}: keys")
        self.lo, self.hi = _range(keys["range"], f"{origin}: keys.range") if "range" in keys else (0, 1)
        fields = keys.get("fields")
        if not isinstance(fields, dict) or not fields:
            raise WorkloadError(f"{origin}: keys.fields: expected the key object's fields, e.g. "
                                f"{{id: \"user-{{i}}\"}} or {{user_id: {{int: \"i\"}}}}")
        self.key_fields = [KeyField(n, s, f"{origin}: keys.fields.{n}") for n, s in fields.items()]
        uses_shared = any(k.values is None and k.range is None for k in self.key_fields)
        if uses_shared and "range" not in keys:
            raise WorkloadError(f"{origin}: keys.range: required (the key index i is drawn from it), "
                                f"e.g. range: [0, 10000]")
        for k in self.key_fields:
            k.check(self.lo)
        t = raw.get("targets")
        if not isinstance(t, list) or not t or not all(isinstance(x, str) and x for x in t):
            raise WorkloadError(f"{origin}: targets: expected a non-empty list of feature names "
                                f"(or give --oka-targets a,b)")
        self.targets = list(dict.fromkeys(t))
        self.batch = raw.get("batch", 1)
        if not isinstance(self.batch, int) or isinstance(self.batch, bool) or self.batch < 1:
            raise WorkloadError(f"{origin}: batch: expected an integer ≥ 1 (keys per request), got {self.batch!r}")
        self.udf_args = self._args(raw, "udf_args")
        self.query_args = self._args(raw, "query_args")
        self.names = {"i"} | {k.name for k in self.key_fields} | {f"i_{k.name}" for k in self.key_fields}
        checks = raw.get("checks") or {}
        if not isinstance(checks, dict):
            raise WorkloadError(f"{origin}: checks: expected a mapping of target → checks")
        self.checks = {}
        for target, spec in checks.items():
            tc = TargetCheck(target, spec, f"{origin}: checks.{target}", self.names, self.udf_args)
            if target in self.targets:
                self.checks[target] = tc
        self._trial()

    def _args(self, raw, what):
        v = raw.get(what) or {}
        if not isinstance(v, dict) or not all(isinstance(x, dict) or x is None for x in v.values()):
            raise WorkloadError(f"{self.origin}: {what}: expected {{feature: {{name: value}}}}, got {v!r}")
        return {f: dict(a or {}) for f, a in v.items()}

    def _trial(self) -> None:
        """Run every check's expressions once for the first key, as `oka validate` does."""
        _, env = self.draw_key(first=True)
        for t, tc in self.checks.items():
            for fc in tc.fields:
                for e in (fc.expect, fc.lo, fc.hi, fc.pattern):
                    if e is None:
                        continue
                    try:
                        v = e(env)
                    except Exception as ex:  # noqa: BLE001 - reported with its place
                        raise WorkloadError(f"{self.origin}: checks.{t}.fields.{fc.field}: `{e.src}` "
                                            f"does not evaluate for the first key ({env}): {ex}") from None
                    if e is not fc.pattern and not _is_num(v):
                        raise WorkloadError(f"{self.origin}: checks.{t}.fields.{fc.field}: `{e.src}` "
                                            f"gives {v!r}, not a number")

    def draw_key(self, first: bool = False):
        """One key object and the names the checks see for it."""
        i = self.lo if first else random.randrange(self.lo, self.hi)
        env = {"i": i}
        key = {}
        for k in self.key_fields:
            if first:
                j = 0 if k.values is not None else (k.range[0] if k.range else i)
                v = k.values[0] if k.values is not None else k.gen({"i": j})
            else:
                v, j = k.draw(i)
            key[k.name] = v
            env[k.name] = v
            env[f"i_{k.name}"] = j
        return key, env

    def fields_per_entry(self) -> dict:
        """Field checks per checked record, per target (for reports and CI)."""
        return {t: len(self.checks[t].fields) if t in self.checks else 0 for t in self.targets}

    def summary(self) -> dict:
        return {"name": self.name, "origin": self.origin, "targets": self.targets,
                "batch": self.batch, "key_fields": [k.name for k in self.key_fields],
                "key_range": [self.lo, self.hi], "udf_args": self.udf_args,
                "query_args": self.query_args,
                "checked_targets": sorted(self.checks),
                "field_checks": self.fields_per_entry(),
                "record_all": sorted(t for t, c in self.checks.items() if c.all),
                "workload": self.raw}

    # ---- answers

    def verify_entry(self, target: str, key: dict, env, entry):
        """(kind, detail) for one key's entry of one target; (None, n) when right, with n
        the number of field checks done (0: presence only)."""
        if entry is None:
            return "missing", "null"
        if not isinstance(entry, list):
            return "malformed", "not a list of records"
        tc = self.checks.get(target)
        rmin, rmax = (tc.rmin, tc.rmax) if tc else (1, None)
        if len(entry) < rmin or (rmax is not None and len(entry) > rmax):
            want = f"{rmin}" if rmax == rmin else f"{rmin} … {rmax if rmax is not None else '∞'}"
            return "wrong_count", f"{len(entry)} records, expected {want}"
        if not tc or tc.key_echo:
            for rec in entry:
                if not isinstance(rec, dict):
                    return "malformed", "a record is not an object"
                echoed = [f for f in key if f in rec]
                if not echoed or any(rec[f] != key[f] for f in echoed):
                    return "wrong_key", f"record keys { {f: rec.get(f) for f in key} }"
        if not tc:
            return None, 0
        n = 0
        for rec in (entry if tc.all else entry[-1:]):
            if not isinstance(rec, dict):
                return "malformed", "a record is not an object"
            for fc in tc.fields:
                try:
                    bad = fc.verify(rec, env)
                except Exception as e:  # noqa: BLE001 - e.g. a division by zero in `expect`
                    return "check_error", f"checks.{target}.fields.{fc.field}: {e}"
                if bad:
                    return "wrong_value", bad
                n += 1
        return None, n


def _assign(opt: str, text: str, where: str):
    """FEATURE.NAME=VALUE → (feature, name, value); VALUE is JSON when it parses, else a string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise WorkloadError(f"{opt} {text!r}: expected FEATURE.NAME=VALUE ({where})")
    lhs, val = text.split("=", 1)
    f, name = lhs.split(".", 1)
    try:
        v = json.loads(val)
    except ValueError:
        v = val
    return f.strip(), name.strip(), v


def _key_spec(text: str, kind: str | None = None):
    """--oka-key FIELD=SPEC → (field, generator spec)."""
    if "=" not in text:
        raise WorkloadError(f"--oka-key {text!r}: expected FIELD=PATTERN (a string key, e.g. "
                            f"id=test-id-{{i}}) or FIELD=int:EXPR (an int key, e.g. user_id=int:1000+i)")
    f, spec = text.split("=", 1)
    if spec.startswith("int:") or (kind == "int" and not spec.startswith("pattern:")):
        return f.strip(), {"int": spec[4:] if spec.startswith("int:") else spec}
    return f.strip(), {"pattern": spec[8:] if spec.startswith("pattern:") else spec}


def _opt(opts, name: str, typ):
    """An override option's value, or None when not given. The web UI's start form sends
    every field as text, and an empty field for an option that has no default."""
    v = getattr(opts, name, None)
    if v is None or v == "":
        return None
    if typ is str or isinstance(v, typ):
        return v
    try:
        return typ(v)
    except (TypeError, ValueError):
        flag = "--" + name.replace("_", "-")
        raise WorkloadError(f"{flag}: expected {'an integer' if typ is int else 'a number'}, "
                            f"got {v!r}") from None


def _list_opt(opts, name: str) -> list[str]:
    v = getattr(opts, name, None) or []
    return [v] if isinstance(v, str) else [x for x in v if x]


def apply_overrides(raw: dict, opts) -> dict:
    """The workload with the --oka-* overrides applied (a copy)."""
    w = copy.deepcopy(raw)
    nkeys, batch = _opt(opts, "oka_keys", int), _opt(opts, "oka_batch", int)
    keys = w.get("keys")
    if keys is None and (nkeys or _list_opt(opts, "oka_key")):
        keys = w["keys"] = {}
    t = _targets(opts)
    if t:
        w["targets"] = t
    if batch:
        w["batch"] = batch
    if isinstance(keys, dict):
        if nkeys:
            start = keys.get("range", [0])[0] if isinstance(keys.get("range"), list) and keys["range"] else 0
            keys["range"] = [start, start + nkeys]
        for text in _list_opt(opts, "oka_key"):
            f, spec = _key_spec(text)
            keys.setdefault("fields", {})
            if not isinstance(keys["fields"], dict):
                keys["fields"] = {}
            keys["fields"][f] = spec
        prefix = _opt(opts, "oka_key_prefix", str)
        if prefix is not None:
            fields = keys.get("fields") or {}
            only = list(fields.items())
            pat = only[0][1] if len(only) == 1 else None
            if isinstance(pat, dict):
                pat = pat.get("pattern")
            if not isinstance(pat, str) or "{i}" not in pat:
                raise WorkloadError(
                    "--oka-key-prefix: applies to a workload with one string key drawn as "
                    f"PREFIX{{i}} (the seed's); this one has {list(fields) or 'no'} key fields; use "
                    "--oka-key FIELD=PATTERN instead")
            fields[only[0][0]] = f"{prefix}{{i}}"
    mult = _opt(opts, "oka_multiplier", float)
    if mult is not None:
        w.setdefault("udf_args", {}).setdefault("simple_feature", {})["multiplier"] = mult
    for opt, what in (("oka_udf_arg", "udf_args"), ("oka_query_arg", "query_args")):
        for text in _list_opt(opts, opt):
            f, name, v = _assign("--" + opt.replace("_", "-"), text, f"{what}.FEATURE.NAME")
            d = w.setdefault(what, {})
            if not isinstance(d.get(f), dict):
                d[f] = {}
            d[f][name] = v
    return w


def registry_workload(host: str, opts, timeout: float = 10.0) -> tuple[dict, str]:
    """A workload built from the server's GET /v1/features: targets from --oka-targets,
    keys from --oka-key (per key field), udf_args/query_args from the options; the checks
    are presence checks of every value column of each target."""
    if not host:
        raise WorkloadError("--oka-workload registry: needs --host (the registry is read from "
                            "GET <host>/v1/features)")
    url = host.rstrip("/") + "/v1/features"
    origin = f"the registry at {url}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the operator's host
            reg = json.loads(r.read())
    except (OSError, ValueError) as e:
        raise WorkloadError(f"--oka-workload registry: cannot read {url}: {e}; check --host, or "
                            f"give a workload file") from None
    feats = {f["name"]: f for f in reg.get("features", [])}
    targets = _targets(opts)
    listing = "; ".join(f"{n} ({f['kind']}, keys {', '.join(_reg_schema(reg, f).get('keys', []))})"
                        for n, f in feats.items())
    if not targets:
        raise WorkloadError(f"--oka-workload registry: give --oka-targets a,b (features of {url}: {listing})")
    keys_of = {}
    for t in targets:
        if t not in feats:
            raise WorkloadError(f"--oka-targets: `{t}` is not a feature of {url}{_suggest(t, feats)} "
                                f"(features: {listing})")
        keys_of[t] = _reg_schema(reg, feats[t])
    first = keys_of[targets[0]]
    for t in targets[1:]:
        if keys_of[t].get("keys") != first.get("keys"):
            raise WorkloadError(
                f"--oka-targets: {targets[0]} is keyed by {first.get('keys')} and {t} by "
                f"{keys_of[t].get('keys')}: one request sends one key object; run them separately")
    given = {}
    for text in _list_opt(opts, "oka_key"):
        f = text.split("=", 1)[0].strip()
        given[f] = _key_spec(text, first["columns"].get(f))[1]
    fields = {}
    for k in first.get("keys", []):
        typ = first["columns"].get(k)
        if k not in given:
            example = f"{k}=int:i" if typ == "int" else f"{k}={k}-{{i}}"
            raise WorkloadError(f"--oka-workload registry: no pattern for the key field `{k}` ({typ}) "
                                f"of {', '.join(targets)}: give --oka-key {example} (and --oka-keys N "
                                f"for the index range, default {DEFAULT_REGISTRY_KEYS})")
        fields[k] = given[k]
    for f in given:
        if f not in fields:
            raise WorkloadError(f"--oka-key {f}=…: `{f}` is not a key field of {', '.join(targets)} "
                                f"(keys: {', '.join(fields)}){_suggest(f, fields)}")
    udf_args = {}
    for text in _list_opt(opts, "oka_udf_arg"):
        f, a, v = _assign("--oka-udf-arg", text, "udf_args.FEATURE.NAME")
        udf_args.setdefault(f, {})[a] = v
    for t in targets:
        for a, d in (feats[t].get("args") or {}).items():
            if (d or {}).get("default") is None and a not in udf_args.get(t, {}):
                raise WorkloadError(f"--oka-workload registry: {t} needs the argument `{a}` "
                                    f"({(d or {}).get('type')}, no default): give --oka-udf-arg {t}.{a}=VALUE")
    checks = {t: {"fields": {c: "present" for c in keys_of[t]["columns"]
                             if c not in keys_of[t].get("keys", []) and c != keys_of[t].get("timestamp")}}
              for t in targets}
    return ({"version": WORKLOAD_VERSION, "name": "registry", "keys": {
        "range": [0, _opt(opts, "oka_keys", int) or DEFAULT_REGISTRY_KEYS], "fields": fields},
        "targets": targets, "udf_args": udf_args, "checks": checks}, origin)


def _reg_schema(reg: dict, feat: dict) -> dict:
    return feat.get("output") or reg.get("entities", {}).get(feat.get("entity"), {})


def resolve_workload(environment) -> Workload:
    """On the master (or a local run): read the workload (file or registry), put it into
    the options that the master sends to its workers, and compile it with the overrides."""
    opts = environment.parsed_options
    src = opts.oka_workload or DEFAULT_WORKLOAD
    if src == REGISTRY:
        raw, origin = registry_workload(environment.host, opts)
    else:
        try:
            with open(src, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            hint = (" (the default, locust/workloads/seed.yaml beside this locustfile: ship it "
                    "too, or give --oka-workload)") if src == DEFAULT_WORKLOAD else ""
            if not os.path.isabs(src):
                hint += f" (relative to {os.getcwd()})"
            raise WorkloadError(f"--oka-workload {src}: cannot read it: {e.strerror}{hint}; give "
                                f"the path of a workload file ({WORKLOAD_HELP}) or `registry`") from None
        raw, origin = parse_workload_text(text, src), src
    opts.oka_workload_content = json.dumps({"origin": origin, "workload": raw}, separators=(",", ":"))
    return workload_from_options(opts)


_WL_CACHE: dict = {}


def workload_from_options(opts) -> Workload:
    """The compiled workload for these options (cached): the content the master resolved,
    with this process's view of the overrides."""
    content = getattr(opts, "oka_workload_content", "") or ""
    if not content:
        raise WorkloadError("no workload: the master did not send one (run this locustfile's "
                            "master with --oka-workload, or the default seed workload beside it)")
    sig = (content, tuple((k, str(v)) for k, v in sorted(vars(opts).items())
                          if k.startswith("oka_") and k in _OVERRIDES))
    w = _WL_CACHE.get(sig)
    if w is None:
        doc = json.loads(content)
        w = Workload(apply_overrides(doc["workload"], opts), doc["origin"])
        _WL_CACHE.clear()
        _WL_CACHE[sig] = w
    return w


_OVERRIDES = ("oka_targets", "oka_batch", "oka_keys", "oka_key", "oka_key_prefix",
              "oka_multiplier", "oka_udf_arg", "oka_query_arg")
# --------------------------------------------------------------------------- user


class OkaUser(FastHttpUser):
    """Sends the workload's request and checks every answer against the workload."""

    # Oka answers in well under a second; an ALB may not. Keep Locust's generous defaults
    # but do not let one stuck connection hide for a minute.
    network_timeout = 30.0
    connection_timeout = 10.0

    def on_start(self):
        o = self.environment.parsed_options
        self.w = workload_from_options(o)
        self.api = o.oka_api
        self.volga_get = o.oka_volga_method == "get"
        self.rate = o.oka_user_rps
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

    def _body(self, keys: list[dict]) -> str:
        w = self.w
        if self.api == "native":
            body = {"target_features": w.targets, "keys": keys}
            if w.query_args:
                body["query_args"] = w.query_args
            if w.udf_args:
                body["udf_args"] = w.udf_args
        else:  # Volga's shape: key lists per target, the workload's key field names
            body = {"target_features": w.targets,
                    "feature_keys": {t: keys for t in w.targets},
                    "query_args": w.query_args or None, "udf_args": w.udf_args or None}
        return json.dumps(body, separators=(",", ":"))

    @task
    def features(self):
        lag = None
        if self.rate > 0:
            lag = (time.perf_counter() - self._due) * 1000.0 if self._behind else 0.0
        drawn = [self.w.draw_key() for _ in range(self.w.batch)]
        payload = self._body([k for k, _ in drawn])
        ctx = {"oka_lag_ms": lag} if lag is not None else {}
        if self.api == "volga" and self.volga_get:
            path = "/on_demand_compute/" + urllib.parse.quote(payload, safe="")
            cm = self.client.get(path, name=self.req_name, catch_response=True, context=ctx)
        else:
            path = "/v1/features" if self.api == "native" else "/on_demand_compute"
            cm = self.client.post(path, data=payload, name=self.req_name, catch_response=True,
                                  context=ctx, headers={"content-type": "application/json"})
        with cm as resp:
            kind, detail, fields, presence = self._verify(resp, drawn)
            if kind is None:
                resp.success()
                c = _LOCAL.checks
                c["requests_checked"] += 1
                c["values_checked"] += len(drawn) * len(self.w.targets)
                c["fields_checked"] += fields
                c["presence_only"] += presence
            else:
                _LOCAL.checks["fail_" + kind] += 1
                _LOGGED[kind] += 1
                if _LOGGED[kind] <= 3:  # the first three of each kind, per process
                    log.warning("oka: %s: %s", kind, detail)
                resp.failure(kind)

    def _verify(self, resp, drawn):
        """(failure kind or None, detail, field checks done, entries checked for presence only)."""
        if resp.status_code != 200:
            return f"http_{resp.status_code}", (resp.text or "")[:300], 0, 0
        try:
            doc = json.loads(resp.content)
            results = doc["results"]
        except Exception as e:  # noqa: BLE001 - anything unparsable is a failure
            return "bad_json", f"{e}: {(resp.text or '')[:300]}", 0, 0
        sid = doc.get("server_id")
        if sid is not None and len(_LOCAL.server_ids) < 256:
            _LOCAL.server_ids.add(str(sid))
        statuses = doc.get("statuses") or {}
        fields = presence = 0
        for t in self.w.targets:
            entries = results.get(t) if isinstance(results, dict) else None
            if not isinstance(entries, list) or len(entries) != len(drawn):
                return "wrong_shape", f"{t}: {str(entries)[:300]}", 0, 0
            st = statuses.get(t)
            if st is not None and (len(st) != len(drawn) or any(s != "present" for s in st)):
                bad = next((i for i, s in enumerate(st) if s != "present"), 0)
                key = drawn[bad][0] if bad < len(drawn) else "?"
                return "not_present", f"{t}[{key}]: statuses {st[:10]}", 0, 0
            for (key, env), entry in zip(drawn, entries):
                kind, n = self.w.verify_entry(t, key, env, entry)
                if kind is not None:
                    return kind, f"{t}[{key}] (i = {env['i']}): {n}: {str(entry)[:300]}", 0, 0
                fields += n
                presence += n == 0
        return None, "", fields, presence


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


def check_main(argv: list[str]) -> int:
    """`python locustfile.py --check WORKLOAD [--oka-… overrides]`: compile a workload
    file (or `registry` with --host) as a run would, and say what it sends and checks."""

    class Parser(argparse.ArgumentParser):
        def add_argument(self, *a, **kw):
            for k in ("include_in_web_ui", "is_secret", "is_required", "is_multiple"):
                kw.pop(k, None)
            return super().add_argument(*a, **kw)

    p = Parser(prog="locustfile.py --check", description="Check a workload file without a run.")
    p.add_argument("--check", required=True, metavar="WORKLOAD", help="workload file, or registry")
    p.add_argument("--host", default="", help="with registry: the server whose GET /v1/features is read")
    _add_options(p)
    opts = p.parse_args(argv)
    opts.oka_workload = opts.check

    class Env:
        parsed_options = opts
        host = opts.host
    try:
        w = resolve_workload(Env())
    except WorkloadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    key, _ = w.draw_key(first=True)
    checks = w.fields_per_entry()
    print(f"{w.origin}: ok (workload {w.name}: targets {', '.join(w.targets)}; key objects like "
          f"{json.dumps(key)} with i in [{w.lo}, {w.hi}); {w.batch} per request; field checks "
          f"per key: " + ", ".join(f"{t} {n}" for t, n in checks.items()) + ")")
    unchecked = [t for t, n in checks.items() if not n]
    if unchecked:
        print(f"note: no value checks for {', '.join(unchecked)}: only the status and the key "
              f"are checked (add checks.<target>.fields)")
    return 0


if __name__ == "__main__":  # `python locustfile.py` prints how to run it
    if "--check" in sys.argv[1:] or any(a.startswith("--check=") for a in sys.argv[1:]):
        sys.exit(check_main(sys.argv[1:]))
    print(__doc__)
