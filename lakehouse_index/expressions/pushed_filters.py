"""Spark's pushed data-source filters → the typed AST (for the ``lakehouse_index`` Spark source).

pyspark ≥ 4.1 hands a Python data source the conjuncts of a query's WHERE clause as small
frozen dataclasses (``pyspark.sql.datasource.EqualTo(attribute=("a",), value=1)``, ``In``,
``IsNull``, ``Not``, ``StringStartsWith``...). :func:`bind_filter` turns one into an AST
node bound to the table schema, or None when the translation would not select exactly the
rows Spark selects; the caller then leaves that filter to Spark. The filters are recognised
by class name and fields, so this module imports no pyspark.

Left to Spark (None):

* nested column paths (``a.b``) and unknown columns;
* comparisons on floating-point columns (Spark orders NaN above every number and equal to
  itself; pyarrow compares NaN false), ``IS [NOT] NULL`` excepted;
* literals the column cannot be compared with exactly (a binary value, a decimal with more
  digits than the column's scale, a null inside ``IN``, which matters under ``NOT``).
"""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.literals import Mismatch, coerce, compare_integers, exact
from lakehouse_index.expressions.types import Family, family

__all__ = ["bind_filter", "like_pattern"]

_COMPARE = {
    "EqualTo": "=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}
_LIKE = {"StringStartsWith": "{}%", "StringEndsWith": "%{}", "StringContains": "%{}%"}


def like_pattern(text: str) -> str:
    """``text`` escaped for a LIKE pattern (``%``, ``_`` and ``\\`` match themselves)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _column(attribute: Any, schema: pa.Schema) -> pa.Field | None:
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return None
    name = attribute[0]
    if name in schema.names:
        return schema.field(name)
    folded = [f for f in schema if f.name.lower() == str(name).lower()]
    return folded[0] if len(folded) == 1 else None


def _literal(value: Any, t: pa.DataType) -> ast.Lit | None:
    """``value`` typed exactly as the column compares it, or None."""
    if value is None:
        return None
    if isinstance(value, decimal.Decimal) and pa.types.is_decimal(t):
        assert isinstance(t, (pa.Decimal128Type, pa.Decimal256Type))
        try:
            as_column = pa.array([value], type=t)  # refuses digits beyond the scale
        except (pa.ArrowInvalid, decimal.InvalidOperation):
            return None
        return ast.Lit(as_column[0].as_py(), t)
    try:
        return exact(coerce(value, t), t)
    except Mismatch:
        return None


def bind_filter(f: Any, schema: pa.Schema) -> ast.Node | None:
    """The AST node selecting exactly the rows Spark's pushed filter ``f`` selects, or None."""
    kind = type(f).__name__
    if kind == "Not":
        child = bind_filter(f.child, schema)
        return None if child is None else ast.Not(child)
    field = _column(getattr(f, "attribute", None), schema)
    if field is None:
        return None
    col = ast.Col(field.name)
    if kind in ("IsNull", "IsNotNull"):
        return ast.IsNull(col, negated=kind == "IsNotNull")
    if family(field.type) is Family.FLOAT:
        return None
    if kind == "EqualNullSafe":
        if f.value is None:
            return ast.IsNull(col)
        lit = _literal(f.value, field.type)
        if lit is None:
            return None
        # ``a <=> v`` is false (never null) for a null ``a``: keeps NOT exact too.
        op, lit = compare_integers("=", lit, field.type)
        return ast.And((ast.IsNull(col, negated=True), ast.Compare(op, col, lit)))
    if kind in _COMPARE:
        lit = _literal(f.value, field.type)
        if lit is None:
            return None
        op, lit = compare_integers(_COMPARE[kind], lit, field.type)
        return ast.Compare(op, col, lit)
    if kind == "In":
        lits = [_literal(v, field.type) for v in f.value]
        if not lits or any(lit is None for lit in lits):
            return None
        return ast.In(col, tuple(lit for lit in lits if lit is not None), field.type)
    if kind in _LIKE and family(field.type) is Family.STRING and isinstance(f.value, str):
        return ast.Like(col, _LIKE[kind].format(like_pattern(f.value)))
    return None
