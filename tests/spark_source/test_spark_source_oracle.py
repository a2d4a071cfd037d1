"""Oracle: ``spark.read.format("lakehouse_index")`` at every version of random Delta and Iceberg histories.

Each history mixes appends, copy-on-write deletes and updates; indexes (secondary on the
key, covering on ``g``, skipping on ``id``) are created mid-history and refreshed only
part of the way, so versions are answered by exact windows, hybrid scans and plain scans.
At every version, random key, IN, range, null, negated and prefix predicates are read with
``versionAsOf`` and, where a commit's timestamp names it alone, ``timestampAsOf``, with the
planner's own choice or forced through an index (``forceIndex``: the tables are tiny), as
the ``where`` option or as Spark's pushed WHERE (``pushFilters=true``); the answer must
equal the format's own reader (deltalake ``DeltaTable(version=v)``, pyiceberg
``scan(snapshot_id=v)``) filtered in Python.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from source_support import batch, expected, iso_ms, random_case, source_rows, unique_times

import lakehouse_index as li
from tests.api.iceberg_index_support import main_lineage, sql_catalog

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

ROWS = 45
CASES_PER_VERSION = 2


def create_indexes(t: li.Table) -> None:
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    t.create_index(li.CoveringIndex("cov_g", indexed=["g"], included=["id", "k"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip_id", columns=["id"]))


def refresh_all(t: li.Table) -> None:
    for name in ("by_k", "cov_g", "skip_id"):
        t.refresh_index(name, mode="incremental")


def check_history(
    spark: Any,
    path: str,
    versions: list[int],
    times: list[int],
    read: Callable[[int], pa.Table],
    rng: random.Random,
    **options: str,
) -> int:
    """Compare every version through the source with the oracle; returns the queries run."""
    queries = 0
    alone = unique_times(times)
    max_id = max(read(versions[-1])["id"].to_pylist() or [0]) + 10
    for i, version in enumerate(versions):
        rows = read(version)
        for _ in range(CASES_PER_VERSION):
            case = random_case(rng, max_id)
            got = source_rows(spark, path, case.sql, versionAsOf=version, **options)
            assert got == expected(rows, case), (version, case.sql, options)
            queries += 1
        if alone[i]:
            case = random_case(rng, max_id)
            got = source_rows(spark, path, case.sql, timestampAsOf=iso_ms(times[i]), **options)
            assert got == expected(rows, case), (version, times[i], case.sql)
            queries += 1
    return queries


def _commit_ms(path: str, version: int) -> int:
    """A Delta commit's timestamp: its log file's modification time (the Delta protocol's rule)."""
    return os.stat(Path(path) / "_delta_log" / f"{version:020d}.json").st_mtime_ns // 1_000_000


#: The where option planned as the planner picks, and Spark's pushed WHERE through an index.
DELTA_OPTIONS = [(1, {}), (2, {"forceIndex": "true", "pushFilters": "true"})]


@pytest.mark.parametrize(("seed", "options"), DELTA_OPTIONS)
def test_delta_history(source_spark: Any, tmp_path: Path, seed: int, options: dict[str, str]) -> None:
    rng = random.Random(seed)
    path = str(tmp_path / "t")
    next_id = 0
    for step in range(7):
        time.sleep(0.05)  # commits a few ms apart: every timestamp names one version
        op = "append" if step < 2 else rng.choice(["append", "append", "delete", "update"])
        if op == "append":
            write_deltalake(path, batch(next_id, ROWS), mode="append")
            next_id += ROWS
        elif op == "delete":
            DeltaTable(path).delete(f"id % {rng.randint(3, 6)} = {rng.randrange(3)}")
        else:
            DeltaTable(path).update(predicate=f"id % 4 = {rng.randrange(4)}", updates={"v": "'upd'"})
        if step == 2:
            create_indexes(li.open_table(path))
        if step == 4:
            refresh_all(li.open_table(path))  # steps 5 and 6 stay unindexed: hybrid scans
    versions = list(range(DeltaTable(path).version() + 1))
    times = [_commit_ms(path, v) for v in versions]

    def read(v: int) -> pa.Table:
        return DeltaTable(path, version=v).to_pyarrow_table()

    assert check_history(source_spark, path, versions, times, read, rng, **options) > len(versions)


@pytest.mark.parametrize(("seed", "force"), [(3, True)])
def test_iceberg_history(source_spark: Any, tmp_path: Path, seed: int, force: bool) -> None:
    import pyiceberg.expressions as X

    rng = random.Random(seed)
    catalog = sql_catalog(str(tmp_path))
    ice = catalog.create_table("db.t", schema=batch(0, 1).schema)
    next_id = 0
    for step in range(7):
        time.sleep(0.05)
        op = "append" if step < 2 else rng.choice(["append", "append", "delete", "overwrite"])
        if op == "append":
            ice.append(batch(next_id, ROWS))
            next_id += ROWS
        elif op == "delete":
            ice.delete(X.EqualTo("g", rng.randrange(7)))
        else:
            lo = rng.randrange(next_id)
            ice.overwrite(
                batch(lo, 5), overwrite_filter=X.And(X.GreaterThanOrEqual("id", lo), X.LessThan("id", lo + 5))
            )
        if step == 2:
            create_indexes(li.open_table("db.t", catalog=catalog))
        if step == 4:
            refresh_all(li.open_table("db.t", catalog=catalog))
    ice = catalog.load_table("db.t")
    location = ice.metadata.location
    versions = main_lineage(ice)
    times = [ice.metadata.snapshot_by_id(v).timestamp_ms for v in versions]

    def read(v: int) -> pa.Table:
        return ice.scan(snapshot_id=v).to_arrow()

    options = {"forceIndex": "true"} if force else {}
    assert check_history(source_spark, location, versions, times, read, rng, **options) > len(versions)
