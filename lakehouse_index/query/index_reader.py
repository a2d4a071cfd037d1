"""Reading index entries for a set of keys: root index → row groups → rows.

Per key, at most three index object reads: the root index is in the log entry (no
read), each candidate index file's footer is cached, then only the row groups whose
statistics may hold a key are read. The files a key may be in are found by bisection over
the base files' key ranges (decoded once per snapshot), not by testing every file.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.config import SizedCache
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds import keys as K
from lakehouse_index.kinds.entries import VERSION
from lakehouse_index.log.entry import IndexFile, Level


@dataclass(frozen=True)
class GroupBounds:
    """Row-group statistics of one column of an index file, extracted once per file."""

    mins: tuple[Any, ...]
    maxes: tuple[Any, ...]
    null_counts: tuple[int | None, ...]
    #: Every group has min/max and both are non-decreasing (files sorted by the column).
    ordered: bool
    #: Per group: known to hold only nulls (no min/max, null count = rows). A group without
    #: min/max is not assumed all-null: some writers record only the null count.
    all_null: tuple[bool, ...] = ()

    @classmethod
    def of(cls, meta: pq.FileMetaData, column: str) -> GroupBounds:
        idx = meta.schema.names.index(column)
        mins: list[Any] = []
        maxes: list[Any] = []
        nulls: list[int | None] = []
        all_null: list[bool] = []
        for rg in range(meta.num_row_groups):
            group = meta.row_group(rg)
            st = group.column(idx).statistics
            has = st is not None and st.has_min_max
            mins.append(st.min if has else None)
            maxes.append(st.max if has else None)
            nulls.append(st.null_count if st is not None and st.has_null_count else None)
            all_null.append(not has and nulls[-1] == group.num_rows)
        return cls.of_bounds(mins, maxes, nulls, all_null)

    @classmethod
    def of_bounds(
        cls, mins: Sequence[Any], maxes: Sequence[Any], nulls: Sequence[int | None], all_null: Sequence[bool]
    ) -> GroupBounds:
        """Bounds of groups in order (row groups of a file, or files of a snapshot)."""
        try:
            ordered = all(m is not None for m in mins) and all(
                mins[i] <= mins[i + 1] and maxes[i] <= maxes[i + 1] for i in range(len(mins) - 1)
            )
        except TypeError:
            ordered = False
        return cls(tuple(mins), tuple(maxes), tuple(nulls), ordered, tuple(all_null))

    def groups_for(self, keys: KeySet) -> list[int]:
        """Row groups whose statistics may hold one of the keys' leading values."""
        if keys.has_nan_leading:  # statistics leave NaN out: any row group may hold one
            return list(range(len(self.mins)))
        if self.ordered and not keys.has_null_leading:
            try:
                found: set[int] = set()
                for k in keys.leading_sorted:
                    i = bisect.bisect_left(self.maxes, k)
                    while i < len(self.mins) and self.mins[i] <= k:
                        found.add(i)
                        i += 1
                return sorted(found)
            except TypeError:
                pass
        return [
            rg
            for rg in range(len(self.mins))
            if (self.mins[rg] is None and (not self.all_null[rg] or keys.has_null_leading))
            or (
                self.mins[rg] is not None
                and keys.may_hit(self.mins[rg], self.maxes[rg], self.null_counts[rg])
            )
        ]


@dataclass
class _Opened:
    file: pq.ParquetFile
    bounds: dict[str, GroupBounds] = field(default_factory=dict)


class FooterCache:
    """An LRU of opened Parquet index files (footers parsed once), keyed by (path, size).

    Index files are written once under unique names, so (path, size) identifies the bytes.
    Its size is :attr:`~lakehouse_index.config.CacheConfig.index_file_entries`.
    """

    def __init__(self) -> None:
        self._files: SizedCache[tuple[str, int], _Opened] = SizedCache("index_file_entries")

    def _get(self, storage: Storage, path: str, size: int) -> _Opened:
        key = (path, size)
        hit = self._files.get(key)
        if hit is not None:
            return hit
        fs, inner = storage.arrow(path)
        # pre_buffer coalesces the column chunks of a row group into one read.
        opened = _Opened(pq.ParquetFile(fs.open_input_file(inner), pre_buffer=True))
        self._files[key] = opened
        return opened

    def clear(self) -> None:
        """Forget every opened file (benchmarks of cold reads)."""
        self._files.clear()

    def open(self, storage: Storage, path: str, size: int) -> pq.ParquetFile:
        """The Parquet file at ``path``; the footer is read only on the first call."""
        return self._get(storage, path, size).file

    def bounds(self, storage: Storage, path: str, size: int, column: str) -> GroupBounds:
        """Row-group statistics of ``column`` in the file at ``path`` (computed once)."""
        opened = self._get(storage, path, size)
        found = opened.bounds.get(column)
        if found is None:
            found = opened.bounds[column] = GroupBounds.of(opened.file.metadata, column)
        return found


FOOTERS = FooterCache()


@dataclass
class ReadStats:
    """Counters of one index read (reported by explain and the benchmarks)."""

    files_considered: int = 0
    files_read: int = 0
    row_groups_read: int = 0
    footers_cached: int = 0


@dataclass(frozen=True)
class KeySet:
    """Lookup keys, typed like the index key columns, with a sorted leading column."""

    table: pa.Table
    tuples: tuple[K.KeyTuple, ...]
    #: The leading components, sorted, without nulls and NaNs.
    leading_sorted: tuple[Any, ...]
    has_null_leading: bool
    #: A key leads with NaN, which Parquet statistics (and index file bounds) leave out: no
    #: row group or file can be excluded for it.
    has_nan_leading: bool = False

    @classmethod
    def build(cls, keys: Sequence[K.KeyTuple], schema: pa.Schema, key_columns: Sequence[str]) -> KeySet:
        """Type the keys (QueryError if a value does not fit its column)."""
        table = K.keys_table(keys, schema, key_columns)
        tuples = tuple(zip(*(table[c].to_pylist() for c in key_columns), strict=True))
        nan = [isinstance(t[0], float) and math.isnan(t[0]) for t in tuples]
        leading = [t[0] for t, is_nan in zip(tuples, nan, strict=True) if t[0] is not None and not is_nan]
        try:
            leading_sorted = tuple(sorted(set(leading)))
        except TypeError:
            leading_sorted = tuple(leading)
        return cls(table, tuples, leading_sorted, any(t[0] is None for t in tuples), any(nan))

    def groups(self, bounds: GroupBounds) -> list[int]:
        """Row groups of an index file (``bounds`` of its leading key column) that may hold a key."""
        return bounds.groups_for(self)

    def select(self, rows: pa.Table) -> pa.Table:
        """The index rows whose key is one of the keys."""
        return rows.filter(K.match_mask(rows, self.table))

    def may_hit(self, lo: Any, hi: Any, null_count: int | None) -> bool:
        """Whether some key's leading component may lie in [lo, hi] (or be null, with nulls present)."""
        if self.has_nan_leading or (self.has_null_leading and (null_count is None or null_count > 0)):
            return True
        if not self.leading_sorted:
            return False
        if lo is None or hi is None:
            return True
        try:
            i = bisect.bisect_left(self.leading_sorted, lo)
            return i < len(self.leading_sorted) and self.leading_sorted[i] <= hi
        except TypeError:
            return True


@dataclass(frozen=True)
class RootIndex:
    """The key bounds of one snapshot's index files, decoded once, for choosing the files a
    key may be in: the base files, by lowest key, as :class:`GroupBounds` (bisected when their
    bounds are ordered, as the writer lays them out), and the rest (delta files, bucketed
    files, files without bounds) tested one by one."""

    files: tuple[IndexFile, ...]
    los: tuple[Any, ...]
    his: tuple[Any, ...]
    #: Positions of the base files, by lowest key, and their bounds in that order.
    base: tuple[int, ...]
    bounds: GroupBounds
    #: Positions of the files tested one by one.
    others: tuple[int, ...]

    @classmethod
    def of(cls, files: tuple[IndexFile, ...], lead_type: pa.DataType) -> RootIndex:
        t = lead_type
        los: tuple[Any, ...] = tuple(K.from_json(f.min_key[0], t) if f.min_key else None for f in files)
        his: tuple[Any, ...] = tuple(K.from_json(f.max_key[0], t) if f.max_key else None for f in files)
        base = [
            i
            for i, f in enumerate(files)
            if f.level is Level.BASE and f.bucket is None and los[i] is not None and his[i] is not None
        ]
        try:
            base.sort(key=lambda i: los[i])
        except TypeError:
            base = []
        kept = set(base)
        others = tuple(i for i in range(len(files)) if i not in kept)
        bounds = GroupBounds.of_bounds(
            [los[i] for i in base], [his[i] for i in base], [None] * len(base), [False] * len(base)
        )
        return cls(files, los, his, tuple(base), bounds, others)

    def candidates(self, keys: Selection) -> list[int]:
        """Positions (ascending) of the files whose key bounds may hold one of ``keys``."""
        found = {i for i in self.others if keys.may_hit(self.los[i], self.his[i], None)}
        found.update(self.base[j] for j in keys.groups(self.bounds))
        return sorted(found)


#: (id of a snapshot's file tuple, its leading key type) → (that tuple, its root index): the
#: tuple belongs to a cached, immutable log entry, and holding it keeps its id from being
#: reused while cached. Size: ``CacheConfig.root_index_entries``.
_ROOTS: SizedCache[tuple[int, str], RootIndex] = SizedCache("root_index_entries")


def root_index(files: tuple[IndexFile, ...], lead_type: pa.DataType) -> RootIndex:
    """The :class:`RootIndex` of ``files`` (cached per tuple)."""
    key = (id(files), str(lead_type))
    hit = _ROOTS.get(key)
    if hit is not None and hit.files is files:
        return hit
    found = RootIndex.of(files, lead_type)
    _ROOTS[key] = found
    return found


@dataclass(frozen=True)
class RowFilter:
    """Index rows matching a predicate over index columns (a range, any condition): read whole.

    For reads whose predicate does not pin the key to finitely many values but uses only
    columns the index holds; every row group of the candidate files is read and filtered.
    """

    expression: pc.Expression

    def may_hit(self, lo: Any, hi: Any, null_count: int | None) -> bool:
        """Any index file may hold matching rows."""
        return True

    def groups(self, bounds: GroupBounds) -> list[int]:
        """Every row group."""
        return list(range(len(bounds.mins)))

    def select(self, rows: pa.Table) -> pa.Table:
        """The index rows the predicate holds for."""
        return rows.filter(self.expression)


#: What an index read selects: rows with given keys, or rows matching a predicate.
Selection = KeySet | RowFilter


def read_entries(
    storage: Storage,
    index_dir: str,
    files: Sequence[IndexFile],
    schema: pa.Schema,
    key_columns: Sequence[str],
    keys: Selection,
    cap: int,
    columns: Sequence[str] | None = None,
    stats: ReadStats | None = None,
    buckets: frozenset[int] | None = None,
) -> pa.Table:
    """Index rows of ``files`` selected by ``keys`` and whose ``_version <= cap`` (unmerged),
    in ``schema`` (the ``columns`` of it).

    ``buckets``: for bucketed (covering) indexes, the only buckets that can hold the keys.
    """
    stats = stats if stats is not None else ReadStats()
    root = root_index(tuple(files), schema.field(key_columns[0]).type)
    stats.files_considered += len(root.files)
    parts = []
    for f in (root.files[i] for i in root.candidates(keys)):
        if f.level is Level.DELTA and f.min_ordinal is not None and f.min_ordinal > cap:
            continue
        if buckets is not None and f.bucket is not None and f.bucket not in buckets:
            continue
        uri = join_uri(index_dir, f.path)
        groups = keys.groups(FOOTERS.bounds(storage, uri, f.size, key_columns[0]))
        if not groups:
            continue
        stats.files_read += 1
        stats.row_groups_read += len(groups)
        pf = FOOTERS.open(storage, uri, f.size)
        t = pf.read_row_groups(groups, columns=list(columns) if columns else None)
        t = keys.select(t)
        if t.num_rows:
            parts.append(t)
    target = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    if not parts:
        return target.empty_table()
    out = pa.concat_tables(parts, promote_options="permissive")
    out = out.filter(pc.less_equal(out[VERSION], cap))
    # Files written before a column was widened (Iceberg int -> long, float -> double, a
    # larger decimal) hold the old type: answer in the schema asked for.
    return out if out.schema.equals(target) else out.select(target.names).cast(target)
