"""A generic bottom-up visitor over the predicate AST.

Renderers, evaluators and analyses subclass :class:`Visitor` and run with :func:`visit`:
a combinator (:class:`~.ast.And`, :class:`~.ast.Or`, :class:`~.ast.Not`) is visited
after its parts, with their results, so a visitor only says how to combine them.
Atoms go to :meth:`Visitor.visit_atom`, which dispatches on the atom's class by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from lakehouse_index.expressions import ast

__all__ = ["Visitor", "fields", "has_tests", "referenced_columns", "visit"]

T = TypeVar("T")


class Visitor(Generic[T]):
    """Say what each kind of node yields, given what its parts yielded."""

    def visit_const(self, node: ast.Const) -> T:
        """``TRUE`` / ``FALSE``."""
        raise NotImplementedError(type(self).__name__ + ".visit_const")

    def visit_not(self, node: ast.Not, part: T) -> T:
        """``NOT part``."""
        raise NotImplementedError(type(self).__name__ + ".visit_not")

    def visit_and(self, node: ast.And, parts: Sequence[T]) -> T:
        """The conjunction of ``parts`` (two or more)."""
        raise NotImplementedError(type(self).__name__ + ".visit_and")

    def visit_or(self, node: ast.Or, parts: Sequence[T]) -> T:
        """The disjunction of ``parts`` (two or more)."""
        raise NotImplementedError(type(self).__name__ + ".visit_or")

    def visit_atom(self, node: ast.Atom) -> T:
        """Any atom; dispatches to the ``visit_<atom>`` methods unless overridden."""
        if isinstance(node, ast.Compare):
            return self.visit_compare(node)
        if isinstance(node, ast.In):
            return self.visit_in(node)
        if isinstance(node, ast.IsNull):
            return self.visit_is_null(node)
        if isinstance(node, ast.Between):
            return self.visit_between(node)
        if isinstance(node, ast.Test):
            return self.visit_test(node)
        return self.visit_like(node)

    def visit_compare(self, node: ast.Compare) -> T:
        """``left op right``."""
        raise NotImplementedError(type(self).__name__ + ".visit_compare")

    def visit_in(self, node: ast.In) -> T:
        """``column [NOT] IN (values)``."""
        raise NotImplementedError(type(self).__name__ + ".visit_in")

    def visit_is_null(self, node: ast.IsNull) -> T:
        """``column IS [NOT] NULL``."""
        raise NotImplementedError(type(self).__name__ + ".visit_is_null")

    def visit_between(self, node: ast.Between) -> T:
        """``column [NOT] BETWEEN low AND high``."""
        raise NotImplementedError(type(self).__name__ + ".visit_between")

    def visit_like(self, node: ast.Like) -> T:
        """``column [NOT] LIKE pattern``."""
        raise NotImplementedError(type(self).__name__ + ".visit_like")

    def visit_test(self, node: ast.Test) -> T:
        """A boolean scalar expression."""
        raise NotImplementedError(type(self).__name__ + ".visit_test")


def visit(node: ast.Node, visitor: Visitor[T]) -> T:
    """Run ``visitor`` over the tree rooted at ``node`` (parts first)."""
    if isinstance(node, ast.And):
        return visitor.visit_and(node, [visit(p, visitor) for p in node.parts])
    if isinstance(node, ast.Or):
        return visitor.visit_or(node, [visit(p, visitor) for p in node.parts])
    if isinstance(node, ast.Not):
        return visitor.visit_not(node, visit(node.part, visitor))
    if isinstance(node, ast.Const):
        return visitor.visit_const(node)
    return visitor.visit_atom(node)


class _Columns(Visitor[frozenset[str]]):
    def visit_const(self, node: ast.Const) -> frozenset[str]:
        return frozenset()

    def visit_not(self, node: ast.Not, part: frozenset[str]) -> frozenset[str]:
        return part

    def visit_and(self, node: ast.And, parts: Sequence[frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*parts)

    def visit_or(self, node: ast.Or, parts: Sequence[frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*parts)

    def visit_atom(self, node: ast.Atom) -> frozenset[str]:
        if isinstance(node, ast.Compare):
            return frozenset(o.name for o in (node.left, node.right) if isinstance(o, ast.Col))
        if isinstance(node, ast.Test):
            return fields(node.expr)
        return frozenset([node.column.name])


def fields(e: ast.Scalar) -> frozenset[str]:
    """Names of the columns a scalar expression reads."""
    if isinstance(e, ast.Field):
        return frozenset([e.name])
    if isinstance(e, ast.Call):
        return frozenset().union(*(fields(a) for a in e.args))
    return frozenset()


def has_tests(node: ast.Node) -> bool:
    """Whether the tree holds a :class:`~.ast.Test` (a condition only this library's evaluators run)."""
    if isinstance(node, (ast.And, ast.Or)):
        return any(has_tests(p) for p in node.parts)
    if isinstance(node, ast.Not):
        return has_tests(node.part)
    return isinstance(node, ast.Test)


def referenced_columns(node: ast.Node) -> frozenset[str]:
    """Logical names of the columns the tree reads."""
    return visit(node, _Columns())
