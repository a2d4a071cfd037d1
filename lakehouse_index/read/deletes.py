"""Row-level deletes of one data file: deleted positions and equality-delete matches.

Positions come from :meth:`~lakehouse_index.source.TableSource.deleted_positions` (deletion
vectors, position deletes); rows are matched (null-safe) by the equality deletes attached to
the entry.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import TableFormatError
from lakehouse_index.read.footers import FileAccess
from lakehouse_index.source import FileEntry, Snapshot

__all__ = ["deleted_positions_array", "equality_delete_mask"]


def deleted_positions_array(source: FileAccess, entry: FileEntry) -> np.ndarray:
    """Positions deleted from ``entry`` by its deletion vector / position deletes (sorted int64)."""
    if entry.deletes is None:
        return np.zeros(0, dtype=np.int64)
    bitmap = source.deleted_positions(entry)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


def equality_delete_mask(
    source: FileAccess, snapshot: Snapshot, entry: FileEntry, rows: pa.Table
) -> np.ndarray | None:
    """Boolean mask of ``rows`` (holding the delete columns) deleted by the entry's equality deletes.

    None when the entry has no equality deletes. Matching is null-safe: a null in a
    delete row matches a null in the data row.
    """
    if not entry.equality_deletes:
        return None
    deleted = np.zeros(rows.num_rows, dtype=bool)
    for eq in entry.equality_deletes:
        cols = [snapshot.column(c) for c in eq.columns]
        dels = source.equality_delete_rows(eq, cols)
        if dels.num_rows == 0 or rows.num_rows == 0:
            continue
        deleted |= _null_safe_match(rows, dels, list(eq.columns), entry.path)
    return deleted


def _null_safe_match(rows: pa.Table, dels: pa.Table, columns: list[str], path: str) -> np.ndarray:
    # Encode each key column over data and delete values with nulls as their own code,
    # then anti-join on the integer codes: null-safe equality for any Arrow type.
    n = rows.num_rows
    left: dict[str, pa.Array] = {"_i": pa.array(np.arange(n, dtype=np.int64))}
    right: dict[str, pa.Array] = {}
    for i, c in enumerate(columns):
        if c not in dels.column_names:
            raise TableFormatError(f"equality delete rows for {path} lack column {c!r}")
        data = rows.column(c)
        other = dels.column(c).cast(data.type)
        both = pa.chunked_array(data.chunks + other.chunks, type=data.type)
        codes = pc.dictionary_encode(both, null_encoding="encode").combine_chunks().indices
        key = f"k{i}"
        left[key] = codes.slice(0, n)
        right[key] = codes.slice(n)
    keys = [f"k{i}" for i in range(len(columns))]
    matched = pa.table(left).join(pa.table(right).group_by(keys).aggregate([]), keys, join_type="left semi")
    mask = np.zeros(n, dtype=bool)
    mask[matched.column("_i").to_numpy()] = True
    return mask
