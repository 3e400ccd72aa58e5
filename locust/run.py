#!/usr/bin/env python3
"""Run the Oka Locust test headless and record both sides, one sample per second.

    python run.py --host http://127.0.0.1:1122 --admin-url http://127.0.0.1:9122 \\
        --name local-2w -- --oka-shape step --oka-step-users 10 --oka-step-time 10 \\
        --oka-max-users 200 --oka-user-rps 10

Everything after `--` (or any option run.py does not know) goes to Locust unchanged,
so the locustfile's `--oka-*` options and Locust's own flags both work.

While Locust runs, run.py
  - polls Oka's admin `GET /stats` every second (with --admin-url), and `GET /metrics`
    at the start and the end (worker count, requests per worker);
  - follows Locust's `--csv-full-history` file (one row per second) for a progress line.
When Locust exits it merges Locust's per-second rows, the locustfile's precise report
(`--oka-report`: per-second histograms, value checks) and the server samples into
`OUT/result.json`, plus `OUT/samples.csv`, `OUT/server_stats.csv`, Locust's own CSVs
(`OUT/locust_*.csv`) and its log (`OUT/locust.log`), and prints a summary.

Modes
  local (default)        one Locust process; --processes N forks N worker processes
                         on this machine (Locust's own --processes; -1 = one per core)
  --master               this Locust is a master that waits for --expect-workers workers
                         started elsewhere with
                         `locust -f locustfile.py --worker --master-host HOST [--processes N]`
                         (they get the --oka-* options from the master)

Exit status: Locust's (1 when any request failed), or 3 when no report was written.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oka_result  # noqa: E402

SERVER_FIELDS = ["qps", "server_p50", "server_p75", "server_p95", "server_p99", "server_avg",
                 "db_qps", "db_p50", "db_p75", "db_p95", "db_p99", "db_avg"]
SAMPLE_FIELDS = [
    "t", "elapsed_s", "users", "offered_rps", "rps", "ok_rps", "fail_rps",
    "client_p50", "client_p75", "client_p90", "client_p95", "client_p99", "client_p99_9",
    "client_max", "client_mean", "co_p50", "co_p95", "co_p99",
    "locust_rps", "locust_fail_s", "locust_p50", "locust_p95", "locust_p99",
    "server_qps", "server_p50", "server_p75", "server_p95", "server_p99", "server_avg",
    "db_qps", "db_p50", "db_p75", "db_p95", "db_p99", "db_avg",
]


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", required=True,
                   help="base URL of Oka's serving port or of a load balancer in front of it")
    p.add_argument("--admin-url", default="",
                   help="Oka's admin base URL (e.g. http://127.0.0.1:9122) to sample /stats; "
                        "behind an ALB, one pod's admin port (port-forward) or leave out")
    p.add_argument("--name", default="", help="run name (default: derived from the options)")
    p.add_argument("--out", default="",
                   help="output directory (default: locust/out/<name>-<time>)")
    p.add_argument("--workers-label", default="",
                   help="number to plot this run against as 'workers' (default: the server's "
                        "worker count from /metrics)")
    p.add_argument("--processes", type=int, default=0,
                   help="Locust --processes: fork N local worker processes (-1: one per core)")
    p.add_argument("--master", action="store_true", help="run Locust as a master")
    p.add_argument("--expect-workers", type=int, default=1, help="with --master")
    p.add_argument("--master-bind-port", type=int, default=5557, help="with --master")
    p.add_argument("--timeout", type=float, default=3600,
                   help="stop Locust (SIGINT, then SIGKILL) after this many seconds")
    p.add_argument("--sample-interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    g = p.add_argument_group("peak sustainable RPS rule (summary)")
    g.add_argument("--slo-p99-ms", type=float, default=oka_result.DEFAULT_SLO_P99_MS)
    g.add_argument("--max-fail-ratio", type=float, default=oka_result.DEFAULT_MAX_FAIL_RATIO)
    g.add_argument("--window-s", type=int, default=oka_result.DEFAULT_WINDOW_S)
    args, rest = p.parse_known_args(argv)
    if rest and rest[0] == "--":
        rest = rest[1:]
    rest = [x for x in rest if x != "--"]
    return args, rest


def http_get(url: str, timeout: float = 1.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - operator's URL
        return r.read()


def scrape_metrics(admin_url: str) -> dict:
    """Worker count and per-worker request counters from Oka's /metrics."""
    try:
        text = http_get(admin_url.rstrip("/") + "/metrics", timeout=2.0).decode()
    except (OSError, urllib.error.URLError) as e:
        return {"error": str(e)}
    per_worker = {}
    for m in re.finditer(r'^oka_worker_requests_total\{worker="([^"]+)"\}\s+(\S+)', text, re.M):
        per_worker[m.group(1)] = float(m.group(2))
    return {"workers": len(per_worker) or None, "requests_per_worker": per_worker}


class Sampler(threading.Thread):
    """Polls /stats on a fixed 1 s grid; each sample carries its own wall time."""

    def __init__(self, admin_url: str, interval: float):
        super().__init__(daemon=True)
        self.url = admin_url.rstrip("/") + "/stats"
        self.interval = interval
        self.samples: list[dict] = []
        self.errors = 0
        self.last_error = ""
        self.stop_ev = threading.Event()

    def run(self):
        nxt = time.time()
        while not self.stop_ev.is_set():
            t = time.time()
            try:
                d = json.loads(http_get(self.url, timeout=min(0.9, self.interval)))
                d["t"] = round(t, 3)
                self.samples.append(d)
            except (OSError, ValueError, urllib.error.URLError) as e:
                self.errors += 1
                self.last_error = str(e)
            nxt += self.interval
            self.stop_ev.wait(max(0.0, nxt - time.time()))


def read_history(path: str) -> tuple[list[dict], list[dict]]:
    """Locust's _stats_history.csv: (Aggregated rows, per-request-name rows)."""
    agg, named = [], []
    if not os.path.exists(path):
        return agg, named
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            (agg if row.get("Name") == "Aggregated" else named).append(row)
    return agg, named


def fnum(x):
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v else None  # NaN -> None


def build_samples(report: dict | None, history: list[dict], server: list[dict],
                  user_rps: float) -> list[dict]:
    rows: dict[int, dict] = {}

    def row(t: int) -> dict:
        return rows.setdefault(t, {"t": t})

    for h in history:
        t = int(h["Timestamp"])
        r = row(t)
        r["users"] = int(fnum(h["User Count"]) or 0)
        r["locust_rps"] = fnum(h["Requests/s"])
        r["locust_fail_s"] = fnum(h["Failures/s"])
        r["locust_p50"] = fnum(h.get("50%"))
        r["locust_p95"] = fnum(h.get("95%"))
        r["locust_p99"] = fnum(h.get("99%"))
    for s in (report or {}).get("per_second", []):
        r = row(int(s["t"]))
        r["ok_rps"] = s["ok"]
        r["fail_rps"] = s["fail"]
        r["rps"] = s["ok"] + s["fail"]
        for k, v in (s.get("lat") or {}).items():
            if k != "count":
                r["client_" + k] = v
        for k in ("p50", "p95", "p99"):
            if k in (s.get("co") or {}):
                r["co_" + k] = s["co"][k]
    if not rows:
        return []
    ts = sorted(rows)
    active = [t for t in ts if rows[t].get("rps") or rows[t].get("users")]
    lo, hi = (active[0], active[-1]) if active else (ts[0], ts[-1])
    for s in server:
        t = int(s["t"])
        # /stats covers the last `window_s` complete seconds: keep only the samples whose
        # window lies inside this run, so traffic from before it (an earlier run) never
        # shows up here. The first few seconds of a run therefore have no server values.
        if t < lo + int(s.get("window_s") or 5) or t > hi + 1:
            continue
        r = row(t)
        for k in SERVER_FIELDS:
            r["server_qps" if k == "qps" else k] = s.get(k)
    shape_log = (report or {}).get("shape_log") or []
    out = []
    users = 0
    for t in range(lo, hi + 1):
        r = rows.get(t, {"t": t})
        if shape_log:
            # the shape's target in the middle of the second (users start within ms;
            # Locust's history row samples the count at an arbitrary point of the second)
            users = next((u for ts, u in reversed(shape_log) if ts <= t + 0.5), 0)
        else:
            users = r.get("users", users)  # carry the last known count over gaps
        r["users"] = users
        r["elapsed_s"] = t - lo
        r.setdefault("rps", 0)
        r.setdefault("ok_rps", 0)
        r.setdefault("fail_rps", 0)
        r["offered_rps"] = round(users * user_rps, 3) if user_rps > 0 else None
        out.append({k: r.get(k) for k in SAMPLE_FIELDS})
    return out


def write_csv(path: str, rows: list[dict], fields: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in fields})


def fmt(x, nd=2):
    return "-" if x is None else f"{x:.{nd}f}"


def summarize(report, samples, server, history_final, failures_csv, args) -> dict:
    tot = (report or {}).get("total", {})
    lat, co = tot.get("lat", {}), tot.get("co", {})
    reqs = tot.get("ok", 0) + tot.get("fail", 0)
    active = [s for s in samples if s["rps"]]
    dur = (active[-1]["t"] - active[0]["t"] + 1) if active else 0
    peak1 = max((s["rps"] for s in samples), default=0)
    w = args.window_s
    peak_w = max((sum(s["rps"] for s in samples[i:i + w]) / w
                  for i in range(0, max(0, len(samples) - w + 1))), default=0.0)
    srv = [s for s in samples if s.get("server_qps")]
    srv_peak = max(srv, key=lambda s: s["server_qps"]) if srv else None
    failure_kinds = {}
    if os.path.exists(failures_csv):
        with open(failures_csv, newline="") as f:
            for r in csv.DictReader(f):
                kind = re.sub(r"^CatchResponseError\('(.*)'\)$", r"\1", r.get("Error", "?"))
                failure_kinds[kind] = failure_kinds.get(kind, 0) + int(fnum(r.get("Occurrences")) or 0)
    sustain = oka_result.peak_sustainable(samples, window_s=w, max_fail_ratio=args.max_fail_ratio,
                                          slo_p99_ms=args.slo_p99_ms)
    return {
        "requests": reqs,
        "failures": tot.get("fail", 0),
        "active_s": dur,
        "mean_rps": round(reqs / dur, 2) if dur else 0.0,
        "peak_rps_1s": peak1,
        f"peak_rps_{w}s": round(peak_w, 2),
        "client_latency_ms": lat,
        "client_co_latency_ms": co,
        # Locust's own final count (exact), and its last history row (up to 1 s stale)
        "locust_totals": (report or {}).get("locust_total"),
        "locust_history_last": history_final,
        "failure_kinds": failure_kinds,
        "server_samples": len(server),
        "server_samples_in_run": len(srv),  # whole 5 s window inside the run, qps > 0
        "server_peak": ({k: srv_peak.get("server_qps" if k == "qps" else k)
                         for k in ["t"] + SERVER_FIELDS} if srv_peak else None),
        "peak_sustainable": sustain,
        "peak_sustainable_rule": {"window_s": w, "max_fail_ratio": args.max_fail_ratio,
                                  "slo_client_p99_ms": args.slo_p99_ms,
                                  "min_offered_ratio": oka_result.DEFAULT_MIN_OFFERED_RATIO},
    }


def print_summary(res: dict, out: str) -> None:
    md, sm, ck = res["run_metadata"], res["summary"], res["checks"]
    o = md.get("oka_options", {})
    w = md.get("workload") or {}
    lat, co = sm["client_latency_ms"], sm["client_co_latency_ms"]
    kr = w.get("key_range") or ["?", "?"]
    print(f"== {md['name']}: {md['mode']}, shape {o.get('oka_shape')}, api {o.get('oka_api')}, "
          f"workload {w.get('name')} ({w.get('origin')}), batch {w.get('batch')}, targets "
          f"{','.join(w.get('targets') or [])}, keys {','.join(w.get('key_fields') or [])} over i in "
          f"[{kr[0]}, {kr[1]}), user rps {o.get('oka_user_rps')}, locust exit {md['locust_exit_code']}")
    if md.get("locust_cpu_warning"):
        print("WARNING: Locust reported high CPU on a load generator; add --processes or "
              "workers before trusting the client-side numbers")
    print(f"client: {sm['requests']} requests, {sm['failures']} failures over {sm['active_s']} s; "
          f"mean {sm['mean_rps']} RPS, peak 1 s {sm['peak_rps_1s']} RPS; latency ms "
          f"p50 {fmt(lat.get('p50'))} p95 {fmt(lat.get('p95'))} p99 {fmt(lat.get('p99'))} "
          f"p99.9 {fmt(lat.get('p99_9'))} max {fmt(lat.get('max'))}"
          + (f"; from intended send p99 {fmt(co.get('p99'))}" if co.get("count") else ""))
    lt = sm.get("locust_totals") or {}
    print(f"locust: {lt.get('requests')} requests, {lt.get('failures')} failures "
          f"(its own count, exit code {lt.get('exit_code')})")
    if sm["failure_kinds"]:
        print(f"failures by kind (Locust's CSV): {sm['failure_kinds']}")
    fails = {k: v for k, v in ck.items() if k.startswith("fail_")}
    print(f"checks: {ck.get('requests_checked', 0)} requests checked, "
          f"{ck.get('values_checked', 0)} values checked ({ck.get('fields_checked', 0)} field "
          f"checks, {ck.get('presence_only', 0)} for presence only), check failures {fails or 0}")
    sp = sm["server_peak"]
    print(f"server: {sm['server_samples']} /stats samples ({sm['server_samples_in_run']} "
          f"with their window inside the run), workers {md.get('server_workers')}"
          + (f"; peak qps {sp['qps']} with server p50/p99 {sp['server_p50']}/{sp['server_p99']} ms,"
             f" db p99 {sp['db_p99']} ms" if sp else ""))
    ps = sm["peak_sustainable"]
    rule = sm["peak_sustainable_rule"]
    print(f"peak sustainable RPS ({rule['window_s']} s, fail ≤ {rule['max_fail_ratio']:.2%}, "
          f"client p99 ≤ {rule['slo_client_p99_ms']:g} ms, ≥ {rule['min_offered_ratio']:.0%} "
          f"of offered): " + (oka_result.peak_label(res, ps) + f" at {ps['users']} users"
                              if ps else "none"))
    print(f"result: {os.path.join(out, 'result.json')}")


def _opt(extra: list[str], flag: str, default: str) -> str:
    """The value of `flag` among the arguments passed on to Locust."""
    for i, a in enumerate(extra):
        if a == flag and i + 1 < len(extra):
            return extra[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return default


def absolute_workload(extra: list[str]) -> list[str]:
    """Locust runs in this folder: make a relative --oka-workload path absolute first."""
    out = list(extra)
    for i, a in enumerate(out):
        if a == "--oka-workload" and i + 1 < len(out):
            j, val, pre = i + 1, out[i + 1], ""
        elif a.startswith("--oka-workload="):
            j, val, pre = i, a.split("=", 1)[1], "--oka-workload="
        else:
            continue
        if val and val != "registry" and not os.path.isabs(val):
            out[j] = pre + os.path.abspath(val)
    return out


def git_commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", HERE, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None) -> int:
    args, locust_extra = parse_args(sys.argv[1:] if argv is None else argv)
    locust_extra = absolute_workload(locust_extra)
    started = time.time()
    stamp = dt.datetime.fromtimestamp(started).strftime("%Y%m%d-%H%M%S")
    name = args.name or f"{_opt(locust_extra, '--oka-api', 'native')}-{_opt(locust_extra, '--oka-shape', 'step')}"
    out = os.path.abspath(args.out or os.path.join(HERE, "out", f"{name}-{stamp}"))
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "locust")
    report_path = os.path.join(out, "oka_report.json")
    for stale in (report_path, prefix + "_stats_history.csv"):
        if os.path.exists(stale):
            os.remove(stale)

    cmd = [sys.executable, "-m", "locust", "-f", os.path.join(HERE, "locustfile.py"),
           "--headless", "--host", args.host, "--csv", prefix, "--csv-full-history",
           "--only-summary", "--oka-report", report_path]
    mode = "local"
    if args.master:
        mode = "master"
        cmd += ["--master", "--expect-workers", str(args.expect_workers),
                "--master-bind-port", str(args.master_bind_port)]
    elif args.processes:
        mode = "local-processes"
        cmd += ["--processes", str(args.processes)]
    cmd += locust_extra

    metrics_before = scrape_metrics(args.admin_url) if args.admin_url else {}
    sampler = Sampler(args.admin_url, args.sample_interval) if args.admin_url else None
    if sampler:
        sampler.start()

    log_path = os.path.join(out, "locust.log")
    print(f"run.py: {' '.join(cmd)}", flush=True)
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=HERE)

        def forward(signum, _frame):
            proc.send_signal(signal.SIGINT)

        old = signal.signal(signal.SIGINT, forward)
        deadline = started + args.timeout
        last_print = 0.0
        timed_out = False
        try:
            while proc.poll() is None:
                time.sleep(0.5)
                now = time.time()
                if now > deadline and not timed_out:
                    print("run.py: timeout, stopping Locust", flush=True)
                    timed_out = True
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(15)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                if not args.quiet and now - last_print >= 5:
                    last_print = now
                    hist, _ = read_history(prefix + "_stats_history.csv")
                    srv = sampler.samples[-1] if sampler and sampler.samples else {}
                    if hist:
                        h = hist[-1]
                        print(f"  t+{now - started:5.0f}s users {h['User Count']:>5} "
                              f"rps {fnum(h['Requests/s']) or 0:8.1f} fail/s "
                              f"{fnum(h['Failures/s']) or 0:6.1f} locust p99 {h.get('99%')} ms"
                              + (f" | server qps {srv.get('qps')} p99 {srv.get('server_p99')} ms"
                                 if srv else ""), flush=True)
        finally:
            signal.signal(signal.SIGINT, old)
    rc = proc.returncode
    ended = time.time()
    if sampler:
        time.sleep(min(1.0, args.sample_interval))  # one more sample after the last request
        sampler.stop_ev.set()
        sampler.join(5)
    metrics_after = scrape_metrics(args.admin_url) if args.admin_url else {}

    report = None
    if os.path.exists(report_path):
        with open(report_path) as f:
            report = json.load(f)
    hist, named = read_history(prefix + "_stats_history.csv")
    opts = (report or {}).get("options", {})
    user_rps = float(opts.get("oka_user_rps") or 0)
    server = sampler.samples if sampler else []
    samples = build_samples(report, hist, server, user_rps)
    final_totals = {}
    if hist:
        h = hist[-1]
        final_totals = {"requests": int(fnum(h["Total Request Count"]) or 0),
                        "failures": int(fnum(h["Total Failure Count"]) or 0),
                        "avg_ms": fnum(h["Total Average Response Time"]),
                        "max_ms": fnum(h["Total Max Response Time"])}

    with open(log_path, errors="replace") as f:
        log_text = f.read()
    # Locust warns when a load generator process ran above 90 % CPU: its numbers are then
    # suspect (the client, not the server, may be the limit).
    cpu_warning = bool(re.search(r"CPU usage (above|was too high|threshold was exceeded)", log_text))
    per_worker = {}
    if metrics_before.get("requests_per_worker") or metrics_after.get("requests_per_worker"):
        b = metrics_before.get("requests_per_worker", {})
        per_worker = {w: v - b.get(w, 0.0)
                      for w, v in metrics_after.get("requests_per_worker", {}).items()}
    res = {
        "schema": oka_result.RESULT_SCHEMA,
        "run_metadata": {
            "name": name,
            "started_at": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
            "ended_at": dt.datetime.fromtimestamp(ended, dt.timezone.utc).isoformat(),
            "wall_s": round(ended - started, 2),
            "host": args.host,
            "admin_url": args.admin_url or None,
            "mode": mode,
            "processes": args.processes or None,
            "expect_workers": args.expect_workers if args.master else None,
            "locust_cmd": cmd,
            "locust_exit_code": rc,
            "locust_timed_out": timed_out,
            "locust_cpu_warning": cpu_warning,
            "locust_version": (report or {}).get("locust_version"),
            "oka_options": opts,
            "workload": (report or {}).get("workload"),
            "workers_label": args.workers_label or None,
            "server_workers": metrics_after.get("workers") or metrics_before.get("workers"),
            "server_requests_per_worker": per_worker or None,
            "server_ids_seen": (report or {}).get("server_ids", []),
            "server_sample_errors": sampler.errors if sampler else None,
            "client_host": socket.gethostname(),
            "client_cpus": os.cpu_count(),
            "python": platform.python_version(),
            "git_commit": git_commit(),
        },
        "summary": {},
        "checks": (report or {}).get("checks", {}),
        "samples": samples,
        "server_samples": server,
    }
    res["summary"] = summarize(report, samples, server, final_totals,
                               prefix + "_failures.csv", args)
    # A hot load generator makes the peak a lower bound: plot.py labels it "≥ N (client-limited)".
    res["summary"]["client_limited"] = cpu_warning
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    write_csv(os.path.join(out, "samples.csv"), samples, SAMPLE_FIELDS)
    write_csv(os.path.join(out, "server_stats.csv"), server, ["t", "window_s"] + SERVER_FIELDS)
    print_summary(res, out)
    if report is None:
        print(f"run.py: Locust wrote no report; see {log_path}", file=sys.stderr)
        with open(log_path) as f:
            sys.stderr.write("".join(f.readlines()[-30:]))
        return 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
