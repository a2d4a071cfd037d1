"""Iceberg tables with ORC data files are refused with an error naming the format, before
anything is written.

pyiceberg 0.12 cannot write ORC data files, so the ORC file is written with ``pyarrow.orc``
and committed with pyiceberg's fast append of a ``DataFile`` declaring ``file_format=ORC``
(what any ORC writer's commit records). Reading ORC is not implemented: the core reads data
files as Parquet (footers, page indexes, statistics, Spark's Parquet reader), see
docs/connectors-iceberg.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pytest
from iceberg_oracle import open_path
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

import lakehouse_index as li
from lakehouse_index.source import UnsupportedFeatureError

ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("s", pa.string())])


def append_orc(table, ids: list[int]) -> str:
    """Write ``ids`` as an ORC data file and commit it with a fast append; its path."""
    root = table.location().removeprefix("file://")
    path = f"{root}/data/rows-{ids[0]}.orc"
    po.write_table(pa.table({"id": ids, "s": [f"s{i}" for i in ids]}, schema=ARROW), path)
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=f"file://{path}",
        file_format=FileFormat.ORC,
        partition=Record(),
        record_count=len(ids),
        file_size_in_bytes=os.path.getsize(path),
    )
    data_file.spec_id = table.spec().spec_id
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        append.append_data_file(data_file)
    return f"file://{path}"


@pytest.fixture()
def orc_table(catalog):
    """(table, last Parquet-only snapshot, ORC file path): two Parquet appends, then one ORC append."""
    table = catalog.create_table("db.orc", ARROW, properties={"format-version": "2"})
    table.append(pa.table({"id": [1, 2], "s": ["a", "b"]}, schema=ARROW))
    table.append(pa.table({"id": [3], "s": ["c"]}, schema=ARROW))
    parquet_only = table.current_snapshot().snapshot_id
    orc = append_orc(table, [4, 5])
    return catalog.load_table("db.orc"), parquet_only, orc


def test_connector_refuses_orc_data_files_naming_the_format(orc_table):
    table, parquet_only, orc = orc_table
    src = open_path(table.location())
    head = src.latest_version()
    for call in (
        lambda: src.snapshot(head),
        lambda: list(src.changes(parquet_only)),
        lambda: src.diff(parquet_only, head),
        lambda: open_path(table.location()).diff(head, parquet_only),
    ):
        with pytest.raises(UnsupportedFeatureError, match="ORC format") as e:
            call()
        assert orc in str(e.value)
    # Snapshots without ORC files stay readable.
    assert len(src.snapshot(parquet_only).files) == 2


def test_api_writes_nothing_for_an_orc_table(catalog):
    table = catalog.create_table("db.orc", ARROW, properties={"format-version": "2"})
    table.append(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}, schema=ARROW))
    root = Path(table.location().removeprefix("file://"))
    t = li.open_table(table.location())
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    append_orc(table, [4, 5])
    before = t.indexes()
    log = sorted((root / "_lakehouse_index" / "by_id" / "_log").iterdir())
    # Refreshing the index built before the ORC commit is refused and leaves it as it was.
    with pytest.raises(UnsupportedFeatureError, match="ORC format"):
        t.refresh_index("by_id", mode="incremental")
    assert t.indexes() == before
    assert sorted((root / "_lakehouse_index" / "by_id" / "_log").iterdir()) == log
    # A new index is refused before its log is written; reads of the head too.
    with pytest.raises(UnsupportedFeatureError, match="ORC format"):
        t.create_index(li.SecondaryIndex("by_s", key="s"))
    assert not (root / "_lakehouse_index" / "by_s").exists()
    with pytest.raises(UnsupportedFeatureError, match="ORC format"):
        t.scan()
