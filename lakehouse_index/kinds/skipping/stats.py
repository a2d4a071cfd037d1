"""Building skipping rows: one row of per-column statistics per data file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.io.parallel import each_file
from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.kinds.skipping.bloom import bloom_build
from lakehouse_index.kinds.skipping.hashing import hash_values
from lakehouse_index.kinds.skipping.schema import (
    FILE_ID,
    column_identity,
    column_type,
    identity_metadata,
    rows_schema,
    validate_spec,
)
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import SkippingIndex


def _column_stats(arr: pa.Array, t: pa.DataType, spec: SkippingIndex) -> pa.StructArray:
    """The one-element struct summarising ``arr`` (one file's values of one column)."""
    if not arr.type.equals(t):
        arr = arr.cast(t)
    nulls = arr.null_count
    present = arr.drop_null() if nulls else arr
    nans = 0
    if pa.types.is_floating(t) and len(present):
        nans = int(pc.sum(pc.is_nan(present)).as_py() or 0)
    if len(present) > nans:
        mm = pc.min_max(present)
        lo, hi = pa.array([mm["min"]], type=t), pa.array([mm["max"]], type=t)
    else:  # only nulls / NaNs: no ordered value to bound
        lo = hi = pa.nulls(1, type=t)
    distinct = pc.unique(present)
    if len(distinct) <= spec.max_values:
        distinct = distinct.take(pc.sort_indices(distinct))
        values = pa.ListArray.from_arrays(pa.array([0, len(distinct)], pa.int32()), distinct)
        bloom = pa.nulls(1, type=pa.binary())
    else:
        values = pa.nulls(1, type=pa.list_(t))
        bloom = pa.array([bloom_build(hash_values(distinct), spec.bloom_fpp)], type=pa.binary())
    return pa.StructArray.from_arrays(
        [lo, hi, pa.array([nulls], pa.int64()), pa.array([nans], pa.int64()), values, bloom],
        fields=list(column_type(t)),
    )


def stats_row(
    data: pa.Table, file_id: int, spec: SkippingIndex, types: Mapping[str, pa.DataType]
) -> pa.Table:
    """The skipping row of one data file whose (indexed) columns are ``data``.

    ``types`` maps each indexed column to the type to record (the snapshot's).
    """
    schema = rows_schema({c: types[c] for c in spec.columns})
    arrays: list[pa.Array] = [pa.array([file_id], pa.int64()), pa.array([data.num_rows], pa.int64())]
    for c in spec.columns:
        arrays.append(_column_stats(data.column(c).combine_chunks(), types[c], spec))
    return pa.Table.from_arrays(arrays, schema=schema)


def build_rows(
    source: TableSource,
    snapshot: Snapshot,
    spec: SkippingIndex,
    jobs: Sequence[tuple[FileEntry, int]],
) -> pa.Table:
    """Skipping rows (sorted by ``_file_id``) for ``jobs``: pairs of (data file, its file id).

    Reads only the indexed columns of each file, in the snapshot's logical schema, in a
    few threads (:func:`~lakehouse_index.io.parallel.each_file`). Row-level deletes are not
    applied: statistics over a superset of the live rows stay valid whatever is deleted.
    """
    validate_spec(spec, snapshot)
    stored = indexed_columns(spec, snapshot)
    types = {c: stored.schema.field(c).type for c in spec.columns}
    schema = rows_schema(types)
    identity = identity_metadata(column_identity(snapshot, stored))
    if not jobs:
        return schema.with_metadata(identity).empty_table()

    def one(job: tuple[FileEntry, int]) -> pa.Table:
        entry, file_id = job
        data = stored.read_file(source, snapshot, entry, spec.columns, apply_deletes=False)
        return stats_row(data, file_id, spec, types)

    rows = pa.concat_tables(each_file(one, jobs)).sort_by(FILE_ID).combine_chunks()
    return rows.replace_schema_metadata(identity)
