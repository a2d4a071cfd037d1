"""The skipping index kind: hashing, bloom filters, per-file statistics and pruning.

Oracles are independent of the code under test: the ``xxhash`` package for the hash,
Python's own min / max / sets for the statistics, pyarrow's filter (and Spark, for NaN
semantics) evaluating the predicate on every row of every file for pruning, and the
files deltalake reports for Delta tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import struct
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import xxhash
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import DeltaSource

from lakehouse_index.errors import InvalidIndexSpecError, TableFormatError
from lakehouse_index.expressions import Predicate
from lakehouse_index.io import Storage
from lakehouse_index.kinds import skipping as sk
from lakehouse_index.log.entry import IndexFile, Level
from lakehouse_index.source import Column, Snapshot
from lakehouse_index.spec import SkippingIndex

UTC = dt.timezone.utc

# --------------------------------------------------------------------------- hashing


def _xxh(b: bytes) -> int:
    return xxhash.xxh64_intdigest(b, seed=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_int_hash_is_xxh64_of_int64_le(values: list[int]) -> None:
    got = sk.hash_values(pa.array(values, pa.int64()))
    assert got.tolist() == [_xxh(v.to_bytes(8, "little", signed=True)) for v in values]


def test_fixed_width_hashes_match_reference_encoding() -> None:
    floats = [0.0, 1.5, -2.25, float("inf"), 1e300]
    assert sk.hash_values(pa.array(floats)).tolist() == [_xxh(struct.pack("<d", f)) for f in floats]
    decs = [decimal.Decimal("1.25"), decimal.Decimal("-3.00"), decimal.Decimal("9999999.99")]
    unscaled = [int(d.scaleb(2)) for d in decs]
    assert sk.hash_values(pa.array(decs, pa.decimal128(9, 2))).tolist() == [
        _xxh(u.to_bytes(16, "little", signed=True)) for u in unscaled
    ]
    days = [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1900, 1, 1)]
    ordinals = [(d - dt.date(1970, 1, 1)).days for d in days]
    assert sk.hash_values(pa.array(days, pa.date32())).tolist() == [
        _xxh(o.to_bytes(8, "little", signed=True)) for o in ordinals
    ]
    strings = ["", "a", "grüße", "日本語", "x" * 100]
    assert sk.hash_values(pa.array(strings)).tolist() == [_xxh(s.encode()) for s in strings]
    assert sk.hash_values(pa.array([True, False])).tolist() == [
        _xxh((1).to_bytes(8, "little")),
        _xxh((0).to_bytes(8, "little")),
    ]


def test_hash_is_canonical_across_widths_and_zero_signs() -> None:
    ints = [0, 1, -7, 127]
    ref = sk.hash_values(pa.array(ints, pa.int64())).tolist()
    for t in (pa.int8(), pa.int16(), pa.int32()):
        assert sk.hash_values(pa.array(ints, t)).tolist() == ref
    fl = [0.5, -1.25, 3.0]
    assert sk.hash_values(pa.array(fl, pa.float32())).tolist() == sk.hash_values(pa.array(fl)).tolist()
    neg, pos = sk.hash_values(pa.array([-0.0, 0.0])).tolist()
    assert neg == pos
    # Sliced arrays hash their own values, not the buffer's start.
    dec = pa.array([decimal.Decimal("1.00"), decimal.Decimal("2.00")], pa.decimal128(5, 2))
    assert sk.hash_values(dec.slice(1)).tolist() == sk.hash_values(dec).tolist()[1:]
    assert sk.hash_values(pa.array(["a", "b", "c"]).slice(1)).tolist() == [_xxh(b"b"), _xxh(b"c")]


# --------------------------------------------------------------------------- bloom filter


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(max_size=8), min_size=0, max_size=300, unique=True),
    st.sampled_from([0.3, 0.05, 0.001]),
)
def test_bloom_has_no_false_negatives(values: list[str], fpp: float) -> None:
    hashes = sk.hash_values(pa.array(values, pa.string()))
    f = sk.bloom_build(hashes, fpp)
    assert len(f) % 32 == 0 and len(f) >= 32
    bs = sk.BloomSet.of(pa.array([f, None, f], pa.binary()))
    for h in hashes:
        assert bs.may_contain_any(np.array([h], dtype=np.uint64)).tolist() == [True, True, True]


@pytest.mark.parametrize("ndv", [1_000, 20_000])
@pytest.mark.parametrize("fpp", [0.1, 0.01, 0.001])
def test_bloom_false_positive_rate_meets_target(ndv: int, fpp: float) -> None:
    rng = np.random.default_rng(ndv)
    members = rng.choice(2**62, size=ndv, replace=False).astype(np.int64)
    f = sk.bloom_build(sk.hash_values(pa.array(members)), fpp)
    outsiders = rng.integers(2**62, 2**63 - 1, size=200_000, dtype=np.int64)
    probes = sk.hash_values(pa.array(outsiders))
    rate = float(np.mean(sk.bloom_probe(f, probes)))
    # The vectorised single-filter probe and the many-filter probe agree.
    bs = sk.BloomSet.of(pa.array([f, None], pa.binary()))
    for h, want in zip(probes[:300], sk.bloom_probe(f, probes[:300]), strict=True):
        assert bs.may_contain_any(np.array([h], dtype=np.uint64)).tolist() == [bool(want), True]
    # Sized for <= fpp in expectation; allow binomial noise on 200k probes.
    assert rate <= fpp * 1.15 + 3 * np.sqrt(fpp / len(probes))
    bits_per_value = len(f) * 8 / ndv
    assert bits_per_value < 1.5 * (-np.log(fpp) / np.log(2) ** 2) + 2  # not wildly oversized


def test_bloom_set_probes_many_filters_of_different_sizes() -> None:
    groups = [np.arange(n, dtype=np.int64) * 7 + n for n in (1, 50, 5_000)]
    filters = [sk.bloom_build(sk.hash_values(pa.array(g)), 0.01) for g in groups]
    col = pa.array([filters[0], None, filters[1], filters[2]], pa.binary())
    bs = sk.BloomSet.of(col)
    for gi, g in enumerate(groups):
        pos = [0, 2, 3][gi]
        got = bs.may_contain_any(sk.hash_values(pa.array(g[:20])))
        assert got[pos] and got[1]
    # Several hashes at once: true when any is present.
    absent = sk.hash_values(pa.array([-1, -2], pa.int64()))
    present = sk.hash_values(pa.array([groups[2][10]], pa.int64()))
    assert bs.may_contain_any(np.concatenate([absent, present]))[3]
    with pytest.raises(TableFormatError):
        sk.BloomSet.of(pa.array([b"short"], pa.binary()))


# --------------------------------------------------------------------------- statistics


SPEC_ALL = ("i", "s", "f", "d", "ts", "dec", "b")
TYPES: dict[str, pa.DataType] = {
    "i": pa.int64(),
    "s": pa.string(),
    "f": pa.float64(),
    "d": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "dec": pa.decimal128(9, 2),
    "b": pa.bool_(),
}
SCHEMA = pa.schema([pa.field(k, v) for k, v in TYPES.items()])


def test_stats_row_against_python() -> None:
    spec = SkippingIndex("sk", ["i", "s", "f"], max_values=3)
    data = pa.table(
        {
            "i": pa.array([5, None, -3, 5, 9], pa.int64()),
            "s": pa.array(["ä", "b", None, None, "ä"]),
            "f": pa.array([float("nan"), 2.5, -0.0, None, 1.0]),
        }
    )
    row = sk.stats_row(data, 42, spec, {c: TYPES[c] for c in spec.columns}).to_pylist()[0]
    assert row["_file_id"] == 42 and row["_rows"] == 5
    i = row["i"]
    assert (i["min"], i["max"], i["nulls"], i["nans"], i["values"]) == (-3, 9, 1, 0, [-3, 5, 9])
    assert i["bloom"] is None
    s = row["s"]
    assert (s["min"], s["max"], s["nulls"], s["values"], s["bloom"]) == ("b", "ä", 2, ["b", "ä"], None)
    f = row["f"]
    assert (f["min"], f["max"], f["nulls"], f["nans"]) == (-0.0, 2.5, 1, 1)
    assert f["values"] is None and f["bloom"] is not None  # 4 distinct (with NaN) > max_values
    only_nan = sk.stats_row(pa.table({"f": [float("nan"), None]}), 1, SkippingIndex("x", "f"), TYPES)
    on = only_nan.to_pylist()[0]["f"]
    assert (on["min"], on["max"], on["nulls"], on["nans"]) == (None, None, 1, 1)


# --------------------------------------------------------------------------- pruning: property


def _lit(col: str, draw: Any) -> str:
    if col == "i":
        return draw(st.sampled_from(["0", "1", "-2", "3", "7", "1.5", "-0", "100"]))
    if col == "s":
        v = draw(st.sampled_from(["", "a", "b", "ä", "ab", "日", "it's", "zz"]))
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if col == "f":
        return draw(st.sampled_from(["0.0", "-0.0", "1.5", "2", "-1", "1e300", "0.1"]))
    if col == "d":
        return f"DATE '2024-01-0{draw(st.integers(1, 7))}'"
    if col == "ts":
        return f"TIMESTAMP '2024-01-01 0{draw(st.integers(0, 6))}:00:00'"
    if col == "dec":
        return draw(st.sampled_from(["1.25", "0", "-3.5", "2", "1.251", "10"]))
    return draw(st.sampled_from(["true", "false"]))


@st.composite
def atoms(draw: Any) -> str:
    col = draw(st.sampled_from(SPEC_ALL))
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "in", "between", "null", "like", "colcmp"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
        return f"{col} {op} {_lit(col, draw)}"
    if kind == "in":
        vals = ", ".join(_lit(col, draw) for _ in range(draw(st.integers(1, 4))))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{col} {neg}IN ({vals})"
    if kind == "between":
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{col} {neg}BETWEEN {_lit(col, draw)} AND {_lit(col, draw)}"
    if kind == "null":
        return f"{col} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == "like":
        pat = draw(st.sampled_from(["a%", "%b", "ä%", "a_", "_", "%", "ab", "日%", "a\\%%"]))
        return f"s {draw(st.sampled_from(['', 'NOT ']))}LIKE '{pat}'"
    return draw(st.sampled_from(["i < dec", "f = i", "b", "NOT b"]))


predicates = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
        inner.map(lambda p: f"NOT ({p})"),
    ),
    max_leaves=4,
)


def _value(col: str, draw: Any) -> Any:
    if col == "i":
        return draw(st.integers(-3, 8))
    if col == "s":
        return draw(st.sampled_from(["", "a", "ab", "b", "ä", "日", "it's", "a%x", "zz"]))
    if col == "f":
        return draw(st.sampled_from([0.0, -0.0, 1.5, 2.0, -1.0, float("nan"), float("inf"), 0.1]))
    if col == "d":
        return dt.date(2024, 1, draw(st.integers(1, 7)))
    if col == "ts":
        return dt.datetime(2024, 1, 1, draw(st.integers(0, 6)), tzinfo=UTC)
    if col == "dec":
        return draw(st.sampled_from([decimal.Decimal(x) for x in ("1.25", "0.00", "-3.50", "2.00", "9.99")]))
    return draw(st.booleans())


@st.composite
def file_tables(draw: Any) -> list[pa.Table]:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        n = draw(st.integers(0, 12))
        cols = {}
        for c in SPEC_ALL:
            null_rate = draw(st.sampled_from([0.0, 0.0, 0.3, 1.0]))
            vals = [None if draw(st.floats(0, 1)) < null_rate else _value(c, draw) for _ in range(n)]
            cols[c] = pa.array(vals, TYPES[c])
        out.append(pa.table(cols, schema=SCHEMA))
    return out


def _matching_files(tables: list[pa.Table], predicate: Predicate) -> set[int]:
    expr = predicate.to_pyarrow()
    return {fid for fid, t in enumerate(tables) if t.filter(expr).num_rows > 0}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(file_tables(), predicates, st.sampled_from([0, 1, 3, 32]), st.sampled_from(SPEC_ALL))
def test_prune_never_drops_a_matching_file(
    tables: list[pa.Table], text: str, max_values: int, left_out: str
) -> None:
    # One column is left out of the index: atoms on it must stay unknown.
    columns = [c for c in SPEC_ALL if c != left_out]
    spec = SkippingIndex("sk", columns, bloom_fpp=0.2, max_values=max_values)
    rows = pa.concat_tables([sk.stats_row(t, fid, spec, TYPES) for fid, t in enumerate(tables)])
    data = sk.SkippingData.of(rows)
    predicate = Predicate.parse(text, SCHEMA)
    extra = len(tables) + 5  # a live file the index does not cover
    kept = sk.prune(data, predicate, [*range(len(tables)), extra])
    assert _matching_files(tables, predicate) <= kept
    assert extra in kept


def test_prune_is_selective() -> None:
    """Not a vacuous property: each kind of atom drops the files it can."""
    spec = SkippingIndex("sk", list(SPEC_ALL), max_values=2)
    tables = []
    for k in range(4):
        tables.append(
            pa.table(
                {
                    "i": pa.array(list(range(10 * k, 10 * k + 10)), pa.int64()),
                    "s": pa.array([f"k{k}-{j}" for j in range(10)]),
                    "f": pa.array([float(k)] * 9 + [float("nan") if k == 3 else float(k)]),
                    "d": pa.array([dt.date(2024, 1, 1 + k)] * 10, pa.date32()),
                    "ts": pa.array([dt.datetime(2024, 1, 1, k, tzinfo=UTC)] * 10, TYPES["ts"]),
                    "dec": pa.array([decimal.Decimal(k)] * 10, TYPES["dec"]),
                    "b": pa.array([k % 2 == 0] * 10),
                },
                schema=SCHEMA,
            )
            if k != 2
            else pa.table({c: pa.nulls(10, TYPES[c]) for c in SPEC_ALL}, schema=SCHEMA)
        )
    data = sk.SkippingData.of(
        pa.concat_tables([sk.stats_row(t, i, spec, TYPES) for i, t in enumerate(tables)])
    )
    cases = {
        "i = 15": {1},
        "i IN (3, 35, 1000)": {0, 3},
        "i NOT IN (3)": {0, 1, 3},
        "i > 28": {3},
        "i BETWEEN 12 AND 13": {1},
        "s = 'k1-4'": {1},
        "s LIKE 'k3%'": {3},
        "f = 1": {1},
        "f > 2": {3},  # file 3: f = 3 (and a NaN)
        "f < 0.5": {0},
        "d = DATE '2024-01-04'": {3},
        "ts >= TIMESTAMP '2024-01-01 03:00:00'": {3},
        "dec = 1": {1},
        "b": {0},
        "NOT b": {1, 3},
        "i IS NULL": {2},
        "i IS NOT NULL": {0, 1, 3},
        "i = 15 OR s = 'k0-1'": {0, 1},
        "i < 100 AND NOT (i < 10)": {1, 3},
        "NOT (i != 5)": {0},
        "i < dec": {0, 1, 2, 3},  # column against column: no pruning
        "f != 1": {0, 3},  # file 3 has NaN; file 1 is all 1.0
    }
    for text, want in cases.items():
        predicate = Predicate.parse(text, SCHEMA)
        assert _matching_files(tables, predicate) <= want, text  # the expectation itself is sound
        assert sk.prune(data, predicate, range(4)) == want, text
    # A predicate given as a pyarrow Expression cannot be analysed: everything is kept.
    arrow = Predicate.of(pc.field("i") == 15, SCHEMA)
    assert sk.prune(data, arrow, range(4)) == {0, 1, 2, 3}
    assert sk.prune(data, None, [1, 9]) == {1, 9}


def test_prune_after_type_widening() -> None:
    """Rows recorded when the column was int32 / float32 still prune (and hash) as int64 / double."""
    spec = SkippingIndex("sk", ["i", "f"], max_values=0)  # bloom filters only
    old = {"i": pa.int32(), "f": pa.float32()}
    tables = [
        pa.table(
            {
                "i": pa.array(list(range(k * 100, k * 100 + 100)), pa.int32()),
                "f": pa.array([k + 0.5] * 100, pa.float32()),
            }
        )
        for k in range(3)
    ]
    data = sk.SkippingData.of(pa.concat_tables([sk.stats_row(t, i, spec, old) for i, t in enumerate(tables)]))
    new_schema = pa.schema([pa.field("i", pa.int64()), pa.field("f", pa.float64())])
    assert sk.prune(data, Predicate.parse("i = 150", new_schema), range(3)) == {1}
    assert sk.prune(data, Predicate.parse("i IN (5, 250)", new_schema), range(3)) == {0, 2}
    assert sk.prune(data, Predicate.parse("f = 2.5", new_schema), range(3)) == {2}
    # The same with value lists (cast to the new type before evaluation).
    lists = SkippingIndex("sk", ["i", "f"], max_values=1_000)
    data = sk.SkippingData.of(
        pa.concat_tables([sk.stats_row(t, i, lists, old) for i, t in enumerate(tables)])
    )
    assert data.rows.column("i").combine_chunks().field("values").null_count == 0
    assert sk.prune(data, Predicate.parse("i IN (5, 250)", new_schema), range(3)) == {0, 2}
    assert sk.prune(data, Predicate.parse("f >= 1.5 AND f < 2", new_schema), range(3)) == {1}
    # A type the recorded statistics do not convert to prunes nothing (and does not fail).
    as_text = pa.schema([pa.field("i", pa.date32()), pa.field("f", pa.float64())])
    assert sk.prune(data, Predicate.parse("i = DATE '2020-01-01'", as_text), range(3)) == {0, 1, 2}


@pytest.mark.parametrize("max_values", [0, 8])
def test_signed_zeros_in_lists(max_values: int) -> None:
    """pyarrow's IN tells -0.0 from 0.0 while = does not: found by a longer hypothesis run."""
    spec = SkippingIndex("sk", ["f"], max_values=max_values)
    types = {"f": pa.float64()}
    schema = pa.schema(list(types.items()))
    tables = [pa.table({"f": [-0.0]}), pa.table({"f": [0.0]}), pa.table({"f": [1.0, 2.0]})]
    data = sk.SkippingData.of(
        pa.concat_tables([sk.stats_row(t, i, spec, types) for i, t in enumerate(tables)])
    )
    for text in ["f IN (0.0)", "f NOT IN (0.0)", "f IN (-0.0)", "f NOT IN (-0.0)", "f = 0", "f != -0.0"]:
        predicate = Predicate.parse(text, schema)
        assert _matching_files(tables, predicate) <= sk.prune(data, predicate, range(3)), text
    assert sk.prune(data, Predicate.parse("f IN (0.0)", schema), range(3)) == {0, 1}


@pytest.mark.spark
def test_prune_keeps_files_spark_matches_with_nan(tmp_path: Path, spark: Any) -> None:
    """Spark orders NaN above everything and equal to itself; pruning must cover that too."""
    spec = SkippingIndex("sk", ["f", "i"], max_values=2)
    tables = [
        pa.table({"f": [1.0, float("nan"), 2.0], "i": [1, 2, 3]}),
        pa.table({"f": [float("nan"), float("nan"), None], "i": [4, 5, 6]}),
        pa.table({"f": [-0.0, 5.0, 7.5, 9.0], "i": [7, 8, 9, 10]}),
        pa.table({"f": [3.0, 3.0, 3.0], "i": [11, 12, 13]}),
    ]
    types = {"f": pa.float64(), "i": pa.int64()}
    schema = pa.schema(list(types.items()))
    paths = []
    for k, t in enumerate(tables):
        p = tmp_path / f"part-{k}.parquet"
        pq.write_table(t, p)
        paths.append(str(p))
    data = sk.SkippingData.of(
        pa.concat_tables([sk.stats_row(t, i, spec, types) for i, t in enumerate(tables)])
    )
    texts = [
        "f > 100",
        "f >= 10",
        "f != 3",
        "f = 3",
        "f < 0",
        "f <= 0",
        "f = 0",
        "f IN (3, 100)",
        "f NOT IN (3)",
        "f BETWEEN 10 AND 20",
        "f NOT BETWEEN 0 AND 10",
        "NOT (f < 100)",
        "NOT (f <= 9)",
        "f > 8 AND i < 7",
        "f IS NULL",
        "NOT (f = 3)",
        "f IN (0.0)",
        "f NOT IN (0.0, 5, 7.5, 9)",
    ]
    from pyspark.sql import functions as F

    frame = None
    for k, part in enumerate(paths):
        df = spark.read.parquet(part).withColumn("_k", F.lit(k))
        frame = df if frame is None else frame.unionByName(df)
    assert frame is not None
    predicates = [Predicate.parse(text, schema) for text in texts]
    # One Spark job: per file, whether any row satisfies each predicate (null counts as no).
    hits = (
        frame.groupBy("_k")
        .agg(
            *[
                F.max(F.expr(f"CASE WHEN {p.to_spark_sql()} THEN 1 ELSE 0 END")).alias(f"p{i}")
                for i, p in enumerate(predicates)
            ]
        )
        .collect()
    )
    for i, (text, predicate) in enumerate(zip(texts, predicates, strict=True)):
        spark_hits = {row["_k"] for row in hits if row[f"p{i}"] == 1}
        kept = sk.prune(data, predicate, range(len(tables)))
        assert spark_hits | _matching_files(tables, predicate) <= kept, text
    # The test means something: Spark and pyarrow disagree on NaN for some of these.
    nan_gt = predicates[texts.index("f > 100")]
    assert {row["_k"] for row in hits if row[f"p{texts.index('f > 100')}"] == 1} == {0, 1}
    assert _matching_files(tables, nan_gt) == set()


# --------------------------------------------------------------------------- Delta tables


def _local(uri: str) -> str:
    p = urlparse(uri)
    return unquote(p.path) if p.scheme == "file" else uri


def _batch(rng: np.random.Generator, k: int, n: int) -> pa.Table:
    """Rows of one append: values cluster by ``k`` so statistics can prune."""
    words = ["grüße", "日本", "ça", "naïve", "emoji🙂", "plain", "it's"]
    vals = rng.integers(0, 40, n) + 30 * k
    null = rng.random(n) < 0.1
    floats = np.where(rng.random(n) < 0.05, np.nan, vals / 4.0)
    return pa.table(
        {
            "i": pa.array(vals, pa.int64(), mask=null),
            "s": pa.array([f"{words[(k + int(v)) % len(words)]}-{v}" for v in vals], mask=null),
            "f": pa.array(floats, pa.float64(), mask=rng.random(n) < 0.1),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=int(v)) for v in vals], pa.date32()),
            "ts": pa.array(
                [dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(hours=int(v)) for v in vals],
                TYPES["ts"],
                mask=null,
            ),
            "dec": pa.array([decimal.Decimal(int(v)) / 4 for v in vals], TYPES["dec"]),
            "b": pa.array(rng.random(n) < 0.5 if k % 3 else np.zeros(n, bool), mask=null),
        }
    )


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("skipping") / "tbl")
    rng = np.random.default_rng(7)
    for k in range(8):
        write_deltalake(path, _batch(rng, k, 200), mode="append")
    return path


def _truth(path: str, ids: dict[str, int]) -> dict[int, pa.Table]:
    """File id → rows of every live file of the latest version, as deltalake and pyarrow see them."""
    by_local = {_local(p): fid for p, fid in ids.items()}
    return {
        by_local[_local(uri)]: _no_views(pq.read_table(_local(uri))) for uri in DeltaTable(path).file_uris()
    }


def _no_views(t: pa.Table) -> pa.Table:
    # delta-rs rewrites files with Utf8View columns, which pyarrow's filter kernels refuse.
    return t.cast(
        pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f for f in t.schema])
    )


@st.composite
def delta_predicates(draw: Any) -> str:
    def atom() -> str:
        col = draw(st.sampled_from(["i", "s", "f", "d", "ts", "dec", "b"]))
        v = draw(st.integers(0, 260))
        lit = {
            "i": str(v),
            "s": "'"
            + draw(st.sampled_from(["grüße", "日本", "ça", "naïve", "emoji🙂", "plain", "it\\'s"]))
            + f"-{v}'",
            "f": f"{v / 4}",
            "d": f"DATE '{dt.date(2020, 1, 1) + dt.timedelta(days=v)}'",
            "ts": f"TIMESTAMP '{dt.datetime(2020, 1, 1) + dt.timedelta(hours=v)}'",
            "dec": f"{v / 4}",
            "b": draw(st.sampled_from(["true", "false"])),
        }[col]
        kind = draw(st.sampled_from(["=", "=", "<", ">=", "!=", "in", "null"]))
        if kind == "in":
            return f"{col} IN ({lit}, {lit})"
        if kind == "null":
            return f"{col} IS NULL"
        return f"{col} {kind} {lit}"

    text = atom()
    for _ in range(draw(st.integers(0, 2))):
        text = f"({text}) {draw(st.sampled_from(['AND', 'OR']))} ({atom()})"
    return f"NOT ({text})" if draw(st.booleans()) else text


def _build(
    path: str,
    spec: SkippingIndex,
    index_dir: str,
    rel: str,
    level: Level,
    only: set[str] | None = None,
    ids: dict[str, int] | None = None,
) -> tuple[Any, dict[str, int], Any]:
    storage = Storage.for_uri(path)
    source = DeltaSource.open(path, storage)
    snap = source.snapshot()
    ids = dict(ids or {})
    for p in sorted(snap.files):
        ids.setdefault(p, len(ids))
    jobs = [(snap.files[p], ids[p]) for p in sorted(snap.files) if only is None or p in only]
    files = sk.build_files(source, snap, spec, jobs, Storage.for_uri(index_dir), index_dir, rel, level)
    return snap, ids, files


def test_delta_build_load_and_prune_against_deltalake(delta_table: str, tmp_path: Path) -> None:
    spec = SkippingIndex("sk", list(SPEC_ALL), bloom_fpp=0.01, max_values=8)
    index_dir = str(tmp_path / "idx")
    snap, ids, files = _build(delta_table, spec, index_dir, "data/a/skipping.parquet", Level.BASE)
    assert len(files) == 1 and files[0].rows == len(snap.files) == 8 and files[0].level is Level.BASE
    data = sk.load(Storage.for_uri(index_dir), index_dir, files, set(ids.values()))
    assert data.columns == SPEC_ALL and len(data.file_ids) == 8

    # Statistics agree with the file contents deltalake reports.
    truth = _truth(delta_table, ids)
    assert set(truth) == set(data.file_ids.tolist())
    for row in data.rows.to_pylist():
        t = truth[row["_file_id"]]
        assert row["_rows"] == t.num_rows
        for c in ("i", "s", "d", "dec"):
            vals = [v for v in t.column(c).to_pylist() if v is not None]
            assert row[c]["nulls"] == t.num_rows - len(vals)
            assert (row[c]["min"], row[c]["max"]) == (min(vals), max(vals))
        fv = [v for v in t.column("f").to_pylist() if v is not None]
        assert row["f"]["nans"] == sum(1 for v in fv if v != v)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(delta_predicates())
    def check(text: str) -> None:
        predicate = Predicate.parse(text, snap.schema)
        expr = predicate.to_pyarrow()
        matching = {fid for fid, t in truth.items() if t.filter(expr).num_rows > 0}
        assert matching <= sk.prune(data, predicate, sorted(truth))

    check()


def test_delta_refresh_deltas_and_lineage(tmp_path: Path) -> None:
    """A DELTA file per refresh; rewritten (deleted-from) files leave through lineage."""
    path = str(tmp_path / "tbl")
    rng = np.random.default_rng(3)
    for k in range(4):
        write_deltalake(path, _batch(rng, k, 100), mode="append")
    spec = SkippingIndex("sk", ["i", "s"], max_values=4)
    index_dir = str(tmp_path / "idx")
    _, ids, base = _build(path, spec, index_dir, "data/a/skipping.parquet", Level.BASE)
    old_paths = set(ids)

    write_deltalake(path, _batch(rng, 9, 100), mode="append")
    DeltaTable(path).delete("i < 20")  # rewrites the first file(s): remove + add
    source = DeltaSource.open(path, Storage.for_uri(path))
    snap = source.snapshot()
    new_paths = set(snap.files) - old_paths
    _, ids, delta = _build(path, spec, index_dir, "data/b/skipping.parquet", Level.DELTA, new_paths, ids)
    assert delta[0].level is Level.DELTA and delta[0].rows == len(new_paths)
    live = {ids[p] for p in snap.files}
    data = sk.load(Storage.for_uri(index_dir), index_dir, base + delta, live)
    assert set(data.file_ids.tolist()) == live

    truth = _truth(path, ids)
    assert set(truth) == live
    for text in ["i = 5", "i < 20", "i >= 270", "i = 285 OR s = 'ça-100'", "i IS NULL", "NOT (i < 300)"]:
        predicate = Predicate.parse(text, snap.schema)
        matching = {fid for fid, t in truth.items() if t.filter(predicate.to_pyarrow()).num_rows > 0}
        kept = sk.prune(data, predicate, sorted(live))
        assert matching <= kept, text
    assert sk.prune(data, Predicate.parse("i < 20", snap.schema), sorted(live)) == set()
    assert len(sk.prune(data, Predicate.parse("i >= 270", snap.schema), sorted(live))) == 1


def test_later_row_for_a_file_id_wins(tmp_path: Path) -> None:
    spec = SkippingIndex("sk", ["i"], max_values=4)
    storage = Storage.for_uri(str(tmp_path))
    first = sk.stats_row(pa.table({"i": [1, 2]}), 0, spec, {"i": pa.int64()})
    second = sk.stats_row(pa.table({"i": [50, 60]}), 0, spec, {"i": pa.int64()})
    other = sk.stats_row(pa.table({"i": [7]}), 1, spec, {"i": pa.int64()})
    a = sk.write_skipping_file(pa.concat_tables([first, other]), storage, str(tmp_path), "data/a/s.parquet")
    b = sk.write_skipping_file(second, storage, str(tmp_path), "data/b/s.parquet", Level.DELTA)
    data = sk.load(storage, str(tmp_path), [a, b], {0, 1})
    schema = pa.schema([pa.field("i", pa.int64())])
    assert sk.prune(data, Predicate.parse("i = 1", schema), [0, 1]) == set()
    assert sk.prune(data, Predicate.parse("i = 50", schema), [0, 1]) == {0}
    only_1 = sk.load(storage, str(tmp_path), [a, b], {1})
    assert only_1.file_ids.tolist() == [1]
    assert sk.prune(only_1, Predicate.parse("i = 50", schema), [0, 1]) == {0}  # 0 not covered: kept


def test_load_ignores_statistics_of_replaced_columns(delta_table: str, tmp_path: Path) -> None:
    """A column dropped and re-added (new physical name / field id) or retyped prunes nothing."""
    spec = SkippingIndex("sk", ["i", "s"], max_values=4)
    index_dir = str(tmp_path / "idx")
    snap, ids, files = _build(delta_table, spec, index_dir, "data/a/s.parquet", Level.BASE)
    storage = Storage.for_uri(index_dir)
    live = sorted(ids.values())
    by_i = Predicate.parse("i = -1", snap.schema)  # no file holds it
    by_s = Predicate.parse("s = 'nothing'", snap.schema)
    same = sk.load(storage, index_dir, files, live, snapshot=snap)
    assert same.columns == ("i", "s")
    assert sk.prune(same, by_i, live) == set() and sk.prune(same, by_s, live) == set()

    def with_column(col: Column) -> Snapshot:
        cols = tuple(col if c.name == col.name else c for c in snap.columns)
        return dataclasses.replace(snap, columns=cols)

    readded = with_column(Column("i", pa.int64(), physical_name="col-7f3a"))
    for changed in (readded, with_column(Column("i", pa.int64(), field_id=12))):
        data = sk.load(storage, index_dir, files, live, snapshot=changed)
        assert data.columns == ("s",)
        assert sk.prune(data, Predicate.parse("i = -1", changed.schema), live) == set(live)
        assert sk.prune(data, Predicate.parse("s = 'nothing'", changed.schema), live) == set()
    retyped = with_column(Column("s", pa.int64()))
    data = sk.load(storage, index_dir, files, live, snapshot=retyped)
    assert data.columns == ("i",)
    assert sk.prune(data, Predicate.parse("s = 5", retyped.schema), live) == set(live)
    widened = with_column(Column("i", pa.decimal128(20, 0)))
    assert sk.load(storage, index_dir, files, live, snapshot=widened).columns == ("i", "s")
    dropped = dataclasses.replace(snap, columns=tuple(c for c in snap.columns if c.name != "i"))
    assert sk.load(storage, index_dir, files, live, snapshot=dropped).columns == ("s",)
    # Compaction writes loaded rows back with their identities: the check still applies.
    compacted = sk.write_skipping_file(same.rows, storage, index_dir, "data/b/s.parquet")
    assert sk.load(storage, index_dir, [compacted], live, snapshot=readded).columns == ("s",)
    assert sk.load(storage, index_dir, [compacted], live, snapshot=snap).rows.equals(same.rows)


def test_partitioned_delta_table(tmp_path: Path) -> None:
    path = str(tmp_path / "tbl")
    for k, region in enumerate(["eu", "us", "ap", "eu"]):
        write_deltalake(
            path,
            pa.table({"region": [region] * 50, "v": pa.array(range(k * 50, k * 50 + 50), pa.int64())}),
            mode="append",
            partition_by=["region"],
        )
    spec = SkippingIndex("sk", ["region", "v"], max_values=4)
    index_dir = str(tmp_path / "idx")
    snap, ids, files = _build(path, spec, index_dir, "data/a/s.parquet", Level.BASE)
    data = sk.load(Storage.for_uri(index_dir), index_dir, files, set(ids.values()))
    dataset = DeltaTable(path).to_pyarrow_dataset()
    by_local = {_local(p): fid for p, fid in ids.items()}
    for text in ["region = 'eu'", "region IN ('ap', 'us') AND v > 60", "v = 175", "region = 'xx'"]:
        predicate = Predicate.parse(text, snap.schema)
        matching = {
            by_local[str(Path(path) / fr.path)]
            for fr in dataset.get_fragments()
            if fr.to_table(schema=dataset.schema).filter(predicate.to_pyarrow()).num_rows > 0
        }
        kept = sk.prune(data, predicate, sorted(ids.values()))
        assert matching <= kept, text
        assert len(kept) == len(matching), text  # constants per file: pruning is exact here


# --------------------------------------------------------------------------- bad input


def test_bad_specs_and_files(tmp_path: Path, delta_table: str) -> None:
    source = DeltaSource.open(delta_table, Storage.for_uri(delta_table))
    snap = source.snapshot()
    with pytest.raises(InvalidIndexSpecError, match="no column 'nope'"):
        sk.validate_spec(SkippingIndex("x", ["nope"]), snap)
    path = str(tmp_path / "nested")
    write_deltalake(path, pa.table({"_rows": [1], "st": [{"a": 1}]}))
    nested = DeltaSource.open(path, Storage.for_uri(path)).snapshot()
    with pytest.raises(InvalidIndexSpecError, match="'st' has type struct"):
        sk.validate_spec(SkippingIndex("x", ["st"]), nested)
    with pytest.raises(InvalidIndexSpecError, match="reserved"):
        sk.validate_spec(SkippingIndex("x", ["_rows"]), nested)
    storage = Storage.for_uri(str(tmp_path))
    missing = IndexFile("data/zz/missing.parquet", rows=1, size=1)
    with pytest.raises(TableFormatError, match="missing"):
        sk.load(storage, str(tmp_path), [missing], {0})
    (tmp_path / "data" / "bad").mkdir(parents=True)
    (tmp_path / "data" / "bad" / "x.parquet").write_bytes(b"not parquet")
    garbage = IndexFile("data/bad/x.parquet", rows=1, size=11)
    with pytest.raises(TableFormatError, match="not readable"):
        sk.load(storage, str(tmp_path), [garbage], {0})
    assert (
        sk.build_files(source, snap, SkippingIndex("x", ["i"]), [], storage, str(tmp_path), "d/x", Level.BASE)
        == ()
    )


# --------------------------------------------------------------------------- pruning rate


def test_pruning_rate_on_a_selective_workload(tmp_path: Path) -> None:
    """100 files x 1,000 rows: clustered ``id``, random unique ``email``, low-cardinality ``country``.

    Measures the files kept for point lookups (bloom filters), IN lists, ranges and a
    low-cardinality equality (value lists); prints the figures for the report.
    """
    path = str(tmp_path / "tbl")
    rng = np.random.default_rng(11)
    n_files, per_file = 100, 1_000
    emails: list[list[str]] = []
    t0 = time.perf_counter()
    for k in range(n_files):
        ids = np.arange(k * per_file, (k + 1) * per_file, dtype=np.int64)
        em = [f"u{rng.integers(1 << 60):x}@exämple.org" for _ in range(per_file)]
        emails.append(em)
        country = rng.choice(["de", "fr", "it"] if k % 10 else ["jp"], per_file)
        write_deltalake(path, pa.table({"id": ids, "email": em, "country": country}), mode="append")
    write_s = time.perf_counter() - t0
    spec = SkippingIndex("sk", ["id", "email", "country"], bloom_fpp=0.01, max_values=32)
    index_dir = str(tmp_path / "idx")
    t0 = time.perf_counter()
    snap, ids_map, files = _build(path, spec, index_dir, "data/a/s.parquet", Level.BASE)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    data = sk.load(Storage.for_uri(index_dir), index_dir, files, set(ids_map.values()))
    load_s = time.perf_counter() - t0
    live = sorted(ids_map.values())
    truth = _truth(path, ids_map)

    workloads: dict[str, list[str]] = {
        "email = (point lookup, bloom)": [
            f"email = '{emails[int(rng.integers(n_files))][int(rng.integers(per_file))]}'" for _ in range(50)
        ],
        "email IN (5 values)": [
            "email IN ("
            + ", ".join(
                f"'{emails[int(rng.integers(n_files))][int(rng.integers(per_file))]}'" for _ in range(5)
            )
            + ")"
            for _ in range(20)
        ],
        "email = (absent value)": [f"email = 'nobody{j}@exämple.org'" for j in range(50)],
        "id = (clustered, min/max)": [f"id = {int(rng.integers(n_files * per_file))}" for _ in range(50)],
        "id BETWEEN (1% range)": [
            f"id BETWEEN {(s := int(rng.integers(90_000)))} AND {s + 999}" for _ in range(20)
        ],
        "country = 'jp' (value lists)": ["country = 'jp'"],
    }
    lines = []
    for name, texts in workloads.items():
        kept_total = 0
        elapsed = 0.0
        for text in texts:
            predicate = Predicate.parse(text, snap.schema)
            t0 = time.perf_counter()
            kept = sk.prune(data, predicate, live)
            elapsed += time.perf_counter() - t0
            matching = {fid for fid, t in truth.items() if t.filter(predicate.to_pyarrow()).num_rows > 0}
            assert matching <= kept, text
            kept_total += len(kept)
        mean_kept = kept_total / len(texts)
        lines.append(
            f"{name:32s} files kept {mean_kept:6.2f} / {n_files} "
            f"(pruned {100 * (1 - mean_kept / n_files):5.1f}%), prune {1e3 * elapsed / len(texts):.2f} ms"
        )
        if name.startswith("email ="):
            assert mean_kept <= 1 + 0.03 * n_files  # the file holding it + ~1% false positives
    size = sum(f.size for f in files)
    lines.append(
        f"build {build_s:.2f} s for {n_files} files ({write_s:.1f} s to write the table); "
        f"index {size / 1024:.0f} KiB; load {1e3 * load_s:.1f} ms"
    )
    print("\n" + "\n".join(lines))
