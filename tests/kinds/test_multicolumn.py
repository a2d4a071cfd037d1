"""The multi-column index (issue 36): exact ranges on any subset of its columns, and samples.

* Oracle (hypothesis): random histories — appends, deletes, rewrites (Delta compaction,
  Iceberg copy-on-write deletes), incremental / quick / full refreshes, optimizes — on
  Delta (deltalake) and Iceberg (pyiceberg); at every version, ranges on every non-empty
  subset of the indexed columns (and a column outside the index, read by row address)
  answer exactly the rows of the format's own reader filtered by pyarrow, and the planner
  chose the index scan. Blocks of 4 rows in index files of 10: many row groups to prune.
* Samples (fixed seeds): the size within binomial bounds, every decile of each indexed
  column sampled at the fraction (uniformity, independence from values), nesting,
  determinism, stability across versions for unchanged rows, equal with and without the
  index (the plain scan computes the same weights), and the index reads about the fraction.
"""

from __future__ import annotations

import itertools
import math
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.config import Config, ExecutorConfig, PlannerConfig
from lakehouse_index.kind_registry import spec_from_json
from lakehouse_index.kinds.multicolumn.weights import weights
from lakehouse_index.spec import spec_to_json
from tests.api.iceberg_index_support import main_lineage, sql_catalog
from tests.support.oracle import rows_multiset as _rows


def rows_multiset(table: pa.Table, columns: list[str]) -> Any:
    """The rows as a multiset, NaN as one value (NaN != NaN would make equal answers differ)."""
    return Counter(
        tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)
        for row in _rows(table, columns).elements()
    )


pytestmark = pytest.mark.filterwarnings("ignore:Delete operation did not match any records")

SCHEMA = pa.schema(
    [("id", pa.int64()), ("a", pa.int64()), ("b", pa.float64()), ("c", pa.string()), ("x", pa.int32())]
)
INDEXED = ("a", "b", "c")
FORCED = Config(
    executor=ExecutorConfig(rows_per_index_file=10, index_row_group_rows=4),
    planner=PlannerConfig(force_index=True),
)


def spec(auto_refresh: str = "incremental") -> li.MultiColumnIndex:
    return li.MultiColumnIndex(
        "mc", columns=list(INDEXED), included=["id"], block_rows=4, auto_refresh=auto_refresh
    )


def batch(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, n)
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "a": pa.array(a, mask=rng.random(n) < 0.1),
            "b": np.where(rng.random(n) < 0.05, np.nan, rng.random(n).round(3)),
            "c": [f"k{v:02d}" for v in rng.integers(0, 40, n)],
            "x": rng.integers(0, 5, n).astype(np.int32),
        },
        schema=SCHEMA,
    )


# ---------------------------------------------------------------------------- tables


@dataclass
class History:
    """A table under test: its li handle and an independent reader of every version."""

    table: li.Table
    append: Callable[[pa.Table], None]
    delete: Callable[[str, pc.Expression], None]
    rewrite: Callable[[], None]
    versions: Callable[[], list[int]]
    read: Callable[[int], pa.Table]


def delta_history(root: Path, first: pa.Table, config: Config) -> History:
    path = str(root / "delta")
    write_deltalake(path, first, configuration={"delta.enableDeletionVectors": "true"})
    return History(
        li.open_table(path, config=config),
        lambda t: write_deltalake(path, t, mode="append"),
        lambda sql, _: DeltaTable(path).delete(sql),
        lambda: DeltaTable(path).optimize.compact(),
        lambda: list(range(DeltaTable(path).version() + 1)),
        lambda v: (
            pa.RecordBatchReader.from_stream(DeltaTable(path, version=v).scan())
            .read_all()
            .select(SCHEMA.names)
            .cast(SCHEMA)
        ),
    )


def iceberg_history(root: Path, first: pa.Table, config: Config) -> History:
    catalog = sql_catalog(str(root))
    catalog.create_table("db.t", schema=SCHEMA, properties={"write.delete.mode": "merge-on-read"})
    catalog.load_table("db.t").append(first)

    def delete(_: str, expression: pc.Expression) -> None:
        table = catalog.load_table("db.t")
        live = table.scan().to_arrow()
        ids = live.filter(expression)["id"].to_pylist()
        if ids:  # rows of the files holding them are rewritten (copy-on-write)
            table.delete(f"id in ({','.join(map(str, ids))})")

    def rewrite() -> None:  # a copy-on-write delete of one row rewrites its file's other rows
        table = catalog.load_table("db.t")
        ids = table.scan().to_arrow()["id"].to_pylist()
        if ids:
            table.delete(f"id = {min(ids)}")

    return History(
        li.open_table("db.t", catalog=catalog, config=config),
        lambda t: catalog.load_table("db.t").append(t),
        delete,
        rewrite,
        lambda: main_lineage(catalog.load_table("db.t")),
        lambda v: catalog.load_table("db.t").scan(snapshot_id=v).to_arrow().select(SCHEMA.names).cast(SCHEMA),
    )


FORMATS = {"delta": delta_history, "iceberg": iceberg_history}


# ---------------------------------------------------------------------------- spec


def test_spec_json_round_trip_and_lazy_export() -> None:
    s = li.MultiColumnIndex("m", columns=["a", "b"], included="x", record_key="id", block_rows=64)
    as_json = spec_to_json(s)
    assert as_json["kind"] == "multicolumn"
    assert spec_from_json(as_json) == s
    assert s.key == ("a", "b") and s.columns == ("a", "b", "x", "id")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"columns": []},
        {"columns": ["a", "a"]},
        {"columns": ["a"], "included": ["a"]},
        {"columns": [f"c{i}" for i in range(9)]},
        {"columns": ["a"], "block_rows": 0},
    ],
)
def test_bad_specs_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(li.InvalidIndexSpecError):
        li.MultiColumnIndex("m", **kwargs)


# ---------------------------------------------------------------------------- oracle

_RANGES = {
    "a": lambda lo, hi: (f"a >= {lo} AND a < {hi}", (pc.field("a") >= lo) & (pc.field("a") < hi), 100),
    "b": lambda lo, hi: (
        f"b BETWEEN {lo / 100} AND {hi / 100}",
        (pc.field("b") >= lo / 100) & (pc.field("b") <= hi / 100),
        100,
    ),
    "c": lambda lo, hi: (
        f"c > 'k{lo // 3:02d}' AND c <= 'k{hi // 3:02d}'",
        (pc.field("c") > f"k{lo // 3:02d}") & (pc.field("c") <= f"k{hi // 3:02d}"),
        100,
    ),
}

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 40)),
        st.tuples(st.just("delete"), st.integers(0, 99)),
        st.tuples(st.just("mor_delete"), st.integers(0, 99)),
        st.tuples(st.just("rewrite"), st.just(0)),
        st.tuples(st.just("refresh"), st.sampled_from(["incremental", "quick", "full"])),
        st.tuples(st.just("optimize"), st.sampled_from(["quick", "full"])),
    ),
    min_size=1,
    max_size=6,
)


def _range_where(cols: tuple[str, ...], bounds: list[int]) -> tuple[str, pc.Expression]:
    sqls, exprs = [], []
    for col, lo in zip(cols, bounds, strict=False):
        sql, e, _ = _RANGES[col](lo, lo + 25)
        sqls.append(sql)
        exprs.append(e)
    expr = exprs[0]
    for e in exprs[1:]:
        expr = expr & e
    return " AND ".join(sqls), expr


def _check_every_version(h: History, seed: int) -> None:
    rng = np.random.default_rng(seed)
    subsets = [s for r in (1, 2, 3) for s in itertools.combinations(INDEXED, r)]
    for v in h.versions():
        truth = h.read(v)
        for cols in subsets:
            where, expr = _range_where(cols, [int(x) for x in rng.integers(0, 90, len(cols))])
            plan = h.table.explain(where=where, version_as_of=v)
            assert plan.chosen.scans, str(plan)
            want = truth.filter(expr)
            covered = ["id", *cols]
            got = h.table.scan(where=where, version_as_of=v, columns=covered)
            assert rows_multiset(got, covered) == rows_multiset(want, covered), (v, where)
            # a column outside the index: rows read by address from the data files
            got_all = h.table.scan(where=where, version_as_of=v)
            assert rows_multiset(got_all, SCHEMA.names) == rows_multiset(want, SCHEMA.names), (v, where)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, seed=st.integers(0, 2**16), auto_refresh=st.sampled_from(["incremental", "off"]))
def test_ranges_equal_the_format_reader_at_every_version(
    tmp_path_factory: pytest.TempPathFactory,
    fmt: str,
    ops: list[tuple[str, Any]],
    seed: int,
    auto_refresh: str,
) -> None:
    """Deletes by the format's library rewrite files (copy-on-write); deletes through the
    project's writer (located by a secondary index on ``id``) leave deletion vectors or
    position deletes, which the index applies by refresh (``auto_refresh``) or at query time."""
    root = tmp_path_factory.mktemp(fmt)
    h = FORMATS[fmt](root, batch(0, 30, seed), FORCED)
    h.table.create_index(li.SecondaryIndex("by_id", key="id"))
    h.table.create_index(spec(auto_refresh))
    next_id = 30
    for i, (op, arg) in enumerate(ops):
        if op == "append":
            h.append(batch(next_id, arg, seed + i))
            next_id += arg
        elif op == "delete":
            h.delete(f"a >= {arg} AND a < {arg + 15}", (pc.field("a") >= arg) & (pc.field("a") < arg + 15))
        elif op == "mor_delete":
            live = h.read(h.versions()[-1])
            ids = live.filter((pc.field("a") >= arg) & (pc.field("a") < arg + 15))["id"].to_pylist()
            if ids:
                h.table.delete(f"id IN ({', '.join(map(str, ids))})")
        elif op == "rewrite":
            h.rewrite()
        elif op == "refresh":
            h.table.refresh_index("mc", mode=arg)
        else:
            h.table.optimize_index("mc", mode=arg)
    _check_every_version(h, seed)
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------- samples

N = 20_000


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> History:
    h = delta_history(tmp_path_factory.mktemp("sample"), batch(0, N, 7), Config())
    h.table.create_index(li.MultiColumnIndex("mc", columns=list(INDEXED), included=["id"], block_rows=256))
    return h


def _within_binomial(k: int, n: int, p: float, sds: float = 5.0) -> bool:
    return abs(k - n * p) <= sds * math.sqrt(n * p * (1 - p)) + 1


def test_sample_size_uniformity_and_independence(sampled: History) -> None:
    t = sampled.table
    full = sampled.read(0)
    f = 0.1
    s = t.sample(f)
    assert t.explain(sample=f).chosen.scans
    assert _within_binomial(s.num_rows, N, f)
    ids = set(s["id"].to_pylist())
    for col in INDEXED:  # every decile of every indexed column is sampled at the fraction
        values = full[col].to_numpy(zero_copy_only=False)
        valid = ~pc.is_null(full[col]).to_numpy(zero_copy_only=False)
        order = np.argsort(values[valid], kind="stable")
        for decile in np.array_split(np.asarray(full["id"])[valid][order], 10):
            k = sum(1 for i in decile.tolist() if i in ids)
            assert _within_binomial(k, len(decile), f), (col, k, len(decile))
    # independence from values: the sample's mean of a numeric column matches the table's
    for col in ("a", "b"):
        pop = pc.drop_null(full[col]).to_numpy()
        got = pc.drop_null(s[col]).to_numpy()
        assert abs(np.nanmean(got) - np.nanmean(pop)) <= 5 * np.nanstd(pop) / math.sqrt(len(got))


def test_sample_nested_deterministic_and_equal_without_index(sampled: History) -> None:
    t = sampled.table
    small, large = t.sample(0.02), t.sample(0.2)
    assert set(small["id"].to_pylist()) <= set(large["id"].to_pylist())
    assert rows_multiset(t.sample(0.2), SCHEMA.names) == rows_multiset(large, SCHEMA.names)
    scanned = t.sample(0.2, use_indexes=False)
    assert rows_multiset(scanned, SCHEMA.names) == rows_multiset(large, SCHEMA.names)
    where = "a < 30 AND c >= 'k10'"
    full = sampled.read(0).filter((pc.field("a") < 30) & (pc.field("c") >= "k10"))
    w = weights(full, ("a", "b", "c", "id"))
    want = full.filter(pa.array(w < 0.2))
    assert rows_multiset(t.sample(0.2, where=where), SCHEMA.names) == rows_multiset(want, SCHEMA.names)
    assert t.sample(1.0).num_rows == N


def test_sample_reads_about_the_fraction_of_the_index(sampled: History) -> None:
    plan = sampled.table.explain(sample=0.01)
    chosen = plan.chosen
    total = chosen.entry.content.size
    assert chosen.scans and chosen.index_bytes <= 0.05 * total, str(plan)


def test_sample_stable_across_versions_and_without_index(tmp_path: Path) -> None:
    h = delta_history(tmp_path, batch(0, 5000, 3), Config())
    h.table.create_index(li.MultiColumnIndex("mc", columns=list(INDEXED), included=["id"], block_rows=64))
    h.append(batch(5000, 2000, 4))
    h.delete("a < 10", pc.field("a") < 10)
    h.rewrite()
    h.table.refresh_index("mc")
    h.append(batch(7000, 500, 5))  # not indexed: the hybrid scan draws its sample by the same weights
    versions = h.versions()
    samples = {v: set(h.table.sample(0.1, version_as_of=v)["id"].to_pylist()) for v in versions}
    live = {v: set(h.read(v)["id"].to_pylist()) for v in versions}
    for v, w in itertools.combinations(versions, 2):
        assert samples[v] & live[w] == samples[w] & live[v], (v, w)
    for v in versions:
        plain = h.table.sample(0.1, version_as_of=v, use_indexes=False)
        assert set(plain["id"].to_pylist()) == samples[v]


def test_sample_without_index_says_so(tmp_path: Path) -> None:
    h = delta_history(tmp_path, batch(0, 2000, 9), Config())
    plan = h.table.explain(sample=0.1)
    assert plan.chosen.entry is None and any("weight" in n for n in plan.notes)
    s = h.table.sample(0.1)
    w = weights(h.read(0), SCHEMA.names)
    assert sorted(s["id"].to_pylist()) == sorted(np.asarray(h.read(0)["id"])[w < 0.1].tolist())
