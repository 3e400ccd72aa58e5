"""A Python client for Oka, the on-demand feature server.

>>> import oka_client
>>> with oka_client.Client("http://127.0.0.1:1122") as oka:
...     r = oka.get_features(["simple_feature"], [{"id": "test-id-21"}])
...     r["simple_feature"][0].record
{'id': 'test-id-21', 'value': 21.0, 'timestamp': '…'}

:class:`Client` (sync) and :class:`AsyncClient` (asyncio) have the same
surface: ``get_features``, ``features`` and ``ingest``. Errors are
:class:`OkaError` subclasses carrying the server's ``code``, ``message`` and
HTTP ``status``.
"""

from ._async_client import AsyncClient
from ._client import Client
from ._errors import (
    BadRequest,
    ClientError,
    Conflict,
    ConnectionFailed,
    DeadlineExceeded,
    Forbidden,
    InternalError,
    NotFound,
    OkaError,
    Overloaded,
    PayloadTooLarge,
    ServerError,
    Timeout,
    Unauthenticated,
    Unavailable,
)
from ._models import (
    FeatureResponse,
    FeatureResult,
    FeatureValue,
    IngestSummary,
    Record,
    Rejection,
)
from ._retry import RetryPolicy
from ._version import __version__

__all__ = [
    "AsyncClient",
    "BadRequest",
    "Client",
    "ClientError",
    "Conflict",
    "ConnectionFailed",
    "DeadlineExceeded",
    "FeatureResponse",
    "FeatureResult",
    "FeatureValue",
    "Forbidden",
    "IngestSummary",
    "InternalError",
    "NotFound",
    "OkaError",
    "Overloaded",
    "PayloadTooLarge",
    "Record",
    "Rejection",
    "RetryPolicy",
    "ServerError",
    "Timeout",
    "Unauthenticated",
    "Unavailable",
    "__version__",
]
