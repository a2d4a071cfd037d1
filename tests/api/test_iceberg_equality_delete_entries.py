"""Equality deletes and the index (issue 5): "equality deletes → DELs by key where the delete
columns are the record key, else the affected files are marked 'verify at read'".

Equality-delete files are crafted (pyiceberg cannot write them) with the Iceberg oracle's
helper. Expected rows come from a Python model of the history (pyiceberg refuses to read
equality deletes); addresses of the deleted rows are found by reading the data files with
plain pyarrow.

* On the record key: after an incremental refresh the index snapshot holds a DEL entry,
  stamped with the delete's sequence number, for exactly the rows the delete removed.
* On another column: every file the delete applies to is verified at read (its rows are
  re-checked by value), at every version, unless a full build already read the rows with
  the delete applied; the answers equal the model.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from iceberg_index_support import commit_equality_delete, index_snapshots, sql_catalog

import lakehouse_index as li
from lakehouse_index.kinds.entries import DEL, FILE_ID, OP, ROW, VERSION
from tests.support.oracle import rows_multiset

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32())])
PROBE: list[Any] = ["a", "b", "c", None, "ü", "missing"]


class EqHistory:
    """A pyiceberg v2 table, a model of its rows, and crafted equality deletes."""

    def __init__(self, directory: Path) -> None:
        self.catalog = sql_catalog(str(directory))
        self.ice = self.catalog.create_table("db.eq", SCHEMA, properties={"format-version": "2"})
        self.model: list[tuple[Any, ...]] = []
        self.versions: list[tuple[int, Counter[tuple[Any, ...]]]] = []
        self.next_id = 0

    def append(self, ks: list[Any]) -> None:
        ids = list(range(self.next_id, self.next_id + len(ks)))
        self.next_id += len(ks)
        rows = pa.table({"id": ids, "k": ks, "g": [i % 3 for i in ids]}, schema=SCHEMA)
        self.ice.append(rows)
        self.model += list(zip(ids, ks, [i % 3 for i in ids], strict=True))
        self._mark()

    def equality_delete(self, column: str, values: list[Any]) -> None:
        arrow_type = SCHEMA.field(column).type
        commit_equality_delete(self.ice, column, values, arrow_type)
        self.ice = self.catalog.load_table("db.eq")
        pos = SCHEMA.names.index(column)
        self.model = [r for r in self.model if r[pos] not in values]
        self._mark()

    def _mark(self) -> None:
        self.versions.append((self.ice.current_snapshot().snapshot_id, Counter(self.model)))

    def check(self, t: li.Table) -> None:
        for sid, expected in self.versions:
            want = Counter(r for r in expected.elements() if r[1] in PROBE)
            got = t.lookup("by_k", PROBE, version_as_of=sid)
            assert rows_multiset(got, ["id", "k", "g"]) == want, sid
            loc = t.locate("by_k", PROBE, version_as_of=sid)
            assert rows_multiset(loc, ["id", "k"]) == Counter({(r[0], r[1]): n for r, n in want.items()}), sid


def _addresses(paths_by_id: dict[int, str], column: str, values: list[Any]) -> set[tuple[int, int]]:
    """(file id, row) of every row whose ``column`` is in ``values``, read with plain pyarrow."""
    out = set()
    for fid, uri in paths_by_id.items():
        col = pq.read_table(uri.removeprefix("file://"), columns=[column])[column].to_pylist()
        out |= {(fid, r) for r, v in enumerate(col) if v in values}
    return out


@pytest.fixture
def history(tmp_path: Path, spark: Any) -> tuple[EqHistory, li.Table]:
    h = EqHistory(tmp_path)
    h.append(["a", "b", None, "ü", "a", "", "b", "c"])
    h.append(["a", None, "c", "a", "ü", "b"])
    t = li.open_table("db.eq", catalog=h.catalog)
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    return h, t


def test_equality_delete_on_the_record_key_becomes_del_entries(
    history: tuple[EqHistory, li.Table], spark: Any
) -> None:
    h, t = history
    deleted_ids = [0, 4, 9, 99]
    h.equality_delete("id", deleted_ids)
    t.refresh_index("by_k", mode="incremental", spark=spark)
    h.check(t)  # the answers are right either way (proven below too)

    entry = index_snapshots(t, "by_k")[-1]
    ordinal = entry.source.ordinal
    live = {f.id: f.path for f in entry.source.files if f.removed_ordinal is None}
    expected = _addresses(live, "id", deleted_ids)
    assert expected  # the delete really removed rows of indexed files
    index_dir = Path(t.index_root.removeprefix("file://")) / "by_k"
    entries = pa.concat_tables([pq.read_table(index_dir / f.path) for f in entry.content.files])
    dels = entries.filter(pc.equal(entries[OP], DEL))
    got = set(zip(dels[FILE_ID].to_pylist(), dels[ROW].to_pylist(), strict=True))
    assert got == expected, (
        "issue 5: an equality delete on the record key must become DEL entries for exactly the "
        f"deleted rows at ordinal {ordinal}; the index holds DELs at {sorted(got)}"
    )
    assert set(dels[VERSION].to_pylist()) == {ordinal}


@pytest.mark.parametrize("mode", ["incremental", "quick", "full", "none"])
def test_equality_delete_on_another_column_is_verified_at_read(
    history: tuple[EqHistory, li.Table], spark: Any, mode: str
) -> None:
    h, t = history
    h.equality_delete("k", ["a", "ü"])
    h.append(["a", "ü", "b"])  # appended after the delete: untouched by it
    if mode != "none":
        t.refresh_index("by_k", mode=mode, spark=spark)
    h.check(t)
    # A covered file the delete applies to is re-checked by value when answering through any
    # retained snapshot, unless the snapshot's entries already leave its rows out: a full build
    # reads rows with every delete applied (and records so); refreshes never apply an equality
    # delete on a column outside the record key.
    rebuilt = index_snapshots(t, "by_k")[-1].id if mode == "full" else None
    for sid, _ in h.versions:
        snap = t.snapshot(sid)
        affected = {p for p, f in snap.files.items() if f.equality_deletes}
        plan = t.plan("by_k", PROBE, version_as_of=sid)
        cov, entry = plan.chosen.coverage, plan.chosen.entry
        assert cov is not None and entry is not None
        applied = {f.id: set(f.equality_applied or ()) for f in entry.source.files}
        if entry.id == rebuilt:  # the rebuild read the rows with the delete applied
            assert all(applied[i] for i, fe in cov.answered.items() if fe.path in affected), sid
        unapplied = {
            fid for fid, fe in cov.answered.items() if {e.path for e in fe.equality_deletes} - applied[fid]
        }
        assert unapplied <= cov.filter_deletes, sid
        assert entry.id == rebuilt or unapplied == {
            fid for fid, fe in cov.answered.items() if fe.path in affected
        }
        scanned = {fe.path for fe in cov.scan}
        assert affected <= {fe.path for fe in cov.answered.values()} | scanned, sid
