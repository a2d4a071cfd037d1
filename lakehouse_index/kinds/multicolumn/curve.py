"""The multi-column index's sort key ``_cell``: weight tier, then a Z-order curve.

Per batch of entries written (a build, a refresh's delta, an optimize), each indexed
column's values are replaced by their rank (ties share the lowest, nulls last), scaled to
``CURVE_BITS // n`` bits (``n`` indexed columns), and the bits interleaved (Morton /
Z-order): rows close in every column get close cells. The cell puts the row's weight tier
(:func:`~lakehouse_index.kinds.multicolumn.weights.tiers`) above the curve, and above that
a flag for rows holding NaN (:data:`NAN_FLAG`). Sorted by
cell and cut into row groups, each row group spans a small box of every indexed column,
and its Parquet min/max statistics prune ranges on any subset of them.

Ranks are of the batch being written, not stored: the cell only places rows, the answers
come from the statistics of the values themselves, so a delta file laid out by its own
ranks answers exactly the same (an optimize lays the whole index out again).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.kinds.multicolumn.weights import tiers

#: The sort column of the entries (int64).
CELL = "_cell"
#: Bits of the curve below the tier (4 bits of tier above, then the NaN flag: the cell stays a
#: positive int64).
CURVE_BITS = 57
#: The cell bit of rows holding a NaN in a floating column of the index: they sort after the
#: others, and a row group whose greatest cell is below this bit holds no NaN (Parquet
#: statistics leave NaN out of min/max; without this a range on a float column could not
#: exclude a row group in which NaN might match, as it does in Spark).
NAN_FLAG = 1 << 61


def quantised_ranks(
    values: pa.ChunkedArray | pa.Array, bits: int, reference: pa.ChunkedArray | pa.Array | None = None
) -> np.ndarray:
    """Each value's rank among ``reference`` (default: ``values``) — how many are below it; nulls
    above every value — as a share of them scaled to ``bits`` bits."""
    n = len(values)
    below = _below(values, values)
    if reference is not None:
        # Below in values and reference together, less below in values alone.
        ref = reference.cast(values.type)
        chunks = [*_chunks(values), *_chunks(ref)]
        below = _below(pa.chunked_array(chunks, values.type), values) - below
        n = len(ref)
    if n == 0:
        return np.zeros(len(values), dtype=np.uint64)
    top = np.uint64((1 << bits) - 1)  # a value above every reference value: the last step
    return np.minimum(((below.astype(np.float64) / n) * float(1 << bits)).astype(np.uint64), top)


def _chunks(values: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


def _below(values: pa.ChunkedArray | pa.Array, first: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Per one of the first ``len(first)`` values, how many of ``values`` sort below it (nulls last)."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    ranks = pc.rank(values, sort_keys="ascending", tiebreaker="min")  # nulls last (the default)
    r = np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.int64) - 1
    return r[: len(first)]


def z_order(coordinates: Sequence[np.ndarray], bits: int) -> np.ndarray:
    """Interleave the low ``bits`` bits of each coordinate (the first column's bit lowest)."""
    n = len(coordinates)
    z = np.zeros(len(coordinates[0]), dtype=np.uint64)
    for bit in range(bits):
        for j, q in enumerate(coordinates):
            z |= ((q >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * n + j)
    return z


def nan_rows(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Per row, whether one of its floating ``columns`` holds NaN."""
    out = np.zeros(table.num_rows, dtype=bool)
    for c in columns:
        if pa.types.is_floating(table.schema.field(c).type):
            out |= np.asarray(pc.fill_null(pc.is_nan(table.column(c)), False).to_numpy(zero_copy_only=False))
    return out


def cells(
    table: pa.Table,
    indexed: Sequence[str],
    stored: Sequence[str],
    weights: np.ndarray,
    reference: pa.Table | None = None,
) -> pa.Array:
    """The ``_cell`` of every row of ``table``: the NaN flag (a NaN in one of the ``stored``
    columns), the weight's tier, then the Z-order of the ``indexed`` columns' ranks (among
    the rows of ``reference``, default ``table``)."""
    bits = CURVE_BITS // len(indexed)
    ranks = [
        quantised_ranks(table.column(c), bits, None if reference is None else reference.column(c))
        for c in indexed
    ]
    z = z_order(ranks, bits)
    cell = (tiers(weights).astype(np.uint64) << np.uint64(CURVE_BITS)) | z
    cell |= nan_rows(table, stored).astype(np.uint64) << np.uint64(61)
    return pa.array(cell.astype(np.int64), pa.int64())
