"""The two executors behind one layout, for every built-in kind.

* The in-process (pyarrow) executor writes a covering index bucketed exactly like Spark:
  the same rows in each bucket, each bucket in its own files (named by Spark's bucket ids).
* Work under the sizing policy's limit (build, incremental refresh, optimize quick and
  full) runs without a JVM: checked in a fresh interpreter that must never import pyspark.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.io import join_uri
from lakehouse_index.kinds.layout import Buckets, bucket_ids
from tests.support.paths import code_env

BUCKETS = 8


def _batch(f: int, rows: int = 400) -> pa.Table:
    ids = list(range(f * rows, (f + 1) * rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([None if i % 41 == 5 else f"user{i % 97}@x" for i in ids], pa.string()),
            "n": pa.array([i % 53 for i in ids], pa.int64()),
        }
    )


def _table(path: Path, files: int = 4) -> str:
    for f in range(files):
        write_deltalake(str(path), _batch(f), mode="append")
    return str(path)


def _rows_per_bucket(t: li.Table, name: str) -> dict[int, Counter[tuple[Any, ...]]]:
    """Every index row by the bucket directory its file sits in (the row address left out: file
    ids follow the order of file names, which differ between the two tables)."""
    entry = t.context.log(name).latest_stable()
    assert entry is not None
    out: dict[int, Counter[tuple[Any, ...]]] = {}
    for f in entry.content.files:
        assert f.bucket is not None, f"{f.path} is not a bucket file"
        fs, path = t.storage.arrow(join_uri(t.context.index_dir(name), f.path))
        rows = pq.read_table(path, filesystem=fs).to_pylist()
        out.setdefault(f.bucket, Counter()).update(
            tuple(sorted((k, v) for k, v in r.items() if k not in ("_file_id", "_row"))) for r in rows
        )
    return out


@pytest.mark.spark
@pytest.mark.parametrize("key", ["email", "n"])
def test_in_process_covering_build_is_bucketed_like_the_spark_build(
    tmp_path: Path, spark: Any, key: str
) -> None:
    spec = li.CoveringIndex("cov", indexed=key, included=["id"], num_buckets=BUCKETS)
    local = li.open_table(_table(tmp_path / "local"))
    on_spark = li.open_table(_table(tmp_path / "spark"))
    local.create_index(spec)  # 1,600 rows: in process
    on_spark.create_index(spec, spark=spark, local_max_rows=0)  # forced onto Spark

    by_local, by_spark = _rows_per_bucket(local, "cov"), _rows_per_bucket(on_spark, "cov")
    assert by_local == by_spark
    assert len(by_local) > 1 and sum(sum(c.values()) for c in by_local.values()) == 1_600
    for bucket, rows in by_local.items():
        keys = sorted({dict(r)[key] for r in rows}, key=str)
        typ = pa.string() if key == "email" else pa.int64()
        assert set(bucket_ids(pa.array(keys, typ), Buckets(key, BUCKETS)).tolist()) == {bucket}, (
            bucket,
            keys,
        )

    # Both answer lookups from the index alone, reading only the key's bucket.
    probe = ["user3@x", None, "absent"] if key == "email" else [3, 52, 999]
    for t in (local, on_spark):
        got = t.lookup("cov", probe, columns=[key, "id"]).to_pylist()
        every = t.scan(columns=[key, "id"], use_indexes=False).to_pylist()
        want = Counter((r[key], r["id"]) for r in every if r[key] in probe)
        assert Counter((r[key], r["id"]) for r in got) == want


_NO_JVM = textwrap.dedent(
    """
    import sys
    from collections import Counter

    import pyarrow as pa
    from deltalake import write_deltalake

    import lakehouse_index as li

    path, kind = sys.argv[1], sys.argv[2]

    def batch(f):
        ids = list(range(f * 300, (f + 1) * 300))
        return pa.table({"id": pa.array(ids, pa.int64()), "k": pa.array([f"k{i % 37}" for i in ids])})

    write_deltalake(path, batch(0), mode="append")
    t = li.open_table(path)
    spec = {
        "secondary": li.SecondaryIndex("ix", key="k", record_key="id"),
        "covering": li.CoveringIndex("ix", indexed="k", included=["id"], num_buckets=4),
        "skipping": li.SkippingIndex("ix", columns="k"),
    }[kind]
    t.create_index(spec)
    for f in (1, 2):
        write_deltalake(path, batch(f), mode="append")
        t.refresh_index("ix", "incremental")
    t.optimize_index("ix", "quick")
    t.optimize_index("ix", "full")
    assert t.indexes()[0].indexed_version == 2, t.indexes()
    probe = ["k3", "k36", "nope"]
    want = Counter(r["id"] for r in t.scan(use_indexes=False).to_pylist() if r["k"] in probe)
    got = t.scan(where="k IN ('k3', 'k36', 'nope')")
    assert Counter(got["id"].to_pylist()) == want, (got, want)
    if spec.kind != "skipping":
        assert Counter(t.lookup("ix", probe)["id"].to_pylist()) == want
    print("pyspark imported:", "pyspark" in sys.modules)
    """
)


@pytest.mark.parametrize("kind", ["secondary", "covering", "skipping"])
def test_small_indexes_build_refresh_and_optimize_without_a_jvm(tmp_path: Path, kind: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", _NO_JVM, str(tmp_path / "t"), kind],
        capture_output=True,
        text=True,
        timeout=300,
        env=code_env(),
    )
    assert run.returncode == 0, run.stderr
    assert "pyspark imported: False" in run.stdout, run.stdout


@pytest.mark.parametrize("layout_version", [1, 2])
def test_covering_layouts_both_answer_lookups(tmp_path: Path, layout_version: int) -> None:
    """An index in the crc32 layout of older releases (1) is still written and read as it was;
    a new one (2) has Spark's bucket file names; both answer lookups exactly."""
    spec = li.CoveringIndex(
        "cov", indexed="email", included=["id"], num_buckets=4, layout_version=layout_version
    )
    t = li.open_table(_table(tmp_path / "t", files=2))
    t.create_index(spec)
    write_deltalake(str(tmp_path / "t"), _batch(7), mode="append")
    t.refresh_index("cov")
    entry = t.context.log("cov").latest_stable()
    assert entry is not None and entry.spec == spec
    in_dirs = {"/bucket=" in f.path for f in entry.content.files}
    assert in_dirs == {layout_version == 1}
    probe = ["user3@x", None, "user96@x", "absent"]
    every = t.scan(columns=["email", "id"], use_indexes=False).to_pylist()
    want = Counter((r["email"], r["id"]) for r in every if r["email"] in probe)
    got = t.lookup("cov", probe, columns=["email", "id"]).to_pylist()
    assert Counter((r["email"], r["id"]) for r in got) == want and want
