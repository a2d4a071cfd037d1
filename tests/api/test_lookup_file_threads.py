"""How many files a lookup fetches at a time: one per core on a local disk, ``parallel_files``
on an object store; and the answer does not depend on it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.query import lookup as lookup_module


def _table(path: Path) -> None:
    """Six files of 2,000 rows (large enough that the planner prefers the index to a scan)."""
    for f in range(6):
        ids = list(range(f * 2_000, (f + 1) * 2_000))
        write_deltalake(
            str(path),
            pa.table({"id": ids, "k": [f"k{i}" for i in ids], "v": [f"value {i:08d}" * 4 for i in ids]}),
            mode="append",
        )


def test_local_files_are_fetched_one_per_core_and_the_rows_do_not_change(tmp_path: Path) -> None:
    _table(tmp_path)
    table = li.open_table(str(tmp_path))
    table.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    keys = [f"k{i}" for i in (3, 2_014, 4_025, 6_036, 8_047, 10_058)]
    plan = table._lookup_plan("by_k", keys, None, None)
    files = list(plan.coverage.answered.values())
    assert len(files) == 6, str(table.explain("by_k", keys))  # the index answers
    many = replace(plan.read, parallel_files=64)
    cores = os.cpu_count() or 1
    assert lookup_module._fetch_config(table.source, files, many).parallel_files == min(64, cores)
    one = replace(plan.read, parallel_files=1)
    assert lookup_module._fetch_config(table.source, files, one).parallel_files == 1

    expected = sorted(
        r["id"] for r in DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist() if r["k"] in set(keys)
    )
    for read in (one, many):
        config = replace(table.config, read=read)
        got = li.open_table(str(tmp_path), config=config).lookup("by_k", keys)
        assert sorted(got["id"].to_pylist()) == expected == [3, 2_014, 4_025, 6_036, 8_047, 10_058]
