"""Accepted inputs (pandas, RecordBatchReader, Spark DataFrame), Iceberg refusals, skipping indexes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.errors import DuplicateKeyError, ReadOnlyTableError, SchemaMismatchError
from tests.workflows.helpers import SCHEMA, create_indexes, index_state, rows
from tests.workflows.test_writes_iceberg_oracle import iceberg_table

FIRST = [(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")]


def _delta(tmp_path: Path) -> li.Table:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    return t


def test_pandas_and_record_batch_reader(tmp_path: Path) -> None:
    t = _delta(tmp_path)
    frame = rows([(3, "c", 2, 3, "x")]).to_pandas()
    assert t.append(frame).rows_written == 1
    reader = pa.RecordBatchReader.from_batches(SCHEMA, rows([(4, "a", 1, 4, "y")]).to_batches())
    assert t.append(reader).rows_written == 1
    # int32 and large_string columns convert losslessly to the table's int64 and string
    narrow = rows([(5, "b", 0, 5, "x")]).cast(
        pa.schema(
            [pa.field(f.name, pa.int32() if f.type == pa.int64() else pa.large_string()) for f in SCHEMA]
        )
    )
    assert t.upsert(narrow, on="id").ok
    assert sorted(t.lookup("by_k", ["a", "b", "c"])["id"].to_pylist()) == [1, 2, 3, 4, 5]
    with pytest.raises(li.errors.WriteRefusedError, match="data must be"):
        t.append([{"id": 1}])


@pytest.mark.spark
def test_spark_dataframe_is_collected(tmp_path: Path, spark) -> None:  # type: ignore[no-untyped-def]
    t = _delta(tmp_path)
    t.config = t.config.replace(executor={"format_spark_writer": False})  # else delta-spark writes it
    frame = spark.createDataFrame(rows([(7, "c", 2, 7, "y"), (8, "c", 1, 8, "x")]).to_pandas())
    result = t.append(frame)
    assert result.rows_written == 2 and result.ok
    assert sorted(t.lookup("by_k", ["c"])["id"].to_pylist()) == [7, 8]


def test_iceberg_opened_by_path_is_read_only(tmp_path: Path) -> None:
    catalog, tbl = iceberg_table(str(tmp_path), FIRST)
    t = li.open_table(tbl.location())
    version = t.latest_version()
    with pytest.raises(ReadOnlyTableError, match="through its catalog"):
        t.append(rows(FIRST))
    assert catalog.load_table("db.t").current_snapshot().snapshot_id == version


def test_iceberg_bad_input_changes_nothing(tmp_path: Path) -> None:
    catalog, _ = iceberg_table(str(tmp_path), FIRST)
    t = li.open_table("db.t", catalog=catalog)
    create_indexes(t)
    version, state = t.latest_version(), index_state(t)
    with pytest.raises(SchemaMismatchError):
        t.append(rows(FIRST).drop_columns(["k2"]))
    with pytest.raises(DuplicateKeyError):
        t.upsert(rows([(9, "a", 0, 1, "x"), (9, "b", 0, 1, "x")]), on=["id"])
    with pytest.raises(li.QueryError):
        t.delete("missing = 3")
    with pytest.raises(li.QueryError, match="cannot compare"):
        t.delete("k = 3")
    assert t.latest_version() == version and index_state(t) == state


def test_skipping_index_follows_writes(tmp_path: Path) -> None:
    t = _delta(tmp_path)
    t.create_index(li.SkippingIndex("skip_v", columns=["v"]))
    result = t.append(rows([(3, "c", 2, 300, "x")]))
    skip = {r.name: r for r in result.indexes}["skip_v"]
    assert skip.ok and skip.indexed_version == result.table_version
    assert t.scan(where="v = 300")["id"].to_pylist() == [3]


def test_upsert_updates_every_matching_row_on_both_formats(tmp_path: Path) -> None:
    """Duplicate keys in the table: every matching row is updated (SQL MERGE), on both formats."""
    dup = [(1, "a", 0, 1, "x"), (1, "a", 0, 2, "y"), (2, "b", 1, 3, "x")]
    path = str(tmp_path / "d")
    write_deltalake(path, rows(dup), partition_by=["p"])
    catalog, _ = iceberg_table(str(tmp_path / "i"), dup)
    for t in (li.open_table(path), li.open_table("db.t", catalog=catalog)):
        t.create_index(li.SecondaryIndex("by_k", key="k"))
        result = t.upsert(rows([(1, "z", 5, 50, "x"), (3, "c", 2, 30, "y")]), on=["id"])
        assert (result.rows_updated, result.rows_written) == (2, 1)
        got = sorted((r["id"], r["k"], r["v"]) for r in t.scan().to_pylist())
        assert got == [(1, "z", 50), (1, "z", 50), (2, "b", 3), (3, "c", 30)]
        assert sorted(t.lookup("by_k", ["z", "c"])["id"].to_pylist()) == [1, 1, 3]


def test_writes_between_foreign_commits_and_a_table_created_again(tmp_path: Path) -> None:
    """This process keeps the deltalake table of its last write for the next one: foreign
    commits in between are caught up with, and a table deleted and created again at the same
    location (a new metaData id) is loaded afresh, never written on the old one's state."""
    import shutil

    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    t = _delta(tmp_path)
    t.append(rows([(3, "c", 2, 3, "x")]))
    write_deltalake(path, rows([(4, "a", 1, 4, "y")]), mode="append")  # a foreign commit
    done = t.append(rows([(5, "b", 0, 5, "x")]))
    assert done.table_version == DeltaTable(path).version() == 3
    assert sorted(DeltaTable(path).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3, 4, 5]

    # The same location, a new table whose history is longer than the old one's.
    shutil.rmtree(path)
    for i in range(5):
        write_deltalake(path, rows([(10 + i, "a", 0, i, "x")]), mode="append", partition_by=["p"])
    again = li.open_table(path)
    create_indexes(again)
    # A delete reads the table's files: on the old table's state it would miss the new ones.
    done = again.delete("v < 2")
    assert done.table_version == DeltaTable(path).version() == 5 and done.rows_deleted == 2
    done = again.append(rows([(20, "c", 1, 20, "y")]))
    assert done.table_version == DeltaTable(path).version() == 6
    got = DeltaTable(path).to_pyarrow_table()
    assert sorted(got["id"].to_pylist()) == [12, 13, 14, 20]
    assert sorted(again.lookup("by_k", ["a", "c"])["id"].to_pylist()) == [12, 13, 14, 20]


def test_a_table_created_again_whose_later_commit_carries_its_metadata_is_not_written_on_the_old_state(
    tmp_path: Path,
) -> None:
    """The kept table of a write to a table since deleted must not catch up with the new
    table's commits: replayed onto the old state, a later metaData action of the new table
    would give it the new id (found by a random history: the update rewrote the old table's
    rows into the new one)."""
    import shutil

    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    old = rows([(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")])
    write_deltalake(path, old)
    li.open_table(path).update("id = 1", set={"v": 100})  # kept for the next write
    shutil.rmtree(path)
    for i in range(3):
        write_deltalake(path, rows([(10 + i, "c", 2, i, "x")]), mode="append")
    DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "false"})  # a metaData action
    write_deltalake(path, rows([(13, "c", 2, 3, "x")]), mode="append")
    before = DeltaTable(path).to_pyarrow_table()
    li.open_table(path).update("id > 0", set={"v": 7})
    after = DeltaTable(path).to_pyarrow_table()
    assert sorted(after["id"].to_pylist()) == sorted(before["id"].to_pylist()) == [10, 11, 12, 13]
    assert set(after["v"].to_pylist()) == {7}
