"""The cluster's parts, each a process tree of its own: cgroups, the Redis Cluster,
the Oka nodes, HAProxy (the load balancer) and the samplers that watch them.

Everything binds loopback; every process started here is stopped by its PID (and,
for a cgroup, by the PIDs its `cgroup.procs` lists) by `Parts.stop_all`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PARENT = "oka-cluster"


class SetupError(Exception):
    """A part could not be started; the message says which and what to do."""


def free_ports(n: int, below: int = 55000) -> list[int]:
    """n distinct free loopback ports below `below` (a Redis Cluster node's bus port is
    its port + 10,000)."""
    out: list[int] = []
    while len(out) < n:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        if p < below and p not in out:
            out.append(p)
    return out


def http_status(url: str, timeout: float = 1.0, body: bytes | None = None) -> int:
    """The status of one request, or 0 when no answer came."""
    req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return 0


class Cgroup:
    """A cgroup (v1: the `cpu` and `cpuacct` hierarchies) with an optional CPU quota.

    `quota` is in CPUs (0.2 = a fifth of one); the CFS period is `period_us`, short so
    that a throttled node waits at most a period, not the default 100 ms."""

    def __init__(self, name: str, quota: float = 0.0, period_us: int = 5000):
        self.name = name
        self.dirs = [os.path.join(CGROUP_ROOT, h, CGROUP_PARENT, name) for h in ("cpu", "cpuacct")]
        for d in self.dirs:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise SetupError(
                    f"cgroup {d}: cannot create it ({e.strerror}); the cluster bench needs "
                    "root and cgroup v1's cpu and cpuacct hierarchies mounted under "
                    f"{CGROUP_ROOT} (or QUOTA=0 to run without quotas)") from None
        cpu = self.dirs[0]
        if quota > 0:
            q = int(round(quota * period_us))
            if q < 1000:
                raise SetupError(f"QUOTA={quota} with a {period_us} µs period is a {q} µs quota; "
                                 "the kernel's least is 1000 µs: raise QUOTA or PERIOD_US")
            self._write(os.path.join(cpu, "cpu.cfs_period_us"), str(period_us))
            self._write(os.path.join(cpu, "cpu.cfs_quota_us"), str(q))
        else:
            self._write(os.path.join(cpu, "cpu.cfs_quota_us"), "-1")

    @staticmethod
    def _write(path: str, value: str) -> None:
        with open(path, "w") as f:
            f.write(value)

    def enter(self) -> None:
        """Moves the calling process into this cgroup (a Popen preexec_fn)."""
        for d in self.dirs:
            self._write(os.path.join(d, "cgroup.procs"), str(os.getpid()))

    def usage_s(self) -> float:
        """CPU seconds used by the processes of this cgroup since it was made."""
        with open(os.path.join(self.dirs[1], "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def throttled_s(self) -> float:
        """Seconds the quota held the cgroup's processes back."""
        with open(os.path.join(self.dirs[0], "cpu.stat")) as f:
            for line in f:
                k, v = line.split()
                if k == "throttled_time":
                    return int(v) / 1e9
        return 0.0

    def pids(self) -> list[int]:
        with open(os.path.join(self.dirs[1], "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]

    def remove(self) -> None:
        """Kills what is left in it (by PID) and removes it."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for d in self.dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass


class Parts:
    """Owns every process and cgroup it starts; `stop_all` stops them by PID."""

    def __init__(self, work: str):
        self.work = work
        self.procs: list[subprocess.Popen] = []
        self.cgroups: list[Cgroup] = []
        for h in ("cpu", "cpuacct"):
            os.makedirs(os.path.join(CGROUP_ROOT, h, CGROUP_PARENT), exist_ok=True)

    def cgroup(self, name: str, quota: float = 0.0, period_us: int = 5000) -> Cgroup:
        cg = Cgroup(name, quota, period_us)
        self.cgroups.append(cg)
        return cg

    def start(self, cmd: list[str], log: str, cgroup: Cgroup | None = None,
              cwd: str | None = None, env: dict | None = None) -> subprocess.Popen:
        out = open(os.path.join(self.work, log), "ab")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                             preexec_fn=cgroup.enter if cgroup else None,
                             start_new_session=True)
        out.close()
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + 10
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for cg in self.cgroups:
            cg.remove()
        for h in ("cpu", "cpuacct"):
            try:
                os.rmdir(os.path.join(CGROUP_ROOT, h, CGROUP_PARENT))
            except OSError:
                pass


def wait_until(what: str, check, timeout: float, proc: subprocess.Popen | None = None,
               log: str | None = None) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            tail = _tail(log) if log else ""
            raise SetupError(f"{what}: the process exited with status {proc.returncode}{tail}")
        time.sleep(0.1)
    raise SetupError(f"{what}: not ready after {timeout:.0f} s{_tail(log) if log else ''}")


def _tail(path: str, n: int = 8) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()[-n:]
    except OSError:
        return ""
    return "; its log " + path + " ends:\n  " + "\n  ".join(lines)


class RedisCluster:
    """Three primaries with a replica each, `cluster-node-timeout` of `node_timeout_ms`
    (how long a primary may be silent before its replica takes over)."""

    def __init__(self, parts: Parts, node_timeout_ms: int = 2000):
        self.parts = parts
        self.cg = parts.cgroup("store")
        self.ports = free_ports(6)
        self.procs: dict[int, subprocess.Popen] = {}
        for port in self.ports:
            d = os.path.join(parts.work, f"redis-{port}")
            os.makedirs(d, exist_ok=True)
            self.procs[port] = parts.start(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                 "--cluster-node-timeout", str(node_timeout_ms), "--save", "",
                 "--appendonly", "no"], f"redis-{port}.log", self.cg, cwd=d)
        for port in self.ports:
            wait_until(f"redis-server on 127.0.0.1:{port}", lambda p=port: self.ping(p), 10,
                       self.procs[port], os.path.join(parts.work, f"redis-{port}.log"))
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in self.ports],
             "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True, text=True, timeout=60)
        if create.returncode != 0:
            raise SetupError(f"redis-cli --cluster create failed: {create.stdout[-400:]}{create.stderr[-400:]}")
        wait_until("the Redis Cluster", self.all_ok, 30)

    @staticmethod
    def cli(port: int, *args: str, timeout: float = 2.0) -> str:
        r = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                           text=True, timeout=timeout)
        return r.stdout

    def ping(self, port: int) -> bool:
        try:
            return self.cli(port, "ping").strip() == "PONG"
        except subprocess.TimeoutExpired:
            return False

    def live_ports(self) -> list[int]:
        return [p for p in self.ports if self.procs[p].poll() is None]

    def all_ok(self) -> bool:
        """Every live node says the cluster is ok and sees three primaries."""
        for p in self.live_ports():
            try:
                info = self.cli(p, "cluster", "info")
            except subprocess.TimeoutExpired:
                return False
            if "cluster_state:ok" not in info or "cluster_size:3" not in info:
                return False
        return True

    def primaries(self) -> list[int]:
        """Ports of the live nodes that are primaries (by the first live node's view)."""
        out = []
        for line in self.cli(self.live_ports()[0], "cluster", "nodes").splitlines():
            f = line.split()
            if len(f) > 2 and "master" in f[2] and "fail" not in f[2]:
                out.append(int(f[1].split("@")[0].split(":")[1]))
        return sorted(out)

    def url(self) -> str:
        first, *rest = self.ports
        return f"redis-cluster://127.0.0.1:{first}?" + "&".join(f"node=127.0.0.1:{p}" for p in rest)


class OkaNode:
    """One `oka serve` in its own cgroup (CPU quota) on its own loopback address."""

    def __init__(self, parts: Parts, index: int, bin_: str, spec: str, store: str,
                 quota: float, period_us: int, workers: int, shutdown_delay_s: float,
                 port: int, admin_port: int):
        self.parts, self.index, self.bin, self.spec, self.store = parts, index, bin_, spec, store
        self.workers, self.shutdown_delay_s = workers, shutdown_delay_s
        self.addr = f"127.0.1.{index + 1}"
        self.port, self.admin_port = port, admin_port
        self.name = f"node{index + 1}"
        self.cg = parts.cgroup(self.name, quota, period_us)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def log(self) -> str:
        return os.path.join(self.parts.work, f"{self.name}.log")

    def start(self) -> None:
        self.starts += 1
        self.proc = self.parts.start(
            [self.bin, "serve", "--spec", self.spec, "--store", self.store,
             "--listen", f"{self.addr}:{self.port}",
             "--admin-listen", f"{self.addr}:{self.admin_port}",
             "--workers", str(self.workers), "--pin", "false",
             "--shutdown-delay-s", str(self.shutdown_delay_s), "--log-format", "json"],
            f"{self.name}.log", self.cg)

    def ready(self) -> bool:
        return http_status(f"http://{self.addr}:{self.admin_port}/readyz") == 200

    def wait_ready(self, timeout: float = 30) -> None:
        wait_until(f"oka serve {self.name} on {self.addr}:{self.port}", self.ready, timeout,
                   self.proc, self.log)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)


def haproxy_config(port: int, nodes: list[OkaNode], stats_sock: str, check: dict) -> str:
    """HAProxy as the ALB: round robin, health checks on each node's `/readyz` with the
    ALB's interval, timeout and thresholds. Two differences from an ALB, written down in
    docs/scaling.md: a request whose connection a node refused (it never reached the
    node) is sent to another node (`retry-on conn-failure`, `option redispatch`), and
    a refused connection takes the node out at once (`observe layer4`)."""
    servers = "\n".join(
        f"    server {n.name} {n.addr}:{n.port} check port {n.admin_port}"
        for n in nodes)
    return f"""global
    maxconn 8000
    stats socket {stats_sock} mode 600 level admin
    log stderr format short local0 notice

defaults
    mode http
    log global
    option dontlognull
    timeout connect 2s
    timeout client 60s
    timeout server 10s
    timeout http-keep-alive 60s
    retries 2
    option redispatch
    retry-on conn-failure

frontend oka
    bind 127.0.0.1:{port}
    default_backend nodes

backend nodes
    balance roundrobin
    http-reuse safe
    option httpchk GET /readyz
    http-check expect status 200
    timeout check {int(check['timeout_s'] * 1000)}ms
    default-server inter {int(check['interval_s'] * 1000)}ms fall {check['unhealthy']} rise {check['healthy']} observe layer4 error-limit 1 on-error mark-down
{servers}
"""


class Balancer:
    """HAProxy from Debian, in its own cgroup, with an admin socket for `show stat`."""

    def __init__(self, parts: Parts, nodes: list[OkaNode], check: dict):
        self.parts = parts
        self.cg = parts.cgroup("balancer")
        self.port = free_ports(1)[0]
        self.sock = os.path.join(parts.work, "haproxy.sock")
        cfg = os.path.join(parts.work, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(haproxy_config(self.port, nodes, self.sock, check))
        self.proc = parts.start(["haproxy", "-db", "-f", cfg], "haproxy.log", self.cg)
        wait_until("haproxy", lambda: os.path.exists(self.sock) and self.stats() is not None, 10,
                   self.proc, os.path.join(parts.work, "haproxy.log"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self, cmd: str) -> str | None:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(1.0)
                s.connect(self.sock)
                s.sendall(cmd.encode() + b"\n")
                chunks = []
                while True:
                    b = s.recv(65536)
                    if not b:
                        break
                    chunks.append(b)
            return b"".join(chunks).decode()
        except OSError:
            return None

    def stats(self) -> dict[str, dict] | None:
        """`show stat` of the backend's servers, by name: status, scur (requests on
        the server now), and the counters."""
        text = self.command("show stat")
        if text is None or not text.startswith("# "):
            return None
        rows = csv.reader(io.StringIO(text[2:]))  # a check's text may hold a quoted comma
        head = next(rows, [])
        out = {}
        for fields in rows:
            row = dict(zip(head, fields))
            if row.get("pxname") == "nodes":
                out[row["svname"]] = row
        return out

    def status(self, name: str) -> str:
        s = self.stats() or {}
        return s.get(name, {}).get("status", "?")


class Sampler(threading.Thread):
    """Every `interval` s: each cgroup's CPU seconds, the machine's idle share, and
    HAProxy's per-server status and requests in flight. Kept in memory as a timeline."""

    def __init__(self, cgroups: list[Cgroup], balancer: Balancer | None, interval: float = 0.1):
        super().__init__(daemon=True)
        self.cgroups, self.balancer, self.interval = cgroups, balancer, interval
        self.samples: list[dict] = []
        self._halt = threading.Event()

    @staticmethod
    def machine() -> tuple[float, float]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]

    def sample(self) -> dict:
        total, idle = self.machine()
        s = {"t": time.time(), "cpu": {}, "machine": (total, idle)}
        for cg in self.cgroups:
            try:
                s["cpu"][cg.name] = cg.usage_s()
            except OSError:
                pass
        if self.balancer is not None:
            st = self.balancer.stats() or {}
            s["servers"] = {k: {"status": v.get("status"), "scur": int(v.get("scur") or 0)}
                            for k, v in st.items() if k != "BACKEND"}
        return s

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append(self.sample())
            self._halt.wait(self.interval)

    def stop(self) -> list[dict]:
        self._halt.set()
        self.join(timeout=5)
        return self.samples


def cpu_between(samples: list[dict], name: str, t0: float, t1: float) -> float | None:
    """CPUs (CPU-seconds per second) a cgroup used between two times, from samples."""
    inside = [s for s in samples if t0 <= s["t"] <= t1 and name in s["cpu"]]
    if len(inside) < 2 or inside[-1]["t"] <= inside[0]["t"]:
        return None
    return (inside[-1]["cpu"][name] - inside[0]["cpu"][name]) / (inside[-1]["t"] - inside[0]["t"])


def machine_busy_between(samples: list[dict], t0: float, t1: float) -> float | None:
    """The share of the machine's CPU time that was busy between two times (0..1)."""
    inside = [s for s in samples if t0 <= s["t"] <= t1]
    if len(inside) < 2:
        return None
    (a_tot, a_idle), (b_tot, b_idle) = inside[0]["machine"], inside[-1]["machine"]
    if b_tot <= a_tot:
        return None
    return 1 - (b_idle - a_idle) / (b_tot - a_tot)


def dump(path: str, doc) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, path)
