"""Partition pruning: a predicate evaluated on the columns a file holds constant.

A file's partition values pin some columns for all its rows; the others are unknown.
:class:`ConstantsOracle` answers each atom with the one outcome the known values give
it, or every outcome when it reads an unknown column, and :func:`might_match` keeps the
file unless the shared three-valued evaluator (:mod:`.evaluator`) rules true out.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.evaluator import AtomOracle, Outcomes, evaluate
from lakehouse_index.expressions.types import LikePattern

__all__ = ["ConstantsOracle", "might_match"]

#: An operand whose value the row does not tell.
_UNKNOWN = object()


class ConstantsOracle(AtomOracle[bool]):
    """Atoms evaluated on one partial row: column name → Python value (None is null)."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.row = row

    def fixed(self, true: bool, false: bool, null: bool) -> Outcomes[bool]:
        return Outcomes(true, false, null)

    def value(self, o: ast.Operand) -> Any:
        """The operand's value in the row, or ``_UNKNOWN``."""
        if isinstance(o, ast.Lit):
            return o.value
        return self.row.get(o.name, _UNKNOWN)

    def atom(self, node: ast.Atom) -> Outcomes[bool]:
        if isinstance(node, ast.Test):
            return self.unknown()  # expressions are filters on the rows read, never pruning
        if isinstance(node, ast.Compare):
            a, b = self.value(node.left), self.value(node.right)
            known = a is not _UNKNOWN and b is not _UNKNOWN
            r = _cmp(node.op, a, b) if known else None
        else:
            v = self.value(node.column)
            known = v is not _UNKNOWN
            r = _truth(node, v) if known else None
        return Outcomes(r is True, r is False, r is None) if known else self.unknown()


def _truth(node: ast.ColumnTest, v: Any) -> bool | None:
    """The SQL value of single-column atom ``node`` when its column holds ``v``."""
    if isinstance(node, ast.IsNull):
        return (v is None) != node.negated
    if v is None:
        return None
    if isinstance(node, ast.In):
        return any(_cmp("=", v, x.value) for x in node.values) != node.negated
    if isinstance(node, ast.Between):
        inside = _cmp(">=", v, node.low.value) and _cmp("<=", v, node.high.value)
        return inside != node.negated
    assert isinstance(node, ast.Like)
    return LikePattern.of(node.pattern).matches(str(v)) != node.negated


def _cmp(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    a, b = _comparable(a), _comparable(b)
    if op == "=":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _comparable(v: Any) -> Any:
    # Partition values may be naive or aware datetimes; literals follow the column's
    # tz-ness. Compare instants in UTC.
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def might_match(node: ast.Node, constants: Mapping[str, Any]) -> bool:
    """False when no row whose ``constants`` columns hold these values can satisfy ``node``.

    A value that cannot be compared with a literal makes the whole predicate unknown.
    """
    try:
        return evaluate(node, ConstantsOracle(constants)).true
    except (TypeError, ValueError, decimal.InvalidOperation):
        return True
