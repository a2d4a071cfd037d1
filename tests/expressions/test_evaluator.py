"""The one three-valued evaluator: against pyarrow on single rows, and its combination rules."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.constants import ConstantsOracle
from lakehouse_index.expressions.evaluator import Outcomes, evaluate
from lakehouse_index.expressions.types import Family, LikePattern, comparison_class, family, orders_alike
from tests.support.predicates import combinations

SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("m", pa.decimal128(5, 2)),
        ("b", pa.bool_()),
    ]
)
DATES = [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 3, 1)]
DECIMALS = [decimal.Decimal(v) for v in ("1.00", "1.50", "2.25", "-3.00")]
VALUES = {
    # Beyond 2**24 and 2**53 too, where pyarrow alone compares no int64 column with a float.
    "k": st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([2**24 + 1, 2**53 + 1, -(2**63)])),
    # -0.0 too: it equals 0.0 in IN as in = (pyarrow's is_in alone hashes bit patterns).
    "x": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 0.5, -1.25, math.nan, math.inf])),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b%", "ü", "a_b", "\\"])),
    "d": st.one_of(st.none(), st.sampled_from(DATES)),
    "m": st.one_of(st.none(), st.sampled_from(DECIMALS)),
    "b": st.one_of(st.none(), st.booleans()),
}
OPS = ["=", "!=", "<", "<=", ">", ">="]


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


LITERALS = {
    "k": st.one_of(
        st.integers(-3, 3).map(str), st.sampled_from(["2.5", "-0.5", "1e30", "9223372036854775808"])
    ),
    "x": st.sampled_from(["0", "-0.0", "0.5", "-1.25", "1e0", "2"]),
    "s": st.sampled_from(["", "a", "ab", "b%", "ü"]).map(_quote),
    "d": st.sampled_from([d.isoformat() for d in DATES]).map(lambda d: f"DATE '{d}'"),
    "m": st.sampled_from(["1", "1.5", "2.25", "-3"]),
}


NOT = st.sampled_from(["", "NOT "])
PATTERNS = ["a%", "%b", "_", "%", "a\\\\_b", "b\\\\%", "ü", "\\\\\\\\"]


def _column_atoms(col: str) -> st.SearchStrategy[str]:
    lit = LITERALS[col]
    values = st.lists(lit, min_size=1, max_size=3).map(", ".join)
    return st.one_of(
        st.builds(f"{col} {{}} {{}}".format, st.sampled_from(OPS), lit),
        st.builds(f"{col} {{}}IN ({{}})".format, NOT, values),
        st.builds(f"{col} {{}}BETWEEN {{}} AND {{}}".format, NOT, lit, lit),
        st.builds(f"{col} IS {{}}NULL".format, NOT),
    )


ATOMS = st.one_of(
    *(_column_atoms(c) for c in sorted(LITERALS)),
    st.builds("s {}LIKE '{}'".format, NOT, st.sampled_from(PATTERNS)),
    st.sampled_from(["b", "NOT b", "b IS TRUE", "b IS NOT FALSE", "TRUE", "FALSE"]),
)
PREDICATES = combinations(ATOMS, max_leaves=8)


@st.composite
def rows(draw: st.DrawFn) -> dict[str, object]:
    return {name: draw(strategy) for name, strategy in VALUES.items()}


def _pyarrow_value(pred: Predicate, row: dict[str, object]) -> bool | None:
    table = pa.Table.from_pylist([row], schema=SCHEMA)
    out = ds.dataset(table).to_table(columns={"r": pred.to_pyarrow()})
    return out.column("r")[0].as_py()


def _outcomes(o: Outcomes[bool]) -> set[bool | None]:
    return {v for v, possible in ((True, o.true), (False, o.false), (None, o.null)) if possible}


@settings(max_examples=300, deadline=None)
@given(where=PREDICATES, row=rows(), known=st.sets(st.sampled_from(list(VALUES))))
def test_constants_agree_with_pyarrow_on_single_rows(
    where: str, row: dict[str, object], known: set[str]
) -> None:
    """Every column known: exactly pyarrow's value; some unknown: pyarrow's value among the outcomes."""
    pred = Predicate.parse(where, SCHEMA)
    assert pred.node is not None
    expected = _pyarrow_value(pred, row)
    exact = _outcomes(evaluate(pred.node, ConstantsOracle(row)))
    assert exact == {expected}, (where, row)
    partial = _outcomes(evaluate(pred.node, ConstantsOracle({c: row[c] for c in known})))
    assert expected in partial, (where, row, known)
    assert pred.might_match({c: row[c] for c in known}) or expected is not True


TRUTH = [True, False, None]


def _and(a: bool | None, b: bool | None) -> bool | None:
    return False if a is False or b is False else None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    return True if a is True or b is True else None if a is None or b is None else False


def _subsets() -> list[frozenset[bool | None]]:
    return [frozenset(c) for n in range(1, 4) for c in itertools.combinations(TRUTH, n)]


def _of(values: frozenset[bool | None]) -> Outcomes[bool]:
    return Outcomes(True in values, False in values, None in values)


def test_combination_is_every_pair_of_outcomes() -> None:
    """AND / OR / NOT of outcome sets equal the sets of every combination (Kleene logic)."""
    for a, b in itertools.product(_subsets(), repeat=2):
        assert _outcomes(_of(a).and_(_of(b))) == {_and(x, y) for x in a for y in b}
        assert _outcomes(_of(a).or_(_of(b))) == {_or(x, y) for x in a for y in b}
        assert _outcomes(_of(a).negate()) == {None if x is None else not x for x in a}


def test_masks_and_bools_combine_alike() -> None:
    """The vectorised masks (many files) give, item by item, what the bools (one file) give."""
    sets = [frozenset(s) for n in range(4) for s in itertools.combinations(TRUTH, n)]  # empty too
    pairs = list(itertools.product(sets, repeat=2))

    def masks(side: int) -> Outcomes[np.ndarray]:
        return Outcomes(*(np.array([v in p[side] for p in pairs]) for v in TRUTH))

    for name in ("and_", "or_"):
        vec = getattr(masks(0), name)(masks(1))
        for i, (a, b) in enumerate(pairs):
            one = getattr(_of(a), name)(_of(b))
            assert (vec.true[i], vec.false[i], vec.null[i]) == (one.true, one.false, one.null)


def test_uncomparable_constants_keep_the_file() -> None:
    """A value that cannot be compared with a literal makes the whole predicate unknown."""
    pred = Predicate.parse("k < 1 AND s = 'a'", SCHEMA)
    assert pred.might_match({"k": "not a number", "s": "b"})
    assert not pred.might_match({"k": 2})


@pytest.mark.parametrize(
    ("pattern", "prefix", "yes", "no"),
    [
        ("ab%", "ab", ["ab", "abc"], ["a", "xab"]),
        ("a_c", "a", ["abc", "aüc"], ["ac", "abbc"]),
        ("a\\%b%", "a%b", ["a%b", "a%bc"], ["axb"]),
        ("\\_x", "_x", ["_x"], ["ax"]),
        ("%", "", ["", "any\nthing"], []),
        ("tail\\", "tail\\", ["tail\\"], ["tail"]),
        ("a.*", "a.*", ["a.*"], ["abc"]),
    ],
)
def test_like_pattern(pattern: str, prefix: str, yes: list[str], no: list[str]) -> None:
    like = LikePattern(pattern)
    assert like.prefix == prefix
    assert all(like.matches(v) for v in yes)
    assert not any(like.matches(v) for v in no)
    assert all(v.startswith(like.prefix) for v in yes)


def test_type_families() -> None:
    assert family(pa.int8()) is family(pa.uint64()) is Family.INTEGER
    assert family(pa.float16()) is Family.FLOAT
    assert family(pa.decimal256(40, 2)) is Family.DECIMAL
    assert family(pa.large_string()) is family(pa.string_view()) is Family.STRING
    assert family(pa.binary_view()) is Family.BINARY
    assert family(pa.binary(16)) is Family.FIXED_BINARY
    assert family(pa.date64()) is Family.DATE
    assert family(pa.list_(pa.int64())) is None
    assert comparison_class(pa.int32()) == comparison_class(pa.decimal128(5, 2)) == "number"
    assert comparison_class(pa.binary(16)) == "fixed_size_binary[16]"
    assert comparison_class(pa.time64("us")) == "time64[us]"
    assert orders_alike(pa.large_string(), pa.string_view()) and orders_alike(pa.int8(), pa.uint64())
    assert orders_alike(pa.date32(), pa.date32()) and not orders_alike(pa.date32(), pa.date64())
    assert not orders_alike(pa.int64(), pa.float64()) and not orders_alike(pa.binary(), pa.large_binary())
