"""A long-lived source whose table changed underneath it in ways commits do not: the log
cleaned up, or the table deleted and created again at the same location (deltalake is the oracle)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from delta_helpers import multiset, open_source, oracle_files, oracle_rows, read_snapshot_rows
from lakehouse_index_delta import DeltaSource

import lakehouse_index as li
from lakehouse_index.source import HistoryTruncatedError, VersionNotFoundError


def append(path: Path, ids: list[int], k: str = "a") -> None:
    deltalake.write_deltalake(
        str(path), pa.table({"id": pa.array(ids, pa.int64()), "k": [k] * len(ids)}), mode="append"
    )


def same_as_deltalake(src: DeltaSource, path: Path, version: int) -> None:
    snap = src.snapshot(version)
    assert set(snap.files) == oracle_files(path, version), version
    want = oracle_rows(path, version)
    assert multiset(read_snapshot_rows(src, snap), want.schema) == multiset(want, want.schema), version


@pytest.mark.parametrize("new_commits", [2, 5])
def test_table_created_again_at_the_same_location_is_read_afresh(table_dir: Path, new_commits: int) -> None:
    for ids in ([1, 2], [3], [4]):
        append(table_dir, ids)
    src = open_source(table_dir)
    for v in range(3):
        src.snapshot(v)  # cached, as a long-lived source has them
    old_id = src.table_id(2)
    time.sleep(0.01)  # the new commit files get other modification times
    shutil.rmtree(table_dir / "_delta_log")
    for i in range(new_commits):
        append(table_dir, [10 + i], "b" if i % 2 else "a")
    # The next listing (a poll of latest_version once the listing is old) shows another log.
    src.LISTING_MAX_AGE_S = 0
    assert src.latest_version() == new_commits - 1 == deltalake.DeltaTable(str(table_dir)).version()
    assert src.table_id(new_commits - 1) == deltalake.DeltaTable(str(table_dir)).metadata().id != old_id
    for v in range(new_commits):
        same_as_deltalake(src, table_dir, v)
    if new_commits < 3:
        with pytest.raises(VersionNotFoundError):
            src.snapshot(2)


def test_table_created_again_through_the_table_api(table_dir: Path) -> None:
    for ids in ([1, 2], [3], [4]):
        append(table_dir, ids)
    t = li.open_table(str(table_dir))
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    assert sorted(t.lookup("by_k", ["a"], version_as_of=1)["id"].to_pylist()) == [1, 2, 3]
    time.sleep(0.01)
    shutil.rmtree(table_dir / "_delta_log")
    append(table_dir, [10])
    append(table_dir, [11], "b")
    t.source.LISTING_MAX_AGE_S = 0  # as after LISTING_MAX_AGE_S seconds
    assert sorted(t.lookup("by_k", ["a"])["id"].to_pylist()) == [10]
    for v in range(2):
        o = deltalake.DeltaTable(str(table_dir), version=v).to_pyarrow_table()
        want = sorted(i for i, k in zip(o["id"].to_pylist(), o["k"].to_pylist(), strict=True) if k == "a")
        assert sorted(t.lookup("by_k", ["a"], version_as_of=v)["id"].to_pylist()) == want, v
        assert sorted(t.scan(version_as_of=v, where="k = 'a'")["id"].to_pylist()) == want, v


def test_cleaned_up_versions_are_refused_as_by_a_fresh_source(table_dir: Path) -> None:
    deltalake.write_deltalake(
        str(table_dir),
        pa.table({"id": pa.array([0], pa.int64()), "k": ["a"]}),
        configuration={"delta.logRetentionDuration": "interval 1 day"},
    )
    for i in range(1, 4):
        append(table_dir, [i])
    src = open_source(table_dir)
    for v in range(4):
        src.snapshot(v)  # cached
    old = time.time() - 10 * 86400
    for v in range(3):
        os.utime(table_dir / "_delta_log" / f"{v:020d}.json", (old + v, old + v))
    deltalake.DeltaTable(str(table_dir)).create_checkpoint()
    os.utime(table_dir / "_delta_log" / f"{3:020d}.checkpoint.parquet", (old + 5, old + 5))
    deltalake.DeltaTable(str(table_dir)).cleanup_metadata()
    assert not (table_dir / "_delta_log" / f"{0:020d}.json").exists()
    for v in range(3):
        with pytest.raises(Exception):  # noqa: B017 - deltalake's own error type
            deltalake.DeltaTable(str(table_dir), version=v)
        with pytest.raises(VersionNotFoundError):
            open_source(table_dir).snapshot(v)
    src.versions()  # a listing (latest_version lists too once the listing is LISTING_MAX_AGE_S old)
    for v in range(3):
        with pytest.raises(HistoryTruncatedError, match="cleaned up"):
            src.snapshot(v)
        with pytest.raises(HistoryTruncatedError):
            src.version_info(v)
    same_as_deltalake(src, table_dir, 3)
    append(table_dir, [4])
    src.LISTING_MAX_AGE_S = 0
    assert src.latest_version() == 4
    same_as_deltalake(src, table_dir, 4)


def test_newer_version_after_a_cleanup_the_listing_never_saw(table_dir: Path) -> None:
    """Listed at version 1; versions 2-4 committed, a checkpoint at 4 and a cleanup that removed
    every commit before it. The newest version's time is then the fresh log's, like deltalake's
    and a fresh source's, not an error about a commit the stale listing would walk through."""
    deltalake.write_deltalake(
        str(table_dir),
        pa.table({"id": pa.array([0], pa.int64()), "k": ["a"]}),
        configuration={"delta.logRetentionDuration": "interval 1 day"},
    )
    append(table_dir, [1])
    src = open_source(table_dir)
    assert src.latest_version() == 1  # the listing this source keeps
    src.version_info(1)
    for i in range(2, 5):
        append(table_dir, [i])
    deltalake.DeltaTable(str(table_dir)).create_checkpoint()
    old = time.time() - 10 * 86400
    for v in range(4):
        os.utime(table_dir / "_delta_log" / f"{v:020d}.json", (old + v, old + v))
    deltalake.DeltaTable(str(table_dir)).cleanup_metadata()
    assert not (table_dir / "_delta_log" / f"{3:020d}.json").exists()
    info = src.version_info(4)
    assert info.timestamp_ms == open_source(table_dir).version_info(4).timestamp_ms
    same_as_deltalake(src, table_dir, 4)
