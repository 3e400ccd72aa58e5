"""The asyncio client: the same surface as :class:`oka_client.Client`, with
``async`` methods."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import (
    Any,
    AsyncIterable,
    Awaitable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Type,
    TypeVar,
    Union,
)

import httpx

from . import _http, _plan
from ._client import TimeoutTypes
from ._errors import OkaError
from ._models import FeatureResponse, IngestSummary

T = TypeVar("T")


class AsyncClient:
    """The asyncio twin of :class:`oka_client.Client`, over one
    ``httpx.AsyncClient`` pool. Takes the same arguments, plus
    ``max_concurrency``: how many batches of one split ``get_features`` call
    are in flight at once (default 4). Close it with :meth:`aclose` or an
    ``async with`` block."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: Optional[str] = None,
        timeout: TimeoutTypes = _http.DEFAULT_TIMEOUT,
        max_retries: int = 3,
        backoff: float = 0.05,
        max_backoff: float = 2.0,
        retry_deadline: float = 10.0,
        max_keys_per_request: int = _http.DEFAULT_MAX_KEYS,
        max_targets_per_request: int = _http.DEFAULT_MAX_TARGETS,
        max_concurrency: int = 4,
        headers: Optional[Mapping[str, str]] = None,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        limits: Optional[httpx.Limits] = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._settings = _http.settings(
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            retry_deadline=retry_deadline,
            max_keys_per_request=max_keys_per_request,
            max_targets_per_request=max_targets_per_request,
        )
        self._concurrency = max_concurrency
        self._rng = _http.rng()
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_http.headers(api_key, headers),
            timeout=timeout,
            transport=transport,
            limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, content: Optional[bytes], started: float) -> Any:
        policy = self._settings.retry
        attempt = 0
        while True:
            attempt += 1
            cause: Optional[BaseException] = None
            try:
                response = await self._http.request(method, path, content=content)
                return _http.answer(response, attempt)
            except OkaError as e:
                error = e
            except httpx.HTTPError as e:
                error, cause = _http.transport_error(e, f"{self._http.base_url}{path.lstrip('/')}"), e
            error.attempts = attempt
            wait = policy.next_wait(error, attempt - 1, time.monotonic() - started, self._rng)
            if wait is None:
                raise error from cause
            await asyncio.sleep(wait)

    async def get_features(
        self,
        targets: _plan.Targets,
        keys: Optional[Sequence[_plan.Key]] = None,
        *,
        feature_keys: Optional[Mapping[str, Sequence[_plan.Key]]] = None,
        udf_args: Optional[Mapping[str, Optional[Mapping[str, Any]]]] = None,
        query_args: Optional[Mapping[str, Optional[Mapping[str, Any]]]] = None,
        deadline_ms: Optional[int] = None,
    ) -> FeatureResponse:
        """See :meth:`oka_client.Client.get_features`. The batches of a split
        request run concurrently, at most ``max_concurrency`` at a time; the
        first error cancels the rest and is raised."""
        started = time.monotonic()
        names = _plan.target_list(targets)
        deps = None
        if _plan.needs_registry(names, feature_keys):
            deps = _plan.dependencies(await self._call("GET", "/v1/features", None, started))
        plan = _plan.plan(
            names,
            keys,
            feature_keys=feature_keys,
            query_args=query_args,
            udf_args=udf_args,
            deadline_ms=deadline_ms,
            max_keys=self._settings.max_keys,
            max_targets=self._settings.max_targets,
            deps=deps,
        )
        if len(plan.batches) == 1:
            batch = plan.batches[0]
            plan.add(batch, await self._call("POST", "/v1/features", _http.encode(batch.body), started))
            return plan.response()
        gate = asyncio.Semaphore(self._concurrency)

        async def one(batch: _plan.Batch) -> Any:
            async with gate:
                return await self._call("POST", "/v1/features", _http.encode(batch.body), started)

        answers = await _all([one(b) for b in plan.batches])
        for batch, result in zip(plan.batches, answers):
            plan.add(batch, result)
        return plan.response()

    async def features(self) -> Dict[str, Any]:
        """``GET /v1/features``: the served spec (``entities`` and ``features``)."""
        registry = await self._call("GET", "/v1/features", None, time.monotonic())
        if not isinstance(registry, dict):
            raise OkaError("the registry answer is not a JSON object", status=200)
        return registry

    async def ingest(
        self,
        feature: str,
        records: Union[Iterable[Mapping[str, Any]], AsyncIterable[Mapping[str, Any]]],
        *,
        batch_size: int = _http.DEFAULT_INGEST_BATCH,
        batch_bytes: int = _http.DEFAULT_INGEST_BYTES,
    ) -> IngestSummary:
        """See :meth:`oka_client.Client.ingest`; ``records`` may also be an
        async iterable. Batches are sent one at a time."""
        batcher = _http.Batcher(feature, batch_size, batch_bytes)
        summary = IngestSummary()

        async def send(body: bytes, indices: Sequence[int]) -> None:
            try:
                result = await self._call("POST", "/v1/ingest", body, time.monotonic())
            except OkaError as e:
                e.ingest_summary = summary
                raise
            summary.add_batch(indices, result)

        async def take(index: int, record: Any) -> None:
            try:
                ready = batcher.add(index, record)
            except (TypeError, ValueError) as e:
                summary.add_local(index, _http.describe_encode_error(e))
                return
            for body, indices in ready:
                await send(body, indices)

        if isinstance(records, AsyncIterable):
            index = 0
            async for record in records:
                await take(index, record)
                index += 1
        else:
            for index, record in enumerate(records):
                await take(index, record)
        last = batcher.flush()
        if last is not None:
            await send(*last)
        return summary


async def _all(calls: List[Awaitable[T]]) -> List[T]:
    """Await all; on the first error cancel the others and raise it."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
