"""Real processes for the client's tests: redis-server and `oka serve`, each on
free loopback ports, each stopped by its PID at teardown.

The oka binary is $OKA_BIN, else target/debug/oka of this repository. Every
test isolates its data with a random key prefix, so the servers are shared.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import httpx
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SPEC = HERE / "spec.yaml"
READER_KEY = "reader-3f9a1c0d5e7b2468"
WRITER_KEY = "ingester-8b1e4f7a2c9d0653"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> List[int]:
    """`n` distinct free loopback ports: every socket stays bound until all are
    chosen, so two calls in a row cannot hand out the same port."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def oka_bin() -> Path:
    path = Path(os.environ.get("OKA_BIN") or REPO / "target" / "debug" / "oka")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no executable oka at {path}: build it (cargo build --bin oka) or set OKA_BIN")
    return path


class Redis:
    """A redis-server that can be stopped and started again on the same port
    with its data (SAVE before stopping; loaded from the dump at start)."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed")
        self.exe = exe
        self.dir = tempfile.mkdtemp(prefix="oka-client-redis-")
        self.port = free_port()
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--dbfilename", "dump.rdb"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if self.command("PING") == b"+PONG":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def command(self, *args: str) -> bytes:
        """One command over RESP; the first line of the answer."""
        wire = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(wire.encode())
            return s.recv(65536).split(b"\r\n")[0]

    def save_and_stop(self) -> None:
        assert self.command("SAVE") == b"+OK"
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Oka:
    """`oka serve --spec tests/spec.yaml --store <redis>` with extra flags."""

    def __init__(self, store: str, *flags: str, env: Optional[Dict[str, str]] = None) -> None:
        self.port, self.admin_port = free_ports(2)
        self.log = tempfile.NamedTemporaryFile(prefix="oka-client-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [str(oka_bin()), "serve", "--spec", str(SPEC), "--store", store,
             "--listen", f"127.0.0.1:{self.port}", "--admin-listen", f"127.0.0.1:{self.admin_port}",
             *flags],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"oka serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.admin}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"oka serve was not ready within 30 s:\n{self.output()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(25)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        os.unlink(self.log.name)


@pytest.fixture(scope="session")
def redis() -> Iterator[Redis]:
    r = Redis()
    yield r
    r.close()


@pytest.fixture(scope="session")
def oka(redis: Redis) -> Iterator[Oka]:
    """The default limits (10,000 keys, 256 targets)."""
    server = Oka(redis.url)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def small_oka(redis: Redis) -> Iterator[Oka]:
    """The same store with tiny limits: 5 keys and 2 targets per request."""
    server = Oka(redis.url, "--max-keys", "5", "--max-targets", "2")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def auth_oka(redis: Redis) -> Iterator[Oka]:
    """API keys on: a reader (read) and a writer (read, write)."""
    server = Oka(redis.url, env={"OKA_API_KEYS": f"{READER_KEY} read;{WRITER_KEY} read,write"})
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    """A key prefix of the test's own."""
    return f"t-{uuid.uuid4().hex[:10]}-"


class Recorder:
    """What went over the wire: one entry per HTTP attempt, with its start
    time, status (None when no answer came), Retry-After, and JSON body."""

    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []

    def start(self, request: httpx.Request) -> Dict[str, Any]:
        import json

        body = json.loads(request.content) if request.content else None
        entry: Dict[str, Any] = {
            "method": request.method,
            "path": request.url.path,
            "body": body,
            "started": time.monotonic(),
            "status": None,
            "retry_after": None,
            "ended": None,
        }
        self.calls.append(entry)
        return entry

    def end(self, entry: Dict[str, Any], response: Optional[httpx.Response]) -> None:
        entry["ended"] = time.monotonic()
        if response is not None:
            entry["status"] = response.status_code
            entry["retry_after"] = response.headers.get("retry-after")

    def paths(self, path: str) -> List[Dict[str, Any]]:
        return [c for c in self.calls if c["path"] == path]


class RecordingTransport(httpx.HTTPTransport):
    def __init__(self, recorder: Recorder, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recorder = recorder
        self.hooks: List[Any] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        entry = self.recorder.start(request)
        try:
            response = super().handle_request(request)
            response.read()
        except BaseException:
            self.recorder.end(entry, None)
            raise
        self.recorder.end(entry, response)
        for hook in self.hooks:
            hook(entry)
        return response


class AsyncRecordingTransport(httpx.AsyncHTTPTransport):
    def __init__(self, recorder: Recorder, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recorder = recorder

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        entry = self.recorder.start(request)
        try:
            response = await super().handle_async_request(request)
            await response.aread()
        except BaseException:
            self.recorder.end(entry, None)
            raise
        self.recorder.end(entry, response)
        return response


def recording() -> Tuple[Recorder, RecordingTransport]:
    r = Recorder()
    return r, RecordingTransport(r)


def async_recording() -> Tuple[Recorder, AsyncRecordingTransport]:
    r = Recorder()
    return r, AsyncRecordingTransport(r)
