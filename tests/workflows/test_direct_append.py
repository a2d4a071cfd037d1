"""Appends of in-process data that write their own data files and index entries
(``workflows/direct_append.append_rows``), on both formats.

* after a foreign commit the index had not seen (it is caught up first), the append's file
  ids do not collide with the ids the catch-up gave the foreign files: every data file of
  the table is in the index's file map once, and every version answers like the reader;
* rows are split into one file per partition value (nulls and several partition columns
  included) in their original order: the written files, read back, hold exactly the rows;
* without an index that takes write-time entries, or by default
  (``ExecutorConfig.write_time_entries_in_process`` off), the format library writes the data.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.io import canonical_uri
from lakehouse_index.io.uri import local_path
from lakehouse_index.log.store import IndexCatalog
from lakehouse_index.workflows.append_task import split
from lakehouse_index.workflows.reports import Action
from tests.api.iceberg_index_support import sql_catalog
from tests.workflows.helpers import check_all, create_indexes, rows

#: The in-process write-time entries are opt-in.
CONFIG = li.Config(executor=li.ExecutorConfig(write_time_entries_in_process=True))
FIRST = [(i, "abc"[i % 3], i % 3, i, "xy"[i % 2]) for i in range(6)]


def _file_map(t: li.Table, name: str) -> Counter[str]:
    stable = IndexCatalog(t.storage, t.index_root).log(name).latest_stable()
    assert stable is not None
    return Counter(f.path for f in stable.source.files)


def test_delta_append_after_a_foreign_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path, config=CONFIG)
    create_indexes(t)
    write_deltalake(path, rows([(10, "a", 1, 5, "y")]), mode="append")  # the index lags
    result = t.append(rows([(11, "a", 2, 6, "x"), (12, "b", 1, 7, "y")]))
    by_k = {r.name: r for r in result.indexes}["by_k"]
    assert by_k.action is Action.WRITE_JOB and by_k.indexed_version == 2 == result.table_version
    files = _file_map(t, "by_k")
    native = {canonical_uri(u) for u in DeltaTable(path).file_uris()}
    assert set(files) == native and set(files.values()) == {1}
    check_all(t, [0, 1, 2], lambda v: DeltaTable(path, version=v).to_pyarrow_table())


def test_iceberg_append_after_a_foreign_commit(tmp_path: Path) -> None:
    catalog = sql_catalog(tmp_path)
    tbl = catalog.create_table("db.t", schema=rows(FIRST).schema)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(FIRST))
    t = li.open_table("db.t", catalog=catalog, config=CONFIG)
    create_indexes(t)
    catalog.load_table("db.t").append(rows([(10, "a", 1, 5, "y")]))
    result = t.append(rows([(11, "a", 2, 6, "x"), (12, "b", 1, 7, "y")]))
    by_k = {r.name: r for r in result.indexes}["by_k"]
    assert by_k.action is Action.WRITE_JOB and by_k.indexed_version == result.table_version
    live = catalog.load_table("db.t").scan().plan_files()
    files = _file_map(t, "by_k")
    assert set(files) == {canonical_uri(task.file.file_path) for task in live}
    assert set(files.values()) == {1}
    versions = [s.snapshot_id for s in catalog.load_table("db.t").snapshots()]
    check_all(t, versions, lambda v: catalog.load_table("db.t").scan(snapshot_id=v).to_arrow())


def test_split_groups_rows_in_order() -> None:
    rng = np.random.default_rng(5)
    n = 2_000
    a = pa.array([None if x == 3 else int(x) for x in rng.integers(0, 4, n)], pa.int64())
    b = pa.array([None if x == 0 else "uv"[x - 1] for x in rng.integers(0, 3, n)], pa.string())
    data = pa.table({"a": a, "b": b, "pos": pa.array(np.arange(n))})
    groups = list(split(data, ("a", "b")))
    seen = []
    for key, part in groups:
        values = dict(key)
        for c in ("a", "b"):
            want = part[c].is_null() if values[c] is None else pc.equal(part[c], values[c])
            assert pc.all(want).as_py(), (key, c)
        positions = part["pos"].to_pylist()
        assert positions == sorted(positions)  # original order kept
        seen.extend(positions)
    assert sorted(seen) == list(range(n))  # every row once
    assert (
        len({k for k, _ in groups}) == len(groups) == len(set(zip(a.to_pylist(), b.to_pylist(), strict=True)))
    )


def test_delta_partitioned_files_hold_exactly_the_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path, config=CONFIG)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    data = rows([(100 + i, "abc"[i % 3], i % 5, i, "xyz"[i % 3]) for i in range(300)])
    result = t.append(data)
    assert result.indexes[0].action is Action.WRITE_JOB
    added = set(DeltaTable(path).file_uris()) - set(DeltaTable(path, version=0).file_uris())
    assert len(added) == 3  # one file per partition value
    for uri in added:
        part = uri.split("/p=")[1].split("/")[0]
        ids = pq.read_table(local_path(canonical_uri(uri)))["id"].to_pylist()
        want = [r["id"] for r in data.to_pylist() if r["p"] == part]
        assert ids == want  # in the data's order
    got = t.lookup("by_k", ["a", "b", "c"])
    native = DeltaTable(path).to_pyarrow_table()
    assert Counter(got["id"].to_pylist()) == Counter(native["id"].to_pylist())


def test_without_write_time_indexes_the_format_library_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path, config=CONFIG)
    t.create_index(li.SecondaryIndex("by_k", key="k", auto_refresh="quick"))
    result = t.append(rows([(50, "c", 0, 5, "x")]))
    assert result.indexes[0].action is Action.QUICK
    added = set(DeltaTable(path).file_uris()) - set(DeltaTable(path, version=0).file_uris())
    (uri,) = added
    assert Path(uri).name.startswith("part-00000-")  # deltalake's own file naming
    assert 50 in t.lookup("by_k", ["c"])["id"].to_pylist()


def test_by_default_the_format_library_writes_and_the_index_refreshes(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    result = t.append(rows([(50, "c", 0, 5, "x")]))
    assert result.indexes[0].action is Action.INCREMENTAL and result.indexes[0].indexed_version == 1
    (uri,) = set(DeltaTable(path).file_uris()) - set(DeltaTable(path, version=0).file_uris())
    assert Path(uri).name.startswith("part-00000-")
