"""Rows grouped by their partition values, as writers lay out new data files."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.sink.contract import PartitionKey


def split(rows: pa.Table, columns: tuple[str, ...]) -> Iterator[tuple[PartitionKey, pa.Table]]:
    """``rows`` grouped by the values of ``columns`` (nulls form their own group), each group
    in its rows' original order: one stable sort of the combined partition codes, then slices."""
    if not columns:
        yield (), rows
        return
    if rows.num_rows == 0:
        return
    codes = np.zeros(rows.num_rows, dtype=np.int64)
    for c in columns:
        encoded = pc.dictionary_encode(rows[c], null_encoding="encode").combine_chunks()
        width = max(1, len(encoded.dictionary))
        codes = codes * width + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if len(columns) > 1:  # renumber densely (below the row count), so the next product cannot overflow
            codes = np.unique(codes, return_inverse=True)[1].astype(np.int64)
    order = np.argsort(codes, kind="stable")
    starts = np.flatnonzero(np.diff(codes[order], prepend=-1))
    if len(starts) == 1:
        yield tuple((c, rows[c][0].as_py()) for c in columns), rows
        return
    grouped = rows.take(pa.array(order))
    ends = [*starts[1:].tolist(), rows.num_rows]
    for start, end in zip(starts.tolist(), ends, strict=True):
        part = grouped.slice(start, end - start)
        yield tuple((c, part[c][0].as_py()) for c in columns), part
