"""The typed answers: feature values per target and key, and ingest summaries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Iterator, List, Optional, Sequence

from . import _frames

__all__ = ["Record", "FeatureValue", "FeatureResult", "FeatureResponse", "Rejection", "IngestSummary"]

Record = Dict[str, Any]
"""One record: an object of the entity's columns, as the server wrote it
(timestamps stay RFC 3339 strings)."""


@dataclass(frozen=True)
class FeatureValue:
    """One target's answer for one key.

    ``records`` is the server's value as it was: a list of records (one for a
    ``latest`` read or a CEL UDF, oldest first for ``range``/``last_n``, possibly
    empty), or ``None`` when the key has none (``status`` ``missing``, ``error``
    or ``invalid_key``). ``status`` is the server's per-key status, ``None``
    only if the server sent no ``statuses``.
    """

    key: Dict[str, Any]
    status: Optional[str]
    records: Optional[List[Record]]

    @property
    def present(self) -> bool:
        """The server computed or read a value for this key."""
        if self.status is not None:
            return self.status == "present"
        return self.records is not None

    @property
    def record(self) -> Optional[Record]:
        """The newest record (the last of ``records``), or ``None`` if there is none."""
        if not self.records:
            return None
        return self.records[-1]


@dataclass(frozen=True)
class FeatureResult:
    """One target's answers, one :class:`FeatureValue` per key, in key order."""

    name: str
    values: List[FeatureValue]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[FeatureValue]:
        return iter(self.values)

    def __getitem__(self, index: int) -> FeatureValue:
        return self.values[index]

    @property
    def statuses(self) -> List[Optional[str]]:
        return [v.status for v in self.values]

    @property
    def records(self) -> List[Optional[Record]]:
        """The newest record of each key (``None`` where there is none)."""
        return [v.record for v in self.values]

    def rows(self, records: str = "last") -> List[Dict[str, Any]]:
        """Flat rows, the ones :meth:`to_pandas` builds; see it."""
        return _frames.rows(self.name, self.values, records=records, with_feature=False)

    def to_pandas(self, records: str = "last") -> Any:
        """A ``pandas.DataFrame``, one row per key, in key order.

        Columns: ``key_index``, ``status``, the key object's fields, then the
        record's fields (``None``/NaN where the key has no record). With
        ``records="last"`` (the default) the row holds the newest record; with
        ``records="all"`` there is one row per record (``record_index`` added),
        and one row of nulls for a key with none. Needs ``pandas``
        (``pip install 'oka-client[pandas]'``).
        """
        return _frames.to_pandas(self.rows(records))

    def to_polars(self, records: str = "last") -> Any:
        """A ``polars.DataFrame`` with the columns of :meth:`to_pandas`. Needs
        ``polars`` (``pip install 'oka-client[polars]'``)."""
        return _frames.to_polars(self.rows(records))


@dataclass(frozen=True)
class FeatureResponse:
    """The answer to :meth:`Client.get_features`: one :class:`FeatureResult`
    per distinct target, in request order (``response["simple_feature"]``).

    ``server_ids`` lists the ``server_id`` of each HTTP answer, one per batch
    the request was split into.
    """

    results: Dict[str, FeatureResult]
    server_ids: List[str] = field(default_factory=list)

    @property
    def targets(self) -> List[str]:
        return list(self.results)

    def __getitem__(self, target: str) -> FeatureResult:
        return self.results[target]

    def __iter__(self) -> Iterator[FeatureResult]:
        return iter(self.results.values())

    def __len__(self) -> int:
        return len(self.results)

    def rows(self, records: str = "last") -> List[Dict[str, Any]]:
        """Flat rows, the ones :meth:`to_pandas` builds; see it."""
        out: List[Dict[str, Any]] = []
        for result in self.results.values():
            out.extend(_frames.rows(result.name, result.values, records=records, with_feature=True))
        return out

    def to_pandas(self, records: str = "last") -> Any:
        """A long ``pandas.DataFrame``: one row per target and key (targets in
        request order, keys in key order), with a ``feature`` column first and
        then the columns of :meth:`FeatureResult.to_pandas`. Targets of
        different entities share the frame; a column a target does not have is
        null in its rows. For one target's frame use ``response[name].to_pandas()``.
        """
        return _frames.to_pandas(self.rows(records))

    def to_polars(self, records: str = "last") -> Any:
        """The frame of :meth:`to_pandas` as a ``polars.DataFrame``."""
        return _frames.to_polars(self.rows(records))


@dataclass(frozen=True)
class Rejection:
    """A record the server did not write: its 0-based position in the
    iterable given to :meth:`Client.ingest`, and the server's reason."""

    index: int
    message: str


@dataclass
class IngestSummary:
    """What :meth:`Client.ingest` did.

    ``written`` and ``rejected`` count records. ``errors`` holds the reasons
    the server gave: it details the first 100 rejections of each batch, so
    ``len(errors)`` may be less than ``rejected`` (``errors_truncated`` then);
    the client keeps at most 10,000 reasons.
    """

    written: int = 0
    rejected: int = 0
    errors: List[Rejection] = field(default_factory=list)
    batches: int = 0
    errors_truncated: bool = False

    MAX_ERRORS: ClassVar[int] = 10_000

    def add_batch(self, indices: Sequence[int], answer: Any) -> None:
        """Fold one ``/v1/ingest`` answer in; ``indices[i]`` is the position in
        the whole input of the batch's record ``i``."""
        if not isinstance(answer, dict):
            answer = {}
        self.batches += 1
        rejected = int(answer.get("rejected", 0))
        self.written += int(answer.get("written", 0))
        self.rejected += rejected
        errors: Sequence[Any] = answer.get("errors") or []
        if len(errors) < rejected:
            self.errors_truncated = True
        for err in errors:
            if not isinstance(err, dict):
                continue
            i = int(err.get("index", 0))
            self._reason(indices[i] if 0 <= i < len(indices) else i, str(err.get("message", "")))

    def add_local(self, index: int, message: str) -> None:
        """A record the client could not encode as JSON (a NaN, an object JSON
        has no form for): rejected without being sent."""
        self.rejected += 1
        self._reason(index, message)

    def _reason(self, index: int, message: str) -> None:
        if len(self.errors) >= self.MAX_ERRORS:
            self.errors_truncated = True
            return
        self.errors.append(Rejection(index, message))
