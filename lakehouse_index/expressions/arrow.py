"""AST → pyarrow compute Expression (for ``Table.filter`` and datasets).

pyarrow's comparisons and Kleene ``&`` / ``|`` already follow SQL three-valued logic;
only ``IN`` needs help: a null input must give null, so ``NOT IN`` drops it, and its
hashing tells -0.0 from 0.0, which SQL's (and pyarrow's ``=``) equality does not.

The binder gives every literal compared with an integer column the column's type
(:func:`~.literals.compare_integers`): pyarrow would compare such a column with a float
in float32 or float64 and refuse values beyond 2**24 or 2**53.

A :class:`~.ast.Test` (a scalar expression) becomes a call of a pyarrow scalar function
registered for it in this process (:mod:`.kernels` evaluates it with Spark SQL's meaning),
taking the columns it reads: the Expression then works wherever pyarrow takes one
(``Table.filter``, datasets), and a process that unpickles the predicate registers it again.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.kernels import evaluate
from lakehouse_index.expressions.visitors import Visitor, fields, visit

__all__ = ["signless_zero", "to_pyarrow"]

_COMPARE: dict[str, Callable[[Any, Any], pc.Expression]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _operand(o: ast.Operand) -> Any:
    if isinstance(o, ast.Col):
        return pc.field(o.name)
    return pc.scalar(pa.scalar(o.value, type=o.type))


def signless_zero(values: Any, t: pa.DataType) -> Any:
    """Float ``values`` (an array or an Expression of type ``t``) with -0.0 made 0.0.

    ``x + 0.0`` does exactly that and leaves every other value, NaN and null as it is.
    (No float16: pyarrow has no arithmetic on it.)
    """
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return pc.add(values, pa.scalar(0.0, t))
    return values


def _negated(e: pc.Expression, negated: bool) -> pc.Expression:
    return ~e if negated else e


class _ToArrow(Visitor[pc.Expression]):
    def visit_const(self, node: ast.Const) -> pc.Expression:
        return pc.scalar(node.value)

    def visit_not(self, node: ast.Not, part: pc.Expression) -> pc.Expression:
        return ~part

    def visit_and(self, node: ast.And, parts: Sequence[pc.Expression]) -> pc.Expression:
        out = parts[0]
        for p in parts[1:]:
            out = out & p  # Kleene and
        return out

    def visit_or(self, node: ast.Or, parts: Sequence[pc.Expression]) -> pc.Expression:
        out = parts[0]
        for p in parts[1:]:
            out = out | p
        return out

    def visit_compare(self, node: ast.Compare) -> pc.Expression:
        return _COMPARE[node.op](_operand(node.left), _operand(node.right))

    def visit_in(self, node: ast.In) -> pc.Expression:
        t = node.column_type
        # Values of another type than the column's cannot equal any of its values.
        value_set = pa.array([v.value for v in node.values if v.type.equals(t)], type=t)
        f = pc.field(node.column.name)
        e = _negated(pc.is_in(signless_zero(f, t), value_set=signless_zero(value_set, t)), node.negated)
        # SQL: a null input gives null, so NOT IN drops rows whose value is null.
        return pc.if_else(f.is_null(), pa.scalar(None, pa.bool_()), e)

    def visit_is_null(self, node: ast.IsNull) -> pc.Expression:
        return _negated(pc.field(node.column.name).is_null(), node.negated)

    def visit_between(self, node: ast.Between) -> pc.Expression:
        f = pc.field(node.column.name)
        return _negated((f >= _operand(node.low)) & (f <= _operand(node.high)), node.negated)

    def visit_like(self, node: ast.Like) -> pc.Expression:
        return _negated(pc.match_like(pc.field(node.column.name), node.pattern), node.negated)

    def visit_test(self, node: ast.Test) -> pc.Expression:
        return _test_expression(node)


_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def _field_types(e: ast.Scalar, out: dict[str, pa.DataType]) -> dict[str, pa.DataType]:
    if isinstance(e, ast.Field):
        out.setdefault(e.name, e.type)
    elif isinstance(e, ast.Call):
        for a in e.args:
            _field_types(a, out)
    return out


def _test_expression(node: ast.Test) -> pc.Expression:
    types = _field_types(node.expr, {})
    names = sorted(fields(node.expr))
    if not names:
        value = evaluate(node.expr, {}, 1, node.zone)[0].as_py()
        return pc.scalar(pa.scalar(value, pa.bool_()))
    name = "lakehouse_index_test_" + hashlib.sha256(repr(node).encode()).hexdigest()[:32]
    with _LOCK:
        if name not in _REGISTERED:

            def udf(ctx: Any, *arrays: pa.Array) -> pa.Array:
                return evaluate(node.expr, dict(zip(names, arrays, strict=True)), ctx.batch_length, node.zone)

            doc = {"summary": "a where expression", "description": repr(node.expr)[:200]}
            in_types = {n: types[n] for n in names}
            pc.register_scalar_function(udf, name, doc, in_types, pa.bool_())
            _REGISTERED.add(name)
    args = [pc.field(n).cast(types[n], safe=False) for n in names]
    return pc.Expression._call(name, args)


def to_pyarrow(node: ast.Node) -> pc.Expression:
    """``node`` as a pyarrow compute Expression."""
    return visit(node, _ToArrow())
