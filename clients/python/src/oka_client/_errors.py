"""Exceptions: one per kind of answer, each carrying the server's error code.

Every error Oka answers is ``{"error": {"code": ..., "message": ...}}`` with a
fitting HTTP status (docs/api.md, "Errors"). :func:`error_from_response` turns
such an answer, or any other non-2xx answer (a plain-text or empty body), into
an :class:`OkaError` subclass chosen by status and code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from ._models import IngestSummary

__all__ = [
    "OkaError",
    "ClientError",
    "BadRequest",
    "Unauthenticated",
    "Forbidden",
    "NotFound",
    "Conflict",
    "PayloadTooLarge",
    "ServerError",
    "InternalError",
    "Unavailable",
    "Overloaded",
    "Timeout",
    "DeadlineExceeded",
    "ConnectionFailed",
    "error_from_response",
]


class OkaError(Exception):
    """An answer from Oka that is not a success, or no answer at all.

    ``code`` is the server's error code (``"invalid_key"``, ``"overloaded"``, ...)
    or ``None`` when the body carried none (a plain-text or empty body, or no
    answer). ``status`` is the HTTP status, ``None`` when no answer came.
    ``retry_after`` is the ``Retry-After`` header in seconds, when there was one.
    ``attempts`` counts the HTTP attempts made before giving up. On an error
    from ``ingest``, ``ingest_summary`` tells what the batches before the failed
    one wrote.
    """

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = None,
        status: Optional[int] = None,
        retry_after: Optional[float] = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.retry_after = retry_after
        self.attempts = attempts
        self.ingest_summary: Optional["IngestSummary"] = None

    def __str__(self) -> str:
        head = []
        if self.status is not None:
            head.append(str(self.status))
        if self.code is not None:
            head.append(self.code)
        prefix = " ".join(head)
        return f"{prefix}: {self.message}" if prefix else self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, "
            f"message={self.message!r})"
        )


class ClientError(OkaError):
    """A 4xx: the request must change (or the credentials). Never retried."""


class BadRequest(ClientError):
    """400: malformed body, unknown field, invalid key, bad UDF or query argument."""


class Unauthenticated(ClientError):
    """401: an API key is needed, or the one sent is not configured."""


class Forbidden(ClientError):
    """403: the API key lacks the route's scope (``read`` or ``write``)."""


class NotFound(ClientError):
    """404: an unknown feature (``unknown_feature``) or route (``not_found``)."""


class Conflict(ClientError):
    """409: the store cannot answer this (``unsupported_by_store``)."""


class PayloadTooLarge(ClientError):
    """413: the body exceeds the server's ``--max-body-bytes``."""


class ServerError(OkaError):
    """A 5xx."""


class InternalError(ServerError):
    """500: something unexpected on the server. Not retried."""


class Unavailable(ServerError):
    """503: the store cannot be reached, or the server sheds load or shuts down.

    Retried after ``Retry-After``; raised once the retries are spent.
    """


class Overloaded(Unavailable):
    """503 ``overloaded``: the server refused the request to shed load."""


class Timeout(ServerError):
    """504: the store did not answer in time (``store_timeout``, retried) or
    the request's deadline passed (``deadline_exceeded``, not retried)."""


class DeadlineExceeded(Timeout):
    """504 ``deadline_exceeded``: the request's ``deadline_ms`` passed."""


class ConnectionFailed(OkaError):
    """No answer: the connection failed or the HTTP timeout passed.

    The underlying ``httpx`` exception is the ``__cause__``.
    """


_BY_STATUS: Dict[int, Type[OkaError]] = {
    400: BadRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    500: InternalError,
    503: Unavailable,
    504: Timeout,
}

_BY_CODE: Dict[str, Type[OkaError]] = {
    "overloaded": Overloaded,
    "deadline_exceeded": DeadlineExceeded,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """``Retry-After`` in seconds: delta-seconds, or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    import datetime as _dt

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


def error_from_response(
    status: int,
    body: bytes,
    retry_after: Optional[str] = None,
    reason: str = "",
    attempts: int = 1,
) -> OkaError:
    """The exception for a non-2xx answer.

    A JSON error body gives ``code`` and ``message``. Any other body (Volga's
    routes answer ``code: message`` as plain text; the HTTP layer may answer
    with an empty body) becomes the message as it is, so it stays readable.
    """
    code: Optional[str] = None
    message: Optional[str] = None
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        err = parsed["error"]
        if isinstance(err.get("code"), str):
            code = err["code"]
        if isinstance(err.get("message"), str):
            message = err["message"]
    if message is None:
        text = body.decode("utf-8", errors="replace").strip()
        if len(text) > 500:
            text = text[:500] + "…"
        message = text or reason or f"HTTP {status}"
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status)
    if cls is None:
        cls = ClientError if 400 <= status < 500 else ServerError if status >= 500 else OkaError
    return cls(
        message,
        code=code,
        status=status,
        retry_after=parse_retry_after(retry_after),
        attempts=attempts,
    )
