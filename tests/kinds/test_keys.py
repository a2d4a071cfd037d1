"""Matching index keys: typed exactly like the key columns, compared without encoding.

* A key value the key column cannot hold exactly (1.5 for an int column, a datetime past
  midnight for a date column, nanoseconds for a microsecond timestamp) matches no row, as
  pyarrow's own comparison (the key in its own type) and a plain scan say; it is not
  converted to a neighbouring value that matches. Values of a kind that cannot be compared
  with the column stay refused with a QueryError.
* A composite key matches exactly the rows whose every component equals the key's (null
  equals null, NaN equals NaN, -0.0 equals 0.0), whatever bytes the values hold: checked
  against Python tuple equality over strings and binaries full of \\x00 \\x01 \\x02, and
  end to end against the Delta reader.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.errors import QueryError
from lakehouse_index.kinds.keys import keys_table, match_mask

# ---------------------------------------------------------------- composite keys, unit level

_TRICKY_TEXT = st.text(alphabet=st.sampled_from(["\x00", "\x01", "\x02", "a", "b", "é"]), max_size=5)
_TRICKY_BYTES = st.binary(max_size=5).map(lambda b: bytes(x % 4 if x < 250 else x for x in b))
_COMPONENTS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "string": (pa.string(), _TRICKY_TEXT),
    "large_string": (pa.large_string(), _TRICKY_TEXT),
    "binary": (pa.binary(), _TRICKY_BYTES),
    "int64": (pa.int64(), st.integers(-3, 3)),
    "float64": (pa.float64(), st.sampled_from([0.0, -0.0, math.nan, 1.5, -2.0, math.inf])),
}


def _norm(v: Any) -> Any:
    """A value as SQL equality sees it: NaN equals NaN, -0.0 equals 0.0."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else v + 0.0
    return v


@st.composite
def _composite_case(draw: st.DrawFn) -> tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    kinds = draw(st.lists(st.sampled_from(sorted(_COMPONENTS)), min_size=2, max_size=3))
    values = [st.none() | _COMPONENTS[k][1] for k in kinds]
    rows = draw(st.lists(st.tuples(*values), max_size=40))
    keys = draw(st.lists(st.sampled_from(rows), max_size=6)) if rows else []
    keys += draw(st.lists(st.tuples(*values), max_size=4))
    return kinds, rows, keys


def _composite_table(kinds: list[str], rows: list[tuple[Any, ...]], chunks: int = 1) -> pa.Table:
    names = [f"c{i}" for i in range(len(kinds))]
    arrays = [pa.array([r[i] for r in rows], type=_COMPONENTS[k][0]) for i, k in enumerate(kinds)]
    table = pa.table(arrays, names=names)
    if chunks > 1 and table.num_rows > 1:
        cut = table.num_rows // 2
        table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])
    return table


@settings(max_examples=300, deadline=None)
@given(_composite_case(), st.integers(1, 2))
@example((["string", "string"], [("a\x02\x01b", "c"), ("a", "b\x02\x01c")], [("a", "b\x02\x01c")]), 1)
@example((["string", "binary"], [("x", b"ok"), ("y", b"\xff")], [("x", b"ok")]), 1)
@example((["binary", "binary"], [(b"\x01", b""), (b"", b"\x01")], [(b"", b"\x01")]), 1)
@example((["string", "string"], [(None, "a"), ("\x00", "a"), ("", "a")], [(None, "a")]), 1)
def test_composite_match_equals_tuple_equality(
    case: tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]], chunks: int
) -> None:
    """match_mask over composite keys is exactly Python tuple equality (the oracle), for
    strings and binaries holding any bytes, nulls, NaN and signed zeros."""
    kinds, rows, keys = case
    table = _composite_table(kinds, rows, chunks)
    key_table = _composite_table(kinds, keys)
    wanted = {tuple(_norm(v) for v in k) for k in keys}
    expected = [tuple(_norm(v) for v in r) in wanted for r in rows]
    assert match_mask(table, key_table).to_pylist() == expected


def test_composite_match_of_no_keys_and_of_many_components() -> None:
    table = pa.table(
        {"a": ["x", "x", None], "b": [b"\xff", b"", None], "c": [1, 1, None], "d": [0.0, -0.0, None]}
    )
    none = table.slice(0, 0)
    assert match_mask(table, none).to_pylist() == [False, False, False]
    keys = pa.table({"a": [None, "x"], "b": [None, b""], "c": [None, 1], "d": [None, 0.0]})
    oracle = [
        r in [tuple(k.values()) for k in keys.to_pylist()]
        for r in map(lambda r: tuple(r.values()), table.to_pylist())
    ]
    assert oracle == [False, True, True]
    assert match_mask(table, keys).to_pylist() == oracle


# ---------------------------------------------------------------- key exactness, unit level


def _own_scalar(v: Any) -> pa.Scalar:
    """The key in its own Arrow type (a pandas Timestamp keeps its nanoseconds)."""
    if isinstance(v, pd.Timestamp):
        return pa.scalar(v, pa.timestamp("ns"))
    return pa.scalar(v)


_DAY = dt.datetime(2024, 1, 1)
_COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    # name: (column type, column values, key values of a comparable kind)
    "int64": (
        pa.int64(),
        st.integers(-5, 5),
        st.integers(-6, 6) | st.integers(-20, 20).map(lambda i: i / 4),
    ),
    "int32": (
        pa.int32(),
        st.integers(-5, 5),
        st.integers(-6, 6) | st.integers(-20, 20).map(lambda i: i / 4) | st.just(2**40),
    ),
    "float32": (
        pa.float32(),
        st.sampled_from([0.5, 0.1, -1.0, 3.0]).map(lambda f: pa.scalar(f, pa.float32()).as_py()),
        st.sampled_from([0.5, 0.1, -1.0, 3.0, 0.10000000149011612, 3]),
    ),
    "decimal": (
        pa.decimal128(10, 2),
        st.integers(-300, 300).map(lambda i: decimal.Decimal(i).scaleb(-2)),
        st.integers(-3000, 3000).map(lambda i: decimal.Decimal(i).scaleb(-3)) | st.integers(-3, 3),
    ),
    "date": (
        pa.date32(),
        st.integers(0, 4).map(lambda d: (_DAY + dt.timedelta(days=d)).date()),
        st.integers(0, 4).map(lambda d: (_DAY + dt.timedelta(days=d)).date())
        | st.integers(0, 4 * 4).map(lambda q: _DAY + dt.timedelta(hours=6 * q)),
    ),
    "timestamp": (
        pa.timestamp("us"),
        st.integers(0, 4).map(lambda s: _DAY + dt.timedelta(seconds=s)),
        st.integers(0, 4).map(lambda s: _DAY + dt.timedelta(seconds=s))
        | st.integers(0, 4).map(lambda d: (_DAY + dt.timedelta(days=d)).date())
        | st.tuples(st.integers(0, 4), st.integers(0, 1)).map(
            lambda sn: pd.Timestamp(_DAY + dt.timedelta(seconds=sn[0])) + pd.Timedelta(nanoseconds=sn[1])
        ),
    ),
}


@st.composite
def _exactness_case(draw: st.DrawFn) -> tuple[str, list[Any], list[Any]]:
    name = draw(st.sampled_from(sorted(_COLUMNS)))
    _, values, keys = _COLUMNS[name]
    return name, draw(st.lists(values, min_size=1, max_size=20)), draw(st.lists(keys, min_size=1, max_size=5))


@settings(max_examples=300, deadline=None)
@given(_exactness_case())
@example(("int64", [1, 2, 3], [1.5]))
@example(("date", [dt.date(2024, 1, 1)], [dt.datetime(2024, 1, 1, 18, 30)]))
@example(("timestamp", [_DAY], [pd.Timestamp(_DAY) + pd.Timedelta(nanoseconds=1)]))
def test_key_matches_what_pyarrow_equality_matches(case: tuple[str, list[Any], list[Any]]) -> None:
    """A row matches a key exactly when pyarrow's ``equal`` (the key in its own type, the
    column widened as pyarrow does) holds: an inexact key matches nothing, never raises."""
    name, values, keys = case
    typ = _COLUMNS[name][0]
    table = pa.table({"k": pa.array(values, typ)})
    expected = [False] * len(values)
    for key in keys:
        hits = pc.equal(table["k"], _own_scalar(key)).to_pylist()
        expected = [a or bool(b) for a, b in zip(expected, hits, strict=True)]
    typed = keys_table([(k,) for k in keys], table.schema, ["k"])
    assert match_mask(table, typed).to_pylist() == expected


def test_nan_and_null_keys_still_match_their_rows() -> None:
    table = pa.table({"f": pa.array([math.nan, None, -0.0, 1.0], pa.float32())})
    typed = keys_table([(math.nan,), (None,), (0.0,)], table.schema, ["f"])
    # SQL equality of the index (NaN = NaN, null = null, -0.0 = 0.0): no pyarrow oracle for it.
    assert match_mask(table, typed).to_pylist() == [True, True, True, False]


@pytest.mark.parametrize(
    ("typ", "key"),
    [
        (pa.string(), 12.5),
        (pa.string(), 7),
        (pa.int64(), True),
        (pa.int64(), "1"),
        (pa.date32(), "2024-01-01"),
        (pa.bool_(), 1),
        (pa.binary(3), b"toolong"),
    ],
)
def test_keys_of_another_kind_are_still_refused(typ: pa.DataType, key: Any) -> None:
    with pytest.raises(QueryError, match="does not fit"):
        keys_table([(key,)], pa.schema([("k", typ)]), ["k"])


# ---------------------------------------------------------------- end to end (Delta reader)


def _reader_rows(path: str, column: str, keys: list[Any]) -> list[dict[str, Any]]:
    """The oracle: the Delta reader's rows whose ``column`` pyarrow finds equal to a key."""
    data = DeltaTable(path).to_pyarrow_table()
    mask = pa.array([False] * data.num_rows)
    for key in keys:
        mask = pc.or_(mask, pc.fill_null(pc.equal(data[column], _own_scalar(key)), False))
    return sorted(data.filter(mask).to_pylist(), key=lambda r: r["id"])


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def typed_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, li.Table]:
    path = str(tmp_path_factory.mktemp("keys") / "typed")

    def batch(ids: range) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(list(ids), pa.int64()),
                "d": pa.array([(_DAY + dt.timedelta(days=i % 3)).date() for i in ids], pa.date32()),
                "ts": pa.array([_DAY + dt.timedelta(seconds=i % 3) for i in ids], pa.timestamp("us")),
            }
        )

    write_deltalake(path, batch(range(0, 6)))
    t = li.open_table(path)
    for col in ("id", "d", "ts"):
        t.create_index(li.SecondaryIndex(f"by_{col}", key=col))
    write_deltalake(path, batch(range(6, 9)), mode="append")  # not indexed yet: scanned by key
    return path, li.open_table(path)


_E2E_KEYS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.integers(-1, 9) | st.integers(-4, 40).map(lambda i: i / 4),
    "d": _COLUMNS["date"][2],
    "ts": _COLUMNS["timestamp"][2],
}


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(_E2E_KEYS)).flatmap(
        lambda c: st.tuples(st.just(c), st.lists(_E2E_KEYS[c], min_size=1, max_size=4))
    )
)
@example(("id", [1.5]))
@example(("id", [2.9, 3.0]))
@example(("d", [dt.datetime(2024, 1, 1, 18, 30)]))
@example(("ts", [pd.Timestamp(_DAY) + pd.Timedelta(nanoseconds=1)]))
def test_lookup_of_inexact_keys_matches_the_reader(
    typed_table: tuple[str, li.Table], case: tuple[str, list[Any]]
) -> None:
    path, t = typed_table
    column, keys = case
    expected = _reader_rows(path, column, keys)
    assert _sorted(t.lookup(f"by_{column}", keys)) == expected
    assert sorted(t.locate(f"by_{column}", keys)[column].to_pylist()) == sorted(r[column] for r in expected)
    if column == "id":
        # The plain scan agrees (floats as SQL literals: multiples of 0.25 print exactly).
        where = "id IN (" + ", ".join(repr(k) for k in keys) + ")"
        assert _sorted(t.scan(where=where)) == expected
        # Arrow keys (a float array for an integer column) mean what their values mean.
        assert _sorted(t.lookup(f"by_{column}", pa.array(keys))) == expected
        assert _sorted(t.lookup(f"by_{column}", pa.table({column: keys}))) == expected


def test_arrow_keys_of_the_wrong_shape_are_refused(typed_table: tuple[str, li.Table]) -> None:
    _, t = typed_table
    with pytest.raises(QueryError, match="lacks the key column"):
        t.lookup("by_id", pa.table({"other": [1]}))
    assert sorted(t.lookup("by_id", pa.chunked_array([[1, 2], [2, 40]]))["id"].to_pylist()) == [1, 2]


def test_composite_lookup_with_separator_bytes_and_binary_matches_the_reader(tmp_path: Path) -> None:
    path = str(tmp_path / "composite")
    a = ["a\x02\x01b", "a", "a\x01", "", None, "\x00", "x", "y"]
    b = ["c", "b\x02\x01c", "\x02", "\x01\x02", "", None, "\x00", "z"]
    h = [b"ok", b"\xff", b"\x01\x02", b"", None, b"\x00\xfe", b"\xc3", b"ok"]
    write_deltalake(
        path, pa.table({"id": pa.array(range(8), pa.int64()), "a": a, "b": b, "h": pa.array(h, pa.binary())})
    )
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_ab", key=["a", "b"]))
    t.create_index(li.SecondaryIndex("by_ah", key=["a", "h"]))
    write_deltalake(  # appended after indexing: found by scanning the new file's keys
        path,
        pa.table(
            {
                "id": pa.array([8, 9], pa.int64()),
                "a": ["a", "a\x02\x01b"],
                "b": ["b\x02\x01c", "c\x02\x01"],
                "h": pa.array([b"\xff", b"\xff\x00"]),
            }
        ),
        mode="append",
    )
    t = li.open_table(path)
    data = DeltaTable(path).to_pyarrow_table()
    others: dict[str, list[tuple[Any, Any]]] = {
        "by_ab": [("a\x02", "\x01b\x02\x01c"), ("a\x02\x01b\x02", ""), ("\x01", None)],
        "by_ah": [("a", b"\xff\x00\x00"), ("x", b"\x00"), (None, b"\xc3"), ("\x00", b"\x00\xfe")],
    }
    for index, cols in (("by_ab", ("a", "b")), ("by_ah", ("a", "h"))):
        pairs = list(zip(*(data[c].to_pylist() for c in cols), strict=True))
        for key in [*pairs, *others[index]]:
            expected = _sorted(data.filter(_pair_mask(data, cols, key)))
            assert _sorted(t.lookup(index, [key])) == expected, (index, key)
        assert _sorted(t.lookup(index, pairs)) == _sorted(data)


def _pair_mask(data: pa.Table, cols: tuple[str, str], key: tuple[Any, Any]) -> pa.Array:
    """Plain pyarrow filtering: every component equal (null matching null)."""
    parts = []
    for c, v in zip(cols, key, strict=True):
        if v is None:
            parts.append(pc.is_null(data[c]))
        else:
            parts.append(pc.fill_null(pc.equal(data[c], pa.scalar(v, data[c].type)), False))
    return pc.and_(parts[0], parts[1])


def test_uuid_keys_are_refused_clearly_and_write_nothing(tmp_path: Path) -> None:
    """pyiceberg reads an Iceberg uuid column as the ``arrow.uuid`` extension type, which Arrow
    can neither compare nor sort: an index keyed on it is refused before anything is written
    (it crashed with ArrowNotImplementedError); as a record key it still works."""
    import uuid

    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, UUIDType

    import lakehouse_index as li
    from lakehouse_index.errors import InvalidIndexSpecError

    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    table = catalog.create_table(
        "db.t", schema=Schema(NestedField(1, "id", LongType()), NestedField(2, "u", UUIDType()))
    )
    arrow = table.schema().as_arrow()
    ids = [uuid.UUID(int=i) for i in range(4)]
    table.append(
        pa.table(
            {
                "id": pa.array(range(4), pa.int64()),
                "u": pa.array([u.bytes for u in ids], arrow.field("u").type),
            }
        )
    )
    t = li.open_table("db.t", catalog=catalog)
    for spec in (li.SecondaryIndex("by_u", key="u"), li.CoveringIndex("cov_u", indexed="u", included=["id"])):
        with pytest.raises(InvalidIndexSpecError, match="extension type"):
            t.create_index(spec)
    assert t.indexes() == []
    t.create_index(li.SecondaryIndex("by_id", key="id", record_key="u"))
    rows = catalog.load_table("db.t").scan().to_arrow()
    assert t.lookup("by_id", [1])["u"].to_pylist() == rows.filter(pc.equal(rows["id"], 1))["u"].to_pylist()
