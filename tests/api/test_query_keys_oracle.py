"""Query oracle over key shapes: IN lists of 1 to 1,000 keys, null keys, keys that do not exist,
composite keys, at every version of a history, for ``lookup``, ``locate`` and ``read(spark)``,
on Delta and Iceberg, through secondary, composite and covering indexes.

Each format gets one table with a history of appends, copy-on-write deletes, updates and
upserts, and indexes refreshed in every mode along the way (so versions are answered from
exact windows, by hybrid scan forwards and backwards, and from stale snapshots). The
oracle is the format's own reader — deltalake's ``DeltaTable(version=v)`` and pyiceberg's
``scan(snapshot_id=v)`` — filtered in Python (``None`` matches null keys).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from iceberg_index_support import key_filter, main_lineage, sql_catalog

import lakehouse_index as li
from lakehouse_index.query import index_queries
from tests.support.oracle import rows_multiset

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

COLS = ["id", "k", "g", "v"]
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()), ("v", pa.string())])
ROWS_PER_BATCH = 800


def batch(lo: int, n: int = ROWS_PER_BATCH) -> pa.Table:
    """Keys clustered by id (4 rows a key, so a few keys live in a few files), some null and unicode."""
    ids = list(range(lo, lo + n))

    def key(i: int) -> str | None:
        if i % 53 == 7:
            return None
        return f"ключ{i // 4}" if (i // 4) % 97 == 3 else f"key{i // 4}"

    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([key(i) for i in ids], pa.string()),
            "g": pa.array([None if i % 41 == 0 else i % 5 for i in ids], pa.int32()),
            "v": pa.array([f"v{i}" for i in ids], pa.string()),
        },
        schema=SCHEMA,
    )


@dataclass
class History:
    """A table with indexes, its versions and the independent reader of each version."""

    table: li.Table
    versions: list[int]
    read: Callable[[int], pa.Table]
    keys: list[Any] = field(default_factory=list)  # every key value any version holds
    cache: dict[int, pa.Table] = field(default_factory=dict)

    def rows(self, version: int) -> pa.Table:
        if version not in self.cache:
            self.cache[version] = self.read(version).select(COLS).cast(SCHEMA)
        return self.cache[version]


def create_indexes(t: li.Table, spark: Any) -> None:
    t.planner_config = li.PlannerConfig(force_index=True)  # small tables: answer through the index
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    t.create_index(li.SecondaryIndex("by_kg", key=["k", "g"], record_key=["id", "v"]), spark=spark)
    t.create_index(
        li.CoveringIndex("cov", indexed="k", included=["id", "g"], num_buckets=4),
        spark=spark,
        local_max_rows=0,
    )


def build_delta(directory: str, spark: Any) -> History:
    path = f"{directory}/delta"
    for b in range(4):
        write_deltalake(path, batch(b * ROWS_PER_BATCH), mode="append")  # v0..v3
    t = li.open_table(path)
    create_indexes(t, spark)  # at v3: v0..v2 are answered by backward repair
    DeltaTable(path).delete("id % 7 = 0")  # v4: rewrites every file
    write_deltalake(path, batch(4 * ROWS_PER_BATCH), mode="append")  # v5
    for name in ("by_k", "by_kg", "cov"):
        t.refresh_index(name, mode="incremental", spark=spark)
    DeltaTable(path).update(predicate="id % 13 = 1", updates={"k": "'upd'"})  # v6
    src = batch(3 * ROWS_PER_BATCH - 40, 80)  # v7: 40 ids updated (new v), 40 inserted
    src = src.set_column(3, "v", pa.array([f"merged{i}" for i in src["id"].to_pylist()], pa.string()))
    (
        DeltaTable(path)
        .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    t.refresh_index("by_k", mode="quick")
    t.refresh_index("cov", mode="full", spark=spark)
    t.optimize_index("by_kg", mode="full", spark=spark)
    write_deltalake(path, batch(5 * ROWS_PER_BATCH), mode="append")  # v8
    DeltaTable(path).delete("id >= 1000 AND id < 1500")  # v9: nothing refreshed after this
    head = DeltaTable(path).version()
    return History(t, list(range(head + 1)), lambda v: DeltaTable(path, version=v).to_pyarrow_table())


def build_iceberg(directory: str, spark: Any) -> History:
    from pyiceberg import expressions as X

    catalog = sql_catalog(directory)
    ice = catalog.create_table("db.q", pa.schema(list(SCHEMA)), properties={"format-version": "2"})
    for b in range(4):
        ice.append(batch(b * ROWS_PER_BATCH))
    t = li.open_table("db.q", catalog=catalog)
    create_indexes(t, spark)
    ice.delete(X.EqualTo("g", 3))  # copy-on-write delete of every file
    ice.append(batch(4 * ROWS_PER_BATCH))
    for name in ("by_k", "by_kg", "cov"):
        t.refresh_index(name, mode="incremental", spark=spark)
    ice.overwrite(
        batch(2 * ROWS_PER_BATCH, 400),
        overwrite_filter=X.And(X.GreaterThanOrEqual("id", 1600), X.LessThan("id", 2000)),
    )
    src = batch(3 * ROWS_PER_BATCH - 40, 80)
    ice.upsert(
        src.set_column(3, "v", pa.array([f"up{i}" for i in src["id"].to_pylist()], pa.string())),
        join_cols=["id"],
    )
    t.refresh_index("by_k", mode="quick")
    t.refresh_index("cov", mode="full", spark=spark)
    t.optimize_index("by_kg", mode="full", spark=spark)
    ice.append(batch(5 * ROWS_PER_BATCH))
    ice.delete(X.And(X.GreaterThanOrEqual("id", 1000), X.LessThan("id", 1500)))
    ice = catalog.load_table("db.q")
    return History(t, main_lineage(ice), lambda sid: ice.scan(snapshot_id=sid).to_arrow())


@pytest.fixture(scope="module", params=["delta", "iceberg"])
def history(request: pytest.FixtureRequest, spark: Any) -> Iterator[History]:
    directory = tempfile.mkdtemp(prefix="li-keys-")
    h = (build_delta if request.param == "delta" else build_iceberg)(directory, spark)
    seen: set[Any] = set()
    for v in h.versions:
        seen |= set(h.rows(v)["k"].to_pylist())
    h.keys = sorted(seen, key=lambda k: (k is None, k or ""))
    yield h
    shutil.rmtree(directory, ignore_errors=True)


def probe_keys(h: History, rnd: random.Random, n: int, missing_share: float, with_null: bool) -> list[Any]:
    """``n`` keys: existing ones (in some version), keys that never existed, maybe null."""
    present = [k for k in h.keys if k is not None]
    out: list[Any] = []
    for i in range(n):
        out.append(f"nope{i}-{rnd.random()}" if rnd.random() < missing_share else rnd.choice(present))
    if with_null:
        out[rnd.randrange(n)] = None
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    pick=st.integers(0, 1 << 20),
    n=st.sampled_from([1, 2, 7, 60, 400, 1000]),
    missing_share=st.sampled_from([0.0, 0.3, 1.0]),
    with_null=st.booleans(),
    seed=st.integers(0, 1 << 30),
)
def test_lookup_and_locate_equal_the_reader_for_any_key_list(
    history: History, pick: int, n: int, missing_share: float, with_null: bool, seed: int
) -> None:
    h = history
    version = h.versions[pick % len(h.versions)]
    rnd = random.Random(seed)
    probe = probe_keys(h, rnd, n, missing_share, with_null)
    full = h.rows(version)
    want = key_filter(full, probe, ("k",))
    t = h.table

    got = t.lookup("by_k", probe, version_as_of=version)
    assert rows_multiset(got, COLS) == rows_multiset(want, COLS), version
    loc = t.locate("by_k", probe, version_as_of=version)
    assert rows_multiset(loc, ["k", "id"]) == rows_multiset(want, ["k", "id"]), version
    # Covering index: index-only (every asked column indexed or included) and with a row fetch.
    got_cov = t.lookup("cov", probe, version_as_of=version, columns=["k", "id", "g"])
    assert rows_multiset(got_cov, ["id", "k", "g"]) == rows_multiset(want, ["id", "k", "g"]), version
    got_cov_rows = t.lookup("cov", probe, version_as_of=version)
    assert rows_multiset(got_cov_rows, COLS) == rows_multiset(want, COLS), version

    # Composite key (k, g) with a composite record key (id, v): tuples with null components too.
    g_values: list[Any] = [0, 1, 2, 3, 4, None, 9]
    probe_kg = [(k, rnd.choice(g_values)) for k in probe]
    want_kg = key_filter(full, probe_kg, ("k", "g"))
    got_kg = t.lookup("by_kg", probe_kg, version_as_of=version)
    assert rows_multiset(got_kg, COLS) == rows_multiset(want_kg, COLS), version
    loc_kg = t.locate("by_kg", probe_kg, version_as_of=version)
    assert rows_multiset(loc_kg, ["k", "g", "id", "v"]) == rows_multiset(want_kg, ["k", "g", "id", "v"])


def _sql_list(values: list[Any]) -> str:
    return ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)


def test_spark_read_equals_the_reader_at_every_version(history: History, spark: Any) -> None:
    """``read(spark, version_as_of=v, where=...)`` for a 1,000-key IN list (missing keys among
    them), a 3-key IN list with another condition, and null keys."""
    h = history
    t = h.table
    rnd = random.Random(7)
    narrowed = 0
    for version in h.versions:
        full = h.rows(version)
        snap = t.snapshot(version)
        big = probe_keys(h, rnd, 1000, 0.2, False)
        small = probe_keys(h, rnd, 3, 0.0, False)
        small_rows = key_filter(full, small, ("k",))
        cases = [
            (f"k IN ({_sql_list(big)})", key_filter(full, big, ("k",))),
            (f"k IN ({_sql_list(small)}) AND g = 1", small_rows.filter(pa.compute.equal(small_rows["g"], 1))),
            ("k IS NULL", key_filter(full, [None], ("k",))),
        ]
        for where, want in cases:
            df = t.read(spark, version_as_of=version, where=where)
            got = pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=SCHEMA)
            assert rows_multiset(got, COLS) == rows_multiset(want, COLS), (version, where[:60])
        # The small IN list really went through an index: only the files holding the keys are read
        # (a key's 4 rows are written together, so it lives in one file).
        files = index_queries.files_for(t.context, snap, f"k IN ({_sql_list(small)})")
        assert files is not None and len(files) <= len(small), version
        located = set(t.locate("by_k", small, version_as_of=version)["_file"].to_pylist())
        assert {f.path for f in files} >= located, version
        narrowed += len(files) < len(snap.files)
    assert narrowed >= 3  # versions of one or two files cannot be narrowed
