"""Order-free comparison of query answers with an independent reader's rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.config import Config, ExecutorConfig

#: Index files of 7 rows in row groups of 3: a key's entries span row groups and index files
#: (the root index, the row-group bounds and the merge across files are used).
SMALL_FILES = Config(executor=ExecutorConfig(index_row_group_rows=3, rows_per_index_file=7))


def rows_multiset(table: pa.Table, columns: Sequence[str]) -> Counter[tuple[Any, ...]]:
    """The rows of ``table`` (only ``columns``) as a multiset of tuples."""
    return Counter(zip(*(table[c].to_pylist() for c in columns), strict=True))
