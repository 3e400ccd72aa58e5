"""Sans-IO: what is retried, and how long to wait before the next attempt.

Retried: ``503`` (any code: ``overloaded``, ``store_unavailable``; the
wait is at least its ``Retry-After``), ``504
store_timeout``, and connection failures and HTTP timeouts (no answer).
Never retried: any ``4xx``, ``500``, and ``504 deadline_exceeded`` (the same
deadline would pass again; the caller decides whether a larger one is worth it).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

from ._errors import ConnectionFailed, OkaError


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` retries at most (so ``max_retries + 1`` attempts);
    exponential backoff from ``backoff`` seconds, doubled per retry up to
    ``max_backoff``, each wait drawn uniformly from its upper half (jitter);
    a ``Retry-After`` is waited at least, plus up to 10 % jitter. No retry
    starts, or is waited for, past ``retry_deadline`` seconds after the call
    began: then the last error is raised."""

    max_retries: int = 3
    backoff: float = 0.05
    max_backoff: float = 2.0
    retry_deadline: float = 10.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.backoff < 0 or self.max_backoff < 0 or self.retry_deadline < 0:
            raise ValueError("backoff, max_backoff and retry_deadline must be >= 0")

    def delay(self, retry: int, retry_after: Optional[float], rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        cap = min(self.max_backoff, self.backoff * (2 ** (retry - 1)))
        wait = rng.uniform(cap / 2, cap) if cap > 0 else 0.0
        if retry_after is not None:
            wait = max(wait, retry_after) + rng.uniform(0, retry_after * 0.1)
        return wait

    def next_wait(
        self,
        error: OkaError,
        retries_done: int,
        elapsed: float,
        rng: random.Random,
    ) -> Optional[float]:
        """The wait before retrying after ``error``, or ``None`` to give up."""
        if not retryable(error) or retries_done >= self.max_retries:
            return None
        wait = self.delay(retries_done + 1, error.retry_after, rng)
        if elapsed + wait > self.retry_deadline:
            return None
        return wait


def retryable(error: OkaError) -> bool:
    """Whether the request may be sent again unchanged."""
    if isinstance(error, ConnectionFailed):
        return True
    if error.status == 503:
        return True
    return error.status == 504 and error.code == "store_timeout"
