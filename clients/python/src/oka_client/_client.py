"""The synchronous client."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Type, Union

import httpx

from . import _http, _plan
from ._errors import OkaError
from ._models import FeatureResponse, IngestSummary

TimeoutTypes = Union[None, float, httpx.Timeout]


class Client:
    """A client of one Oka server, over one ``httpx`` connection pool.

    Create one per process and share it (it is thread-safe, as ``httpx.Client``
    is); close it with :meth:`close` or a ``with`` block.

    - ``base_url``: the serving port, e.g. ``"http://oka:1122"``.
    - ``api_key``: sent as ``Authorization: Bearer <key>``.
    - ``timeout``: httpx's timeout for each phase of an HTTP attempt (connect,
      write, read, pool), in seconds, or an ``httpx.Timeout``; ``None`` waits
      for ever.
    - ``max_retries``, ``backoff``, ``max_backoff``, ``retry_deadline``: see
      :class:`oka_client.RetryPolicy`. A ``503`` (waiting its ``Retry-After``),
      a ``504 store_timeout`` and a failed connection are retried; a ``4xx``
      never is.
    - ``max_keys_per_request``, ``max_targets_per_request``: the server's
      ``--max-keys`` and ``--max-targets``; larger requests are split.
    - ``headers``: extra headers for every request. ``transport``: an
      ``httpx`` transport (for tests, proxies or custom TLS). ``limits``: the
      pool's ``httpx.Limits``.
    """

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
        headers: Optional[Mapping[str, str]] = None,
        transport: Optional[httpx.BaseTransport] = None,
        limits: Optional[httpx.Limits] = None,
    ) -> None:
        self._settings = _http.settings(
            max_retries=max_retries,
            backoff=backoff,
            max_backoff=max_backoff,
            retry_deadline=retry_deadline,
            max_keys_per_request=max_keys_per_request,
            max_targets_per_request=max_targets_per_request,
        )
        self._rng = _http.rng()
        self._http = httpx.Client(
            base_url=base_url,
            headers=_http.headers(api_key, headers),
            timeout=timeout,
            transport=transport,
            limits=limits or httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _call(self, method: str, path: str, content: Optional[bytes], started: float) -> Any:
        """One logical request: attempts until an answer, a final error, or
        the retry policy gives up."""
        policy = self._settings.retry
        attempt = 0
        while True:
            attempt += 1
            cause: Optional[BaseException] = None
            try:
                response = self._http.request(method, path, content=content)
                return _http.answer(response, attempt)
            except OkaError as e:
                error = e
            except httpx.HTTPError as e:
                error, cause = _http.transport_error(e, f"{self._http.base_url}{path.lstrip('/')}"), e
            error.attempts = attempt
            wait = policy.next_wait(error, attempt - 1, time.monotonic() - started, self._rng)
            if wait is None:
                raise error from cause
            time.sleep(wait)

    def get_features(
        self,
        targets: _plan.Targets,
        keys: Optional[Sequence[_plan.Key]] = None,
        *,
        feature_keys: Optional[Mapping[str, Sequence[_plan.Key]]] = None,
        udf_args: Optional[Mapping[str, Optional[Mapping[str, Any]]]] = None,
        query_args: Optional[Mapping[str, Optional[Mapping[str, Any]]]] = None,
        deadline_ms: Optional[int] = None,
    ) -> FeatureResponse:
        """``POST /v1/features``: compute ``targets`` for ``keys``.

        ``targets`` is a feature name or a list of them; ``keys`` a list of key
        objects (``[{"id": "test-id-1"}]``), used by every target without a list
        of its own in ``feature_keys``. ``udf_args``, ``query_args`` and
        ``deadline_ms`` are sent as the request's fields of the same names.

        A request over ``max_keys_per_request`` keys or
        ``max_targets_per_request`` targets is sent as several, one after
        another, and merged back in key order; ``deadline_ms`` then applies to
        each. Raises an :class:`OkaError` subclass for an error answer.
        """
        started = time.monotonic()
        names = _plan.target_list(targets)
        deps = None
        if _plan.needs_registry(names, feature_keys):
            deps = _plan.dependencies(self._call("GET", "/v1/features", None, started))
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
        for batch in plan.batches:
            plan.add(batch, self._call("POST", "/v1/features", _http.encode(batch.body), started))
        return plan.response()

    def features(self) -> Dict[str, Any]:
        """``GET /v1/features``: the served spec (``entities`` and ``features``)."""
        registry = self._call("GET", "/v1/features", None, time.monotonic())
        if not isinstance(registry, dict):
            raise OkaError("the registry answer is not a JSON object", status=200)
        return registry

    def ingest(
        self,
        feature: str,
        records: Iterable[Mapping[str, Any]],
        *,
        batch_size: int = _http.DEFAULT_INGEST_BATCH,
        batch_bytes: int = _http.DEFAULT_INGEST_BYTES,
    ) -> IngestSummary:
        """``POST /v1/ingest``: write ``records`` (any iterable, read lazily) into
        the pipeline feature ``feature``, ``batch_size`` records (and at most
        about ``batch_bytes`` bytes) per request, one request at a time.

        Records the server rejects, and records the client cannot encode (a NaN
        float), are counted in the summary with their reason and input index;
        the rest are written. A failed batch (after retries) raises its
        :class:`OkaError`, whose ``ingest_summary`` tells what the earlier
        batches wrote. A retried batch may be written twice: a record that
        carries its own timestamp is then stored once.
        """
        batcher = _http.Batcher(feature, batch_size, batch_bytes)
        summary = IngestSummary()

        def send(body: bytes, indices: Sequence[int]) -> None:
            try:
                result = self._call("POST", "/v1/ingest", body, time.monotonic())
            except OkaError as e:
                e.ingest_summary = summary
                raise
            summary.add_batch(indices, result)

        for index, record in enumerate(records):
            try:
                ready = batcher.add(index, record)
            except (TypeError, ValueError) as e:
                summary.add_local(index, _http.describe_encode_error(e))
                continue
            for body, indices in ready:
                send(body, indices)
        last = batcher.flush()
        if last is not None:
            send(*last)
        return summary
