"""The side-car folder survives the table's own garbage collection.

Delta (delta-rs ``DeltaTable.vacuum``) skips ``_``-prefixed paths, so ``<table>/_lakehouse_index``
is safe; checked for real, with positive controls showing the same vacuum does delete
unreferenced table files and an untracked non-hidden folder.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake


def _live(table: str) -> set[str]:
    """Live data files of the table per deltalake, relative to the table root."""
    uris = DeltaTable(table).file_uris()
    return {os.path.relpath(u.removeprefix("file://"), table) for u in uris}


def _files_under(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("full", [False, True])
def test_delta_vacuum_keeps_the_side_car_folder(tmp_path, full: bool) -> None:
    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": [1, 2, 3], "email": ["a", "b", "c"]}))
    first_files = _live(table)
    write_deltalake(table, pa.table({"id": [4], "email": ["d"]}), mode="overwrite")
    live = _live(table)

    side_car = {
        "_lakehouse_index/by_email/_log/00000000000000000000.json": b'{"formatVersion":1}',
        "_lakehouse_index/by_email/_log/00000000000000000001.json": b'{"formatVersion":1}',
        "_lakehouse_index/by_email/data/0f3c/part-0.parquet": None,
        "_lakehouse_index/by_email/data/9a1b/merged.parquet": None,
    }
    for rel, data in side_car.items():
        path = os.path.join(table, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if data is None:
            pq.write_table(pa.table({"email": ["a"], "_file_id": [0], "_row": [0]}), path)
        else:
            with open(path, "wb") as f:
                f.write(data)
    # Positive control: an untracked, non-hidden folder that a full vacuum must remove.
    stray = "stray/part-x.parquet"
    os.makedirs(os.path.join(table, "stray"))
    pq.write_table(pa.table({"x": [1]}), os.path.join(table, stray))

    dt = DeltaTable(table)
    planned = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True, full=full)
    assert not [p for p in planned if "_lakehouse_index" in p]
    deleted = dt.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False, full=full)

    left = _files_under(table)
    assert set(side_car) <= left  # every side-car file survived
    assert not [p for p in deleted if "_lakehouse_index" in p]
    # The vacuum did run: the overwritten files are gone, the live ones stay.
    assert first_files and not (first_files & left)
    assert live <= left
    if full:
        assert stray not in left  # untracked non-hidden files do get deleted by a full vacuum
    assert DeltaTable(table).to_pyarrow_table().to_pydict() == {"id": [4], "email": ["d"]}
