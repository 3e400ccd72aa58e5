"""The pattern docs/python-client.md recommends for a model server, run as
written there: one AsyncClient made at startup, shared by concurrent
predictions, closed at shutdown."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional

import oka_client
from conftest import Oka


class Predictor:
    """KServe-style: load() at startup, predict() per request, close() at shutdown."""

    def __init__(self, oka_url: str) -> None:
        self.oka_url = oka_url
        self.oka: Optional[oka_client.AsyncClient] = None

    def load(self) -> None:
        self.oka = oka_client.AsyncClient(
            self.oka_url,
            timeout=1.0,  # above the deadline below, so the server's 504 comes first
            max_retries=1,
            retry_deadline=0.5,  # a 503's Retry-After: 1 is not waited for: fail fast
        )

    async def predict(self, payload: Dict[str, Any]) -> Dict[str, Any]:
        assert self.oka is not None
        users = [{"id": u} for u in payload["users"]]
        features = await self.oka.get_features(
            ["simple_feature"], users, udf_args={"simple_feature": {"multiplier": 2.0}}, deadline_ms=200
        )
        scores = [v.record["value"] if v.record else 0.0 for v in features["simple_feature"]]
        return {"scores": scores}

    async def close(self) -> None:
        if self.oka is not None:
            await self.oka.aclose()


def test_one_shared_async_client(oka: Oka, prefix: str) -> None:
    with oka_client.Client(oka.url) as c:
        c.ingest("test_feature", [{"id": f"{prefix}{i}", "value": float(i)} for i in range(50)])

    async def serve() -> List[Dict[str, Any]]:
        model = Predictor(oka.url)
        model.load()
        try:
            payloads = [{"users": [f"{prefix}{i}", f"{prefix}{i + 1}", "nobody"]} for i in range(0, 40)]
            return await asyncio.gather(*(model.predict(p) for p in payloads))
        finally:
            await model.close()

    answers = asyncio.run(serve())
    assert answers == [{"scores": [2.0 * i, 2.0 * (i + 1), 0.0]} for i in range(0, 40)]
