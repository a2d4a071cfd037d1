"""Reads and samples answered from an index's rows, reading only the row groups that can hold them.

For kinds whose :meth:`~lakehouse_index.kinds.base.IndexKind.access` says ``scans`` (the
multi-column index): the index's files are laid out so that every row group spans a small
range of each indexed column (``kinds.multicolumn.curve``), and the Parquet statistics of
every row group bound each column. A read:

1. **picks row groups** (:func:`pick_groups`): the statistics of every row group of the
   snapshot's files become one row of skipping statistics each (min, max, null count; NaN
   possible in the floating columns of a group whose greatest ``_cell`` carries the NaN
   flag, ``kinds.multicolumn.curve``), and the skipping index's three-valued evaluator
   (``kinds.skipping.prune``) keeps the groups where the predicate may be true;
   a sample also drops the groups whose least ``_weight`` is at or above the fraction (the
   weight tiers put small weights in their own row groups). A group lacking statistics
   of a column is kept. Delta files newer than the cap are skipped;
2. **reads their entries** (:func:`matching_entries`), keeps those matching the
   predicate exactly (and weight below the fraction) with ``_version`` at or below the
   coverage's cap, moves rows of rewritten files to their new address, merges the LSM,
   keeps the files the snapshot answers for and drops rows deleted since indexing: the live
   matching rows of the covered files;
3. **answers** (:func:`answer`): from the entries when the index holds every column asked
   for (index only), else by reading just those rows' positions from the data files; the
   files the snapshot does not cover are scanned with the predicate (and, for a sample, the
   same weights computed from their rows). The result equals a plain scan's rows (in
   another order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.config import ReadConfig, SizedCache
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.types import Family, family
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.io.parallel import each_file
from lakehouse_index.kinds.entries import FILE_ID, META_COLUMNS, OP, ROW, VERSION, merge
from lakehouse_index.kinds.multicolumn.curve import CELL, NAN_FLAG
from lakehouse_index.kinds.multicolumn.weights import WEIGHT, in_sample
from lakehouse_index.kinds.skipping.files import SkippingData
from lakehouse_index.kinds.skipping.prune import may_match
from lakehouse_index.kinds.skipping.schema import FILE_ID as GROUP_ID
from lakehouse_index.kinds.skipping.schema import ROWS, column_type
from lakehouse_index.log.entry import IndexFile, Level, LogEntry
from lakehouse_index.query.coverage import Coverage
from lakehouse_index.query.index_reader import FOOTERS
from lakehouse_index.query.lookup import _live_positions
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.scan import scan_files
from lakehouse_index.source import FileEntry, Snapshot, TableSource


@dataclass(frozen=True)
class _FileGroups:
    """The row-group statistics of one index file, as skipping rows (one per row group)."""

    rows: pa.Table
    #: Per group: some column has no usable statistics (the group is always read).
    unknown: np.ndarray
    #: Per group: the least ``_weight`` (NaN when the file has no weight column).
    weight_min: np.ndarray
    #: Per group: compressed bytes of its column chunks.
    sizes: np.ndarray


#: How data files' rows are read by position.
_READ = ReadConfig()

#: (index file URI, size, columns) → its row groups' statistics.
_GROUPS: SizedCache[tuple[str, int, tuple[str, ...]], _FileGroups] = SizedCache("index_file_entries")


def _stat_values(meta: pq.FileMetaData, idx: int, typ: pa.DataType, lows: bool) -> pa.Array | None:
    """Per row group, the min (or max) statistic of column ``idx`` as ``typ`` values (None: unusable)."""
    out: list[Any] = []
    for rg in range(meta.num_row_groups):
        st = meta.row_group(rg).column(idx).statistics
        if st is None or not st.has_min_max:
            out.append(None)
        elif family(typ) in (Family.TIMESTAMP, Family.DATE):
            out.append(st.min_raw if lows else st.max_raw)  # exact storage values (no datetime rounding)
        else:
            out.append(st.min if lows else st.max)
    try:
        if family(typ) in (Family.TIMESTAMP, Family.DATE):
            raw = pa.int64() if family(typ) is Family.TIMESTAMP or typ.bit_width == 64 else pa.int32()
            return pa.array(out, raw).cast(typ)
        return pa.array(out, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return None


def _file_groups(storage: Storage, uri: str, size: int, columns: tuple[str, ...]) -> _FileGroups:
    key = (uri, size, columns)
    hit = _GROUPS.get(key)
    if hit is not None:
        return hit
    pf = FOOTERS.open(storage, uri, size)
    meta, schema = pf.metadata, pf.schema_arrow
    n = meta.num_row_groups
    names = meta.schema.names
    counts = np.array([meta.row_group(rg).num_rows for rg in range(n)], dtype=np.int64)
    unknown = np.zeros(n, dtype=bool)
    nan_possible = np.ones(n, dtype=bool)
    if CELL in names:  # the cell's NaN flag tells the row groups holding no NaN
        hi_cell = _stat_values(meta, names.index(CELL), pa.int64(), False)
        if hi_cell is not None:
            top = np.asarray(hi_cell.fill_null(NAN_FLAG).to_numpy(), dtype=np.int64)
            nan_possible = top >= NAN_FLAG
    fields: dict[str, pa.Array] = {}
    for c in columns:
        typ = schema.field(c).type
        idx = names.index(c)
        lo, hi = _stat_values(meta, idx, typ, True), _stat_values(meta, idx, typ, False)
        nulls = np.array(
            [
                st.null_count
                if (st := meta.row_group(rg).column(idx).statistics) is not None and st.has_null_count
                else -1
                for rg in range(n)
            ],
            dtype=np.int64,
        )
        if lo is None or hi is None:
            unknown[:] = True
            lo = hi = pa.nulls(n, typ)
        else:
            no_range = np.asarray(lo.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            unknown |= (nulls < 0) | (no_range & (nulls != counts))
        nans = (
            np.where(nan_possible, counts, 0) if family(typ) is Family.FLOAT else np.zeros(n, dtype=np.int64)
        )
        fields[c] = pa.StructArray.from_arrays(
            [
                lo,
                hi,
                pa.array(np.maximum(nulls, 0)),
                pa.array(nans),
                pa.nulls(n, pa.list_(typ)),
                pa.nulls(n, pa.binary()),
            ],
            fields=list(column_type(typ)),
        )
    rows = pa.table({GROUP_ID: pa.array(np.arange(n), pa.int64()), ROWS: pa.array(counts), **fields})
    if WEIGHT in names:
        w = _stat_values(meta, names.index(WEIGHT), pa.float64(), True)
        weight_min = (
            np.full(n, np.nan) if w is None else np.asarray(w.fill_null(0.0).to_numpy(), dtype=np.float64)
        )
    else:
        weight_min = np.full(n, np.nan)
    sizes = np.array(
        [
            sum(meta.row_group(rg).column(i).total_compressed_size for i in range(meta.num_columns))
            for rg in range(n)
        ],
        dtype=np.int64,
    )
    found = _FileGroups(rows, unknown, weight_min, sizes)
    _GROUPS[key] = found
    return found


@dataclass(frozen=True)
class Picked:
    """The row groups of a snapshot's index files a read takes, and what they cost."""

    groups: tuple[tuple[IndexFile, tuple[int, ...]], ...]
    #: Compressed bytes of the picked row groups.
    bytes: int
    #: Row groups picked, and in all the snapshot's files.
    read: int
    total: int


@dataclass(frozen=True)
class _EntryGroups:
    """The row groups of all the files of one index snapshot, numbered across its files: one
    skipping table for the lot, so a query prunes them in one pass (and the statistics views
    the pruning prepares are kept with it)."""

    data: SkippingData
    unknown: np.ndarray
    weight_min: np.ndarray
    sizes: np.ndarray
    #: Per file of the snapshot (in its order), the number of its first group.
    starts: np.ndarray


#: (index directory, the snapshot's files, columns) → their row groups.
_ENTRY_GROUPS: SizedCache[tuple[str, tuple[tuple[str, int], ...], tuple[str, ...]], _EntryGroups] = (
    SizedCache("index_file_entries")
)


def _entry_groups(storage: Storage, index_dir: str, entry: LogEntry) -> _EntryGroups:
    columns = tuple(entry.spec.columns)
    key = (index_dir, tuple((f.path, f.size) for f in entry.content.files), columns)
    hit = _ENTRY_GROUPS.get(key)
    if hit is not None:
        return hit
    per = [_file_groups(storage, join_uri(index_dir, f.path), f.size, columns) for f in entry.content.files]
    counts = np.array([len(g.unknown) for g in per], dtype=np.int64)
    starts = np.cumsum(counts) - counts
    # Files written at different table versions may type a column differently (widened).
    rows = (
        pa.concat_tables(
            [
                g.rows.set_column(0, GROUP_ID, pa.array(g.rows[GROUP_ID].to_numpy() + s))
                for g, s in zip(per, starts, strict=True)
            ],
            promote_options="permissive",
        )
        if counts.sum()
        else pa.table({GROUP_ID: pa.array([], pa.int64())})
    )
    found = _EntryGroups(
        SkippingData.of(rows),
        np.concatenate([np.zeros(0, dtype=bool), *(g.unknown for g in per)]),
        np.concatenate([np.zeros(0), *(g.weight_min for g in per)]),
        np.concatenate([np.zeros(0, dtype=np.int64), *(g.sizes for g in per)]),
        starts,
    )
    _ENTRY_GROUPS[key] = found
    return found


def pick_groups(
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    predicate: Predicate | None,
    fraction: float | None,
    cap: int,
) -> Picked:
    """The row groups of ``entry``'s files whose statistics may hold a row matching ``predicate``
    (None: any row) with a weight below ``fraction`` (None: any weight)."""
    groups = _entry_groups(storage, index_dir, entry)
    files = entry.content.files
    total = len(groups.unknown)
    ends = np.append(groups.starts[1:], total)
    keep = np.zeros(total, dtype=bool)
    for f, lo, hi in zip(files, groups.starts, ends, strict=True):
        keep[lo:hi] = not f.newer_than(cap)
    if predicate is not None and total:
        keep &= may_match(groups.data, predicate) | groups.unknown  # groups numbered 0..total-1
    if fraction is not None:
        keep &= ~(groups.weight_min >= fraction)  # NaN (no weight statistics) keeps the group
    out: list[tuple[IndexFile, tuple[int, ...]]] = []
    for f, lo, hi in zip(files, groups.starts, ends, strict=True):
        picked = np.flatnonzero(keep[lo:hi])
        if picked.size:
            out.append((f, tuple(picked.tolist())))
    return Picked(tuple(out), int(groups.sizes[keep].sum()), int(keep.sum()), total)


def _entry_field(target: Snapshot, name: str) -> pa.Field:
    """The type an entry column is read as: a table column as ``target`` types it."""
    if name == WEIGHT:
        return pa.field(name, pa.float64())
    if name in META_COLUMNS:
        return pa.field(name, pa.int8() if name == OP else pa.int64())
    return target.schema.field(name)


def matching_entries(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    predicate: Predicate | None,
    fraction: float | None,
    picked: Picked,
    *,
    columns: Sequence[str] | None = None,
    address: bool = True,
    apply_deletes: bool = True,
) -> pa.Table:
    """The live entries, in the ``picked`` row groups (:func:`pick_groups` of the same
    ``predicate``, ``fraction`` and cap), of the files ``cov`` answers for whose rows match
    ``predicate`` (and, with ``fraction``, whose weight is below it): the index's share of the
    answer.

    Holds ``columns`` of the spec's (default all, as ``target`` types them) and, with
    ``address``, the row address (``_file_id``, ``_row``). Only the columns the answer needs
    are read: versions and ops only when delta files or moves need the LSM merge or a file
    holds entries newer than the cap. ``apply_deletes=False`` keeps rows deleted since
    indexing (callers re-reading the rows from the data files, which applies deletes)."""
    spec = entry.spec
    wanted = list(spec.columns if columns is None else columns)
    merged = bool(cov.moves) or any(f.level is Level.DELTA for f in entry.content.files)
    capped = all(f.max_ordinal is not None and f.max_ordinal <= cov.cap for f, _ in picked.groups)
    every_id = set(cov.answered) >= {f.id for f in entry.source.files}
    deletes = apply_deletes and bool(cov.filter_deletes)
    meta = (
        list(META_COLUMNS)
        if merged
        else [
            *([FILE_ID] if address or deletes or not every_id else []),
            *([ROW] if address or deletes else []),
            *([] if capped else [VERSION]),
        ]
    )
    checked = [c for c in spec.columns if predicate is not None and c in predicate.columns]
    names = list(dict.fromkeys([*wanted, *checked, *([WEIGHT] if fraction is not None else []), *meta]))
    schema = pa.schema([_entry_field(target, c) for c in names])
    expression = predicate.to_pyarrow() if predicate is not None else None

    pooled = len(picked.groups) > 1

    def one(item: tuple[IndexFile, tuple[int, ...]]) -> pa.Table:
        f, groups = item
        pf = FOOTERS.open(storage, join_uri(index_dir, f.path), f.size)
        t = pf.read_row_groups(
            list(groups), columns=names, use_threads=not pooled
        )  # as index_reader.read_entries does
        t = t.select(names).cast(schema) if not t.schema.equals(schema) else t
        if VERSION in names:
            t = t.filter(pc.less_equal(t[VERSION], cov.cap))
        if fraction is not None:
            t = t.filter(pc.less(t[WEIGHT], pa.scalar(fraction, pa.float64())))
        return t.filter(expression) if expression is not None else t

    parts = [t for t in each_file(one, picked.groups) if t.num_rows]
    live = pa.concat_tables(parts) if parts else schema.empty_table()
    if merged:
        live = merge(cov.moves.translate(live), None)
    if not every_id:
        live = live.filter(pc.is_in(live[FILE_ID], value_set=cov.answered_ids))
    if deletes and live.num_rows:
        keep = np.ones(live.num_rows, dtype=bool)
        fids, rows = live[FILE_ID].to_numpy(), live[ROW].to_numpy()
        for fid in cov.filter_deletes:
            sel = np.flatnonzero(fids == fid)
            if len(sel):
                alive = _live_positions(source, target, cov.answered[fid], rows[sel], _READ)
                keep[sel] = np.isin(rows[sel], alive)
        live = live.filter(pa.array(keep))
    return live.select([*wanted, *([FILE_ID, ROW] if address else [])])


def files_matching(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    predicate: Predicate,
    picked: Picked,
) -> list[FileEntry]:
    """The files of ``target`` that may hold matching rows: those with live matching entries
    in the ``picked`` row groups, and every file the snapshot does not answer for (Spark reads
    them and re-checks)."""
    live = matching_entries(
        source, storage, index_dir, entry, target, cov, predicate, None, picked, apply_deletes=False
    )
    ids = set(live[FILE_ID].to_pylist())
    return [cov.answered[i] for i in sorted(ids)] + list(cov.scan)


def answer(
    source: TableSource,
    storage: Storage,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    cov: Coverage,
    predicate: Predicate | None,
    columns: Sequence[str] | None,
    picked: Picked,
    fraction: float | None = None,
    identity: Sequence[str] = (),
) -> pa.Table:
    """The rows of ``target`` matching ``predicate`` (with ``fraction``: those of the sample),
    with ``columns`` (default all): from the ``picked`` row groups of the index alone when it
    holds them, else read by position from the data files; files the snapshot does not cover
    are scanned."""
    out_cols = list(dict.fromkeys(columns)) if columns is not None else list(target.schema.names)
    result_schema = pa.schema([target.schema.field(c) for c in out_cols])
    index_only = set(out_cols) <= set(entry.spec.columns)
    live = matching_entries(
        source,
        storage,
        index_dir,
        entry,
        target,
        cov,
        predicate,
        fraction,
        picked,
        columns=out_cols if index_only else (),
        address=not index_only,
        apply_deletes=index_only,
    )
    parts = [live] if index_only else _fetch(source, target, cov, live, out_cols, predicate)
    if cov.scan:
        need = list(dict.fromkeys([*out_cols, *(identity if fraction is not None else ())]))
        scanned = scan_files(source, target, cov.scan, columns=need, where=predicate)
        if fraction is not None:
            scanned = scanned.filter(in_sample(scanned, identity, fraction))
        parts.append(scanned.select(out_cols))
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return result_schema.empty_table()
    return pa.concat_tables([p.cast(result_schema) for p in parts])


def _fetch(
    source: TableSource,
    target: Snapshot,
    cov: Coverage,
    live: pa.Table,
    out_cols: list[str],
    predicate: Predicate | None,
) -> list[pa.Table]:
    """The rows at the entries' addresses, read from their data files (deletes applied), re-checked."""
    fids, rows = live[FILE_ID].to_numpy(), live[ROW].to_numpy()
    need = list(dict.fromkeys([*out_cols, *(predicate.columns if predicate is not None else ())]))
    expression = predicate.to_pyarrow() if predicate is not None else None
    parts = []
    for fid in np.unique(fids).tolist():
        positions = np.unique(rows[fids == fid])
        t = read_file(source, target, cov.answered[fid], columns=need, positions=positions, config=_READ)
        if expression is not None:
            t = t.filter(expression)
        parts.append(t.select(out_cols))
    return parts


def sample_scan(
    source: TableSource,
    target: Snapshot,
    fraction: float,
    identity: Sequence[str],
    predicate: Predicate | None,
    columns: Sequence[str] | None,
) -> pa.Table:
    """A sample without an index: every live file scanned, each row's weight computed from
    its ``identity`` columns exactly as an index would have stored it."""
    out_cols = list(dict.fromkeys(columns)) if columns is not None else list(target.schema.names)
    need = list(dict.fromkeys([*out_cols, *identity]))
    rows = scan_files(source, target, list(target.files.values()), columns=need, where=predicate)
    return rows.filter(in_sample(rows, identity, fraction)).select(out_cols)
