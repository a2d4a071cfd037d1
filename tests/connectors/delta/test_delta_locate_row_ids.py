"""``locate``'s ``_row_id`` on a Delta table with row tracking (issue 5).

deltalake cannot write row tracking, so the history is crafted by hand on top of a real
Databricks-written row-tracking table (the ``table_with_liquid_clustering`` peer table:
10 one-row files with ``baseRowId`` 0..9): a schema change, an UPDATE and a MERGE whose
new files carry the materialized row-id column (``delta.rowTracking.materializedRowIdColumnName``)
with non-null values for the rows that moved and nulls for inserted rows, a deletion
vector, an INSERT whose file has the column all null, and an OPTIMIZE that materializes
every id. The oracle is computed here, independently of the connector and the index:
from the crafted add actions (``baseRowId``, deletion vectors) and the Parquet values read
with plain pyarrow, each live row's id is its materialized value when not null, else
``baseRowId + position`` (Delta protocol, "Row Tracking").

After every commit, ``locate`` at every version so far equals that oracle through an
index refreshed incrementally (exact windows), one never refreshed (hybrid scans), a
covering index, and every retained snapshot of the refreshed index forced. ``lookup``
keeps the table's columns, an index with a record key returns no ``_row_id``, and neither
does a table without row tracking.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from lakehouse_index_delta.deletion_vectors import z85_encode
from test_delta_deletion_vectors import bitmap_bytes, i_dv, remove
from test_delta_metadata import copy_peer, log_lines, write_commit

import lakehouse_index as li
from lakehouse_index.io import join_uri
from lakehouse_index.log.store import IndexCatalog
from lakehouse_index.query import lookup as lk

#: Keys probed: rows that never moved, moved by UPDATE / MERGE / OPTIMIZE, deleted, duplicated, missing.
PROBE = [0, 2, 3, 5, 9, 102, 103, 300, 301, 302, 400, 401, 999]
LOCATED = ["id", "_row_id", "_file", "_row"]


class History:
    """The crafted table, and what the test itself knows about every version's live files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        actions = log_lines(path, 0)
        meta = next(a["metaData"] for a in actions if "metaData" in a)
        self.meta = meta
        self.mat = meta["configuration"]["delta.rowTracking.materializedRowIdColumnName"]
        #: file name → (add action body, deleted positions)
        live = {a["add"]["path"]: (a["add"], frozenset[int]()) for a in actions if "add" in a}
        self.versions: list[dict[str, tuple[dict[str, Any], frozenset[int]]]] = [live]
        self.high_water = max(
            a["baseRowId"] + json.loads(a["stats"])["numRecords"] - 1 for a, _ in live.values()
        )

    @property
    def version(self) -> int:
        return len(self.versions) - 1

    def by_id(self, key: int) -> dict[str, Any]:
        """The live add action of the one-row peer file holding ``id == key``."""
        for name, (add, _) in self.versions[-1].items():
            if pq.read_table(self.path / name)["id"].to_pylist() == [key]:
                return add
        raise KeyError(key)

    def write(
        self, name: str, ids: list[int], ks: list[str | None], mat: list[int | None] | None, rg: int
    ) -> dict[str, Any]:
        """A data file (``mat``: the materialized row-id column, or None for no such column) and its add."""
        cols: dict[str, pa.Array] = {"id": pa.array(ids, pa.int64()), "k": pa.array(ks, pa.string())}
        if mat is not None:
            cols[self.mat] = pa.array(mat, pa.int64())
        pq.write_table(pa.table(cols), self.path / name, row_group_size=rg)
        base = self.high_water + 1
        self.high_water += len(ids)
        return {
            "path": name,
            "partitionValues": {},
            "size": (self.path / name).stat().st_size,
            "modificationTime": 1_700_000_000_000,
            "dataChange": True,
            "stats": json.dumps({"numRecords": len(ids)}),
            "baseRowId": base,
            "defaultRowCommitVersion": self.version + 1,
        }

    def commit(
        self,
        operation: str,
        *,
        adds: Sequence[tuple[dict[str, Any], frozenset[int]]] = (),
        removes: Sequence[str] = (),
        data_change: bool = True,
        extra: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Commit the next version; the test's own view of the live files follows it."""
        live = dict(self.versions[-1])
        actions: list[dict[str, Any]] = [
            {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": operation}}
        ]
        actions += list(extra)
        for name in removes:
            add, deleted = live.pop(name)
            rm = remove(add, add.get("deletionVector"))
            rm["remove"]["dataChange"] = data_change
            actions.append(rm)
        for add, deleted in adds:
            body = dict(add, dataChange=data_change)
            if deleted:
                payload = bitmap_bytes(sorted(deleted))
                body["deletionVector"] = i_dv(z85_encode(payload), payload, len(deleted))
            actions.append({"add": body})
            live[add["path"]] = (body, deleted)
        rt = {"rowIdHighWaterMark": self.high_water, "domainName": "delta.rowTracking"}
        actions.append(
            {
                "domainMetadata": {
                    "domain": "delta.rowTracking",
                    "configuration": json.dumps(rt),
                    "removed": False,
                }
            }
        )
        write_commit(self.path, self.version + 1, actions)
        self.versions.append(live)

    def expected(self, version: int, keys: list[int]) -> Counter[tuple[Any, ...]]:
        """(id, row id, file name, position) of every live row of ``version`` whose id is in ``keys``."""
        out: Counter[tuple[Any, ...]] = Counter()
        for name, (add, deleted) in self.versions[version].items():
            t = pq.read_table(self.path / name)
            mat = t[self.mat].to_pylist() if self.mat in t.column_names else [None] * t.num_rows
            for pos, key in enumerate(t["id"].to_pylist()):
                if key in keys and pos not in deleted:
                    rid = mat[pos] if mat[pos] is not None else add["baseRowId"] + pos
                    out[(key, rid, name, pos)] += 1
        return out

    def all_ids(self, version: int) -> list[int]:
        everything = self.expected(version, list(range(10_000)))
        return [rid for (_, rid, _, _), n in everything.items() for _ in range(n)]


def located(t: pa.Table) -> Counter[tuple[Any, ...]]:
    assert t.column_names == LOCATED, t.column_names
    names = [f.rsplit("/", 1)[-1] for f in t["_file"].to_pylist()]
    return Counter(
        zip(t["id"].to_pylist(), t["_row_id"].to_pylist(), names, t["_row"].to_pylist(), strict=True)
    )


def build(tmp_path: Path) -> tuple[History, li.Table]:
    path = copy_peer("table_with_liquid_clustering", tmp_path)
    h = History(path)
    table = li.open_table(str(path))
    table.planner_config = li.PlannerConfig(force_index=True)  # tiny tables: test the index path
    return h, table


def steps(h: History) -> list[Any]:
    """The crafted history after the peer's version 0 (each entry commits one version)."""

    def add_column() -> None:
        schema = json.loads(h.meta["schemaString"])
        schema["fields"].append({"name": "k", "type": "string", "nullable": True, "metadata": {}})
        h.commit("ADD COLUMNS", extra=[{"metaData": dict(h.meta, schemaString=json.dumps(schema))}])

    def update() -> None:  # SET id = id + 100 WHERE id IN (2, 3): the rows keep their ids 2 and 3
        olds = [h.by_id(2)["path"], h.by_id(3)["path"]]
        u = h.write("u.parquet", [102, 103], ["u", "u"], [2, 3], 1)
        h.commit("UPDATE", adds=[(u, frozenset())], removes=olds)

    def merge() -> None:  # id 5 matched and kept (materialized 5), three rows inserted (null: inherited)
        old = h.by_id(5)["path"]
        m = h.write("m.parquet", [5, 300, 301, 302], ["m", "x", "x", "m"], [5, None, None, None], 2)
        h.commit("MERGE", adds=[(m, frozenset())], removes=[old])

    def delete_by_dv() -> None:  # DELETE WHERE id = 300: a deletion vector, the file keeps its baseRowId
        m = h.versions[-1]["m.parquet"][0]
        body = {k: v for k, v in m.items() if k != "deletionVector"}
        h.commit("DELETE", adds=[(body, frozenset({1}))], removes=["m.parquet"])

    def insert() -> None:  # a writer that writes the materialized column, all null; a duplicate key
        a = h.write("a.parquet", [400, 401, 102], ["a", "a", "dup"], [None, None, None], 2)
        h.commit("WRITE", adds=[(a, frozenset())])

    def optimize() -> None:  # every id materialized into one file with a fresh baseRowId
        names = [h.by_id(0)["path"], h.by_id(1)["path"], h.by_id(4)["path"], "u.parquet", "m.parquet"]
        rows: list[tuple[Any, Any, Any]] = []
        for name in names:
            add, deleted = h.versions[-1][name]
            t = pq.read_table(h.path / name)
            ks = t["k"].to_pylist() if "k" in t.column_names else [None] * t.num_rows
            mat = t[h.mat].to_pylist() if h.mat in t.column_names else [None] * t.num_rows
            for pos, (key, k) in enumerate(zip(t["id"].to_pylist(), ks, strict=True)):
                if pos not in deleted:
                    rows.append((key, k, mat[pos] if mat[pos] is not None else add["baseRowId"] + pos))
        o = h.write("o.parquet", [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], 3)
        h.commit("OPTIMIZE", adds=[(o, frozenset())], removes=names, data_change=False)

    return [add_column, update, merge, delete_by_dv, insert, optimize]


def forced(table: li.Table, name: str, version: int, keys: list[Any]) -> list[tuple[pa.Table, Any]]:
    """``locate`` (and its coverage) through every retained snapshot of index ``name``."""
    out = []
    for entry in IndexCatalog(table.storage, table.index_root).log(name).active_snapshots():
        plan = lk.plan_lookup(table.source, entry, table.snapshot(version), keys)
        out.append(
            (lk.locate(table.source, table.storage, join_uri(table.index_root, name), plan), plan.coverage)
        )
    return out


def test_locate_row_ids_follow_the_delta_row_tracking_definition(tmp_path: Path) -> None:
    h, table = build(tmp_path)
    assert table.snapshot().row_id_column == h.mat
    table.create_index(li.SecondaryIndex("by_id", key="id"))
    table.create_index(li.SecondaryIndex("stale", key="id"))  # never refreshed: hybrid scans
    table.create_index(li.CoveringIndex("cov", indexed="id", num_buckets=2))
    hybrid = False  # some answer combined index entries with a scan of uncovered files
    for step in [None, *steps(h)]:
        if step is not None:
            step()
            table.refresh_index("by_id", mode="incremental")
            table.refresh_index("cov", mode="incremental")
            if h.version == 1:  # k exists from version 1 on
                table.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
            else:
                table.refresh_index("by_k", mode="incremental")
        assert table.latest_version() == h.version
        for v in range(h.version + 1):
            ids = h.all_ids(v)
            assert len(ids) == len(set(ids)), v  # the oracle's row ids are unique per version
            want = h.expected(v, PROBE)
            for name in ("by_id", "stale", "cov"):
                assert located(table.locate(name, PROBE, version_as_of=v)) == want, (h.version, v, name)
            for got, _ in forced(table, "by_id", v, PROBE):
                assert located(got) == want, (h.version, v)
            for got, cov in forced(table, "stale", v, PROBE):
                assert located(got) == want, (h.version, v)
                hybrid |= bool(cov.scan) and bool(cov.answered)
            rows = table.lookup("by_id", PROBE, version_as_of=v)
            assert rows.column_names == table.snapshot(v).schema.names  # lookup unchanged
            assert sorted(rows["id"].to_pylist()) == sorted(key for key, *_ in want.elements())
            if v >= 1:
                by_k = table.locate("by_k", ["u", "m", "x", "dup", None], version_as_of=v)
                assert by_k.column_names == ["k", "id", "_file", "_row"], v  # a record key: no _row_id
    assert hybrid
    # Stable: a row keeps its id through UPDATE, MERGE, the DV and OPTIMIZE (by key: unique here).
    first = {key: rid for key, rid, *_ in h.expected(2, [102, 103])}
    assert first == {102: 2, 103: 3}
    last = {key: rid for key, rid, *_ in h.expected(h.version, [103, 5, 301, 302])}
    assert {k: last[k] for k in (103, 5, 301, 302)} == {103: 3, 5: 5, 301: 14, 302: 15}


def test_locate_without_row_tracking_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "plain"
    deltalake.write_deltalake(
        str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64()), "k": ["a", "b", "a"]})
    )
    table = li.open_table(str(path))
    assert table.snapshot().row_id_column is None
    table.planner_config = li.PlannerConfig(force_index=True)
    table.create_index(li.SecondaryIndex("by_k", key="k"))
    table.create_index(li.SecondaryIndex("by_k_id", key="k", record_key="id"))
    deltalake.write_deltalake(
        str(path), pa.table({"id": pa.array([4], pa.int64()), "k": ["a"]}), mode="append"
    )
    for _ in range(2):  # hybrid (file 2 not indexed), then exact after a refresh
        got = table.locate("by_k", ["a"])
        assert got.column_names == ["k", "_file", "_row"] and got.num_rows == 3
        assert table.locate("by_k_id", ["a"]).column_names == ["k", "id", "_file", "_row"]
        table.refresh_index("by_k", mode="incremental")
        table.refresh_index("by_k_id", mode="incremental")
