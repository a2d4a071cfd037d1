"""The pyarrow executor for point lookups (no JVM).

``locate`` answers *where* the rows with the given keys are (key, record key, file,
row position); without a declared record key, on table versions with stable row ids, the
record key is the row id (``_row_id``, computed from the row address: see
:func:`lakehouse_index.read.row_ids.row_ids`). ``lookup`` fetches those rows from the data
files, reading only the row groups that hold them, with the target version's deletes
applied and the key re-checked.
Both repair the index snapshot's difference to the target version (see ``coverage``):
files the index does not cover are scanned with the same key filter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from lakehouse_index.config import ReadConfig, SizedCache
from lakehouse_index.expressions.types import orders_alike
from lakehouse_index.io import Storage
from lakehouse_index.io.parallel import CORES, shared_pool
from lakehouse_index.kinds import keys as K
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.kinds.entries import FILE_ID, META_COLUMNS, ROW, index_schema, merge
from lakehouse_index.log.entry import Level, LogEntry
from lakehouse_index.query.coverage import Coverage, coverage
from lakehouse_index.query.index_reader import (
    GroupBounds,
    KeySet,
    ReadStats,
    RowFilter,
    Selection,
    read_entries,
)
from lakehouse_index.read.columns import resolve_columns
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.deletes import deleted_positions_array
from lakehouse_index.read.footers import FileLayout, file_key
from lakehouse_index.read.row_ids import row_ids
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import IndexSpec

FILE = "_file"
_T = TypeVar("_T")
#: The column ``locate`` adds for the stable row id when the index declares no record key.
ROW_ID = "_row_id"


@dataclass
class LookupPlan:
    """One lookup: the index snapshot used, the target table state, and the repair."""

    entry: LogEntry
    target: Snapshot
    coverage: Coverage
    keys: KeySet
    stats: ReadStats
    #: How the data files' rows are read (point-read tuning).
    read: ReadConfig = ReadConfig()

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The index key columns."""
        return self.entry.spec.key

    @property
    def stored(self) -> IndexedColumns:
        """The index's columns at the target version (an indexed expression's type and tree)."""
        return indexed_columns(self.entry.spec, self.target)


def plan_lookup(
    source: TableSource,
    entry: LogEntry,
    target: Snapshot,
    keys: Sequence[object] | K.ArrowKeys,
    cov: Coverage | None = None,
    read: ReadConfig = ReadConfig(),
) -> LookupPlan:
    """Type the keys against the target schema; ``cov`` defaults to the coverage of ``entry``.

    ``keys``: Python values (tuples for composite keys), or Arrow data typed by column
    (:func:`~lakehouse_index.kinds.keys.arrow_keys`), which is converted without a Python
    loop per key.
    """
    spec = entry.spec
    kind_of(spec).validate(spec, target)
    keyset = KeySet.of(K.keys_of(keys, indexed_columns(spec, target).schema, spec.key))
    return LookupPlan(entry, target, cov or coverage(source, entry, target), keyset, ReadStats(), read)


def _index_hits(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    plan: LookupPlan,
    *,
    apply_deletes: bool,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Live index entries for the keys among the files the index answers for (``columns`` of
    the spec's: default all), with the row address.

    ``apply_deletes`` drops rows deleted in the target from files whose deletes changed
    since indexing; callers that re-read the rows (which applies deletes) skip it.
    """
    spec = plan.entry.spec
    schema = index_schema(spec, plan.target)
    wanted = list(dict.fromkeys([*spec.key, *(spec.columns if columns is None else columns), *META_COLUMNS]))
    if not plan.coverage.answered:  # a plain scan: the index answers for no file
        return pa.schema([schema.field(c) for c in wanted]).empty_table()
    live = _live_entries(
        storage,
        index_dir,
        plan.entry,
        plan.target,
        plan.coverage,
        plan.keys,
        plan.stats,
        _buckets(spec, plan),
        wanted,
    )
    if not apply_deletes or not plan.coverage.filter_deletes or live.num_rows == 0:
        return live
    keep = np.ones(live.num_rows, dtype=bool)
    fids = live[FILE_ID].to_numpy()
    rows = live[ROW].to_numpy()
    for fid in plan.coverage.filter_deletes:
        sel = np.nonzero(fids == fid)[0]
        if not len(sel):
            continue
        fe = plan.coverage.answered[fid]
        alive = _live_positions(source, plan.target, fe, rows[sel], plan.read)
        keep[sel] = np.isin(rows[sel], alive)
    return live.filter(pa.array(keep))


def _live_entries(
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    coverage: Coverage,
    selection: Selection,
    stats: ReadStats,
    buckets: frozenset[int] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The live index entries ``selection`` picks, of the files the snapshot answers for (LSM
    merged once for the whole selection); ``columns`` of them (default all)."""
    raw = read_entries(
        storage,
        index_dir,
        entry.content.files,
        index_schema(entry.spec, target),
        entry.spec.key,
        selection,
        coverage.cap,
        columns=columns,
        stats=stats,
        buckets=buckets,
    )
    raw = coverage.moves.translate(raw)
    # Base files hold each row address once, as a PUT: only delta files (and entries read at
    # a moved address, which later deletes may name) need the LSM merge.
    has_deltas = bool(coverage.moves) or any(f.level is Level.DELTA for f in entry.content.files)
    live = merge(raw, None) if has_deltas else raw
    return live.filter(pc.is_in(live[FILE_ID], value_set=coverage.answered_ids))


def files_matching(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    where: pc.Expression,
    cov: Coverage,
) -> frozenset[str]:
    """Paths of ``target``'s files that may hold rows matching ``where``, through one index snapshot.

    ``cov`` is the coverage of ``entry`` for ``target`` (the planner computed it).

    ``where`` uses only columns the index holds (a range on the key, a condition on a
    covering index's included columns): the index rows are filtered by it, and the files
    of the live matching entries are kept, plus every file the snapshot does not answer
    for (scanned as the hybrid scan would). Rows deleted since indexing may keep a file:
    the reader re-applies deletes and the predicate.
    """
    kind_of(entry.spec).validate(entry.spec, target)
    live = _live_entries(storage, index_dir, entry, target, cov, RowFilter(where), ReadStats())
    ids = set(live[FILE_ID].to_pylist())
    return frozenset(cov.answered[i].path for i in ids) | frozenset(fe.path for fe in cov.scan)


def _buckets(spec: IndexSpec, plan: LookupPlan) -> frozenset[int] | None:
    """The buckets the keys fall in (None: read every bucket)."""
    if all(f.bucket is None for f in plan.entry.content.files):
        return None
    key_type = plan.stored.schema.field(spec.key[0]).type
    return kind_of(spec).buckets(spec, plan.keys.tuples, key_type)


def _live_positions(
    source: TableSource, target: Snapshot, fe: FileEntry, positions: np.ndarray, config: ReadConfig
) -> np.ndarray:
    """The subset of ``positions`` not deleted in ``target`` (DVs, position and equality deletes)."""
    if fe.equality_deletes:
        t = read_file(source, target, fe, columns=[], positions=positions, with_positions=True, config=config)
        return t[ROW].to_numpy()
    return positions[~np.isin(positions, deleted_positions_array(source, fe))]


#: Key columns of files lookups scan (not covered by the index yet), kept between lookups:
#: (file key, key columns as resolved) → the columns plus ``_row``, deletes not applied.
_SCAN_KEYS: SizedCache[Hashable, pa.Table] = SizedCache("scan_key_bytes", getsizeof=lambda t: t.nbytes)


def clear_scan_cache() -> None:
    """Forget the cached key columns of scanned files (tests, benchmarks of cold lookups)."""
    _SCAN_KEYS.clear()


def _scan_keys(source: TableSource, plan: LookupPlan, fe: FileEntry) -> pa.Table | None:
    """The key columns and ``_row`` of every row of ``fe`` (deletes not applied), cached while
    the file's bytes stay the same; None when no row group's statistics may hold a key."""
    key, layout = file_key(source, fe)
    stored = plan.stored
    sources = stored.sources_of(plan.key_columns)
    cols = [plan.target.column(c) for c in sources]
    cache_key = (
        key,
        tuple((c.name, str(c.type), c.field_id, c.stored_name, c.file_names, c.in_data_files) for c in cols),
        tuple(sorted((k, repr(v)) for k, v in fe.partition_dict.items() if k in sources)),
        tuple(n for n, _ in stored.expressions if n in plan.key_columns),
    )
    found = _SCAN_KEYS.get(cache_key)
    if found is not None:
        return found if _may_hold(plan, fe, layout) else None
    if not _may_hold(plan, fe, layout):
        return None
    found = stored.read_file(
        source, plan.target, fe, plan.key_columns, with_positions=True, apply_deletes=False, config=plan.read
    )
    _SCAN_KEYS[cache_key] = found
    return found


def _scan_hits(
    source: TableSource, plan: LookupPlan, columns: Sequence[str]
) -> list[tuple[FileEntry, pa.Table]]:
    """Rows with the keys in files the index does not answer for (read directly).

    Per file: skipped when the row-group statistics of the leading key column exclude
    every key; else the file's key columns (read once, then kept between lookups until
    the file's bytes change, see ``CacheConfig.scan_key_bytes``) are matched, and the
    matching rows alone are read, all ``columns`` (keys included), with the target's
    deletes applied; the key is re-checked on the rows read.

    Files on an object store are handled concurrently (each waits on requests); on a local
    disk one after the other: warm, a file costs a cached footer and key column, and
    threads only contend for the GIL (21 appended files: 5.7 ms in a row, 9 to 13 ms on 8
    threads).
    """
    files = plan.coverage.scan
    if not files:
        return []
    read = _fetch_config(source, files, 0, plan.read)  # rows not known: in turn on a local disk

    def one(fe: FileEntry) -> tuple[FileEntry, pa.Table] | None:
        keys = _scan_keys(source, plan, fe)
        if keys is None:
            return None
        positions = keys[ROW].to_numpy()[K.match_mask(keys, plan.keys.table).to_numpy(zero_copy_only=False)]
        if not len(positions):
            return None
        t = plan.stored.read_file(
            source, plan.target, fe, columns, positions=positions, with_positions=True, config=plan.read
        )
        t = t.filter(K.match_mask(t, plan.keys.table))
        return (fe, t) if t.num_rows else None

    return [hit for hit in _each_file(one, files, read) if hit is not None]


def _each_file(fn: Callable[[FileEntry], _T], files: Sequence[FileEntry], read: ReadConfig) -> list[_T]:
    """``fn`` of each file, in order; up to ``read.parallel_files`` files at a time."""
    if len(files) <= 1 or read.parallel_files <= 1:
        return [fn(fe) for fe in files]
    return list(shared_pool("lookup-files", read.parallel_files).map(fn, files))


#: Below this many wanted rows per file on average, local files are read one after another.
_THREADED_ROWS_PER_FILE = 4


def _fetch_config(source: TableSource, files: Sequence[FileEntry], rows: int, read: ReadConfig) -> ReadConfig:
    """``read`` with as many file threads as fetching ``rows`` rows of ``files`` gains from
    (``rows`` 0: not known, as for a hybrid scan; local files are then read in turn).

    On an object store ``read.parallel_files``: each file waits on requests. On a local disk
    the work is the CPU's: for a row or two per file it is mostly Python, and threads only
    contend for the GIL, so the files are read one after another; with more rows per file
    pyarrow's decoding (without the GIL) dominates, and they take one thread per core.
    (Warm, 2 cores, per key, one thread against two, paired batches: 10 keys in 10 files
    4.5 / 5.4 ms; 100 keys in 64 files 3.4 / 3.5 ms; 1,000 keys, about 10 per file, 1.7 / 1.3 ms.)
    """
    if len(files) <= 1:
        return read  # one file: no threads
    fs, _ = source.io.arrow(files[0].path)
    if not isinstance(fs, pafs.LocalFileSystem):
        return read
    threads = 1 if rows < _THREADED_ROWS_PER_FILE * len(files) else min(read.parallel_files, CORES)
    return replace(read, parallel_files=threads)


def _may_hold(plan: LookupPlan, fe: FileEntry, layout: FileLayout) -> bool:
    """Whether a row group of ``fe`` may hold a key by its leading-key statistics."""
    candidates = _candidate_rows(plan, fe, layout)
    return candidates is None or bool(len(candidates))


def _candidate_rows(plan: LookupPlan, fe: FileEntry, layout: FileLayout) -> np.ndarray | None:
    """Positions of the row groups of ``fe`` whose leading-key statistics may hold a key.

    None when every row group may (read the whole file).
    """
    if plan.stored.tree(plan.key_columns[0]) is not None:
        return None  # an indexed expression: data files keep no statistics of its values
    lead = resolve_columns(plan.target, fe, layout, [plan.key_columns[0]])[0]
    if (
        lead.stored is None
        or lead.stored_type is None
        or not orders_alike(lead.stored_type, lead.column.type)
    ):
        return None  # a constant, an absent column or a changed type: no statistics to trust
    if lead.stored not in layout.metadata.schema.names:
        return None
    starts = layout.row_group_starts
    groups = GroupBounds.of(layout.metadata, lead.stored).groups_for(plan.keys)
    if len(groups) == layout.metadata.num_row_groups:
        return None
    keep = [np.arange(starts[rg], starts[rg + 1], dtype=np.int64) for rg in groups]
    return np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)


def returns_row_ids(spec: IndexSpec, target: Snapshot) -> bool:
    """Whether ``locate`` adds ``_row_id``: no declared record key and ``target`` has stable row ids."""
    return (
        target.row_id_column is not None
        and not spec.record_key
        and ROW_ID not in spec.key  # a key column of that name would be shadowed
    )


def _row_ids_by_file(
    source: TableSource, target: Snapshot, files: dict[int, FileEntry], fids: np.ndarray, rows: np.ndarray
) -> pa.Array:
    """Row ids of the located rows ``(fids[i], rows[i])`` (file ids of ``files``), in order."""
    values = np.zeros(len(rows), dtype=np.int64)
    valid = np.zeros(len(rows), dtype=bool)
    for fid in np.unique(fids).tolist():
        sel = np.nonzero(fids == fid)[0]
        ids = row_ids(source, target, files[fid], rows[sel])
        values[sel] = ids.fill_null(0).to_numpy(zero_copy_only=False)
        valid[sel] = ids.is_valid().to_numpy(zero_copy_only=False)
    return pa.array(values, pa.int64(), mask=~valid)


def _paths(files: dict[int, FileEntry], fids: np.ndarray) -> pa.Array:
    """The path of each file id of ``fids`` (ids of ``files``), one lookup per distinct id."""
    ids, inverse = np.unique(fids, return_inverse=True)
    return pa.array([files[i].path for i in ids.tolist()], pa.string()).take(pa.array(inverse))


def locate(
    source: TableSource, storage: Storage, index_dir: str, plan: LookupPlan, *, with_row_ids: bool = True
) -> pa.Table:
    """Key, record key, file path (``_file``) and row position (``_row``) of every matching live row.

    When the index declares no record key and the target version has stable row ids
    (:func:`returns_row_ids`), ``_row_id`` (int64) stands in the record key's place: each
    row's stable row id as its format defines it (:func:`~lakehouse_index.read.row_ids.row_ids`),
    computed from the row address, reading only the materialized row-id column at the
    located positions. ``with_row_ids=False`` leaves it out (callers that need files only).
    """
    spec = plan.entry.spec
    cols = list(spec.key) + list(spec.record_key)
    ids = with_row_ids and returns_row_ids(spec, plan.target)  # then cols is the key only

    def part(t: pa.Table, files: pa.Array, row_id: pa.Array | None) -> pa.Table:
        extra = [] if row_id is None else [row_id]
        return pa.table(
            [*(t[c] for c in cols), *extra, files, t[ROW]],
            names=[*cols, *([ROW_ID] if ids else []), FILE, ROW],
        )

    hits = _index_hits(source, storage, index_dir, plan, apply_deletes=True, columns=cols)
    answered = plan.coverage.answered
    fids = hits[FILE_ID].to_numpy()
    paths = _paths(answered, fids)
    located = _row_ids_by_file(source, plan.target, answered, fids, hits[ROW].to_numpy()) if ids else None
    parts = [part(hits, paths, located)]
    for fe, t in _scan_hits(source, plan, cols):
        located = row_ids(source, plan.target, fe, t[ROW].to_numpy()) if ids else None
        parts.append(part(t, pa.array([fe.path] * t.num_rows, pa.string()), located))
    schema = parts[0].schema
    return pa.concat_tables([p.cast(schema) for p in parts])


def lookup(
    source: TableSource, storage: Storage, index_dir: str, plan: LookupPlan, columns: Sequence[str] | None
) -> pa.Table:
    """Full rows (or ``columns``) of the table version whose key is one of the keys."""
    out_cols = list(columns) if columns is not None else [c.name for c in plan.target.columns]
    unknown = [c for c in out_cols if c not in plan.target.schema.names]
    if unknown:
        from lakehouse_index.errors import QueryError

        raise QueryError(f"unknown columns {unknown}; the table has {plan.target.schema.names}")
    need = list(dict.fromkeys([*plan.key_columns, *out_cols]))
    schema = pa.schema([plan.target.schema.field(c) for c in out_cols])
    if set(need) <= set(plan.entry.spec.columns):  # index-only: a covering index holds every column
        hits = _index_hits(source, storage, index_dir, plan, apply_deletes=True, columns=need)
        parts = [hits.select(out_cols), *(t.select(out_cols) for _, t in _scan_hits(source, plan, need))]
        return pa.concat_tables([p.cast(schema) for p in parts])
    hits = _index_hits(source, storage, index_dir, plan, apply_deletes=False, columns=plan.key_columns)
    # The wanted rows grouped by file once: sorted by (file id, row), cut where the id changes.
    fids = hits[FILE_ID].to_numpy()
    rows = hits[ROW].to_numpy()
    order = np.lexsort((rows, fids))
    fids, rows = fids[order], rows[order]
    ids, starts = np.unique(fids, return_index=True)
    ends = np.append(starts[1:], len(fids)).astype(np.int64) if len(fids) else starts
    wanted = {
        plan.coverage.answered[i].path: rows[a:b] for i, a, b in zip(ids.tolist(), starts, ends, strict=True)
    }
    files = [plan.coverage.answered[i] for i in ids.tolist()]

    stored = plan.stored

    def fetch(fe: FileEntry) -> pa.Table:
        t = stored.read_file(source, plan.target, fe, need, positions=wanted[fe.path], config=plan.read)
        return t.filter(K.match_mask(t, plan.keys.table)).select(out_cols)

    # Each file's pages are read once for all its rows; the files concurrently (and within a
    # file, as merged ranges in parallel).
    parts = _each_file(fetch, files, _fetch_config(source, files, len(rows), plan.read))
    for _, t in _scan_hits(source, plan, need):
        parts.append(t.select(out_cols))
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])
