"""Sans-IO pieces both clients share: settings, headers, JSON encoding, turning
an answer into data or an exception, and the ingest batcher."""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import httpx

from ._errors import ConnectionFailed, OkaError, error_from_response
from ._retry import RetryPolicy
from ._version import __version__

DEFAULT_TIMEOUT = 5.0
DEFAULT_MAX_KEYS = 10_000
DEFAULT_MAX_TARGETS = 256
DEFAULT_INGEST_BATCH = 1_000
DEFAULT_INGEST_BYTES = 1 << 20


@dataclass(frozen=True)
class Settings:
    retry: RetryPolicy
    max_keys: int
    max_targets: int


def settings(
    *,
    max_retries: int,
    backoff: float,
    max_backoff: float,
    retry_deadline: float,
    max_keys_per_request: int,
    max_targets_per_request: int,
) -> Settings:
    if max_keys_per_request < 1 or max_targets_per_request < 1:
        raise ValueError("max_keys_per_request and max_targets_per_request must be at least 1")
    return Settings(
        RetryPolicy(max_retries, backoff, max_backoff, retry_deadline),
        max_keys_per_request,
        max_targets_per_request,
    )


def headers(api_key: Optional[str], extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
    out = {
        "content-type": "application/json",
        "accept": "application/json",
        "user-agent": f"oka-client-python/{__version__}",
    }
    if api_key is not None:
        out["authorization"] = f"Bearer {api_key}"
    out.update(extra or {})
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def encode(body: Any) -> bytes:
    """Compact JSON; a naive ``datetime`` is taken as UTC; NaN and infinity
    are refused (``ValueError``), as the server would refuse them."""
    return json.dumps(
        body, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_json_default
    ).encode("utf-8")


def answer(response: httpx.Response, attempts: int) -> Any:
    """The parsed JSON of a ``2xx``, or the exception for anything else."""
    if 200 <= response.status_code < 300:
        try:
            return json.loads(response.content)
        except ValueError as e:
            raise OkaError(
                f"the server answered {response.status_code} with a body that is not JSON",
                status=response.status_code,
                attempts=attempts,
            ) from e
    raise error_from_response(
        response.status_code,
        response.content,
        response.headers.get("retry-after"),
        response.reason_phrase,
        attempts,
    )


def transport_error(e: httpx.HTTPError, url: str) -> OkaError:
    """The exception for a request that got no answer. Misuse (a URL httpx
    cannot send to) is not retried; anything else is a :class:`ConnectionFailed`."""
    if isinstance(e, (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL)):
        return OkaError(f"cannot send to {url}: {e}")
    kind = type(e).__name__
    detail = str(e) or kind
    return ConnectionFailed(f"no answer from {url} ({kind}: {detail})")


def rng() -> random.Random:
    return random.Random()


class Batcher:
    """Records in, ``/v1/ingest`` bodies out: at most ``batch_size`` records
    and (unless one record alone is larger) ``batch_bytes`` bytes each. Holds one
    batch at a time."""

    def __init__(self, feature: str, batch_size: int, batch_bytes: int) -> None:
        if batch_size < 1 or batch_bytes < 1:
            raise ValueError("batch_size and batch_bytes must be at least 1")
        self._head = b'{"feature":' + encode(feature) + b',"records":['
        self._size = batch_size
        self._bytes = batch_bytes
        self._parts: List[bytes] = []
        self._indices: List[int] = []
        self._held = len(self._head) + 2

    def add(self, index: int, record: Any) -> List[Tuple[bytes, List[int]]]:
        """Add the record at ``index`` of the input; returns the bodies that are
        full (each with the input index of its records). Raises ``TypeError`` or
        ``ValueError`` for a record JSON cannot carry."""
        if not isinstance(record, Mapping):
            raise TypeError(f"a record is an object (a mapping), not {type(record).__name__}")
        part = encode(record)
        out: List[Tuple[bytes, List[int]]] = []
        if self._parts and self._held + len(part) + 1 > self._bytes:
            out.append(self._take())
        self._parts.append(part)
        self._indices.append(index)
        self._held += len(part) + 1
        if len(self._parts) >= self._size:
            out.append(self._take())
        return out

    def flush(self) -> Optional[Tuple[bytes, List[int]]]:
        return self._take() if self._parts else None

    def _take(self) -> Tuple[bytes, List[int]]:
        body = self._head + b",".join(self._parts) + b"]}"
        indices = self._indices
        self._parts, self._indices = [], []
        self._held = len(self._head) + 2
        return body, indices


def describe_encode_error(e: Exception) -> str:
    text = str(e)
    if "Out of range float" in text:
        return "a float that is NaN or infinite (JSON has no form for it)"
    return f"cannot be encoded as JSON: {text}"
