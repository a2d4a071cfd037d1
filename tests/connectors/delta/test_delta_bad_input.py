"""Broken logs give clear errors naming the file, never silently wrong files or rows."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from delta_helpers import open_source, oracle_files
from lakehouse_index_delta import DeltaSource

from lakehouse_index.io import Storage
from lakehouse_index.source import NotATableError, TableFormatError, VersionNotFoundError


def _table(path: Path, commits: int = 3) -> None:
    for i in range(commits):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")


def commit_file(path: Path, v: int) -> Path:
    return path / "_delta_log" / f"{v:020d}.json"


def test_not_a_table(tmp_path: Path) -> None:
    io = Storage.for_uri(str(tmp_path))
    assert not DeltaSource.detect(str(tmp_path), io)
    (tmp_path / "_delta_log").mkdir()
    assert DeltaSource.detect(str(tmp_path), io)
    with pytest.raises(NotATableError, match="_delta_log"):
        DeltaSource.open(str(tmp_path), io)


def test_truncated_commit_line(table_dir: Path) -> None:
    _table(table_dir)
    f = commit_file(table_dir, 2)
    f.write_bytes(f.read_bytes()[:-25])  # a writer died mid-line
    with pytest.raises(TableFormatError, match=rf"{f.name}: line \d+ is not valid JSON"):
        open_source(table_dir)


def test_non_json_commit(table_dir: Path) -> None:
    _table(table_dir)
    commit_file(table_dir, 1).write_text("hello world\n")
    with pytest.raises(TableFormatError, match=f"{commit_file(table_dir, 1).name}: line 1"):
        open_source(table_dir)


def test_action_that_is_not_an_object(table_dir: Path) -> None:
    _table(table_dir)
    commit_file(table_dir, 2).write_text("[1, 2]\n")
    with pytest.raises(TableFormatError, match=commit_file(table_dir, 2).name):
        open_source(table_dir)


def test_add_without_size(table_dir: Path) -> None:
    _table(table_dir)
    f = commit_file(table_dir, 1)
    f.write_text(f.read_text().replace('"size":', '"sizeX":'))
    with pytest.raises(TableFormatError, match=f"{f.name}: malformed add action"):
        open_source(table_dir)


def test_missing_first_commit_without_checkpoint(table_dir: Path) -> None:
    _table(table_dir)
    commit_file(table_dir, 0).unlink()
    with pytest.raises(VersionNotFoundError, match=commit_file(table_dir, 0).name):
        open_source(table_dir)


def test_corrupt_checkpoint_falls_back_to_commits_or_names_the_file(table_dir: Path) -> None:
    _table(table_dir, 4)
    deltalake.DeltaTable(str(table_dir)).create_checkpoint()
    expected = oracle_files(table_dir, 3)
    cp = table_dir / "_delta_log" / f"{3:020d}.checkpoint.parquet"
    cp.write_bytes(b"PAR1 garbage")
    # The commits are all there: the version is rebuilt without the checkpoint.
    assert set(open_source(table_dir).snapshot(3).files) == expected
    for v in range(3):
        commit_file(table_dir, v).unlink()
    with pytest.raises(TableFormatError, match=cp.name):
        open_source(table_dir)


def test_unknown_version(table_dir: Path) -> None:
    _table(table_dir)
    src = open_source(table_dir)
    with pytest.raises(VersionNotFoundError):
        src.snapshot(7)
    with pytest.raises(VersionNotFoundError):
        src.snapshot(-1)
    with pytest.raises(VersionNotFoundError):
        src.version_at(0)
    with pytest.raises(VersionNotFoundError):
        list(src.changes(1, 9))
