"""DataFrame conversion. pandas and polars are optional and imported only here,
when a conversion is asked for."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Dict, List, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ._models import FeatureValue


def rows(
    name: str,
    values: Sequence["FeatureValue"],
    *,
    records: str = "last",
    with_feature: bool,
) -> List[Dict[str, Any]]:
    """One dict per key (``records="last"``) or per record (``records="all"``).

    Columns, in order: ``feature`` (when ``with_feature``), ``key_index``,
    (``record_index`` with ``"all"``), ``status``, the key object's fields, the
    record's fields not already given.
    """
    if records not in ("last", "all"):
        raise ValueError(f"records must be 'last' or 'all', not {records!r}")
    out: List[Dict[str, Any]] = []
    for i, value in enumerate(values):
        head: Dict[str, Any] = {}
        if with_feature:
            head["feature"] = name
        head["key_index"] = i
        if records == "last":
            chosen = [value.record]
        else:
            chosen = list(value.records) if value.records else [None]
        for j, record in enumerate(chosen):
            row = dict(head)
            if records == "all":
                row["record_index"] = j if record is not None else None
            row["status"] = value.status
            row.update(value.key)
            if record is not None:
                for column, cell in record.items():
                    if column not in row or row[column] is None:
                        row[column] = cell
            out.append(row)
    return out


def _columns(table: List[Dict[str, Any]]) -> List[str]:
    seen: Dict[str, None] = {}
    for row in table:
        for column in row:
            seen.setdefault(column, None)
    return list(seen)


def to_pandas(table: List[Dict[str, Any]]) -> Any:
    try:
        pandas = importlib.import_module("pandas")
    except ImportError as e:  # pragma: no cover - exercised only without pandas
        raise ImportError(
            "to_pandas() needs pandas: pip install 'oka-client[pandas]'"
        ) from e
    return pandas.DataFrame.from_records(table, columns=_columns(table))


def to_polars(table: List[Dict[str, Any]]) -> Any:
    try:
        polars = importlib.import_module("polars")
    except ImportError as e:  # pragma: no cover - exercised only without polars
        raise ImportError(
            "to_polars() needs polars: pip install 'oka-client[polars]'"
        ) from e
    columns = _columns(table)
    full = [{c: row.get(c) for c in columns} for row in table]
    return polars.from_dicts(full, infer_schema_length=None) if full else polars.DataFrame(
        {c: [] for c in columns}
    )
