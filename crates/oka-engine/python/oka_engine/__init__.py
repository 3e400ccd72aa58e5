"""Oka's feature engine: a spec's on-demand features over Arrow tables.

``Engine(spec_yaml).compute(table, features=[...], args={...})`` takes rows that
hold each entity's keys, a time column (the request time, ``now``), optional
on-demand argument columns (``<feature>.<arg>`` or ``<arg>``) and the pipeline
features' latest records as ``<feature>__<field>`` columns (as ``oka
training-set`` writes them, or as the caller joined them), and returns the same
rows with each feature's ``<feature>__<field>`` columns and ``<feature>__status``,
computed by the planner and executor that serve requests. Tables cross into
Rust by the Arrow C data interface; the GIL is released while it computes.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import pyarrow as pa

from ._oka_engine import _Engine, __version__

__all__ = ["Engine", "__version__"]


def _as_table(data: Any) -> pa.Table:
    """A pyarrow Table from a Table, RecordBatch(es), pandas or polars frame."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_arrow"):  # polars
        return data.to_arrow()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, Iterable):
        batches = list(data)
        return pa.Table.from_batches(batches)
    raise TypeError(f"expected a pyarrow Table or RecordBatch, or a pandas or polars DataFrame; got {type(data).__name__}")


class Engine:
    """A spec loaded once; ``compute`` may be called any number of times."""

    def __init__(self, spec_yaml: str, origin: Optional[str] = None) -> None:
        """``origin``: the spec's path, when its Python UDFs' files are
        relative to it. Python UDFs run in this interpreter."""
        self._spec = spec_yaml
        self._origin = origin
        self._engine = _Engine(spec_yaml, origin)

    @classmethod
    def from_file(cls, path: str) -> "Engine":
        with open(path, encoding="utf-8") as f:
            return cls(f.read(), origin=path)

    def output_schema(self, schema: pa.Schema, features: Optional[Sequence[str]] = None,
                      time_column: str = "timestamp") -> pa.Schema:
        """The schema ``compute`` answers for input of ``schema``."""
        return self._engine.output_schema(schema, _features(features), time_column)

    def compute(self, data: Any, features: Optional[Sequence[str]] = None,
                args: Optional[Mapping[str, Mapping[str, Any]]] = None,
                time_column: str = "timestamp") -> pa.Table:
        """The rows of ``data`` with the features' columns appended.

        ``features``: names (default: every on-demand feature of the spec).
        ``args``: ``{feature: {arg: value}}`` for rows whose argument column is
        absent or null.
        """
        table = _as_table(data)
        feats, args_json = _features(features), json.dumps(args or {})
        schema = self._engine.output_schema(table.schema, feats, time_column)
        batches = [self._engine.compute_batch(b, feats, args_json, time_column)
                   for b in table.to_batches()]
        return pa.Table.from_batches(batches, schema=schema)

    def spark_map(self, features: Optional[Sequence[str]] = None,
                  args: Optional[Mapping[str, Mapping[str, Any]]] = None,
                  time_column: str = "timestamp") -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
        """A function for Spark's ``DataFrame.mapInArrow``: each partition's
        batches in, the same rows with the features' columns out. The engine is
        built once per partition from the spec text (it is not pickled)."""
        spec, origin, feats, args_json = self._spec, self._origin, _features(features), json.dumps(args or {})

        def compute_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            engine = _Engine(spec, origin)
            for batch in batches:
                yield engine.compute_batch(batch, feats, args_json, time_column)

        return compute_partition

    def spark_schema(self, schema: Any, features: Optional[Sequence[str]] = None,
                     time_column: str = "timestamp") -> Any:
        """The Spark schema (``StructType``) ``spark_map``'s batches have, for a
        DataFrame of Spark ``schema``: the second argument of ``mapInArrow``."""
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        arrow = self.output_schema(to_arrow_schema(schema, timezone="UTC"), features, time_column)
        return from_arrow_schema(arrow, prefer_timestamp_ntz=False)


def _features(features: Optional[Sequence[str]]) -> Optional[list]:
    if features is None:
        return None
    if isinstance(features, str):
        return [features]
    return list(features)
