"""The multi-column index on Spark: built, refreshed and optimized there, and samples read there.

* Build (Delta and Iceberg): one index built on Spark (``local_max_rows=0``) and one in
  process over the same table hold the same entries (values, weights, addresses, stamps:
  bit-identical weights) after the build, an incremental refresh of appended files and
  deletes, and a full optimize; the Spark-built one then answers ranges as the format's own
  reader does and samples as the weights computed from that reader's rows say; and for
  every type Spark hands its tasks in its own Arrow types (timestamps, dates, decimals,
  narrow integers and floats, booleans, binaries), the same entries and samples.
* ``Table.read(spark, sample=...)`` (Delta and Iceberg): exactly the rows of ``Table.sample``
  for the same arguments — with and without ``where``, with the index's columns (read from
  the index alone) and with all columns (rows fetched from data files) — on a stale index
  (files appended since the build: the hybrid scan draws them by the same weights), with
  deletes since indexing, at a version in the past; nested; without a multi-column index by
  a Spark plain scan (and ``explain`` says so); fractions outside (0, 1] refused.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.config import Config, ExecutorConfig, PlannerConfig
from lakehouse_index.kinds.multicolumn.weights import weights
from tests.kinds.test_multicolumn import FORMATS, INDEXED, SCHEMA, History, batch

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

#: Small index files in small row groups (many files per Spark partition, many blocks); the
#: index chosen whenever it can answer (the tables are small enough for a plain scan to win).
SMALL = Config(
    executor=ExecutorConfig(rows_per_index_file=300, index_row_group_rows=64),
    planner=PlannerConfig(force_index=True),
)


def _value(v: Any) -> Any:
    """One Python value whichever reader gave it: NaN as one value, binaries as bytes, instants
    in UTC (Spark collects timestamps as naive local times, pyarrow as UTC)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.timezone.utc)
    return v


def multiset(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset (NaN as one value)."""
    return Counter(
        tuple(_value(v) for v in row) for row in zip(*(table[c].to_pylist() for c in columns), strict=True)
    )


def frame_multiset(frame: Any, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """A Spark DataFrame's rows (collected as Python rows) as a multiset."""
    assert frame.columns == columns
    return Counter(tuple(_value(v) for v in row) for row in frame.collect())


def entries(t: li.Table, name: str) -> Counter[tuple[Any, ...]]:
    """Every entry of the index's latest snapshot but its curve cell (laid out per executor)."""
    stable = t.context.log(name).latest_stable()
    assert stable is not None
    files = [pq.read_table(f"{t.context.index_dir(name)}/{f.path}") for f in stable.content.files]
    rows = pa.concat_tables(files)
    return multiset(rows, [c for c in rows.column_names if c != "_cell"])


def spec(name: str) -> li.MultiColumnIndex:
    return li.MultiColumnIndex(
        name, columns=list(INDEXED), included=["id"], block_rows=16, auto_refresh="off"
    )


def history(tmp_path: Path, fmt: str) -> History:
    """Two data files, and a secondary index on ``id`` (``Table.delete`` locates rows by it and
    writes deletion vectors / position deletes)."""
    h = FORMATS[fmt](tmp_path, batch(0, 1500, 1), SMALL)
    h.append(batch(1500, 1000, 2))
    h.table.create_index(li.SecondaryIndex("by_id", key="id"))
    return h


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_spark_build_refresh_and_optimize_equal_in_process(tmp_path: Path, spark: Any, fmt: str) -> None:
    h = history(tmp_path, fmt)
    t = h.table
    t.create_index(spec("on_spark"), spark=spark, local_max_rows=0)
    t.create_index(spec("in_process"), local_max_rows=1 << 40)
    assert entries(t, "on_spark") == entries(t, "in_process")
    h.append(batch(2500, 700, 3))
    h.delete("a < 20", pc.field("a") < 20)
    ids = h.read(h.versions()[-1]).filter(pc.field("a") >= 90)["id"].to_pylist()
    t.delete(f"id IN ({', '.join(map(str, ids))})")  # deletion vectors / position deletes
    t.refresh_index("on_spark", "incremental", spark=spark, local_max_rows=0)
    t.refresh_index("in_process", "incremental", local_max_rows=1 << 40)
    assert entries(t, "on_spark") == entries(t, "in_process")
    t.optimize_index("on_spark", "full", spark=spark, local_max_rows=0)
    t.optimize_index("in_process", "full", local_max_rows=1 << 40)
    assert entries(t, "on_spark") == entries(t, "in_process")

    t.delete_index("in_process")  # the Spark-built index answers alone
    truth = h.read(h.versions()[-1])
    where = "a >= 30 AND a < 60 AND c <= 'k20'"
    assert t.explain(where=where).chosen.scans
    want = truth.filter((pc.field("a") >= 30) & (pc.field("a") < 60) & (pc.field("c") <= "k20"))
    assert multiset(t.scan(where=where), SCHEMA.names) == multiset(want, SCHEMA.names)
    assert t.explain(sample=0.2).chosen.index == "on_spark"
    sampled = truth.filter(pa.array(weights(truth, ("a", "b", "c", "id")) < 0.2))
    assert multiset(t.sample(0.2), SCHEMA.names) == multiset(sampled, SCHEMA.names)


def _same_as_sample(t: li.Table, spark: Any, fraction: float, **query: Any) -> None:
    columns = query.get("columns") or SCHEMA.names
    want = multiset(t.sample(fraction, **query), columns)
    assert frame_multiset(t.read(spark, sample=fraction, **query), columns) == want, (fraction, query)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_read_sample_equals_sample_on_a_stale_index(tmp_path: Path, spark: Any, fmt: str) -> None:
    h = history(tmp_path, fmt)
    t = h.table
    t.create_index(spec("mc"))
    past = h.versions()[-1]
    h.append(batch(2500, 800, 4))  # not indexed: the hybrid scan samples it
    ids = h.read(h.versions()[-1]).filter(pc.field("a") < 25)["id"].to_pylist()
    t.delete(f"id IN ({', '.join(map(str, ids))})")  # deletes since indexing
    now = h.versions()[-1]
    where, some = "a < 50 AND c >= 'k10'", ["id", "a", "b"]  # the index's columns: the index alone
    for version in (past, now):
        for fraction, w, columns in (
            (0.05, None, None),
            (0.3, where, None),
            (0.3, None, some),
            (1.0, where, some),
        ):
            plan = t.explain(sample=fraction, version_as_of=version, where=w)
            assert plan.chosen.scans and plan.chosen.index == "mc", str(plan)
            _same_as_sample(t, spark, fraction, where=w, version_as_of=version, columns=columns)
    small = {r.id for r in t.read(spark, sample=0.05, columns=["id"]).collect()}
    large = {r.id for r in t.read(spark, sample=0.3, columns=["id"]).collect()}
    assert small and small < large
    # the weights are those of the rows the format's reader returns
    truth = h.read(now)
    want = truth.filter(pa.array(weights(truth, ("a", "b", "c", "id")) < 0.3))
    assert Counter(large) == Counter(want["id"].to_pylist())


def test_read_sample_without_an_index_is_a_plain_scan(tmp_path: Path, spark: Any) -> None:
    h = history(tmp_path, "delta")
    t = h.table
    plan = t.explain(sample=0.2)
    assert plan.chosen.entry is None and any("weight" in n for n in plan.notes), str(plan)
    for where in (None, "b < 0.5"):
        _same_as_sample(t, spark, 0.2, where=where)
    truth = h.read(h.versions()[-1])
    want = truth.filter(pa.array(weights(truth, SCHEMA.names) < 0.2))
    assert frame_multiset(t.read(spark, sample=0.2), SCHEMA.names) == multiset(want, SCHEMA.names)
    # with the index in place, use_indexes=False reads the same rows by the plain scan
    t.create_index(spec("mc"))
    scanned = t.read(spark, sample=0.2, use_indexes=False, columns=["id"])
    assert frame_multiset(scanned, ["id"]) == multiset(t.sample(0.2, columns=["id"]), ["id"])


@pytest.mark.parametrize("fraction", [0, 0.0, -0.1, 1.5, math.nan, "0.5", True, None])
def test_fractions_outside_zero_one_refused(tmp_path: Path, spark: Any, fraction: Any) -> None:
    t = history(tmp_path, "delta").table
    with pytest.raises(li.QueryError, match=r"sample fraction must be a number in \(0, 1\]"):
        t.sample(fraction)
    if fraction is not None:  # read(sample=None) is a read
        with pytest.raises(li.QueryError, match="sample fraction"):
            t.read(spark, sample=fraction)
        with pytest.raises(li.QueryError, match="sample fraction"):
            t.explain(sample=fraction)


def test_weights_identical_for_every_type_spark_reads(tmp_path: Path, spark: Any) -> None:
    """Timestamps, dates, decimals, narrow integers and floats, booleans, binaries: Spark hands
    them to the tasks in its own Arrow types, and the weights are those of an in-process build."""
    n = 600
    ids = list(range(n))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=7 * i) for i in ids],
                pa.timestamp("us", "UTC"),
            ),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i % 50) for i in ids], pa.date32()),
            "m": pa.array([decimal.Decimal(i % 97) / 8 for i in ids], pa.decimal128(12, 3)),
            "s": pa.array([i % 300 - 150 for i in ids], pa.int16()),
            "f": pa.array([None if i % 13 == 0 else (i % 41) / 3 for i in ids], pa.float32()),
            "flag": pa.array([i % 3 == 0 for i in ids], pa.bool_()),
            "raw": pa.array([bytes([i % 256, i % 7]) for i in ids], pa.binary()),
        }
    )
    path = str(tmp_path / "typed")
    write_deltalake(path, data.slice(0, 400))
    write_deltalake(path, data.slice(400), mode="append")
    t = li.open_table(path, config=SMALL)
    columns = ["ts", "d", "m"]
    mc = li.MultiColumnIndex(
        "on_spark", columns=columns, included=["s", "f", "flag", "raw", "id"], block_rows=16
    )
    t.create_index(mc, spark=spark, local_max_rows=0)
    t.create_index(
        li.MultiColumnIndex("in_process", columns=columns, included=list(mc.included), block_rows=16)
    )
    assert entries(t, "on_spark") == entries(t, "in_process")
    t.delete_index("in_process")
    names = data.schema.names
    for where in (None, "d >= DATE '2020-01-20' AND m < 9"):
        want = multiset(t.sample(0.3, where=where), names)
        assert frame_multiset(t.read(spark, sample=0.3, where=where), names) == want
        assert frame_multiset(t.read(spark, sample=0.3, where=where, use_indexes=False), names) == want
