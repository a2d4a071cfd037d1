"""The covering index kind (Hyperspace): indexed + included columns, hash-bucketed.

Rows are the secondary index's entries with the included columns as extra payload —
``(indexed…, included…, _file_id, _row, _version, _op)`` — so the LSM, lineage
filtering and row-level maintenance are shared. What differs is the layout: rows are
hash-bucketed on the leading indexed column (sorted by key inside each bucket), and a lookup
whose columns are all in the index is answered from the index alone.

Buckets are computed as :mod:`lakehouse_index.kinds.layout` says, identically by both
executors: in the spec's ``layout_version`` 2 by Spark's own bucketing function for every key
type (so Spark reads the files as a bucketed table: ``read/bucketed.py``), in layout 1 by crc32,
where lookups of keys other than strings and integers read every bucket (the bounds and
row-group statistics still prune).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.kinds.entries import sort_columns
from lakehouse_index.kinds.layout import Buckets, Layout, key_buckets
from lakehouse_index.kinds.secondary import SecondaryKind
from lakehouse_index.spec import CoveringIndex, IndexSpec


class CoveringKind(SecondaryKind):
    """The covering index plug-in: the secondary index's entries and maintenance, bucketed files."""

    name = "covering"
    spec_type = CoveringIndex

    def layout(self, spec: IndexSpec) -> Layout:
        """Hash buckets on the leading indexed column, sorted by key then row address inside."""
        assert isinstance(spec, CoveringIndex)
        return Layout(key=spec.key, sort=tuple(sort_columns(spec)), buckets=bucketing(spec))

    def buckets(
        self, spec: IndexSpec, keys: Sequence[tuple[Any, ...]], key_type: pa.DataType
    ) -> frozenset[int] | None:
        assert isinstance(spec, CoveringIndex)
        return key_buckets([k[0] for k in keys], key_type, bucketing(spec))


def bucketing(spec: CoveringIndex) -> Buckets:
    """The buckets of a covering index: on its leading indexed column, in its layout version."""
    return Buckets(spec.key[0], spec.num_buckets, spark=spec.layout_version >= 2)
