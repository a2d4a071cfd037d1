"""Sampling weights: each row's uniform number in [0, 1), a hash of its identity.

A sample of fraction ``f`` is the rows whose weight is below ``f``: each row is in with
probability ``f``, independently of its values (the hash mixes them beyond recognition),
the same rows for the same call (deterministic), and a smaller fraction's sample is a
subset of a larger one's (nested).

**Identity.** The weight is XXH64 over the canonical encodings
(:func:`~lakehouse_index.kinds.skipping.hashing.hash_values`: integers as int64, floats as
float64, strings as UTF-8...) of the row's values of every column the index stores —
indexed, included and record key, in the spec's order — chained column by column
(:func:`~lakehouse_index.kinds.skipping.hashing.hash_pair`; a null is a fixed hash). Not
the row address: a rewrite (compaction, copy-on-write delete or update of other rows)
moves rows, and their weights must not change. Consequences: a row keeps its weight at
every version while those values stay the same, whichever file holds it and whichever
executor or reader (the plain scan's fallback computes the same); rows equal in all those
columns share a weight (they are in or out of a sample together: declare a
``record_key`` that tells them apart when that matters); an update of one of those
columns draws the row a new weight. Type widening (int → long, float → double) keeps
weights.

**Tiers.** A row's tier is ``floor(-log4(weight))`` capped at :data:`TIERS` - 1: tier ``k``
holds weights in ``[4**-(k+1), 4**-k)`` (tier 0: three quarters of the rows). The index
sorts by tier first (:mod:`.curve`), so a sample of ``f`` reads only the row groups of the
tiers that can hold weights below ``f``: at most ``4 f`` of the index (1.6% for ``f`` =
0.01). Base 4 rather than 2 keeps three quarters of the rows in one tier, laid out by the
curve as one: a range query reads about as little as without tiers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import QueryError
from lakehouse_index.kinds.skipping.hashing import hash_pair, hash_values

#: The weight column of the index entries (float64 in [0, 1)).
WEIGHT = "_weight"
#: Weight tiers (the last holds every weight below ``2**-(TIERS-1)``).
TIERS = 16
_NULL = np.uint64(0x6A09E667F3BCC909)
_SEED = np.uint64(0x243F6A8885A308D3)


def row_hashes(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Per row, the chained XXH64 of its values of ``columns`` (uint64)."""
    h = np.full(table.num_rows, _SEED, dtype=np.uint64)
    for name in columns:
        col = table.column(name).combine_chunks()
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        values = np.full(table.num_rows, _NULL, dtype=np.uint64)
        if valid.any():
            values[valid] = hash_values(col.filter(pa.array(valid)) if not valid.all() else col)
        h = hash_pair(h, values)
    return h


def weights(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Per row, its weight in [0, 1) (float64): the top 53 bits of :func:`row_hashes`."""
    return (row_hashes(table, columns) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def weight_array(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """:func:`weights` as a pyarrow float64 array."""
    return pa.array(weights(table, columns), pa.float64())


def tiers(w: np.ndarray) -> np.ndarray:
    """Per weight, its tier (int64): ``floor(-log4(w))`` capped at ``TIERS - 1``."""
    with np.errstate(divide="ignore"):
        t = np.floor(-np.log2(w) / 2)
    return np.minimum(np.nan_to_num(t, posinf=TIERS - 1), TIERS - 1).astype(np.int64)


def check_fraction(fraction: float) -> float:
    """``fraction`` as a float in (0, 1] (QueryError otherwise: a sample of nothing is no sample)."""
    try:
        f = math.nan if isinstance(fraction, (bool, str)) else float(fraction)
    except (TypeError, ValueError):
        f = math.nan
    if not 0.0 < f <= 1.0:
        raise QueryError(f"a sample fraction must be a number in (0, 1], got {fraction!r}")
    return f


def in_sample(table: pa.Table, columns: Sequence[str], fraction: float) -> pa.Array:
    """Per row of ``table``, whether it is in the sample of ``fraction`` (its weight is below it)."""
    return pc.less(weight_array(table, columns), pa.scalar(fraction, pa.float64()))
