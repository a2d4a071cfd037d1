"""Batch lookups and locates equal a plain read of the same version, for random key sets.

One table per format (Delta with deletion vectors, Iceberg v2 merge-on-read) with a key column
of every kind an index takes (integer, string, float with NaN and -0.0, date, timestamp,
decimal, binary), nulls in each, values clustered (runs of equal keys) and spread; one
secondary index per column in tiny index files (keys span row groups and files). Its history:
appends indexed at creation, then an append the index does not cover, a merge-on-read delete
(deletion vectors / position deletes) and a copy-on-write delete by the format's own library
(files rewritten behind the index's back), refreshes of some indexes (delta files with
tombstones), and one more append. Every version is asked for; the oracle is the format's own
reader (deltalake's scan applying deletion vectors, pyiceberg's scan) filtered in Python with
SQL equality on floats (NaN equals NaN, -0.0 equals 0.0) and ``None`` matching nulls.

Key sets are drawn by hypothesis: existing values (a run of neighbours, or spread), values no
row holds, duplicates, nulls, NaN; handed over as a Python list or as an Arrow array.
A last test asks for the same keys as a Spark DataFrame and compares with the in-process answer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_index_support import main_lineage, sql_catalog

import lakehouse_index as li
from lakehouse_index.errors import QueryError
from lakehouse_index.read.spark_read import spark_schema
from tests.support.oracle import SMALL_FILES, rows_multiset

pytestmark = pytest.mark.filterwarnings("ignore:Delete operation did not match any records")

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int64()),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.binary()),
    ]
)
KEYS = [c for c in SCHEMA.names if c != "id"]
PER_BATCH = 40
_FLOATS = [0.0, -0.0, 1.5, float("nan"), -2.25, 1e300]
_DAY = dt.date(2020, 1, 1)
_TS = dt.datetime(2021, 3, 4, 5, 6, 7)


def value(column: str, n: int) -> Any:
    """The ``column`` value number ``n`` (the same n gives the same value)."""
    return {
        "i": n - 30,
        "s": f"s{n:03d}" if n % 3 else f"ключ{n}",
        "f": _FLOATS[n % len(_FLOATS)] if n < 12 else n / 8,
        "d": _DAY + dt.timedelta(days=n),
        "ts": _TS + dt.timedelta(seconds=n, microseconds=n),
        "dec": decimal.Decimal(n * 25).scaleb(-2),
        "b": bytes([n % 256, 7]) if n % 4 else b"",
    }[column]


def rows(lo: int, n: int = PER_BATCH) -> pa.Table:
    """Rows ``lo .. lo+n``: key numbers clustered (runs of 3 ids) for i, s, d, ts; spread for the
    others; every column null now and then."""
    ids = list(range(lo, lo + n))
    data: dict[str, list[Any]] = {"id": ids}
    for c in KEYS:
        clustered = c in ("i", "s", "d", "ts")
        data[c] = [
            None if (i + len(c)) % 11 == 0 else value(c, i // 3 if clustered else (i * 7) % 23) for i in ids
        ]
    return pa.table(data, schema=SCHEMA)


@dataclass
class History:
    table: li.Table
    versions: list[Any]
    read: Callable[[Any], pa.Table]
    cache: dict[Any, pa.Table] = field(default_factory=dict)

    def rows(self, version: Any) -> pa.Table:
        if version not in self.cache:
            self.cache[version] = self.read(version).select(SCHEMA.names).cast(SCHEMA)
        return self.cache[version]


def create_indexes(t: li.Table) -> None:
    t.config = SMALL_FILES.replace(planner={"force_index": True})
    for c in KEYS:
        t.create_index(li.SecondaryIndex(f"by_{c}", key=c, record_key="id"))


def refresh_some(t: li.Table) -> None:
    for c in KEYS[::2]:
        t.refresh_index(f"by_{c}", mode="incremental")


def build_delta(directory: str) -> History:
    path = f"{directory}/delta"
    config = {"delta.enableDeletionVectors": "true"}
    for b in range(3):
        write_deltalake(path, rows(b * PER_BATCH), mode="append", configuration=config)
    t = li.open_table(path)
    create_indexes(t)
    write_deltalake(path, rows(3 * PER_BATCH), mode="append")  # not indexed
    t.delete("i IN (-28, -20, -5, 3, 10)", mode="merge-on-read")  # deletion vectors
    DeltaTable(path).delete("id % 7 = 1")  # copy-on-write, behind the index's back
    refresh_some(t)
    write_deltalake(path, rows(4 * PER_BATCH), mode="append")
    head = DeltaTable(path).version()

    def read(v: int) -> pa.Table:
        return pa.RecordBatchReader.from_stream(DeltaTable(path, version=v).scan()).read_all()

    return History(t, list(range(head + 1)), read)


def build_iceberg(directory: str) -> History:
    from pyiceberg import expressions as X

    catalog = sql_catalog(directory)
    mor = {"format-version": "2", "write.delete.mode": "merge-on-read"}
    ice = catalog.create_table("db.b", SCHEMA, properties=mor)
    for b in range(3):
        ice.append(rows(b * PER_BATCH))
    t = li.open_table("db.b", catalog=catalog)
    create_indexes(t)
    ice.append(rows(3 * PER_BATCH))
    t.delete("i IN (-28, -20, -5, 3, 10)", mode="merge-on-read")  # position deletes
    catalog.load_table("db.b").delete(X.EqualTo("i", -20))  # pyiceberg, behind the index's back
    refresh_some(t)
    catalog.load_table("db.b").append(rows(4 * PER_BATCH))
    ice = catalog.load_table("db.b")
    return History(t, main_lineage(ice), lambda sid: ice.scan(snapshot_id=sid).to_arrow())


@pytest.fixture(scope="module", params=["delta", "iceberg"])
def history(request: pytest.FixtureRequest) -> Iterator[History]:
    directory = tempfile.mkdtemp(prefix="li-batch-")
    yield (build_delta if request.param == "delta" else build_iceberg)(directory)
    shutil.rmtree(directory, ignore_errors=True)


def rows_of(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows as a multiset, NaN replaced by a marker (NaN equals nothing, itself included)."""
    found = rows_multiset(table, columns)
    nan = "<NaN>"
    return Counter(
        {
            tuple(nan if isinstance(v, float) and math.isnan(v) else v for v in row): n
            for row, n in found.items()
        }
    )


def same(a: Any, b: Any) -> bool:
    """SQL equality of key values, with NaN equal to NaN and None matching null."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b if a is not None and b is not None else a is None and b is None


def expected(full: pa.Table, column: str, keys: list[Any]) -> pa.Table:
    """The rows of ``full`` whose ``column`` equals one of ``keys`` (the oracle)."""
    values = full[column].to_pylist()
    return full.filter(pa.array([any(same(v, k) for k in keys) for v in values], pa.bool_()))


@st.composite
def key_sets(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """A key column and keys for it: a run of neighbouring values or spread ones, missing
    values, duplicates, maybe null."""
    column = draw(st.sampled_from(KEYS))
    numbers = st.integers(0, 80)
    start = draw(numbers)
    picked = (
        list(range(start, start + draw(st.integers(1, 25))))
        if draw(st.booleans())
        else draw(st.lists(numbers, max_size=60))
    )
    keys: list[Any] = [value(column, n) for n in picked]
    keys += [value(column, n) for n in draw(st.lists(st.integers(200, 400), max_size=5))]  # missing
    if keys and draw(st.booleans()):
        keys += draw(st.lists(st.sampled_from(keys), max_size=5))  # duplicates
    if draw(st.booleans()):
        keys.append(None)
    return column, draw(st.permutations(keys))


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=key_sets(), pick=st.integers(0, 1 << 20), as_arrow=st.booleans())
def test_batch_lookups_and_locates_equal_the_reader(
    history: History, case: tuple[str, list[Any]], pick: int, as_arrow: bool
) -> None:
    column, keys = case
    h = history
    version = h.versions[pick % len(h.versions)]
    want = expected(h.rows(version), column, keys)
    probe: Any = pa.array(keys, SCHEMA.field(column).type) if as_arrow else keys
    got = h.table.lookup(f"by_{column}", probe, version_as_of=version)
    assert rows_of(got, SCHEMA.names) == rows_of(want, SCHEMA.names), (column, version)
    loc = h.table.locate(f"by_{column}", probe, version_as_of=version)
    assert rows_multiset(loc, ["id"]) == rows_multiset(want, ["id"]), (column, version)
    # Each located address holds its row: read back from the data file by position.
    if loc.num_rows:
        back = h.table.lookup(f"by_{column}", probe, version_as_of=version, columns=["id"])
        assert sorted(back["id"].to_pylist()) == sorted(loc["id"].to_pylist())


@pytest.mark.spark
def test_a_dataframe_of_keys_locates_and_looks_up_on_spark(history: History, spark: Any) -> None:
    """Keys as a Spark DataFrame (duplicates, nulls, missing keys) give the in-process answer,
    for a key column of each kind."""
    h = history
    with pytest.raises(QueryError, match="lacks the key column"):
        h.table.locate("by_i", spark.createDataFrame([(1,)], "other long"))
    for n, column in enumerate(KEYS):
        keys = [value(column, k) for k in range(0, 60, 2)] + [value(column, 300), None, value(column, 4)]
        frame = spark.createDataFrame([(k,) for k in keys], spark_schema(pa.schema([SCHEMA.field(column)])))
        # One version per column, alternating the latest and one the index answers by repair.
        for version in [h.versions[-1] if n % 2 else h.versions[len(h.versions) // 2]]:
            want = h.table.locate(f"by_{column}", keys, version_as_of=version)
            got = h.table.locate(f"by_{column}", frame, version_as_of=version).toPandas()
            got_rows = pa.Table.from_pandas(got, preserve_index=False)
            cols = ["id", "_file", "_row"]
            assert rows_multiset(got_rows, cols) == rows_multiset(want, cols), (column, version)
            full = h.table.lookup(f"by_{column}", frame, version_as_of=version, columns=["id", column])
            ids = sorted(r["id"] for r in full.collect())
            assert ids == sorted(expected(h.rows(version), column, keys)["id"].to_pylist()), (column, version)
