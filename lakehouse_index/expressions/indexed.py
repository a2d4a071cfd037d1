"""Expressions an index stores the values of (``SecondaryIndex(key="lower(email)")``).

:func:`bind_expression` reads an index key written as Spark SQL into its canonical text and
typed tree (the scalar binder's: Spark SQL's meaning, in UTC); the text names the index
column holding the values, the tree computes them (:func:`values`) and is what a ``where``
is matched against. :func:`substitute` rewrites a bound predicate for an index: each
subtree equal to an indexed expression becomes a reference to the index column, and each
condition that is then that column against constants becomes an atom (``=``, ``IN``,
ranges), which key extraction, pruning and index filters take as they take a column's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pyarrow as pa
from sqlglot import exp

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import ast
from lakehouse_index.expressions.binder import parse_expression
from lakehouse_index.expressions.kernels import evaluate
from lakehouse_index.expressions.scalar_binder import ScalarBinder
from lakehouse_index.expressions.types import Family, family
from lakehouse_index.expressions.visitors import fields

__all__ = ["ZONE", "bind_expression", "substitute", "values"]

#: The time zone indexed expressions are computed in (and the only one a where matches them in).
ZONE = "UTC"


def _bind(text: str, tree: exp.Expression, schema: pa.Schema) -> ast.Scalar:
    def fail(msg: str) -> QueryError:
        return QueryError(f"{msg} (in expression {text!r})")

    return ScalarBinder(schema, fail).bind(tree)


@functools.lru_cache(maxsize=512)
def bind_expression(text: str, schema: pa.Schema) -> tuple[str, ast.Scalar]:
    """(canonical text, typed tree) of index key ``text`` against ``schema``.

    QueryError when it does not parse, reads an unknown column, is not deterministic
    (``rand()``, ``current_date()``: the binder refuses them), reads no column, or is of a
    type an index key cannot be. The canonical text is sqlglot's Spark SQL rendering with
    function names in lower case; it binds to the same tree (checked).
    """
    parsed = parse_expression(text, "expression")
    tree = _bind(text, parsed, schema)
    if not fields(tree):
        raise QueryError(f"expression {text!r} reads no column: every row would have the same key")
    if pa.types.is_null(tree.type):
        raise QueryError(f"expression {text!r} is always NULL")
    canonical = parsed.sql(dialect="spark", normalize_functions="lower")
    if _bind(canonical, parse_expression(canonical, "expression"), schema) != tree:
        raise QueryError(
            f"expression {text!r} has no stable canonical form ({canonical!r} means another thing)"
        )
    return canonical, tree


def values(tree: ast.Scalar, rows: pa.Table) -> pa.Array:
    """The expression's value on each row of ``rows`` (which holds the columns it reads)."""
    return evaluate(tree, {c: rows[c] for c in fields(tree)}, rows.num_rows, ZONE)


def substitute(node: ast.Node, indexed: Sequence[tuple[str, ast.Scalar]]) -> ast.Node:
    """``node`` with every subtree equal to an indexed expression (``(column name, tree)``)
    read from that column: conditions on it against constants become atoms on the column.

    Only conditions in :data:`ZONE` match (a tree means what it means in its zone). A
    condition on a floating-point value stays an expression (atoms do not order NaN as
    Spark does), as does one against a NULL constant.
    """
    if isinstance(node, ast.And):
        return ast.And(tuple(substitute(p, indexed) for p in node.parts))
    if isinstance(node, ast.Or):
        return ast.Or(tuple(substitute(p, indexed) for p in node.parts))
    if isinstance(node, ast.Not):
        return ast.Not(substitute(node.part, indexed))
    if not isinstance(node, ast.Test) or node.zone != ZONE:
        return node
    replaced = _replace(node.expr, indexed)
    return node if replaced == node.expr else _condition(replaced, node.zone, {n for n, _ in indexed})


def _replace(e: ast.Scalar, indexed: Sequence[tuple[str, ast.Scalar]]) -> ast.Scalar:
    for name, tree in indexed:
        if e == tree:
            return ast.Field(name, tree.type)
    if isinstance(e, ast.Call):
        return ast.Call(e.fn, tuple(_replace(a, indexed) for a in e.args), e.type, e.option)
    return e


def _constant(e: ast.Scalar, t: pa.DataType, zone: str) -> ast.Lit | None:
    """``e`` as a literal of type ``t`` when it reads no column and is not null (else None)."""
    if fields(e) or not e.type.equals(t):
        return None
    value = evaluate(e, {}, 1, zone)[0].as_py()
    return None if value is None else ast.Lit(value, t)


def _indexed(e: ast.Scalar, names: set[str]) -> bool:
    return isinstance(e, ast.Field) and e.name in names


def _condition(e: ast.Scalar, zone: str, names: set[str]) -> ast.Node:
    """Boolean expression ``e`` as atoms where it compares an index column with constants."""
    if isinstance(e, ast.Call):
        if e.fn in ("and", "or"):
            parts = tuple(_condition(a, zone, names) for a in e.args)
            return ast.And(parts) if e.fn == "and" else ast.Or(parts)
        if e.fn == "not":
            return ast.Not(_condition(e.args[0], zone, names))
        if e.fn in ast.COMPARISONS and _indexed(e.args[1], names) and not _indexed(e.args[0], names):
            e = ast.Call(ast.FLIP[e.fn], e.args[::-1], e.type)  # 'x' = lower(email)
        column = e.args[0] if e.args else None
        if (
            isinstance(column, ast.Field)
            and _indexed(column, names)
            and family(column.type) is not Family.FLOAT
        ):
            if e.fn in ast.COMPARISONS:
                lit = _constant(e.args[1], column.type, zone)
                if lit is not None:
                    return ast.Compare(e.fn, ast.Col(column.name), lit)
            if e.fn == "in":
                lits = [_constant(a, column.type, zone) for a in e.args[1:]]
                if all(lit is not None for lit in lits):
                    kept = tuple(lit for lit in lits if lit is not None)
                    return ast.In(ast.Col(column.name), kept, column.type)
    return ast.Test(e, zone)
