"""Order-free comparison of query answers with an independent reader's rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa


def rows_multiset(table: pa.Table, columns: Sequence[str]) -> Counter[tuple[Any, ...]]:
    """The rows of ``table`` (only ``columns``) as a multiset of tuples."""
    return Counter(zip(*(table[c].to_pylist() for c in columns), strict=True))
