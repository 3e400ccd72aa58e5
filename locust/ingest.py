#!/usr/bin/env python3
"""Load JSON Lines files into pipeline features of a running Oka, through POST /v1/ingest.

    python3 locust/ingest.py --url http://127.0.0.1:1122 FEATURE=FILE.jsonl [FEATURE=FILE …]

For a server without a shared store (`oka serve --spec … ` with the in-memory store),
where `oka ingest` cannot reach the data, and for a server behind a load balancer. Each
line of FILE is one record of FEATURE's entity (docs/feature-spec.md, "Ingest input
format"); records go in bodies of --chunk records. Standard library only.

Exit status: 0 when every record was written; 1 when any was rejected (the first ten are
printed with their file and line) or a request failed; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request


def post(url: str, body: bytes, headers: dict, timeout: float) -> dict:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the operator's URL
        return json.loads(r.read())


def load(url: str, feature: str, path: str, chunk: int, headers: dict, timeout: float) -> tuple[int, list[str]]:
    """(records written, problems) for one file."""
    written, problems = 0, []
    batch: list[tuple[int, dict]] = []

    def flush():
        nonlocal written
        if not batch:
            return
        body = json.dumps({"feature": feature, "records": [r for _, r in batch]}).encode()
        try:
            res = post(url, body, headers, timeout)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            raise SystemExit(f"ingest: {path}: lines {batch[0][0]}–{batch[-1][0]}: HTTP {e.code} "
                             f"from {url}: {detail}") from None
        except OSError as e:
            raise SystemExit(f"ingest: {path}: cannot reach {url}: {e}; is the server up "
                             f"(check --url)?") from None
        written += res.get("written", 0)
        for err in res.get("errors", []):
            line = batch[err["index"]][0] if err.get("index", -1) < len(batch) else "?"
            problems.append(f"{path}:{line}: {err.get('message')}")
        extra = res.get("rejected", 0) - len(res.get("errors", []))
        if extra > 0:
            problems.append(f"{path}: {extra} more records rejected between lines "
                            f"{batch[0][0]} and {batch[-1][0]}")
        batch.clear()

    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise SystemExit(f"ingest: {path}: cannot read it: {e.strerror}") from None
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(f"{path}:{n}: not JSON ({e}); each line must be one JSON object")
                continue
            batch.append((n, rec))
            if len(batch) >= chunk:
                flush()
    flush()
    return written, problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="Oka's serving port or load balancer, e.g. http://127.0.0.1:1122")
    p.add_argument("--api-key", default="", help="an API key with the write scope (X-API-Key)")
    p.add_argument("--chunk", type=int, default=1000, help="records per request body")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    p.add_argument("files", nargs="+", metavar="FEATURE=FILE")
    a = p.parse_args(argv)
    url = a.url.rstrip("/") + "/v1/ingest"
    headers = {"X-API-Key": a.api_key} if a.api_key else {}
    failed = False
    for spec in a.files:
        feature, sep, path = spec.partition("=")
        if not sep or not feature or not path:
            p.error(f"{spec!r}: expected FEATURE=FILE, e.g. purchases=data.jsonl")
        written, problems = load(url, feature, path, max(1, a.chunk), headers, a.timeout)
        print(f"ingest: {feature}: {written} records written from {path}"
              + (f", {len(problems)} problems" if problems else ""))
        for line in problems[:10]:
            print(f"  {line}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
