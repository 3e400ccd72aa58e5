"""Oka's Volga routes as Volga's own on-demand client sees them.

Volga's `OnDemandClient.request` (legacy branch, volga/on_demand/client.py) does
three things, reproduced here step for step on the same stack (aiohttp, pydantic
1.10):

1. `url = f"{base}/on_demand_compute/" + request.json()`: the request model's JSON,
   raw, in the path (aiohttp/yarl encodes what a path may not hold, leaves valid
   `%XX` sequences alone);
2. `await response.json()`; if that raises, it raises
   `Exception(f"Unable to parse json response: {raw}")` with the raw body;
3. `OnDemandResponse.parse_obj(json)`: `results: Dict[str, List[Optional[List[Any]]]]`,
   `server_id: int`.

Usage: check.py BASE_URL (an `oka serve --demo`). Prints one line per check and
`volga-client: N passed, M failed`; exits 1 on any failure.
"""

import asyncio
import datetime
import sys
from typing import Any, Dict, List, Optional

import aiohttp
import pydantic


class OnDemandRequest(pydantic.BaseModel):
    target_features: List[str]
    feature_keys: Dict[str, List[Dict[str, Any]]]
    query_args: Optional[Dict[str, Dict[str, Any]]] = None
    udf_args: Optional[Dict[str, Dict[str, Any]]] = None


class OnDemandResponse(pydantic.BaseModel):
    results: Dict[str, List[Optional[List[Any]]]]
    server_id: int


class ClientError(Exception):
    """What Volga's client raises when the body is not JSON."""


async def volga_request(session, base, request, headers=None):
    """Volga's client's steps: raw JSON in the path, `.json()`, `parse_obj`."""
    url = f"{base}/on_demand_compute/" + request.json()
    async with session.get(url, headers=headers) as response:
        try:
            body = await response.json()
        except Exception:
            raw = await response.read()
            raise ClientError(f"Unable to parse json response: {raw}")
        return OnDemandResponse.parse_obj(body)


passed, failed = [], []


def check(name, ok, detail=""):
    (passed if ok else failed).append(name)
    print(f"  {'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))


async def main(base):
    async with aiohttp.ClientSession() as session:
        # The request from the docstring of Volga's client.
        req = OnDemandRequest(
            target_features=["simple_feature"],
            feature_keys={"simple_feature": [{"id": f"test-id-{i}"} for i in range(3)]},
            udf_args={"simple_feature": {"multiplier": 2.0}},
        )
        resp = await volga_request(session, base, req)
        records = [r[0] for r in resp.results["simple_feature"]]
        check("values", [r["value"] for r in records] == [0.0, 2.0, 4.0], records)
        check(
            "fields in the entity's declaration order (id, value, timestamp)",
            all(list(r) == ["id", "value", "timestamp"] for r in records),
            [list(r) for r in records],
        )
        # Volga's users compare timestamps with naive datetimes: no TypeError.
        try:
            ts = datetime.datetime.fromisoformat(records[0]["timestamp"])
            age = datetime.datetime.utcnow() - ts
            check("naive UTC timestamps compare with naive datetimes",
                  ts.tzinfo is None and abs(age.total_seconds()) < 3600, f"{ts}, age {age}")
        except (TypeError, ValueError) as e:
            check("naive UTC timestamps compare with naive datetimes", False, repr(e))

        # Leniency where Volga answered 200.
        empty = await volga_request(
            session, base, OnDemandRequest(target_features=[], feature_keys={})
        )
        check("empty target list: empty results", empty.results == {}, empty)
        bad = await volga_request(session, base, OnDemandRequest(
            target_features=["simple_feature"],
            feature_keys={"simple_feature": [{"id": "test-id-1"}, {"id": 5}, {"user": "x"}]},
        ))
        got = bad.results["simple_feature"]
        check("malformed keys: null for those keys, the rest served",
              got[0] is not None and got[0][0]["value"] == 1.0 and got[1:] == [None, None], got)

        # Odd keys as the client sends them (raw JSON in the path): each is
        # written first, then must come back as its own record.
        keys = ["a b", "100%", "héllo ✓", "a/b", "q\"uote", "x:y@z"]
        records = [{"id": k, "value": 500.0 + i} for i, k in enumerate(keys)]
        async with session.post(f"{base}/v1/ingest",
                                json={"feature": "test_feature", "records": records}) as w:
            check("odd keys written", w.status == 200, await w.text())
        for i, key in enumerate(keys):
            r = await volga_request(session, base, OnDemandRequest(
                target_features=["test_feature"], feature_keys={"test_feature": [{"id": key}]},
            ))
            got = r.results["test_feature"][0]
            check(f"key {key!r} reaches the server intact",
                  got is not None and got[0]["id"] == key and got[0]["value"] == 500.0 + i,
                  r.results)

        # An error reaches the user readable: the client's own exception, with
        # Oka's code and message.
        nope = OnDemandRequest(target_features=["simple_featur"],
                               feature_keys={"simple_featur": [{"id": "test-id-1"}]})
        try:
            await volga_request(session, base, nope)
            check("an error is raised with Oka's message", False, "no exception")
        except ClientError as e:
            text = str(e)
            check("an error is raised with Oka's message",
                  "unknown_feature: unknown feature `simple_featur`" in text, text)
        # Why not JSON: the same error as a JSON body fails the response model
        # with a message about `results`, not the error.
        try:
            await volga_request(session, base, nope, headers={"Accept": "application/json"})
            check("a JSON error body would be a validation error", False, "no exception")
        except pydantic.ValidationError as e:
            check("a JSON error body would be a validation error",
                  "results" in str(e) and "simple_featur" not in str(e), str(e).splitlines()[:2])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(f"volga-client: {len(passed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)
