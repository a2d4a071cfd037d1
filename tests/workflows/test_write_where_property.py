"""Property: a write's ``where`` means the rows ``t.scan(where=...)`` returns, on every format.

Random tables (several files) hold NaN, -0.0 and 0.0, float32 values, int32 extremes and
nulls; random ``where`` clauses compare them with literals a column cannot hold (0.1 for
float32, 2**31 for int32), with zeros of both signs, IN lists, BETWEEN, NOT and column
pairs. ``t.update`` must change exactly the rows the scan selects and lose none,
``t.delete`` must remove exactly those rows; the result is read back with the format's
own reader (deltalake, pyiceberg), not this library's.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.errors import WriteRefusedError
from lakehouse_index.expressions import Predicate
from tests.api.iceberg_index_support import sql_catalog
from tests.workflows.write_oracle import deltalake_would_overwrite_nans

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("f", pa.float64()),
        pa.field("g", pa.float32()),
        pa.field("i", pa.int32()),
        pa.field("s", pa.string()),
        pa.field("u", pa.string()),
    ]
)
F_VALUES = [0.0, -0.0, math.nan, None, 1.5, 3.0, 1e300, math.inf, -math.inf, 0.1]
G_VALUES = [0.1, -0.0, 0.0, math.nan, None, 1.5, 3.4028234663852886e38]
I_VALUES = [0, -5, 2**31 - 1, -(2**31), None, 7]
S_VALUES = ["a", "ab", "b", None]

F_LITERALS = ["0.0", "-0.0", "1.5", "3.0", "1e300", "0.1", "-2.25"]
G_LITERALS = ["0.1", "1.5", "0.0", "-0.0", "3.4028234663852886e38", "3.4028235e38"]
I_LITERALS = ["0", "-5", "7", "2147483647", "2147483648", "-2147483648", "-2147483649", "1.5", "7.0"]
OPS = ["=", "!=", "<", "<=", ">", ">="]


def _row(draw: Any, i: int) -> dict[str, Any]:
    return {
        "id": i,
        "f": draw(st.sampled_from(F_VALUES)),
        "g": draw(st.sampled_from(G_VALUES)),
        "i": draw(st.sampled_from(I_VALUES)),
        "s": draw(st.sampled_from(S_VALUES)),
        "u": "o",
    }


@st.composite
def batches(draw: Any) -> list[pa.Table]:
    """One to three files of one to six rows."""
    out, next_id = [], 0
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 6))
        rows = [_row(draw, next_id + k) for k in range(n)]
        next_id += n
        out.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    return out


@st.composite
def atoms(draw: Any) -> str:
    kind = draw(st.integers(0, 8))
    column, literals = draw(st.sampled_from([("f", F_LITERALS), ("g", G_LITERALS), ("i", I_LITERALS)]))
    if kind <= 2:
        return f"{column} {draw(st.sampled_from(OPS))} {draw(st.sampled_from(literals))}"
    if kind == 3:
        values = draw(st.lists(st.sampled_from(literals), min_size=1, max_size=3))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {neg}IN ({', '.join(values)})"
    if kind == 4:
        low, high = sorted(draw(st.lists(st.sampled_from(literals), min_size=2, max_size=2)), key=float)
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{column} {neg}BETWEEN {low} AND {high}"
    if kind == 5:
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if kind == 6:
        return f"f {draw(st.sampled_from(OPS))} g"
    if kind == 7:
        return f"s {draw(st.sampled_from(['=', '!=']))} 'a'"
    return draw(st.sampled_from(["s LIKE 'a%'", "s NOT LIKE 'a%'"]))


@st.composite
def wheres(draw: Any) -> str:
    parts = draw(st.lists(atoms(), min_size=1, max_size=3))
    out = parts[0]
    for p in parts[1:]:
        out = f"({out}) {draw(st.sampled_from(['AND', 'OR']))} ({p})"
    return f"NOT ({out})" if draw(st.booleans()) else out


def _norm(v: Any) -> Any:
    return repr(v) if isinstance(v, float) else v  # NaN equal to NaN, -0.0 apart from 0.0


def _bag(t: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(_norm(r[c]) for c in SCHEMA.names) for r in t.select(SCHEMA.names).to_pylist())


def _updated(t: pa.Table) -> pa.Table:
    return t.set_column(
        SCHEMA.get_field_index("u"), SCHEMA.field("u"), pa.array(["U"] * t.num_rows, pa.string())
    )


def _delta(directory: str, files: list[pa.Table]) -> tuple[li.Table, Any]:
    path = str(Path(directory) / "t")
    for b in files:
        write_deltalake(path, b, mode="append")
    return li.open_table(path), lambda: DeltaTable(path).to_pyarrow_table()


def _iceberg(directory: str, files: list[pa.Table]) -> tuple[li.Table, Any]:
    catalog = sql_catalog(directory)
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    for b in files:
        tbl.append(b)
    return li.open_table("db.t", catalog=catalog), lambda: catalog.load_table("db.t").scan().to_arrow()


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(files=batches(), where=wheres())
def test_update_and_delete_change_exactly_the_scanned_rows(
    fmt: str, files: list[pa.Table], where: str
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        t, read_back = (_delta if fmt == "delta" else _iceberg)(directory, files)
        before = pa.concat_tables(files)
        predicate = Predicate.parse(where, SCHEMA)
        # A where with scalar expressions (``f = g``) is found by this library's reader and
        # committed by it: deltalake rewrites nothing, so there is nothing to refuse.
        through_deltalake = not predicate.has_expressions
        if fmt == "delta" and through_deltalake and deltalake_would_overwrite_nans(files, predicate.columns):
            for write in (lambda: t.update(where, set={"u": "U"}), lambda: t.delete(where)):
                with pytest.raises(WriteRefusedError, match="deltalake"):
                    write()
                assert _bag(read_back()) == _bag(before), where  # nothing written
            return
        selected = t.scan(where=where, use_indexes=False)
        ids = set(selected["id"].to_pylist())
        mask = pa.array([i in ids for i in before["id"].to_pylist()])
        matched, others = before.filter(mask), before.filter(pa.compute.invert(mask))

        # update sets u (no where references it): exactly the selected rows change, none is lost
        result = t.update(where, set={"u": "U"})
        assert result.rows_updated in (None, matched.num_rows), where
        assert _bag(read_back()) == _bag(others) + _bag(_updated(matched)), where

        # delete: exactly the selected rows (now updated) go
        result = t.delete(where)
        assert result.rows_deleted in (None, matched.num_rows), where
        assert _bag(read_back()) == _bag(others), where
