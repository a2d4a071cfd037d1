"""Writes an index plans: delete, update, upsert and overwrite(where) touch only the files holding their rows.

Each scenario writes a table of several files (one key range per file), indexes ``id``, runs
the write and checks, against the format library's own read of every version (deltalake,
pyiceberg): the rows; which data files the commit removed and added (only the files holding
the rows, and the new rows' files); that the write took the index path; and that the index
then answers at every version, having placed the rewritten files by the commit's lineage
(its refresh wrote entries only for the rows the write added).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action

FILES = 5
PER_FILE = 200
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.int64())])


def _rows(ids: range | list[int], v: int = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


class Delta:
    def __init__(self, root: Path) -> None:
        self.path = str(root / "t")
        for f in range(FILES):
            write_deltalake(self.path, _rows(range(f * PER_FILE, (f + 1) * PER_FILE)), mode="append")
        self.t = li.open_table(self.path)

    def read(self, version: int) -> pa.Table:
        return DeltaTable(self.path, version=version).to_pyarrow_table()

    def files(self, version: int) -> set[str]:
        return {f.rsplit("/", 1)[-1] for f in DeltaTable(self.path, version=version).file_uris()}


class Iceberg:
    def __init__(self, root: Path) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("w", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}/wh")
        catalog.create_namespace("db")
        tbl = catalog.create_table("db.t", schema=SCHEMA)
        for f in range(FILES):
            tbl.append(_rows(range(f * PER_FILE, (f + 1) * PER_FILE)))
        self.catalog = catalog
        self.t = li.open_table("db.t", catalog=catalog)

    def read(self, version: int) -> pa.Table:
        return self.catalog.load_table("db.t").scan(snapshot_id=version).to_arrow()

    def files(self, version: int) -> set[str]:
        tasks = self.catalog.load_table("db.t").scan(snapshot_id=version).plan_files()
        return {t.file.file_path.rsplit("/", 1)[-1] for t in tasks}


@pytest.fixture(params=["delta", "iceberg"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    fmt = Delta(tmp_path) if request.param == "delta" else Iceberg(tmp_path)
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    return fmt


def _multiset(t: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(t[c].to_pylist() for c in SCHEMA.names), strict=True))


def _check_every_version(fmt: Any, versions: list[int], keys: list[int]) -> None:
    """lookup of ``keys`` at every version equals the format library's read of that version."""
    for v in versions:
        want = fmt.read(v).select(SCHEMA.names)
        want = want.filter(pa.compute.is_in(want["id"], pa.array(keys)))
        got = fmt.t.lookup("by_id", keys, version_as_of=v).select(SCHEMA.names)
        assert _multiset(got) == _multiset(want), v


def _refresh_entries(result: li.WriteResult) -> int:
    (report,) = [r for r in result.indexes if r.name == "by_id"]
    assert report.action is Action.INCREMENTAL
    return report.entries_written


def test_a_keyed_delete_rewrites_only_the_file_holding_the_keys(table: Any) -> None:
    before = table.t.latest_version()
    result = table.t.delete("id IN (3, 250) AND v = 0")  # files 0 and 1
    after = result.table_version
    assert result.path is li.WritePath.INDEX and result.index == "by_id"
    assert result.mode == "copy-on-write" and result.rows_deleted == 2
    assert len(result.files_rewritten) == 2
    gone = table.files(before) - table.files(after)
    assert len(gone) == 2 and len(table.files(after) - table.files(before)) == 2
    rows = table.read(after)
    assert rows.num_rows == FILES * PER_FILE - 2 and not set(rows["id"].to_pylist()) & {3, 250}
    assert _refresh_entries(result) == 0  # the rewrites were placed by the commit's lineage
    _check_every_version(table, [before, after], [3, 250, 4, 251, 999])


def test_the_where_is_checked_on_the_located_rows(table: Any) -> None:
    result = table.t.delete("id IN (3, 250) AND v = 1")  # the key pins rows, the rest matches none
    assert result.path is li.WritePath.INDEX and result.rows_deleted == 0
    assert table.read(result.table_version).num_rows == FILES * PER_FILE


def test_an_upsert_rewrites_the_files_of_its_updates_and_adds_its_rows(table: Any) -> None:
    before = table.t.latest_version()
    data = _rows([10, 11, 5000, 5001], v=7)  # two updates in file 0, two inserts
    result = table.t.upsert(data, on="id")
    after = result.table_version
    assert result.path is li.WritePath.INDEX
    assert (result.rows_updated, result.rows_written) == (2, 2)
    assert len(table.files(before) - table.files(after)) == 1  # file 0 only
    rows = table.read(after)
    assert rows.num_rows == FILES * PER_FILE + 2
    assert _multiset(rows.filter(pa.compute.equal(rows["v"], 7))) == _multiset(data)
    assert _refresh_entries(result) == 4  # the added rows only
    _check_every_version(table, [before, after], [10, 11, 12, 5000, 5001])


def test_an_upsert_replacing_a_whole_file_indexes_its_new_rows_as_new(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row of file 1 updated: the file goes, nothing replaces it, and the new rows' file is
    indexed as new, not aligned with the removed file by fingerprints (which reads both)."""
    from lakehouse_index.maintenance import lineage

    aligned: list[int] = []
    real = lineage.remap_commit

    def spy(*args: Any, **kwargs: Any) -> Any:
        aligned.append(len(args[5]))  # the added files left to align
        return real(*args, **kwargs)

    monkeypatch.setattr(lineage, "remap_commit", spy)
    before = table.t.latest_version()
    data = _rows([*range(PER_FILE, 2 * PER_FILE), 5000], v=7)
    result = table.t.upsert(data, on="id")
    after = result.table_version
    assert result.path is li.WritePath.INDEX and (result.rows_updated, result.rows_written) == (PER_FILE, 1)
    assert len(table.files(before) - table.files(after)) == 1  # file 1 goes, nothing rewritten of it
    assert table.files(after) - table.files(before) == {f.rsplit("/", 1)[-1] for f in result.files_added}
    assert aligned == [0]
    assert _refresh_entries(result) == PER_FILE + 1
    _check_every_version(table, [before, after], [PER_FILE, PER_FILE + 7, 2 * PER_FILE - 1, 5000, 3])


def test_a_keyed_update_and_overwrite(table: Any) -> None:
    first = table.t.latest_version()
    up = table.t.update("id = 401", set={"v": 9})
    assert up.path is li.WritePath.INDEX and up.rows_updated == 1
    ow = table.t.overwrite(_rows([401, 402], v=5), where="id = 401")
    assert ow.path is li.WritePath.INDEX
    rows = table.read(ow.table_version)
    assert sorted(rows.filter(pa.compute.greater(rows["v"], 0))["id"].to_pylist()) == [401, 402]
    assert rows.num_rows == FILES * PER_FILE + 1
    _check_every_version(table, [first, up.table_version, ow.table_version], [400, 401, 402])


def test_writes_no_index_pins_go_through_the_format_library(table: Any) -> None:
    assert table.t.delete("v = 3").path is li.WritePath.FORMAT_LIBRARY
    forced = table.t.delete("id = 3", use_indexes=False)
    assert forced.path is li.WritePath.FORMAT_LIBRARY and forced.rows_deleted == 1
    assert table.t.upsert(_rows([7], v=1), on="name").path is li.WritePath.FORMAT_LIBRARY


def test_a_mode_the_writer_does_not_write_is_refused_before_anything_is_written(table: Any) -> None:
    before = table.t.latest_version()
    with pytest.raises(li.errors.WriteRefusedError, match="write mode must be one of"):
        table.t.delete("id = 3", mode="sideways")
    assert table.t.latest_version() == before
