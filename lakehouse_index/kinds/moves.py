"""Reading index entries of rewritten files at their new addresses (the lineage remap).

A copy-on-write commit removes file F and adds file G holding most of F's rows unchanged.
Instead of indexing G's rows again, an incremental refresh may record where F's rows
went (``SourceFile.moves``, see ``maintenance.lineage``). A reader at an ordinal at or
after the commit translates F's entries ``(F, r)`` to ``(G, r')``, keeping their
``_version`` and ``_op``; entries of rows in no move are dropped (the commit deleted
them). Moves chain: G may itself be rewritten later, so translation repeats until no
entry names a moved file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_index.config import SizedCache
from lakehouse_index.kinds.entries import FILE_ID, ROW, in_file_ids
from lakehouse_index.log.entry import SourceFile, SourceState
from lakehouse_index.row_filter import filter_rows


@dataclass(frozen=True)
class _Runs:
    """The moves of one removed file as sorted arrays."""

    start: np.ndarray
    count: np.ndarray
    file_id: np.ndarray
    to: np.ndarray


@dataclass(frozen=True)
class MoveMap:
    """The moves a reader capped at one ordinal applies, by removed file id."""

    runs: dict[int, _Runs]

    @classmethod
    def of(cls, files: Iterable[SourceFile], cap: int) -> MoveMap:
        """Moves of the files removed at or before ``cap``."""
        runs = {}
        for f in files:
            if f.moves and f.removed_ordinal is not None and f.removed_ordinal <= cap:
                ms = sorted(f.moves, key=lambda m: m.start)
                runs[f.id] = _Runs(
                    np.array([m.start for m in ms], dtype=np.int64),
                    np.array([m.count for m in ms], dtype=np.int64),
                    np.array([m.file_id for m in ms], dtype=np.int64),
                    np.array([m.to for m in ms], dtype=np.int64),
                )
        return cls(runs)

    def __bool__(self) -> bool:
        return bool(self.runs)

    def translate(self, entries: pa.Table) -> pa.Table:
        """``entries`` with the addresses of moved rows replaced; entries of deleted rows dropped."""
        if not self.runs or entries.num_rows == 0:
            return entries
        fids, rows, alive = self.resolve(entries[FILE_ID].to_numpy(), entries[ROW].to_numpy())
        names = entries.schema.names
        out = entries.set_column(names.index(FILE_ID), FILE_ID, pa.array(fids, pa.int64())).set_column(
            names.index(ROW), ROW, pa.array(rows, pa.int64())
        )
        return filter_rows(out, alive)

    def resolve(self, file_ids: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where the rows at addresses ``(file_ids, rows)`` live now: their new file ids and rows,
        and whether they live on at all (False: the commit that removed their file deleted them)."""
        fids, rows = file_ids.astype(np.int64, copy=True), rows.astype(np.int64, copy=True)
        keep = np.ones(len(fids), dtype=bool)
        if not self.runs or not len(fids):
            return fids, rows, keep
        # Every run of every moved file, ordered by (file id, start): one search places a
        # row address in its run, whatever file it names.
        moved = np.array(sorted(self.runs), dtype=np.int64)
        all_runs = [self.runs[int(f)] for f in moved]
        run_fid = np.concatenate(
            [np.full(len(r.start), f, dtype=np.int64) for f, r in zip(moved, all_runs, strict=True)]
        )
        start = np.concatenate([r.start for r in all_runs])
        count = np.concatenate([r.count for r in all_runs])
        to_fid = np.concatenate([r.file_id for r in all_runs])
        to_row = np.concatenate([r.to for r in all_runs])
        # Each pass moves entries one step along their chain; a chain is at most as long as
        # the number of moved files.
        for _ in range(len(moved) + 1):
            todo = np.nonzero(keep & in_file_ids(fids, moved))[0]
            if not len(todo):
                break
            f, r = fids[todo], rows[todo]
            # Last run with (file id, start) <= (f, r): lexicographic search on the pair.
            run = _search_pairs(run_fid, start, f, r)
            inside = (run >= 0) & (run_fid[np.maximum(run, 0)] == f)
            at = np.maximum(run, 0)
            inside &= r < start[at] + count[at]
            keep[todo[~inside]] = False
            hit, run = todo[inside], run[inside]
            rows[hit] = to_row[run] + rows[hit] - start[run]
            fids[hit] = to_fid[run]
        return fids, rows, keep

    def spark_rows(self) -> list[tuple[int, int, int, int, int]]:
        """``(file id, start, end, new file id, new start)`` per run, for a Spark range join."""
        return [
            (fid, int(s), int(s + c), int(f), int(t))
            for fid, r in self.runs.items()
            for s, c, f, t in zip(r.start, r.count, r.file_id, r.to, strict=True)
        ]

    @property
    def depth(self) -> int:
        """Length of the longest chain of moves (passes a join-based translation needs)."""
        targets = {fid: set(r.file_id.tolist()) for fid, r in self.runs.items()}
        memo: dict[int, int] = {}

        def chain(fid: int) -> int:
            if fid not in targets:
                return 0
            if fid not in memo:
                memo[fid] = 1 + max(chain(t) for t in targets[fid])
            return memo[fid]

        return max((chain(f) for f in targets), default=0)


def _search_pairs(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per query ``(x[i], y[i])``, the index of the last ``(a[j], b[j]) <= (x[i], y[i])`` in the
    pairs sorted by ``(a, b)``; -1 when none."""
    # Ranks of a in its distinct values make one sortable int key with b (b, y >= 0).
    span = int(max(b.max(initial=0), y.max(initial=0))) + 1
    levels = np.unique(a)
    ka = np.searchsorted(levels, a) * span + b
    pos = np.searchsorted(levels, x)
    known = (pos < len(levels)) & (levels[np.minimum(pos, len(levels) - 1)] == x)
    kx = np.where(known, pos * span + y, -1)
    return np.where(known, np.searchsorted(ka, kx, side="right") - 1, -1)


#: (id of a log entry's source state, cap) → (that state, its move map). Log entries are
#: immutable, so the map of one entry at one cap never changes; holding the state keeps
#: its id from being reused while cached. Size: ``CacheConfig.move_map_entries``.
_CACHE: SizedCache[tuple[int, int], tuple[SourceState, MoveMap]] = SizedCache("move_map_entries")


def moves_of(state: SourceState, cap: int) -> MoveMap:
    """``MoveMap.of(state.files, cap)``, cached: lookups repeat it per query."""
    key = (id(state), cap)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is state:
        return hit[1]
    found = MoveMap.of(state.files, cap)
    _CACHE[key] = (state, found)
    return found
