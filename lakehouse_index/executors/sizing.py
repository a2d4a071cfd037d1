"""The sizing policy: whether a piece of index work runs in this process or on Spark.

In process (pyarrow) is the fast path on one machine: a 2M-row secondary index builds in about
2 s here, where a local Spark takes 15 s (its job setup, the JVM, Arrow transfers to Python
workers, and no more cores than this process's threads use). So, unless told otherwise, work
runs in process while its entries fit in memory, and on Spark only when they do not, or when
a **cluster** is configured (a session or ``$LAKEHOUSE_INDEX_SPARK_MASTER`` whose master is not
``local``): a cluster has more cores and memory than the driver, and work above
``cluster_local_max_rows`` rows goes there.

Memory: the in-process build holds the entries of its files and a sorted copy, measured here at
64 bytes a row for a ``bigint`` key and 132 for a 20-character string key (peak RSS of
``create_index`` on 2M and 8M rows). :func:`entry_bytes` estimates it from the index schema (twice
the width of an entry, the row address included: 66 and 154 bytes), and the work fits when
that times its rows is at most ``local_memory_share`` of the memory this process may still take
(:func:`available_memory`: the cgroup's limit where there is one, else the system's
``MemAvailable``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_index.config import ExecutorConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Bytes assumed per value of a variable-width column (strings, binary, nested), offsets included.
VARIABLE_WIDTH_BYTES = 48
#: Bytes a row of work is assumed to take when its schema is not known: a 64-byte string key and
#: the row address (``_file_id``, ``_row``, ``_version``, ``_op``), twice.
DEFAULT_ROW_BYTES = 2 * (64 + 25)

_CGROUP_V2 = Path("/sys/fs/cgroup")
_CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def entry_bytes(schema: pa.Schema) -> int:
    """Memory an in-process build takes per row for entries of ``schema`` (its columns, the row
    address included; variable-width values counted as :data:`VARIABLE_WIDTH_BYTES`), held twice
    (the entries read and their sorted copy): 66 bytes for a ``bigint`` key, 154 for a string."""
    width = 0
    for field in schema:
        try:
            width += max(1, field.type.bit_width // 8)
        except ValueError:  # variable width
            width += VARIABLE_WIDTH_BYTES
    return 2 * width


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_headroom() -> int | None:
    """Bytes this process's cgroup may still take (v2, else v1), None without a limit."""
    limit = _read_int(_CGROUP_V2 / "memory.max")
    if limit is not None:
        used = _read_int(_CGROUP_V2 / "memory.current") or 0
        return max(0, limit - used)
    limit = _read_int(_CGROUP_V1 / "memory.limit_in_bytes")
    if limit is not None and limit < 1 << 60:  # v1 reports "no limit" as a huge number
        used = _read_int(_CGROUP_V1 / "memory.usage_in_bytes") or 0
        return max(0, limit - used)
    return None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory() -> int:
    """Bytes this process may still allocate: the smaller of the cgroup's headroom and the
    system's available memory (``/proc/meminfo``), else free physical pages (``sysconf``),
    else 2 GiB."""
    known = [m for m in (_cgroup_headroom(), _meminfo_available()) if m is not None]
    if known:
        return min(known)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2 << 30


def cluster_configured(spark: SparkSession | None = None) -> bool:
    """Whether Spark work would run on a cluster: ``spark``, else the active session (looked for
    only when pyspark is already imported: asking starts nothing), runs on a master that is not
    ``local``, or is a Spark Connect session; with no session, ``$LAKEHOUSE_INDEX_SPARK_MASTER``
    names such a master."""
    from lakehouse_index.spark import MASTER_ENV

    if spark is None and "pyspark.sql" in sys.modules:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is not None:
        context = getattr(spark, "_sc", None)
        if context is None:  # Spark Connect: the work runs on the server
            return True
        return not str(context.master).startswith("local")
    master = os.environ.get(MASTER_ENV, "")
    return bool(master) and not master.startswith("local")


def local_bound(config: ExecutorConfig, row_bytes: int, *, cluster: bool, compaction: bool = False) -> int:
    """The most rows (index entries when ``compaction``) that run in this process: the explicit
    ``local_max_rows`` / ``local_max_entries`` when set; else, with a cluster, its bounds
    (``cluster_local_max_rows`` / ``cluster_local_max_entries``); else what fits in
    ``local_memory_share`` of :func:`available_memory` at ``row_bytes`` a row."""
    explicit = config.local_max_entries if compaction else config.local_max_rows
    if explicit is not None:
        return explicit
    if cluster:
        return config.cluster_local_max_entries if compaction else config.cluster_local_max_rows
    return int(available_memory() * config.local_memory_share) // max(1, row_bytes)


def runs_locally(
    config: ExecutorConfig,
    rows: int,
    *,
    row_bytes: int = DEFAULT_ROW_BYTES,
    cluster: bool,
    compaction: bool = False,
) -> bool:
    """Whether work of ``rows`` rows of ``row_bytes`` each runs in this process (else Spark)."""
    return rows <= local_bound(config, row_bytes, cluster=cluster, compaction=compaction)
