"""Every tuning knob of lakehouse-index, with its default, in one frozen :class:`Config`.

A :class:`~lakehouse_index.api.Table` carries one (``open_table(..., config=Config(...))``)
and hands the relevant section to each layer: the executors get :class:`ExecutorConfig`,
the planner :class:`PlannerConfig`, the readers :class:`ReadConfig`, the index log
:class:`LogConfig`. Caches are shared by every table of a process, so their sizes
(:class:`CacheConfig`) are set process-wide with :func:`configure_caches`.

Every option is documented in ``docs/CONFIG.md`` (a test keeps the two in step).

Example::

    import lakehouse_index as li

    cfg = li.Config(executor=li.ExecutorConfig(local_max_rows=5_000_000))
    t = li.open_table("/data/events", config=cfg)
    t2 = li.open_table("/data/events", config=cfg.replace(planner={"force_index": True}))
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import cachetools


class SizedFile(Protocol):
    """A data file as the sizing policy sees it (``FileEntry`` or ``SourceFile``)."""

    @property
    def size(self) -> int: ...
    @property
    def num_records(self) -> int | None: ...
    @property
    def deleted_count(self) -> int: ...


@dataclass(frozen=True)
class ExecutorConfig:
    """Where index data is computed, and the layout of the files written."""

    #: Builds and refreshes whose rows (net of deleted rows) number at most this run in this
    #: process with pyarrow; larger ones on Spark. None (the default): sized by the machine
    #: (``executors.sizing``): in process while the entries fit in ``local_memory_share`` of
    #: the memory available, with a cluster configured up to ``cluster_local_max_rows``.
    local_max_rows: int | None = None
    #: Optimizes (compactions of index entries: no data file is decoded) of at most this many
    #: entries run in this process; larger ones on Spark. None: sized like ``local_max_rows``.
    local_max_entries: int | None = None
    #: Share of the memory available to this process (cgroup limit, else ``MemAvailable``) that
    #: in-process work may take when no explicit bound is set.
    local_memory_share: float = 0.5
    #: With a cluster configured (a Spark session or ``$LAKEHOUSE_INDEX_SPARK_MASTER`` whose
    #: master is not ``local``), builds and refreshes of more rows than this go to it.
    cluster_local_max_rows: int = 1_000_000
    #: With a cluster configured, optimizes of more index entries than this go to it (an entry
    #: is a key and a row address, far cheaper to merge than a data row is to extract).
    cluster_local_max_entries: int = 10_000_000
    #: Rows assumed per byte of a data file whose row count the table's log does not record.
    bytes_per_row_estimate: int = 64
    #: Rows per row group of secondary and covering index files (a point lookup decodes one).
    index_row_group_rows: int = 4_096
    #: Rows per index file at most. A cold lookup parses the footer of the file holding its key
    #: (one entry per row group) and reads its row groups' key bounds: 250,000 rows of
    #: 4,096-row groups make a 43 KB footer. (A cold locate on 5M rows: 19 ms against 21 ms with
    #: files of 1M rows, whose footers and bounds took 4-5 ms; warm lookups cost the same.)
    rows_per_index_file: int = 250_000
    #: Rows per row group of skipping-index files (one row per data file).
    skipping_row_group_rows: int = 65_536
    #: Lineage remap: a rewritten file is remapped only if at most this share of its rows are new.
    remap_max_new_share: float = 0.5
    #: Lineage remap: the moved rows must form runs of at least this many rows on average.
    remap_min_rows_per_run: int = 4
    #: Appends of in-process data write their own data files (pyarrow) and compute the entries of
    #: incremental secondary/covering indexes from the rows in hand, instead of writing through
    #: deltalake / pyiceberg and refreshing (which rereads the new files' key columns). Off by
    #: default: measured at the same CPU cost here, and the files written this way carry Delta
    #: statistics for integer, float, string and date columns only (no timestamp bounds).
    write_time_entries_in_process: bool = False
    #: A Spark DataFrame is appended or upserted by the format's own Spark writer when its
    #: session has it (delta-spark), which enforces every writer feature of the table; the
    #: indexes then refresh from the commit. False: this package writes the frame (the
    #: distributed append with write-time index entries, or collected to this process).
    format_spark_writer: bool = True

    def estimate_rows(self, files: Iterable[SizedFile]) -> int:
        """Live rows of ``files`` (the sizing policy): recorded row counts, else size over
        ``bytes_per_row_estimate``, minus deleted rows."""
        total = 0
        for f in files:
            rows = f.num_records if f.num_records is not None else f.size // self.bytes_per_row_estimate
            total += max(0, rows - f.deleted_count)
        return total


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of the planner's cost model (bytes)."""

    #: Reject a snapshot whose hybrid scan reads more than this share of the version's bytes.
    max_scan_share: float = 0.5
    #: Charged per covered file that is not live in the target (lineage filter work).
    excluded_file_cost: int = 1024
    #: Charged per row deleted since indexing (delete filter work).
    deleted_row_cost: int = 8
    #: Answer from the cheapest index snapshot that can answer at all, even when a plain
    #: scan is estimated cheaper or the hybrid scan is over ``max_scan_share`` (tests of
    #: the index path on small tables; users who know their workload better).
    force_index: bool = False


@dataclass(frozen=True)
class ReadConfig:
    """How data files are read (pyarrow point reads and Spark reads)."""

    #: Row groups with more rows than this are read page by page when few rows are wanted
    #: (when the file has a page index); smaller ones are decoded whole.
    page_read_min_rows: int = 8_192
    #: At most this many wanted rows of one row group take the page or batch path.
    point_read_max_rows: int = 64
    #: Batch size when a large row group is read batch by batch up to the last wanted row.
    point_read_batch_rows: int = 4_096
    #: Bytes read from the end of a data file to get its footer in one request (more only
    #: when the footer is larger); the offset indexes just before it usually come along.
    footer_read_bytes: int = 64 << 10
    #: Point reads of several data files on an object store fetch them concurrently on up to
    #: this many threads (on a local disk: in turn for a row or two per file, else one per core).
    parallel_files: int = 8
    #: Spark reads: below this many deleted positions the delete table is broadcast.
    spark_broadcast_deletes: int = 2_000_000
    #: Spark reads: driver-side tables up to this many values become SQL VALUES.
    spark_local_values_limit: int = 200_000
    #: Bucketed reads through a covering index (``Table.read``): where the rows of data files
    #: the snapshot does not cover are written as bucket files (a URI or path every Spark
    #: executor reaches). None: a fresh temporary directory on the driver (local masters).
    spark_scratch_dir: str | None = None


@dataclass(frozen=True)
class LogConfig:
    """The index log and its clean-up."""

    #: Age (seconds) after which a reader lists the log again instead of probing.
    relist_after_s: float = 600.0
    #: Log entries younger than this (seconds) are never expired, so cached readers stay correct.
    min_retention_s: float = 24 * 3600.0
    #: ``vacuum_index`` keeps snapshots younger than this many hours by default.
    vacuum_retention_hours: float = 168.0
    #: Read the index log concurrently with the table's log on a lookup, and a cold reader's
    #: entries concurrently: None (default) on object stores only (on local files a read costs
    #: less than handing it to a thread).
    concurrent_reads: bool | None = None

    def reads_concurrently(self, storage_concurrent: bool) -> bool:
        """Whether reads overlap, on a storage whose requests wait on the network when
        ``storage_concurrent`` (``Storage.concurrent_reads``)."""
        return storage_concurrent if self.concurrent_reads is None else self.concurrent_reads


@dataclass(frozen=True)
class CacheConfig:
    """Process-wide caches (set with :func:`configure_caches`), in entries unless noted.

    The connectors' caches are per open table: each table gets caches of these sizes.
    """

    #: Parquet footers of data files kept.
    footer_entries: int = 1_024
    #: Parquet page indexes of data files kept (point reads page by page).
    page_index_entries: int = 256
    #: Bytes of decoded dictionary pages of data files kept, per (file, column, row group):
    #: a warm point read then fetches only the data pages holding its rows.
    dictionary_bytes: int = 512 << 20
    #: Bytes of key columns of files a lookup scans (files the index does not cover yet)
    #: kept between lookups.
    scan_key_bytes: int = 128 << 20
    #: Opened index files (footers and row-group bounds) kept: 1,024 files of
    #: ``rows_per_index_file`` rows hold an index of 256M rows.
    index_file_entries: int = 1_024
    #: Lineage move maps kept.
    move_map_entries: int = 64
    #: Coverages kept (one per index snapshot and table version a lookup planned for).
    coverage_entries: int = 64
    #: Decoded key bounds of index snapshots' files kept (one per snapshot a lookup read).
    root_index_entries: int = 64
    #: Delta, per table: parsed commit files kept.
    delta_commit_entries: int = 100_000
    #: Delta, per table: replayed log states and built snapshots kept (each).
    delta_state_entries: int = 4
    #: Delta, per table: bytes of deletion-vector files kept.
    delta_dv_bytes: int = 64 << 20
    #: Iceberg, per table: parsed manifest lists and manifests kept (each).
    iceberg_manifest_entries: int = 4_096
    #: Iceberg, per table: live-file states of snapshots kept.
    iceberg_state_entries: int = 8


@dataclass(frozen=True)
class Config:
    """Every tuning knob, grouped by the layer that uses it; all have defaults."""

    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    planner: PlannerConfig = field(default_factory=PlannerConfig)
    read: ReadConfig = field(default_factory=ReadConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def replace(self, **sections: Any) -> Config:
        """A copy with some options changed: ``cfg.replace(planner={"force_index": True})``.

        Each keyword names a section and gives a mapping of its options (or a whole section).
        """
        changes: dict[str, Any] = {}
        for name, value in sections.items():
            current = getattr(self, name)  # AttributeError names an unknown section
            changes[name] = value if not isinstance(value, dict) else dataclasses.replace(current, **value)
        return dataclasses.replace(self, **changes)


_CACHES = CacheConfig()
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
#: Every SizedCache alive, so that configure_caches can resize them.
_LIVE: weakref.WeakSet[SizedCache[Any, Any]] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


class SizedCache(MutableMapping[_K, _V], Generic[_K, _V]):
    """A thread-safe LRU cache (``cachetools.LRUCache``) sized by one :class:`CacheConfig` field.

    ``size_field`` names the field; ``getsizeof`` measures a value (default: 1 per entry).
    A value larger than the whole cache is not kept. :func:`configure_caches` resizes
    every live instance whose size changed (emptying it).
    """

    def __init__(self, size_field: str, *, getsizeof: Callable[[_V], int] | None = None) -> None:
        if size_field not in {f.name for f in dataclasses.fields(CacheConfig)}:
            raise ValueError(f"{size_field!r} is not a CacheConfig field")
        self.size_field = size_field
        self._getsizeof = getsizeof
        self._lock = threading.RLock()
        self._cache = self._new(getattr(_CACHES, size_field))
        with _LIVE_LOCK:
            _LIVE.add(self)

    # A cache is one object, not a value: compared and hashed by identity (a WeakSet holds it).
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    def _new(self, maxsize: int) -> cachetools.LRUCache[_K, _V]:
        return cachetools.LRUCache(maxsize=maxsize, getsizeof=self._getsizeof)

    @property
    def maxsize(self) -> int:
        """Capacity now in force (entries, or the unit of ``getsizeof``)."""
        return int(self._cache.maxsize)

    def _resize(self, maxsize: int) -> None:
        with self._lock:
            if maxsize != self._cache.maxsize:
                self._cache = self._new(maxsize)

    def __getitem__(self, key: _K) -> _V:
        with self._lock:
            return self._cache[key]

    def get(self, key: _K, default: Any = None) -> Any:
        """The value for ``key`` (marked most recently used), else ``default``."""
        with self._lock:
            return self._cache.get(key, default)

    def __setitem__(self, key: _K, value: _V) -> None:
        with self._lock:
            try:
                self._cache[key] = value
            except ValueError:  # larger than the whole cache: not kept
                self._cache.pop(key, None)

    def __delitem__(self, key: _K) -> None:
        with self._lock:
            del self._cache[key]

    def __iter__(self) -> Iterator[_K]:
        with self._lock:
            return iter(list(self._cache))

    def __len__(self) -> int:
        return len(self._cache)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._cache  # not a use: the entry's recency is unchanged

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._cache.clear()


def configure_caches(config: CacheConfig | None = None, **options: Any) -> CacheConfig:
    """Set the process-wide cache sizes (``None`` and no options: back to the defaults).

    ``configure_caches(footer_entries=4096)`` changes one size and resets the others to their
    defaults; pass ``cache_config()`` to keep them. Every cache whose size changes is
    recreated empty at the new size, at once (caches created later get the new sizes too).
    Returns the sizes now in force.
    """
    global _CACHES
    base = config or CacheConfig()
    _CACHES = dataclasses.replace(base, **options)
    with _LIVE_LOCK:
        live = list(_LIVE)
    for cache in live:
        cache._resize(getattr(_CACHES, cache.size_field))
    return _CACHES


def cache_config() -> CacheConfig:
    """The process-wide cache sizes in force."""
    return _CACHES
