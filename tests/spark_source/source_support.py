"""Random predicates with an independent Python evaluation, and reading through the source."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.spark_source import MIN_PYSPARK
from tests.support.oracle import rows_multiset

COLS = ["id", "k", "g", "v"]


def source_available() -> bool:
    """Whether the installed pyspark has Python data sources with filter pushdown (no import of pyspark)."""
    from importlib.metadata import version

    major, minor = version("pyspark").split(".")[:2]
    return (int(major), int(minor)) >= MIN_PYSPARK


SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()), ("v", pa.string())])


def batch(lo: int, n: int) -> pa.Table:
    """Rows ``lo..lo+n``: key ``k`` shared by 3 consecutive ids (some null), ``g`` small (some null)."""
    ids = list(range(lo, lo + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 17 == 5 else f"k{i // 3}" for i in ids], pa.string()),
            "g": pa.array([None if i % 11 == 0 else i % 7 for i in ids], pa.int32()),
            "v": pa.array([f"v{i}" for i in ids], pa.string()),
        },
        schema=SCHEMA,
    )


@dataclass(frozen=True)
class Case:
    """A WHERE clause and the same condition in Python (True only when SQL says true)."""

    sql: str
    holds: Callable[[dict[str, Any]], bool]


def _ge(a: Any, b: Any) -> bool:
    return a is not None and a >= b


def random_case(rng: random.Random, max_id: int) -> Case:
    """A key, IN, range, null, negated or prefix predicate, sometimes AND-ed with another."""
    key = f"k{rng.randrange(max_id // 3 + 2)}"
    keys = [f"k{rng.randrange(max_id // 3 + 2)}" for _ in range(rng.randint(2, 4))]
    lo = rng.randrange(max_id + 1)
    hi = lo + rng.randint(0, 40)
    g = rng.randrange(7)
    prefix = f"k{rng.randint(1, 9)}"
    shapes = [
        Case(f"k = '{key}'", lambda r: r["k"] == key),
        Case(f"k IN ({', '.join(repr(x) for x in keys)})", lambda r: r["k"] in keys),
        Case(f"id >= {lo} AND id < {hi}", lambda r: lo <= r["id"] < hi),
        Case(f"g BETWEEN {g} AND {g + 1}", lambda r: _ge(r["g"], g) and r["g"] <= g + 1),
        Case("k IS NULL", lambda r: r["k"] is None),
        Case(f"g IS NOT NULL AND k = '{key}'", lambda r: r["g"] is not None and r["k"] == key),
        Case(f"k != '{key}' AND g = {g}", lambda r: r["k"] is not None and r["k"] != key and r["g"] == g),
        Case(f"k LIKE '{prefix}%'", lambda r: r["k"] is not None and r["k"].startswith(prefix)),
        Case(f"k = '{key}' OR id = {lo}", lambda r: r["k"] == key or r["id"] == lo),
    ]
    return rng.choice(shapes)


def expected(rows: pa.Table, case: Case) -> Counter[tuple[Any, ...]]:
    """The oracle's answer: the rows of an independent reader for which ``case`` holds."""
    kept = [r for r in rows.select(COLS).to_pylist() if case.holds(r)]
    return Counter(tuple(r[c] for c in COLS) for r in kept)


def source_frame(spark: Any, path: str, where: str, **options: Any) -> Any:
    """``spark.read.format("lakehouse_index")`` for ``where``: as the ``where`` option (planned with
    the indexes, exact for every query of the frame), or with ``pushFilters=true`` as Spark's
    WHERE on a fresh frame (pushed into the planner)."""
    opts = {k: str(v) for k, v in options.items()}
    reader = spark.read.format("lakehouse_index").options(**opts)
    if opts.get("pushFilters", "false").lower() == "true":
        return reader.load(path).where(where)
    return reader.option("where", where).load(path)


def source_rows(spark: Any, path: str, where: str, **options: Any) -> Counter[tuple[Any, ...]]:
    """The rows ``spark.read.format("lakehouse_index")`` returns for ``where``."""
    got = source_frame(spark, path, where, **options).select(*COLS).collect()
    return rows_multiset(pa.Table.from_pylist([r.asDict() for r in got], schema=SCHEMA), COLS)


def iso_ms(ms: int) -> str:
    """An epoch-milliseconds instant as the ISO text timestampAsOf takes."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def partitions(spark: Any, path: str, where: str, **options: Any) -> int:
    """How many input partitions (tasks) the source plans for ``where``."""
    return int(source_frame(spark, path, where, **options).rdd.getNumPartitions())


def unique_times(times: Sequence[int]) -> list[bool]:
    """Per commit: whether its timestamp names it alone (strictly before the next commit's)."""
    return [i + 1 == len(times) or times[i] < times[i + 1] for i in range(len(times))]
