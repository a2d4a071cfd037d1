"""The covering index kind (Hyperspace): indexed + included columns, hash-bucketed.

Rows are the secondary index's entries with the included columns as extra payload —
``(indexed…, included…, _file_id, _row, _version, _op)`` — so the LSM, lineage
filtering and row-level maintenance are shared. What differs is the layout: rows are
hash-bucketed on the leading indexed column (one directory ``bucket=<n>`` per bucket,
sorted by key inside), and a lookup whose columns are all in the index is answered from
the index alone.

Buckets are computed as :mod:`lakehouse_index.kinds.layout` says, identically by both
executors for string and integer keys; for other key types every bucket is read (the
bounds and row-group statistics still prune).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.kinds.entries import sort_columns
from lakehouse_index.kinds.layout import Buckets, Layout, bucket_of, prunable
from lakehouse_index.kinds.secondary import SecondaryKind
from lakehouse_index.spec import CoveringIndex, IndexSpec


class CoveringKind(SecondaryKind):
    """The covering index plug-in: the secondary index's entries and maintenance, bucketed files."""

    name = "covering"
    spec_type = CoveringIndex

    def layout(self, spec: IndexSpec) -> Layout:
        """Hash buckets on the leading indexed column, sorted by key then row address inside."""
        assert isinstance(spec, CoveringIndex)
        return Layout(
            key=spec.key, sort=tuple(sort_columns(spec)), buckets=Buckets(spec.key[0], spec.num_buckets)
        )

    def buckets(
        self, spec: IndexSpec, keys: Sequence[tuple[Any, ...]], key_type: pa.DataType
    ) -> frozenset[int] | None:
        assert isinstance(spec, CoveringIndex)
        if not prunable(key_type):
            return None
        return frozenset(bucket_of(k[0], spec.num_buckets) for k in keys)
