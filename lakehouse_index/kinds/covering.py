"""The covering index kind (Hyperspace): indexed + included columns, hash-bucketed.

Rows are the secondary index's entries with the included columns as extra payload —
``(indexed…, included…, _file_id, _row, _version, _op)`` — so the LSM, lineage
filtering and row-level maintenance are shared. What differs is the layout: rows are
hash-bucketed on the leading indexed column (one directory ``bucket=<n>`` per bucket,
sorted by key inside), and a lookup whose columns are all in the index is answered from
the index alone.

The bucket of a value is ``crc32(utf8(string form)) mod num_buckets`` (null → 0),
computed identically by Spark (``crc32(cast(v as string))``) and by Python for strings
and integers; for other key types every bucket is read (the bounds and row-group
statistics still prune).
"""

from __future__ import annotations

import re
import zlib
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Column

BUCKET_DIR = re.compile(r"/bucket=(\d+)/")
BUCKET_COLUMN = "bucket"


def prunable(typ: pa.DataType) -> bool:
    """Whether Python computes the same bucket as Spark for values of ``typ``."""
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)


def bucket_of(value: Any, num_buckets: int) -> int:
    """The bucket of one leading-key value (strings and integers)."""
    if value is None:
        return 0
    return zlib.crc32(str(value).encode("utf-8")) % num_buckets


def bucket_column(leading: Column, num_buckets: int) -> Column:
    """The Spark expression of :func:`bucket_of`."""
    from pyspark.sql import functions as F

    crc = F.crc32(leading.cast("string").cast("binary"))
    return F.coalesce(F.pmod(crc, F.lit(num_buckets)), F.lit(0)).cast("int")


def bucket_from_path(path: str) -> int | None:
    """The bucket number encoded in an index file's path."""
    m = BUCKET_DIR.search(path)
    return int(m.group(1)) if m else None
