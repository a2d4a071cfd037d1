"""Rows of an Arrow table kept by a boolean mask, without copying when they form few runs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["FILTER_SLICE_ROWS", "filter_rows"]

#: Kept runs per row above which :func:`filter_rows` copies instead of slicing: slices of
#: fewer rows than this on average would make too many chunks.
FILTER_SLICE_ROWS = 10_000


def filter_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """``table.filter(keep)`` for a boolean numpy mask. When the kept rows form few runs (an
    optimize dropping a few erased rows' entries, a data file rewritten without a few rows)
    they are cut out as zero-copy slices instead of copying every column."""
    if keep.all():
        return table
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.astype(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    if not len(starts):
        return table.schema.empty_table()
    if len(starts) > 1 + len(keep) // FILTER_SLICE_ROWS:
        return table.filter(pa.array(keep))
    return pa.concat_tables([table.slice(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)])
