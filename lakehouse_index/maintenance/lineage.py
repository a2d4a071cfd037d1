"""Lineage remap: index a copy-on-write rewrite by recording where rows moved.

A copy-on-write DELETE, UPDATE or MERGE rewrites every file it touches: file F is
removed and file G, holding F's other rows unchanged and in the same order, is added.
Table compaction (OPTIMIZE, ``rewrite_data_files``) concatenates files, again keeping the
row order within each. Indexing G again means sorting and writing an entry per row it
holds; instead, an incremental refresh aligns G's rows with the rows of the files the
same commit removed and records the correspondence as runs (``SourceFile.moves``).
Readers then read F's existing entries at their new address (``query.moves``).

The alignment compares the index's own columns (``spec.columns``: keys, record key, included
columns; for an indexed expression the columns it reads) of F's live rows and G's rows, in
order, reading those columns only (pyarrow, no JVM). A G row is matched to an F row only
when every index column is equal, so the moved entry holds exactly what indexing G would
have written, whichever equal row is chosen; each F row is used at most once; F rows left
unmatched were deleted by the commit. G rows that match nothing (rows an UPDATE changed,
rows a MERGE inserted) get ordinary PUT entries. Correctness therefore never depends on how
the table was rewritten; only the benefit does. A G that is mostly new rows, or whose rows
would need very many runs, is indexed the ordinary way instead.

A writer that rewrote a file itself (the GDPR erase) knows the alignment already: it
hands it over as :class:`Rewritten` (G is F's rows at these positions, in order), and
:func:`known_remap` records the runs without reading either file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.kinds.base import IndexKind
from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.kinds.entries import PUT, ROW
from lakehouse_index.log.entry import Move
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.sink.rewrite import Rewritten
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import IndexSpec


@dataclass(frozen=True)
class Remap:
    """The outcome for one commit: moves per removed file, files placed without an index job."""

    moves: dict[int, tuple[Move, ...]] = field(default_factory=dict)
    #: Paths of added files whose rows are all accounted for (moved or in ``entries``).
    placed: frozenset[str] = frozenset()
    #: PUT entries for the rows of placed files that matched no removed row.
    entries: tuple[pa.Table, ...] = ()


def known_remap(
    removed: Sequence[tuple[int, FileEntry]],
    added: Sequence[tuple[int, FileEntry]],
    rewritten: Mapping[str, Rewritten],
) -> Remap:
    """The remap of the added files ``rewritten`` describes (keyed by the added file's path).

    An added file is placed when its old file is among ``removed`` (and has no equality
    deletes, as in :func:`remap_commit`), it has no deletes of its own, and its row count (when
    the table records one) is the number of kept positions; each old file is used once. Nothing is read.
    """
    removed_ids = {fe.path: fid for fid, fe in removed if not fe.equality_deletes}
    moves: dict[int, tuple[Move, ...]] = {}
    placed: set[str] = set()
    for gid, ge in added:
        hint = rewritten.get(ge.path)
        if hint is None or ge.deletes or ge.equality_deletes:
            continue
        if ge.num_records is not None and ge.num_records != len(hint.kept):
            continue
        fid = removed_ids.pop(hint.old, None)
        if fid is None:
            continue
        moves[fid] = tuple(Move(r.start, r.count, gid, r.to) for r in _position_runs(fid, hint.kept, 0))
        placed.add(ge.path)
    return Remap(moves, frozenset(placed))


@dataclass
class _Rows:
    """The live rows of one removed file, as fingerprints, with a read cursor."""

    file_id: int
    positions: np.ndarray
    codes: np.ndarray
    at: int = 0


def remap_commit(
    source: TableSource,
    target: Snapshot,
    kind: IndexKind,
    spec: IndexSpec,
    removed: Sequence[tuple[int, FileEntry]],
    added: Sequence[tuple[int, FileEntry]],
    ordinal: int,
    config: ExecutorConfig = ExecutorConfig(),
) -> Remap:
    """Align the files one commit added with the files it removed (same partition only).

    ``removed`` are (file id, entry as live before the commit), ``added`` (new file id,
    entry). Files that cannot be aligned are left out of ``Remap.placed``.
    """
    by_partition: dict[tuple[tuple[str, object], ...], list[tuple[int, FileEntry]]] = {}
    for fid, fe in removed:
        if not fe.equality_deletes:  # rows matched by value at read time: not remappable
            by_partition.setdefault(fe.partition_values, []).append((fid, fe))
    moves: dict[int, list[Move]] = {}
    placed: set[str] = set()
    entries: list[pa.Table] = []
    for part in {fe.partition_values for _, fe in added}:
        olds = by_partition.get(part)
        news = [
            (fid, fe)
            for fid, fe in added
            if fe.partition_values == part and not fe.deletes and not fe.equality_deletes
        ]
        if not olds or not news:
            continue
        cols = indexed_columns(spec, target).sources  # rows equal in these have equal entries
        old_rows = [read_file(source, target, fe, columns=cols, with_positions=True) for _, fe in olds]
        new_rows = [read_file(source, target, fe, columns=cols, apply_deletes=False) for _, fe in news]
        codes = _fingerprints([*old_rows, *new_rows], cols)
        sources = [
            _Rows(fid, t[ROW].to_numpy(), c)
            for (fid, _), t, c in zip(olds, old_rows, codes[: len(olds)], strict=True)
        ]
        where = _Occurrences.of(sources)
        for (gid, ge), rows, g in zip(news, new_rows, codes[len(olds) :], strict=True):
            found = _align(g, sources, where, int(len(g) * config.remap_max_new_share))
            if found is None:
                continue
            runs, unmatched = found
            if len(runs) > 4 + len(g) // config.remap_min_rows_per_run:
                continue
            for m in runs:
                moves.setdefault(m.file_id, []).append(Move(m.start, m.count, gid, m.to))
            placed.add(ge.path)
            if len(unmatched):
                new = rows.take(pa.array(unmatched)).append_column(ROW, pa.array(unmatched, pa.int64()))
                entries.append(kind.row_entries(new, spec, target, gid, ordinal, PUT))
            # Runs taken from the sources are consumed; a file G that is skipped above
            # leaves its matched rows consumed too, which only means fewer moves (its
            # rows are indexed anew and the skipped source rows count as deleted).
    return Remap(
        {fid: tuple(sorted(ms, key=lambda m: m.start)) for fid, ms in moves.items()},
        frozenset(placed),
        tuple(entries),
    )


def _fingerprints(tables: Sequence[pa.Table], columns: Sequence[str]) -> list[np.ndarray]:
    """Per table, one int64 per row, equal for two rows iff every column is equal (nulls equal)."""
    sizes = [t.num_rows for t in tables]
    combined: np.ndarray | None = None
    for c in columns:
        # From the chunks: building a ChunkedArray from ChunkedArrays is slow in pyarrow.
        chunks = [chunk for t in tables for chunk in t[c].chunks]
        values = pa.chunked_array(chunks, type=tables[0].schema.field(c).type).combine_chunks()
        codes = _value_codes(values)
        if combined is None:
            combined = codes
        else:
            _, combined = np.unique(combined * (int(codes.max(initial=0)) + 1) + codes, return_inverse=True)
            combined = combined.astype(np.int64)
    assert combined is not None
    return np.split(combined, np.cumsum(sizes)[:-1])


def _value_codes(values: pa.Array) -> np.ndarray:
    """One int64 per value, equal for equal values (nulls equal).

    Struct, list and map values (a covering index's nested columns), which pyarrow cannot
    dictionary-encode, are told apart by their Python form.
    """
    try:
        encoded = values.dictionary_encode()
    except pa.ArrowNotImplementedError:
        seen: dict[str, int] = {}
        forms = (repr(v) for v in values.to_pylist())
        return np.fromiter((seen.setdefault(f, len(seen)) for f in forms), dtype=np.int64, count=len(values))
    return encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1


@dataclass(frozen=True)
class _Run:
    """Rows ``start..start+count-1`` of removed file ``file_id`` are rows ``to..`` of the new file."""

    file_id: int
    start: int
    count: int
    to: int


def _align(
    g: np.ndarray, sources: list[_Rows], where: _Occurrences, max_unmatched: int
) -> tuple[list[_Run], list[int]] | None:
    """Runs of ``g`` (new file fingerprints) found, in order, in the sources; and the unmatched rows.

    None when more than ``max_unmatched`` rows of ``g`` match nothing.
    """
    runs: list[_Run] = []
    unmatched: list[int] = []
    cur: _Rows | None = None
    i = 0
    while i < len(g):
        if cur is not None:
            n = _common_prefix(g, i, cur.codes, cur.at)
            if n:
                runs += _physical_runs(cur, n, i)
                cur.at += n
                i += n
                continue
        cur = _seek(int(g[i]), sources, where, cur)
        if cur is None:
            unmatched.append(i)
            if len(unmatched) > max_unmatched:
                return None
            i += 1
    return runs, unmatched


def _physical_runs(src: _Rows, n: int, to: int) -> list[_Run]:
    """Live rows ``at..at+n-1`` of ``src`` as runs of consecutive physical positions."""
    return _position_runs(src.file_id, src.positions[src.at : src.at + n], to)


def _position_runs(file_id: int, pos: np.ndarray, to: int) -> list[_Run]:
    """Rows at positions ``pos`` of file ``file_id`` (becoming rows ``to..``) as runs of consecutive ones."""
    if not len(pos):
        return []
    breaks = np.flatnonzero(np.diff(pos) != 1) + 1
    return [
        _Run(file_id, int(pos[a]), int(b - a), to + int(a))
        for a, b in zip(np.r_[0, breaks], np.r_[breaks, len(pos)], strict=True)
    ]


def _common_prefix(a: np.ndarray, i: int, b: np.ndarray, j: int) -> int:
    """Length of the longest common prefix of ``a[i:]`` and ``b[j:]`` (compared in growing blocks)."""
    n = min(len(a) - i, len(b) - j)
    done, step = 0, 64
    while done < n:
        m = min(step, n - done)
        diff = np.flatnonzero(a[i + done : i + done + m] != b[j + done : j + done + m])
        if len(diff):
            return done + int(diff[0])
        done += m
        step *= 4
    return n


@dataclass(frozen=True)
class _Occurrences:
    """Where each fingerprint occurs among the removed files' rows (sorted for binary search)."""

    codes: np.ndarray
    source: np.ndarray
    offset: np.ndarray

    @classmethod
    def of(cls, sources: Sequence[_Rows]) -> _Occurrences:
        codes = np.concatenate([s.codes for s in sources])
        source = np.concatenate([np.full(len(s.codes), i) for i, s in enumerate(sources)])
        offset = np.concatenate([np.arange(len(s.codes)) for s in sources])
        order = np.argsort(codes, kind="stable")
        return cls(codes[order], source[order], offset[order])

    def find(self, value: int) -> tuple[np.ndarray, np.ndarray]:
        """(source index, offset) of every row with fingerprint ``value``, by source then offset."""
        lo, hi = np.searchsorted(self.codes, [value, value + 1])
        return self.source[lo:hi], self.offset[lo:hi]


def _seek(value: int, sources: list[_Rows], where: _Occurrences, cur: _Rows | None) -> _Rows | None:
    """The source to continue from, its cursor moved to the next unused row equal to ``value``.

    Preference: the current source (rows skipped over were deleted by the commit), then
    a source whose cursor is on the value, then the first source holding it ahead of its
    cursor. None when no unused row has the value.
    """
    src, off = where.find(value)
    if not len(src):
        return None
    cursors = np.array([s.at for s in sources])
    ahead = off >= cursors[src]
    src, off = src[ahead], off[ahead]
    if not len(src):
        return None
    if cur is not None:
        mine = np.flatnonzero(src == sources.index(cur))
        if len(mine):
            cur.at = int(off[mine[0]])
            return cur
    at_cursor = np.flatnonzero(off == cursors[src])
    pick = int(at_cursor[0]) if len(at_cursor) else 0
    chosen = sources[int(src[pick])]
    chosen.at = int(off[pick])
    return chosen
