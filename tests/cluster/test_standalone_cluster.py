"""The library on a Spark standalone cluster (master + one worker on 127.0.0.1, from pyspark's
own classes), driven through ``$LAKEHOUSE_INDEX_SPARK_MASTER`` by a driver process of its own.

Its answers (index-narrowed read after build and refresh, hybrid read after an unindexed
append, lookups) equal local mode's on a copy of the same table, and deltalake's read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from tests.cluster.cluster_job import KEYS, batch, pairs, scenario
from tests.support.paths import REPO_ROOT
from tests.support.spark_cluster import cluster_env, standalone_cluster

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_cluster_answers_equal_local_mode(tmp_path: Path, spark: Any) -> None:
    cluster_table, local_table = tmp_path / "on-cluster", tmp_path / "local"
    for b in range(3):
        write_deltalake(str(cluster_table), batch(b), mode="append")
    shutil.copytree(cluster_table, local_table)

    out = tmp_path / "answers.json"
    with standalone_cluster(tmp_path) as master:
        job = subprocess.run(
            [sys.executable, "-m", "tests.cluster.cluster_job", str(cluster_table), str(out)],
            cwd=REPO_ROOT,
            env=cluster_env(LAKEHOUSE_INDEX_SPARK_MASTER=master),
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert job.returncode == 0, job.stderr[-5000:]
    on_cluster = json.loads(out.read_text())
    assert on_cluster["master"] == master
    assert on_cluster["executors"] == 1, "the cluster's executor never registered"

    local = scenario(str(local_table), spark)
    for answer in ("indexed_read", "hybrid_read", "lookup", "indexed_version", "latest_version"):
        assert on_cluster[answer] == local[answer], answer
    assert local["indexed_version"] < local["latest_version"]  # the last reads were hybrid

    # Both equal deltalake's read of the final table.
    rows = DeltaTable(str(cluster_table)).to_pyarrow_table(columns=["k", "id"])
    want = [p for p in pairs(rows) if p[0] in KEYS]
    assert on_cluster["hybrid_read"] == want and on_cluster["lookup"] == want
    assert pairs(DeltaTable(str(local_table)).to_pyarrow_table(columns=["k", "id"])) == pairs(rows)
