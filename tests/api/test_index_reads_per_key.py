"""Issue 6: "≤3 index object reads per key when metadata is cached (root manifest in the log
entry, Parquet footers cached)".

Storage requests are counted by wrapping the index's and the table's pyarrow filesystems
(``integration.bench.common.count_io``, the benchmarks' counter: every read call on an
opened file is one GET on S3). A 200k-row Delta table with its unique keys spread over
every file is indexed (secondary and covering); after one warm-up call, each lookup and
locate of one key — present or missing — must make at most 3 index-data reads, for a
compacted index and for one with a delta file from an incremental refresh. The answers
are checked against deltalake at the same time.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from integration.bench.common import clear_engine_caches, count_io

pytestmark = pytest.mark.spark

FILES = 10
ROWS = 20_000
MAX_READS = 3


def _batch(ids: np.ndarray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([f"u{i:07d}@x.org" for i in ids.tolist()], pa.string()),
            "country": pa.array([["fr", "de", "jp"][i % 3] for i in ids.tolist()], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, li.Table]:
    path = str(tmp_path_factory.mktemp("reads") / "t")
    ids = np.random.default_rng(5).permutation(FILES * ROWS)  # keys spread over every file
    for f in range(FILES):
        write_deltalake(path, _batch(ids[f * ROWS : (f + 1) * ROWS]), mode="append")
    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    t.create_index(li.CoveringIndex("cov", indexed="email", included=["id", "country"], num_buckets=4))
    return path, t


def _check_reads(path: str, t: li.Table, keys: list[str]) -> list[int]:
    """Index-data reads of each warm lookup / locate of one key (answers checked against deltalake)."""
    truth = {
        r["email"]: r["id"] for r in DeltaTable(path).to_pyarrow_table(columns=["email", "id"]).to_pylist()
    }
    seen = []
    for name in ("by_email", "cov"):
        for fn in (t.locate, t.lookup):
            with count_io(t.storage, t.source.io) as counters:
                fn(name, [keys[0]])  # warm: footers cached through the counting wrapper
                for key in keys:
                    before = counters.object_reads("index-data")
                    got = fn(name, [key])
                    reads = counters.object_reads("index-data") - before
                    assert got["email"].to_pylist() == ([key] if key in truth else []), (name, key)
                    if "id" in got.column_names:
                        assert got["id"].to_pylist() == ([truth[key]] if key in truth else []), (name, key)
                    assert reads <= MAX_READS, (name, fn.__name__, key, reads)
                    seen.append(reads)
            clear_engine_caches()  # drop handles opened through the wrapper
    return seen


def test_at_most_three_index_reads_per_key_when_warm(table: tuple[str, li.Table], spark: Any) -> None:
    path, t = table
    rnd = random.Random(3)
    keys = [f"u{rnd.randrange(FILES * ROWS):07d}@x.org" for _ in range(12)] + [
        "missing@x.org",
        "u9999999@x.org",
    ]
    compact = _check_reads(path, t, keys)
    # An incremental refresh adds a delta file (an LSM level): still within the bound.
    write_deltalake(path, _batch(np.arange(FILES * ROWS, FILES * ROWS + 500)), mode="append")
    DeltaTable(path).delete("id % 1000 = 7")
    for name in ("by_email", "cov"):
        t.refresh_index(name, mode="incremental", spark=spark)
    with_delta = _check_reads(path, t, [*keys, f"u{FILES * ROWS + 3:07d}@x.org"])
    assert max(compact) >= 1 and max(with_delta) >= 1  # the counter does see index reads
