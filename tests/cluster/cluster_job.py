"""The scenario the cluster test runs twice: on a standalone cluster (a driver process of its
own, ``python -m tests.cluster.cluster_job TABLE OUT``) and in local mode (the test's session).

Build and incremental refresh on Spark (``local_max_rows=0``), an index-narrowed
``read(where=...)``, then an append left unindexed and the same read again (hybrid scan:
index for the indexed files, a scan of the new one), and lookups. Returns the answers.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake

import lakehouse_index as li

WHERE = "k IN ('k0', 'rare', 'absent')"
KEYS = ["k0", "rare", "absent"]


def batch(b: int, n: int = 400) -> pa.Table:
    """Batch ``b``: keys k0..k6, one ``rare`` key per batch; ids unique."""
    keys = [f"k{i % 7}" for i in range(n)]
    keys[b] = "rare"
    return pa.table({"id": pa.array([b * 10_000 + i for i in range(n)], pa.int64()), "k": keys})


def pairs(rows: Any) -> list[list[Any]]:
    """Sorted ``[k, id]`` pairs of Spark rows or a pyarrow table."""
    if isinstance(rows, pa.Table):
        return sorted([k, i] for k, i in zip(rows["k"].to_pylist(), rows["id"].to_pylist(), strict=True))
    return sorted([r["k"], r["id"]] for r in rows)


def scenario(path: str, spark: Any = None) -> dict[str, Any]:
    """Run the scenario on the Delta table at ``path`` (batches 0-2 written); its answers."""
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark, local_max_rows=0)
    write_deltalake(path, batch(3), mode="append")
    t.refresh_index("by_k", "incremental", spark=spark, local_max_rows=0)
    indexed = pairs(t.read(spark, where=WHERE).select("k", "id").collect())
    write_deltalake(path, batch(4), mode="append")  # not indexed: reads are hybrid from here
    [info] = t.indexes()
    hybrid = pairs(t.read(spark, where=WHERE).select("k", "id").collect())
    return {
        "indexed_read": indexed,
        "hybrid_read": hybrid,
        "lookup": pairs(t.lookup("by_k", KEYS, columns=["k", "id"])),
        "indexed_version": info.indexed_version,
        "latest_version": t.latest_version(),
    }


def main() -> None:
    from lakehouse_index.spark import get_spark

    path, out = sys.argv[1], sys.argv[2]
    answers = scenario(path)  # the library makes the session: $LAKEHOUSE_INDEX_SPARK_MASTER
    sc = get_spark().sparkContext
    answers["master"] = sc.master
    # Block managers of the driver and of each executor that registered.
    answers["executors"] = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
    with open(out, "w") as f:
        json.dump(answers, f)
    get_spark().stop()


if __name__ == "__main__":
    main()
