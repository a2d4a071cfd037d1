"""Delta ``stats`` of data files the project commits: record count, null counts, bounds.

Columns as the file names them (physical names under column mapping), the columns the
table asks statistics for (``delta.dataSkippingStatsColumns``, else the leading
``delta.dataSkippingNumIndexedCols``); minima and maxima only for integer, date and string
columns, string minima cut to a prefix and cut maxima left out, so every bound is exact or
safe.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: Leading columns with statistics unless the table says otherwise (the protocol's default).
DEFAULT_STATS_COLUMNS = 32
#: Longest string prefix kept as a minimum; longer maxima are left out.
STRING_PREFIX = 32


def _stat_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return None
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, str):
        return v[:STRING_PREFIX]
    return v


def _stats_columns(names: Sequence[str], config: Mapping[str, str]) -> list[str]:
    """The columns of ``names`` that get statistics: ``delta.dataSkippingStatsColumns``, else the
    leading ``delta.dataSkippingNumIndexedCols`` (32 unless set; -1: all)."""
    listed = config.get("delta.dataSkippingStatsColumns")
    if listed:
        chosen = [c.strip().strip("`") for c in listed.split(",") if c.strip()]
        return [c for c in chosen if c in names]
    n = int(config.get("delta.dataSkippingNumIndexedCols", DEFAULT_STATS_COLUMNS))
    return list(names) if n < 0 else list(names[:n])


def _bounded(t: pa.DataType) -> bool:
    """Whether minima and maxima are kept for a column of type ``t`` (integers, dates, strings)."""
    return (
        pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
    )


def _stats_json(
    num_records: int, mins: dict[str, Any], maxs: dict[str, Any], nulls: dict[str, int], *, tight: bool
) -> str:
    """The ``stats`` JSON; string minima cut to a prefix, cut maxima left out, so every bound is safe."""
    mins = {k: _stat_value(v) for k, v in mins.items()}
    maxs = {k: _stat_value(v) for k, v in maxs.items() if not (isinstance(v, str) and len(v) > STRING_PREFIX)}
    stats = {"numRecords": num_records, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    return json.dumps({**stats, "tightBounds": tight}, separators=(",", ":"))


def file_stats(rows: pa.Table, config: Mapping[str, str]) -> str:
    """Delta ``stats`` JSON of a new file: record count, null counts, min/max of simple columns.

    Columns as the file names them (physical names under column mapping). Minima and
    maxima only for integer, date and string columns among the leading
    ``delta.dataSkippingNumIndexedCols`` (or ``delta.dataSkippingStatsColumns``).
    """
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in _stats_columns(rows.schema.names, config):
        col = rows.column(name)
        if pa.types.is_nested(col.type):
            continue
        nulls[name] = col.null_count
        if _bounded(col.type) and col.null_count < len(col):
            mm = pc.min_max(col)
            mins[name], maxs[name] = mm["min"].as_py(), mm["max"].as_py()
    return _stats_json(rows.num_rows, mins, maxs, nulls, tight=True)


def footer_stats(meta: pq.FileMetaData, config: Mapping[str, str]) -> str:
    """Delta ``stats`` JSON of a file that gets a deletion vector, from its Parquet footer: the
    physical rows' count, null counts and bounds (the columns and types of :func:`file_stats`),
    ``tightBounds: false`` (the bounds cover rows the DV marks). A column some row group has no
    statistics for gets none."""
    schema = meta.schema.to_arrow_schema()
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    paths = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    for name in _stats_columns(schema.names, config):
        t = schema.field(name).type
        if pa.types.is_nested(t) or name not in paths:
            continue
        groups = [meta.row_group(r).column(paths[name]).statistics for r in range(meta.num_row_groups)]
        if any(g is None or not g.has_null_count for g in groups):
            continue
        nulls[name] = sum(g.null_count for g in groups)
        valued = [g for g in groups if g.num_values > 0]
        if _bounded(t) and valued and all(g.has_min_max for g in valued):
            mins[name], maxs[name] = min(g.min for g in valued), max(g.max for g in valued)
    return _stats_json(meta.num_rows, mins, maxs, nulls, tight=False)
