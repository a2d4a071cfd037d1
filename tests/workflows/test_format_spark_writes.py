"""Spark DataFrames written through delta-spark itself: ``t.append(spark_df)`` and ``t.upsert(spark_df)``.

The table is created by delta-spark with what only its writer honours: a CHECK constraint, a
generated column, row tracking, deletion vectors and the change data feed. Appends and
upserts of Spark DataFrames through the API are committed by delta-spark (the result says
so); a row breaking the constraint or the generation rule is refused by delta-spark, and
then nothing is committed and the indexes are unchanged; after every write the indexes are
at the new version and every answer equals delta-spark's read of each version. With the
format's Spark writer turned off (``ExecutorConfig.format_spark_writer``) the frame is
written by this package: refused on this table (deltalake honours none of its writer
features), written and indexed on a plain one. A table with an identity column and a NOT
NULL column (an invariant): frames leaving the identity out get delta-spark's identity values
(appends and the upsert's inserts), a null is refused with delta-spark's own reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import lakehouse_index as li
from lakehouse_index.errors import DuplicateKeyError, UnsupportedWriterFeatureError, WriteRefusedError
from tests.workflows.helpers import index_state

pytestmark = pytest.mark.spark

DDL = "id bigint, k string, v bigint, twice bigint"


def _create(spark: Any, path: str) -> li.Table:
    """The table, created by delta-spark's table builder (its SQL takes no generated column)."""
    delta = spark._jvm.io.delta.tables.DeltaTable
    twice = delta.columnBuilder(spark._jsparkSession, "twice").dataType("BIGINT").generatedAlwaysAs("v * 2")
    builder = delta.create(spark._jsparkSession).location(path)
    for name, typ in (("id", "BIGINT"), ("k", "STRING"), ("v", "BIGINT")):
        builder = builder.addColumn(name, typ)
    builder = builder.addColumn(twice.build())
    for key in ("delta.enableDeletionVectors", "delta.enableRowTracking", "delta.enableChangeDataFeed"):
        builder = builder.property(key, "true")
    builder.execute()
    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT v_positive CHECK (v > 0)").collect()
    t = li.open_table(path, config=li.Config(planner=li.PlannerConfig(force_index=True)))
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["v"], num_buckets=2))
    return t


def _frame(spark: Any, rows: list[tuple[int, str, int]], twice: int | None = None) -> Any:
    """Rows (id, k, v) with ``twice`` = v * 2 (or ``twice`` for every row: breaks the generation rule)."""
    return spark.createDataFrame([(i, k, v, v * 2 if twice is None else twice) for i, k, v in rows], DDL)


def _spark_rows(spark: Any, path: str, version: int) -> list[dict[str, Any]]:
    df = spark.read.format("delta").option("versionAsOf", version).load(path)
    return [r.asDict() for r in df.collect()]


def _check(spark: Any, t: li.Table, path: str) -> None:
    """Every version: lookups, covering lookups and scans equal delta-spark's read."""
    cols = ["id", "k", "v", "twice"]
    for version in range(t.latest_version() + 1):
        want = _spark_rows(spark, path, version)
        for k in ("a", "b", "c"):
            expect = Counter(tuple(r[c] for c in cols) for r in want if r["k"] == k)
            got = t.lookup("by_k", [k], version_as_of=version).to_pylist()
            assert Counter(tuple(r[c] for c in cols) for r in got) == expect, (version, k)
            got = t.lookup("cov", [k], version_as_of=version, columns=["k", "v"]).to_pylist()
            assert Counter((r["k"], r["v"]) for r in got) == Counter(
                (r["k"], r["v"]) for r in want if r["k"] == k
            )
        scanned = t.scan(version_as_of=version, where="k = 'a' OR v > 50").to_pylist()
        expect = Counter(tuple(r[c] for c in cols) for r in want if r["k"] == "a" or r["v"] > 50)
        assert Counter(tuple(r[c] for c in cols) for r in scanned) == expect, version


def _indexed_at(t: li.Table, version: int) -> None:
    assert {i.name: i.indexed_version for i in t.indexes()} == {"by_k": version, "cov": version}


def test_appends_and_upserts_of_spark_frames_go_through_delta_spark(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = _create(spark, path)
    first = t.append(_frame(spark, [(1, "a", 10), (2, "b", 20), (3, "c", 30)]))
    assert first.note == "written by delta-spark" and first.rows_written == 3
    assert first.table_version == t.latest_version()
    _indexed_at(t, first.table_version)
    second = t.append(_frame(spark, [(4, "a", 40), (5, "b", 60)]))
    assert second.table_version == first.table_version + 1 and second.rows_written == 2
    up = t.upsert(_frame(spark, [(1, "b", 11), (6, "c", 70)]), on="id")
    assert up.note == "written by delta-spark"
    assert (up.rows_written, up.rows_updated) == (1, 1)
    _indexed_at(t, up.table_version)
    # delta-spark computed row ids and wrote the change data feed of its MERGE
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", up.table_version)
        .load(path)
    )
    assert Counter(r["_change_type"] for r in changes.collect()) == Counter(
        {"update_preimage": 1, "update_postimage": 1, "insert": 1}
    )
    _check(spark, t, path)


@pytest.mark.parametrize(
    ("rows", "twice", "what"),
    [
        ([(7, "a", 5), (8, "a", -1)], None, "CHECK constraint v_positive"),
        ([(7, "a", 5)], 3, "generated column twice"),
    ],
)
def test_rows_delta_spark_refuses_commit_nothing(
    spark: Any, tmp_path: Path, rows: list[tuple[int, str, int]], twice: int | None, what: str
) -> None:
    path = str(tmp_path / "t")
    t = _create(spark, path)
    t.append(_frame(spark, [(1, "a", 10)]))
    head, state = t.latest_version(), index_state(t)
    with pytest.raises(WriteRefusedError, match="delta-spark refused the append; nothing was committed"):
        t.append(_frame(spark, rows, twice))
    with pytest.raises(WriteRefusedError, match="delta-spark refused the upsert; nothing was committed"):
        t.upsert(_frame(spark, rows, twice), on="id")
    assert t.latest_version() == head and index_state(t) == state, what
    _check(spark, t, path)


def test_upsert_keys_are_checked_before_delta_spark_runs(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = _create(spark, path)
    t.append(_frame(spark, [(1, "a", 10)]))
    head = t.latest_version()
    with pytest.raises(DuplicateKeyError, match="not unique"):
        t.upsert(_frame(spark, [(2, "a", 10), (2, "b", 20)]), on="id")
    nulls = spark.createDataFrame([(None, "a", 10, 20)], DDL)
    with pytest.raises(DuplicateKeyError, match="null"):
        t.upsert(nulls, on="id")
    assert t.latest_version() == head


def test_with_the_format_spark_writer_off_this_package_writes(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _create(spark, path)
    own = li.open_table(path, config=li.Config(executor=li.ExecutorConfig(format_spark_writer=False)))
    head = own.latest_version()
    # deltalake honours none of the table's writer features: refused, nothing written
    with pytest.raises(UnsupportedWriterFeatureError):
        own.append(_frame(spark, [(1, "a", 10)]))
    assert own.latest_version() == head
    plain = str(tmp_path / "plain")
    spark.sql(
        f"CREATE TABLE delta.`{plain}` (id BIGINT, k STRING, v BIGINT, twice BIGINT) USING delta"
    ).collect()
    p = li.open_table(plain, config=li.Config(executor=li.ExecutorConfig(format_spark_writer=False)))
    p.create_index(li.SecondaryIndex("by_k", key="k"))
    result = p.append(_frame(spark, [(1, "a", 10), (2, "b", 20)]))
    assert result.note is None and result.rows_written == 2  # turned off: no writer was missing
    want = Counter((r["id"], r["k"]) for r in _spark_rows(spark, plain, result.table_version))
    got = p.lookup("by_k", ["a", "b"], version_as_of=result.table_version).to_pylist()
    assert Counter((r["id"], r["k"]) for r in got) == want == Counter({(1, "a"): 1, (2, "b"): 1})


def test_identity_values_and_not_null_invariants_come_from_delta_spark(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    delta, js = spark._jvm.io.delta.tables.DeltaTable, spark._jsparkSession
    builder = delta.create(js).location(path)
    builder = builder.addColumn(
        delta.columnBuilder(js, "rid").dataType("BIGINT").generatedAlwaysAsIdentity(1, 1).build()
    )
    builder = builder.addColumn(delta.columnBuilder(js, "k").dataType("STRING").nullable(False).build())
    builder.addColumn("v", "BIGINT").execute()
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    frame = "k string, v bigint"  # no rid: delta-spark computes it
    first = t.append(spark.createDataFrame([("a", 1), ("b", 2)], frame))
    assert first.note == "written by delta-spark"
    head, state = t.latest_version(), index_state(t)
    with pytest.raises(WriteRefusedError, match=r"DELTA_NOT_NULL_CONSTRAINT_VIOLATED.*column: k"):
        t.append(spark.createDataFrame([(None, 3)], frame))
    assert t.latest_version() == head and index_state(t) == state
    up = t.upsert(spark.createDataFrame([("a", 5), ("c", 3)], frame), on="k")
    assert (up.note, up.rows_written, up.rows_updated) == ("written by delta-spark", 1, 1)
    for version in range(t.latest_version() + 1):
        want = Counter(
            tuple(r) for r in spark.read.format("delta").option("versionAsOf", version).load(path).collect()
        )
        got = t.lookup("by_k", ["a", "b", "c"], version_as_of=version).to_pylist()
        assert Counter((r["rid"], r["k"], r["v"]) for r in got) == want, version
    rows = {r["k"]: r for r in t.lookup("by_k", ["a", "b", "c"]).to_pylist()}
    assert rows["a"]["v"] == 5 and rows["a"]["rid"] == first_rid(spark, path, first.table_version, "a")
    assert len({r["rid"] for r in rows.values()}) == 3  # the insert got a new identity value


def first_rid(spark: Any, path: str, version: int, k: str) -> int:
    """The identity value delta-spark gave row ``k`` at ``version`` (an update keeps it)."""
    df = spark.read.format("delta").option("versionAsOf", version).load(path)
    return int(df.where(f"k = '{k}'").collect()[0]["rid"])
