"""The lineage remap: copy-on-write rewrites keep their index entries at the rows' new address.

Scenario tests on real deltalake rewrites (DELETE, UPDATE, compaction, and chains of
them) check what the refresh records (moves instead of new index data) and that every
answer equals deltalake's read of the same version, before and after a full optimize.
A property test checks the alignment and the read-time translation together on random
rewrites: every row of the new file is either reached by exactly one moved entry holding
its own values, or indexed anew.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.kinds.entries import FILE_ID, ROW
from lakehouse_index.kinds.moves import MoveMap
from lakehouse_index.log.entry import LogEntry, Move, SourceFile
from lakehouse_index.maintenance.lineage import _align, _Occurrences, _Rows
from tests.support.oracle import rows_multiset

pytestmark = pytest.mark.spark

FILES = 6
ROWS = 400
COLUMNS = ["id", "email", "country"]


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": [f"u{i}@x.org" if i % 50 else None for i in ids],  # some null keys
            "country": [["fr", "de", "jp"][i % 3] for i in ids],
        }
    )


@pytest.fixture
def table(tmp_path: Path, spark: Any) -> tuple[str, li.Table]:
    path = str(tmp_path / "t")
    for f in range(FILES):
        write_deltalake(path, _batch(f * ROWS, ROWS), mode="append")
    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=True)  # small table: answer through the index
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="email", included=["id", "country"]), spark=spark)
    return path, t


def _stable(t: li.Table, name: str) -> LogEntry:
    entry = t.context.log(name).latest_stable()
    assert entry is not None
    return entry


def _removed_with_moves(entry: LogEntry) -> list[SourceFile]:
    return [f for f in entry.source.files if f.moves]


def _check(path: str, t: li.Table, version: int) -> None:
    """Every key (and a missing one) answered by both indexes equals deltalake's read."""
    full = DeltaTable(path, version=version).to_pyarrow_table()
    probe = [*{e for e in full["email"].to_pylist()}, "missing@x.org", None]
    want = rows_multiset(full, COLUMNS)
    for name in ("by_email", "cov"):
        got = t.lookup(name, probe, version_as_of=version)
        assert rows_multiset(got, COLUMNS) == want, (name, version)
        loc = t.locate(name, probe, version_as_of=version)
        located = ["email", "id"] if name == "by_email" else ["email"]  # a covering index has no record key
        assert rows_multiset(loc, located) == rows_multiset(full, located), (name, version)
    only = t.lookup("cov", probe, version_as_of=version, columns=COLUMNS)  # index-only answer
    assert rows_multiset(only, COLUMNS) == want


def test_delete_rewrite_records_moves_and_no_new_index_data(table: tuple[str, li.Table], spark: Any) -> None:
    path, t = table
    before = DeltaTable(path).version()
    DeltaTable(path).delete("id % 97 = 3")  # a few rows in every file: every file is rewritten
    old = _stable(t, "by_email")
    t.refresh_index("by_email", spark=spark)
    new = _stable(t, "by_email")
    moved = _removed_with_moves(new)
    assert len(moved) == FILES
    deleted = sum(1 for i in range(FILES * ROWS) if i % 97 == 3)
    assert sum(m.count for f in moved for m in f.moves) == FILES * ROWS - deleted
    # Nothing to index anew: every surviving row kept its entry.
    assert new.content.files == old.content.files
    t.refresh_index("cov", spark=spark)
    for v in (before, before + 1):
        _check(path, t, v)


def test_update_indexes_only_changed_rows(table: tuple[str, li.Table], spark: Any) -> None:
    path, t = table
    DeltaTable(path).update(predicate="id % 101 = 5", updates={"country": "'xx'"})
    changed = sum(1 for i in range(FILES * ROWS) if i % 101 == 5)
    for name in ("by_email", "cov"):
        old = _stable(t, name)
        t.refresh_index(name, spark=spark)
        new = _stable(t, name)
        added = [f for f in new.content.files if f not in old.content.files]
        if name == "by_email":  # country is not in this index: every row moved
            assert added == []
        else:  # the updated rows differ in an included column: they alone are indexed
            assert sum(f.rows for f in added) == changed
    _check(path, t, DeltaTable(path).version())


def test_chains_of_rewrites_then_full_optimize(table: tuple[str, li.Table], spark: Any) -> None:
    path, t = table
    versions = [DeltaTable(path).version()]
    for step in range(3):
        if step == 1:  # more small files, then compaction concatenates them with the rewritten one
            for f in range(3):
                write_deltalake(path, _batch((FILES + f) * ROWS, ROWS // 4), mode="append")
            DeltaTable(path).optimize.compact()
        else:  # delta-rs rewrites all touched files into one new file
            DeltaTable(path).delete(f"id % 13 = {step}")
        versions.append(DeltaTable(path).version())
        for name in ("by_email", "cov"):
            t.refresh_index(name, spark=spark)
    entry = _stable(t, "by_email")
    assert MoveMap.of(entry.source.files, entry.source.ordinal).depth >= 2
    for v in versions:
        _check(path, t, v)
    for name in ("by_email", "cov"):
        t.optimize_index(name, mode="full", spark=spark)
        assert _removed_with_moves(_stable(t, name)) == []
    _check(path, t, versions[-1])
    _check(path, t, versions[0])  # time travel through the older snapshots still works


def test_remap_off_indexes_rewritten_files(table: tuple[str, li.Table], spark: Any) -> None:
    path, t = table
    DeltaTable(path).delete("id % 97 = 3")
    old = _stable(t, "by_email")
    t.refresh_index("by_email", spark=spark, remap=False)
    new = _stable(t, "by_email")
    assert _removed_with_moves(new) == []
    added = [f for f in new.content.files if f not in old.content.files]
    assert sum(f.rows for f in added) == sum(1 for i in range(FILES * ROWS) if i % 97 != 3)
    t.refresh_index("cov", spark=spark)
    _check(path, t, DeltaTable(path).version())


# ---------------------------------------------------------------------- alignment property


@st.composite
def rewrites(draw: st.DrawFn) -> tuple[list[np.ndarray], np.ndarray]:
    """Removed files' fingerprints (small alphabet: duplicates) and a new file made from them."""
    olds = [
        np.array(draw(st.lists(st.integers(0, 5), max_size=30)), dtype=np.int64)
        for _ in range(draw(st.integers(1, 3)))
    ]
    new: list[int] = []
    for old in olds:
        if not draw(st.booleans()):
            continue
        for v in old.tolist():
            op = draw(st.sampled_from(["keep", "keep", "keep", "drop", "change", "insert"]))
            if op == "keep":
                new.append(v)
            elif op == "change":
                new.append(draw(st.integers(0, 7)))
            elif op == "insert":
                new += [v, draw(st.integers(0, 7))]
    return olds, np.array(new, dtype=np.int64)


@settings(max_examples=300, deadline=None)
@given(rewrites(), st.lists(st.integers(0, 29), max_size=5))
def test_alignment_and_translation_reach_every_new_row_once(
    case: tuple[list[np.ndarray], np.ndarray], deleted: list[int]
) -> None:
    olds, g = case
    # Rows deleted before the commit (a deletion vector) are not among the live rows.
    sources = []
    for fid, codes in enumerate(olds):
        live = np.array([p for p in range(len(codes)) if p not in deleted], dtype=np.int64)
        sources.append(_Rows(fid, live, codes[live]))
    found = _align(g, sources, _Occurrences.of(sources), len(g))
    assert found is not None
    runs, unmatched = found
    new_id = len(olds)
    files = [
        SourceFile(
            fid,
            f"f{fid}",
            1,
            removed_ordinal=1,
            moves=tuple(Move(r.start, r.count, new_id, r.to) for r in runs if r.file_id == fid),
        )
        for fid in range(len(olds))
    ]
    # One entry per live row of each removed file, its payload the row's fingerprint.
    entries = pa.table(
        {
            "code": [int(s.codes[i]) for s in sources for i in range(len(s.codes))],
            FILE_ID: [s.file_id for s in sources for _ in s.codes],
            ROW: [int(p) for s in sources for p in s.positions],
        },
        schema=pa.schema([("code", pa.int64()), (FILE_ID, pa.int64()), (ROW, pa.int64())]),
    )
    translated = MoveMap.of(files, 1).translate(entries)
    # What stays on a removed file is dropped by the lineage filter (only live files answer).
    moved = translated.filter(pc.equal(translated[FILE_ID], new_id))
    moved_rows = sum(r.count for r in runs)
    assert moved.num_rows == moved_rows
    assert translated.num_rows - moved.num_rows <= entries.num_rows - moved_rows
    rows = moved[ROW].to_pylist()
    assert len(rows) == len(set(rows)), "a new row is reached by two entries"
    for row, code in zip(rows, moved["code"].to_pylist(), strict=True):
        assert g[row] == code, "a moved entry does not hold its new row's values"
    assert sorted(rows + list(unmatched)) == list(range(len(g)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.booleans(), max_size=40), min_size=1, max_size=4), st.randoms())
def test_pure_deletes_and_concatenation_leave_nothing_to_index(keep: list[list[bool]], rnd: Any) -> None:
    # Distinct rows (a record key): the new file is the kept rows of some files, in order.
    olds, start = [], 0
    for k in keep:
        olds.append(np.arange(start, start + len(k), dtype=np.int64))
        start += len(k)
    order = list(range(len(olds)))
    rnd.shuffle(order)  # compaction may concatenate the files in any order
    g = np.concatenate([olds[i][np.array(keep[i], dtype=bool)] for i in order] + [np.zeros(0, np.int64)])
    sources = [_Rows(fid, np.arange(len(c), dtype=np.int64), c) for fid, c in enumerate(olds)]
    found = _align(g, sources, _Occurrences.of(sources), 0)
    assert found is not None
    runs, unmatched = found
    assert unmatched == []
    gaps = sum(1 + sum(1 for a, b in itertools.pairwise(k) if a and not b) for k in keep)
    assert len(runs) <= gaps
