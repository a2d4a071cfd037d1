"""Index-accelerated Spark joins: covering indexes read as bucketed tables (``Table.read``).

Oracle: random Delta and Iceberg tables (key types, nulls, a skewed key, appends after the
index snapshot, deletes both copy-on-write and merge-on-read, incremental refreshes that
leave LSM delta files, time travel to any version) joined through the indexed frames equal
the same join of plain reads (``use_indexes=False``) of the same versions, and the physical
plan of indexed ⋈ indexed has no Exchange at all, indexed ⋈ unindexed exactly one (the
unindexed side's).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from tests.api.iceberg_index_support import sql_catalog

pytestmark = pytest.mark.spark

BUCKETS = 4

#: Key types with a small pool of values each (a join needs repeated keys), None included.
KEYS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "long": (pa.int64(), [-3, 0, 7, 2**40, None]),
    "string": (pa.string(), ["", "a", "é", "longer key value", None]),
    "date": (pa.date32(), [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1601, 7, 4), None]),
    "decimal": (
        pa.decimal128(12, 2),
        [decimal.Decimal("-1.50"), decimal.Decimal("0.00"), decimal.Decimal("9.99"), None],
    ),
}


@pytest.fixture(scope="module")
def joins(spark: Any) -> Iterator[Any]:
    """The session with broadcast joins off: every join is a sort-merge join that needs both
    sides clustered by the key, so the plan shows whether a side was shuffled. Spark reuses a
    bucketed side's partitioning for the other side's shuffle only when it has at least
    ``spark.sql.shuffle.partitions`` buckets: set to the indexes' bucket count."""
    settings = {"spark.sql.autoBroadcastJoinThreshold": "-1", "spark.sql.shuffle.partitions": str(BUCKETS)}
    before = {k: spark.conf.get(k) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    yield spark
    for k, v in before.items():
        spark.conf.set(k, v)


def _rows(key_type: pa.DataType, keys: list[Any], start: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(keys, key_type),
            "v": pa.array(range(start, start + len(keys)), pa.int64()),
            "pad": pa.array([f"p{i}" for i in range(len(keys))]),
        }
    )


class _Side:
    """One table with a covering index on ``k`` (payload ``v``) and its history."""

    def __init__(self, root: Path, fmt: str, key_type: pa.DataType, first: list[Any]) -> None:
        data = _rows(key_type, first, 0)
        self.next = len(first)
        if fmt == "delta":
            write_deltalake(str(root), data)
            self.table = li.open_table(str(root))
        else:
            catalog = sql_catalog(str(root))
            catalog.create_table("db.t", data.schema, properties={"format-version": "2"}).append(data)
            self.table = li.open_table("db.t", catalog=catalog)
        spec = li.CoveringIndex("cov", indexed="k", included=["v"], num_buckets=BUCKETS, auto_refresh="off")
        self.table.create_index(spec)
        self.key_type = key_type

    def step(self, op: str, keys: list[Any], mode: str) -> None:
        if op == "append":
            self.table.append(_rows(self.key_type, keys, self.next))
            self.next += len(keys)
        elif op == "delete":
            victims = list(range(len(keys) % 3, self.next, 3))[:20]
            if victims:
                self.table.delete(f"v IN ({', '.join(map(str, victims))})", mode=mode, use_indexes=False)
        else:
            self.table.refresh_index("cov")

    def versions(self) -> list[int]:
        return [v.version for v in self.table.source.versions()]


def _plan(df: Any) -> str:
    """The physical plan (before the frame runs: adaptive execution's final plan repeats it)."""
    return str(df._jdf.queryExecution().executedPlan().toString())


def _exchanges(df: Any) -> int:
    return _plan(df).count("Exchange hashpartitioning")


def _multiset(df: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in df.collect())


ops = st.lists(
    st.tuples(
        st.sampled_from(["append", "delete", "refresh"]),
        st.lists(st.integers(0, 3), min_size=1, max_size=12),
    ),
    max_size=4,
)


@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    fmt=st.sampled_from(["delta", "iceberg"]),
    key=st.sampled_from(sorted(KEYS)),
    first=st.tuples(
        st.lists(st.integers(0, 4), min_size=1, max_size=30), st.lists(st.integers(0, 4), max_size=30)
    ),
    histories=st.tuples(ops, ops),
    mode=st.sampled_from(["copy-on-write", "merge-on-read"]),
    pick=st.tuples(st.integers(0, 10), st.integers(0, 10)),
    skew=st.booleans(),
)
def test_joins_of_indexed_frames_equal_plain_joins_without_exchange(
    joins: Any,
    tmp_path_factory: pytest.TempPathFactory,
    fmt: str,
    key: str,
    first: tuple[list[int], list[int]],
    histories: tuple[list[tuple[str, list[int]]], list[tuple[str, list[int]]]],
    mode: str,
    pick: tuple[int, int],
    skew: bool,
) -> None:
    key_type, pool = KEYS[key]

    def values(ix: list[int]) -> list[Any]:
        return [pool[0] if skew and i % 2 else pool[i % len(pool)] for i in ix]

    root = tmp_path_factory.mktemp("joins")
    sides = [_Side(root / name, fmt, key_type, values(f)) for name, f in zip("ab", first, strict=True) if f]
    if len(sides) < 2:
        sides.append(_Side(root / "b", fmt, key_type, values([0, 1, 2])))
    if fmt == "delta":
        mode = "copy-on-write"  # merge-on-read needs the deletion-vector table feature
    for side, history in zip(sides, histories, strict=True):
        for op, ix in history:
            side.step(op, values(ix), mode)
    a, b = sides
    va, vb = (s.versions()[p % len(s.versions())] for s, p in zip(sides, pick, strict=True))

    ia = a.table.read(joins, columns=["k", "v"], version_as_of=va)
    ib = b.table.read(joins, columns=["k", "v"], version_as_of=vb).withColumnRenamed("v", "w")
    pa_ = a.table.read(joins, columns=["k", "v"], version_as_of=va, use_indexes=False)
    pb = b.table.read(joins, columns=["k", "v"], version_as_of=vb, use_indexes=False).withColumnRenamed(
        "v", "w"
    )
    assert a.table.explain_read(columns=["k", "v"], version_as_of=va).index == "cov"

    indexed = ia.join(ib, "k")
    assert _exchanges(indexed) == 0, _plan(indexed)
    assert _multiset(indexed) == _multiset(pa_.join(pb, "k"))
    assert _multiset(ia) == _multiset(pa_)  # the frames themselves, null keys included

    half = ia.join(pb, "k")
    if not _plan(half).startswith("LocalTableScan <empty>"):  # Spark 4 folds a join with an empty side
        assert _exchanges(half) == 1, _plan(half)  # the unindexed side only
    assert _multiset(half) == _multiset(pa_.join(pb, "k"))


def test_explain_read_says_why_no_index_answers(joins: Any, tmp_path: Path) -> None:
    side = _Side(tmp_path / "t", "delta", pa.int64(), [1, 2, 3])
    side.table.create_index(li.CoveringIndex("old", indexed="v", included=["k"], layout_version=1))
    plan = side.table.explain_read(columns=["k", "pad"])
    assert plan.index is None
    text = str(plan)
    assert "'cov': does not hold pad" in text and "'old': layout 1" in text
    got = side.table.read(joins, columns=["k", "pad"])  # the plain read
    assert _multiset(got) == _multiset(side.table.read(joins, columns=["k", "pad"], use_indexes=False))
