"""Bad input to the index lifecycle through the public API: a clear ``li.*`` error naming the
problem, and nothing changed under ``_lakehouse_index`` (compared byte by byte)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake
from enginetest_helpers import (
    INDEX,
    batch,
    check_answers,
    index_dir,
    latest_stable,
    log_entries,
    make_table,
    named_files,
    sidecar_tree,
)

import lakehouse_index as li

pytestmark = pytest.mark.spark


def _refused(fn: Any, error: type[Exception], match: str, path: Path) -> None:
    """``fn()`` raises ``error`` matching ``match`` and leaves the side-car tree untouched."""
    before = sidecar_tree(path)
    with pytest.raises(error, match=match):
        fn()
    assert sidecar_tree(path) == before


def test_lifecycle_operations_refused_in_the_wrong_state(indexed_table: tuple[Path, li.Table]) -> None:
    path, t = indexed_table
    # Restore and cancel of an active index: nothing to undo.
    _refused(lambda: t.restore_index(INDEX), li.IllegalIndexStateError, "restore of a ACTIVE index", path)
    _refused(lambda: t.cancel_index(INDEX), li.IllegalIndexStateError, "no operation is in progress", path)
    # Creating it again.
    _refused(lambda: t.create_index(li.SecondaryIndex(INDEX, key="id")), li.IndexExistsError, INDEX, path)

    t.delete_index(INDEX)
    assert [i.state for i in t.indexes()] == [li.IndexState.DELETED]
    make_table(path, [10])  # something to refresh
    for mode in ("full", "incremental", "quick"):
        _refused(
            lambda mode=mode: t.refresh_index(INDEX, mode),
            li.IllegalIndexStateError,
            "deleted: restore it first",
            path,
        )
    for mode in ("quick", "full"):
        _refused(
            lambda mode=mode: t.optimize_index(INDEX, mode),
            li.IllegalIndexStateError,
            "deleted: restore it first",
            path,
        )
    _refused(lambda: t.delete_index(INDEX), li.IllegalIndexStateError, "delete of a DELETED index", path)
    _refused(lambda: t.lookup(INDEX, ["k1"]), li.IllegalIndexStateError, "DELETED", path)
    _refused(lambda: t.locate(INDEX, ["k1"]), li.IllegalIndexStateError, "DELETED", path)

    # Restore brings the same snapshot back; a refresh then catches up and answers correctly.
    t.restore_index(INDEX)
    t.refresh_index(INDEX, "incremental")
    check_answers(t, path)

    # Vacuumed: gone for every operation but create.
    t.delete_index(INDEX)
    t.vacuum_index(INDEX, retention_hours=0)
    assert t.indexes() == []
    assert not (index_dir(path) / "data").exists() or not any((index_dir(path) / "data").rglob("*.parquet"))
    for op in (
        lambda: t.refresh_index(INDEX, "quick"),
        lambda: t.restore_index(INDEX),
        lambda: t.delete_index(INDEX),
        lambda: t.vacuum_index(INDEX),
    ):
        _refused(op, li.IndexNotFoundError, "was vacuumed", path)
    _refused(lambda: t.lookup(INDEX, ["k1"]), li.IndexNotFoundError, INDEX, path)


def test_index_names_with_slashes_are_refused_everywhere(indexed_table: tuple[Path, li.Table]) -> None:
    path, t = indexed_table
    for name in ("a/b", "by_k/_log", "../by_k", "by_k/../by_k", "/abs", "", "."):
        calls = [
            functools.partial(t.refresh_index, name, "quick"),
            functools.partial(t.optimize_index, name, "quick"),
            functools.partial(t.delete_index, name),
            functools.partial(t.restore_index, name),
            functools.partial(t.cancel_index, name),
            functools.partial(t.vacuum_index, name, retention_hours=0),
            functools.partial(t.lookup, name, ["k1"]),
            functools.partial(t.locate, name, ["k1"]),
        ]
        for call in calls:
            _refused(call, li.InvalidIndexSpecError, "invalid index name", path)
    assert [i.name for i in t.indexes()] == [INDEX]
    check_answers(t, path)


def _parquet_files(path: Path) -> dict[str, str]:
    return {k: v for k, v in sidecar_tree(path).items() if k.endswith(".parquet")}


def test_vacuum_of_an_active_index_keeps_every_file_it_needs(
    indexed_table: tuple[Path, li.Table], spark: Any
) -> None:
    path, t = indexed_table
    make_table(path, [10, 11])
    t.refresh_index(INDEX, "incremental", spark=spark)  # base + delta
    DeltaTable(str(path)).delete("batch = 1")  # a removed file (lineage tombstone)
    t.refresh_index(INDEX, "incremental")
    make_table(path, [12])
    t.refresh_index(INDEX, "quick")  # pending changes, answered by hybrid scan

    # Default retention (a week): nothing expires, no index data file goes (Spark's _SUCCESS
    # and .crc side files are named by no entry: vacuum may remove them).
    files_before = _parquet_files(path)
    t.vacuum_index(INDEX)
    assert _parquet_files(path) == files_before
    check_answers(t, path)

    # Zero retention: older snapshots go, everything the latest snapshot names stays.
    stable = latest_stable(path)
    live = {f["path"] for f in stable["content"]["files"]}
    assert live
    t.vacuum_index(INDEX, retention_hours=0)
    for rel in live:
        assert (index_dir(path) / rel).is_file(), rel
    assert named_files(path) >= live
    assert [i.state for i in t.indexes()] == [li.IndexState.ACTIVE]
    check_answers(t, path)
    # The index keeps working after the vacuum.
    t.refresh_index(INDEX, "incremental", spark=spark)
    check_answers(t, path)


def _drop_column_k(path: Path) -> None:
    """A new table version without column ``k`` (deltalake cannot drop a column in place)."""
    data = DeltaTable(str(path)).to_pyarrow_table()
    write_deltalake(str(path), data.drop_columns(["k"]), mode="overwrite", schema_mode="overwrite")


def test_index_on_a_dropped_column_fails_lookups_clearly(indexed_table: tuple[Path, li.Table]) -> None:
    path, t = indexed_table
    before_drop = DeltaTable(str(path)).version()
    _drop_column_k(path)
    for call in (
        lambda: t.lookup(INDEX, ["k1"]),
        lambda: t.locate(INDEX, ["k1"]),
    ):
        _refused(call, li.LakehouseIndexError, "no column 'k'", path)
    # The table as it was is still answered from the index (time travel before the drop).
    got = t.lookup(INDEX, ["k3"], version_as_of=before_drop, columns=["id"])["id"].to_pylist()
    expected = [
        r["id"]
        for r in DeltaTable(str(path), version=before_drop).to_pyarrow_table().to_pylist()
        if r["k"] == "k3"
    ]
    assert sorted(got) == sorted(expected)


@pytest.mark.parametrize("mode", ["incremental", "full", "quick"])
def test_refresh_of_an_index_on_a_dropped_column_changes_nothing(
    indexed_table: tuple[Path, li.Table], spark: Any, mode: str
) -> None:
    path, t = indexed_table
    _drop_column_k(path)
    write_deltalake(str(path), batch(20).drop_columns(["k"]), mode="append")
    _refused(
        lambda: t.refresh_index(INDEX, mode, spark=spark),
        li.InvalidIndexSpecError,
        "no column 'k'",
        path,
    )
    assert [e["state"] for e in log_entries(path).values()][-1] == "ACTIVE"
