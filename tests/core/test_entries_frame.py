"""The Spark executor's index entries against the files' rows, on real local Spark."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from core_helpers import CaseSpec, FileSpec, build_case

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors import SparkExecutor
from lakehouse_index.kinds.base import IndexJob
from lakehouse_index.kinds.derived import IndexedColumns

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_entries_carry_each_jobs_file_id_and_version(spark: SparkSession, tmp_path: os.PathLike[str]) -> None:
    """One entry per live row and job; a path with two jobs (removed and re-added) gets both."""
    spec = CaseSpec(
        "id",
        True,
        [
            FileSpec(rows=[(1, "a", 0.5), (2, "b", None), (3, "c", 1.0)], part="x y", deleted={1}),
            FileSpec(rows=[(4, "d", 2.0), (None, "e", 3.0)], part="%2F+é"),
        ],
    )
    source, expected = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    first, second = sorted(snap.files)
    jobs = [
        IndexJob(snap.files[first], 5, 10),
        IndexJob(snap.files[second], 6, 10),
        IndexJob(snap.files[first], 7, 12),
    ]
    columns = IndexedColumns(pa.schema([snap.schema.field("k"), snap.schema.field("id")]))
    df = SparkExecutor(spark, ExecutorConfig()).entries(source, snap, columns, jobs)
    assert df.columns == ["k", "id", "_file_id", "_row", "_version", "_op"]

    live = expected.filter(pc.invert(expected["_deleted"])).to_pylist()
    want = [
        (r["k"], r["id"], job.file_id, r["_row"], job.ordinal, 0)
        for job in jobs
        for r in live
        if r["_file_path"] == job.entry.path
    ]
    assert sorted((tuple(r) for r in df.collect()), key=repr) == sorted(want, key=repr)
