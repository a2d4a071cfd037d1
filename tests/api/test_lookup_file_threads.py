"""How many files a lookup fetches at a time on a local disk (one after another for a row or two
per file, else one per core); and the answer does not depend on it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.query import index_queries
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


def test_local_files_are_read_in_turn_or_one_per_core_and_the_rows_do_not_change(tmp_path: Path) -> None:
    _table(tmp_path)
    table = li.open_table(str(tmp_path))
    table.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    few = [f * 2_000 + 3 for f in range(6)]  # a row in each file: read one file after another
    lots = [f * 2_000 + j * 397 for f in (1, 4) for j in range(5)]  # five in each of two: threads

    plan = index_queries.lookup_plan(table.context, "by_k", [f"k{i}" for i in few], table.snapshot)
    files = list(plan.coverage.answered.values())
    assert len(files) == 6  # the index answers
    many = replace(plan.read, parallel_files=64)
    one = replace(plan.read, parallel_files=1)
    threads = lookup_module._fetch_config
    assert threads(table.source, files, len(files), many).parallel_files == 1
    assert threads(table.source, files, 5 * len(files), many).parallel_files == min(64, os.cpu_count() or 1)
    assert threads(table.source, files, 5 * len(files), one).parallel_files == 1

    oracle = DeltaTable(str(tmp_path)).to_pyarrow_table().to_pylist()
    for ids in (few, lots):
        keys = [f"k{i}" for i in ids]
        assert table.explain("by_k", keys).chosen.entry is not None  # through the index
        expected = sorted(r["id"] for r in oracle if r["k"] in set(keys))
        assert expected == sorted(ids)
        for read in (one, many):
            config = replace(table.config, read=read)
            got = li.open_table(str(tmp_path), config=config).lookup("by_k", keys)
            assert sorted(got["id"].to_pylist()) == expected
