"""Two processes racing to create the same index: exactly one wins, the index stays intact."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import lakehouse_index as li

pytestmark = pytest.mark.spark


def _create(path: str, barrier: Any, results: Any) -> None:
    from lakehouse_index.spark import get_spark

    spark = get_spark(master="local[1]")
    t = li.open_table(path)
    barrier.wait()
    try:
        t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
        results.put(("ok", ""))
    except li.LakehouseIndexError as e:
        results.put((type(e).__name__, str(e)))
    finally:
        spark.stop()


def test_two_processes_create_the_same_index(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": list(range(100)), "k": [f"k{i % 17}" for i in range(100)]}))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=_create, args=(path, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)

    kinds = sorted(kind for kind, _ in outcomes)
    assert kinds.count("ok") == 1, outcomes
    loser_kind, loser_msg = next(o for o in outcomes if o[0] != "ok")
    # Lost the put-if-absent race, found the winner's CREATING entry (both concurrency errors), or
    # (a slow start on a loaded machine) found the winner's finished index.
    assert loser_kind in ("ConcurrentIndexUpdate", "IndexBusyError", "IndexExistsError"), outcomes
    assert "by_k" in loser_msg

    t = li.open_table(path)
    [info] = t.indexes()
    assert info.state is li.IndexState.ACTIVE
    got = t.lookup("by_k", ["k3"])
    assert sorted(got["id"].to_pylist()) == [i for i in range(100) if i % 17 == 3]
