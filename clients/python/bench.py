"""Requests per second of oka_client.AsyncClient against a running server.

    python clients/python/bench.py --url http://127.0.0.1:1122 [--duration 5] [--concurrency 4] [--rounds 3]

Against `oka serve --demo` (keys test-id-0 … test-id-9999, feature
simple_feature). For 1-key and 100-key requests it runs, for --duration seconds
each, --concurrency tasks that each send one request after another over one
AsyncClient, and prints requests/s, feature values/s and latency percentiles.
The same load through a bare httpx.AsyncClient (json.dumps the body, POST,
json-parse the answer) is the baseline: the difference is the client's own
cost (planning batches, checking the answer, building typed results). Both run in this one Python process,
on one core, so the numbers are bounded by it as much as by the server; the
last column, this process's CPU time per request, is the cost on the caller's
side whatever the server does.

One Python process spends about 1 ms of CPU per request in httpx, so it tops
out near 1,000 requests/s whatever the server. Many tasks in flight on one
pool make it worse, not better: with 16 tasks (over 16 or 4 connections)
requests/s fell by half and p99 rose to about 200 ms, through bare httpx as
much as through the client. Hence the default of 4.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from typing import Awaitable, Callable, Dict, List, Tuple

import httpx

import oka_client


def keys_for(rng: random.Random, n: int, total: int) -> List[Dict[str, str]]:
    return [{"id": f"test-id-{rng.randrange(total)}"} for _ in range(n)]


async def drive(
    call: Callable[[random.Random], Awaitable[None]], duration: float, concurrency: int
) -> List[float]:
    """Closed loop: `concurrency` tasks calling back to back until `duration`
    has passed; the latency of every call, in seconds."""
    latencies: List[float] = []
    stop = time.monotonic() + duration

    async def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            await call(rng)
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return latencies


def row(name: str, n_keys: int, runs: List[Tuple[List[float], float]], duration: float) -> str:
    """The median round (by requests/s) of one case."""
    runs = sorted(runs, key=lambda r: len(r[0]))
    lat, cpu = runs[len(runs) // 2]
    rps = len(lat) / duration
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [lat[0]] * 99
    return (
        f"| {name:<11} | {n_keys:>4} | {rps:>9.0f} | {rps * n_keys:>11.0f} "
        f"| {q[49] * 1e3:>7.2f} | {q[98] * 1e3:>7.2f} | {cpu / len(lat) * 1e6:>17.0f} |"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:1122")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per case (default 5)")
    ap.add_argument("--concurrency", type=int, default=4, help="tasks in flight (default 4)")
    ap.add_argument("--connections", type=int, default=0, help="pool size (default: --concurrency)")
    ap.add_argument("--feature", default="simple_feature")
    ap.add_argument("--key-space", type=int, default=10_000, help="keys test-id-0 … N-1 (default 10000)")
    ap.add_argument("--sizes", default="1,100", help="keys per request (default 1,100)")
    ap.add_argument("--rounds", type=int, default=1, help="rounds per case, alternating the clients; the median is shown")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    conns = args.connections or args.concurrency
    limits = httpx.Limits(max_connections=conns, max_keepalive_connections=conns)

    print(
        f"server {args.url}, {args.concurrency} tasks over {conns} connections, {args.duration:g} s per case, "
        f"{args.rounds} round(s) (median shown), feature {args.feature}"
    )
    print("| client      | keys |     req/s |    values/s | p50 ms  | p99 ms  | client CPU µs/req |")
    print("|-------------|-----:|----------:|------------:|--------:|--------:|------------------:|")
    async with oka_client.AsyncClient(args.url, limits=limits, max_retries=0) as oka, httpx.AsyncClient(
        base_url=args.url, limits=limits
    ) as raw:
        for n in sizes:
            # Warm the pools and check the answers are values, not misses.
            r = await oka.get_features(args.feature, keys_for(random.Random(0), n, args.key_space))
            missing = sum(1 for v in r[args.feature] if not v.present)
            if missing:
                raise SystemExit(f"{missing} of {n} keys missing: is this `oka serve --demo`?")

            async def via_client(rng: random.Random, n: int = n) -> None:
                res = await oka.get_features(args.feature, keys_for(rng, n, args.key_space))
                assert len(res[args.feature]) == n

            async def via_httpx(rng: random.Random, n: int = n) -> None:
                body = json.dumps({"target_features": [args.feature], "keys": keys_for(rng, n, args.key_space)})
                resp = await raw.post("/v1/features", content=body)
                resp.raise_for_status()
                resp.json()

            cases = (("oka_client", via_client), ("bare httpx", via_httpx))
            runs: Dict[str, List[Tuple[List[float], float]]] = {name: [] for name, _ in cases}
            for _ in range(args.rounds):
                for name, call in cases:
                    cpu0 = time.process_time()
                    lat = await drive(call, args.duration, args.concurrency)
                    runs[name].append((lat, time.process_time() - cpu0))
            for name, _ in cases:
                print(row(name, n, runs[name], args.duration), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
