"""Key extraction: the finite set of key tuples an equality / IN predicate pins columns to.

Each node yields a :class:`Relation` (columns and the value tuples every matching row's
columns are among) or None when it restricts nothing finitely: ``=`` and ``IN`` give one
column, AND joins its parts' relations, OR unites them over the columns they share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.visitors import Visitor, visit

__all__ = ["Relation", "key_values"]

#: Joins that would list more tuples than this give up (None: not a finite key set).
MAX_KEYS = 1_000_000


@dataclass(frozen=True)
class Relation:
    """A finite set of value tuples for some columns that every matching row satisfies."""

    columns: tuple[str, ...]
    rows: frozenset[tuple[Any, ...]]

    def project(self, columns: Sequence[str]) -> set[tuple[Any, ...]]:
        """The tuples restricted to ``columns`` (all of which must be in the relation)."""
        idx = [self.columns.index(c) for c in columns]
        return {tuple(row[i] for i in idx) for row in self.rows}

    def join(self, other: Relation) -> Relation | None:
        """The natural join (AND of both); None when it would exceed :data:`MAX_KEYS` tuples."""
        shared = [c for c in self.columns if c in other.columns]
        extra = tuple(c for c in other.columns if c not in self.columns)
        ai = [self.columns.index(c) for c in shared]
        bi = [other.columns.index(c) for c in shared]
        be = [other.columns.index(c) for c in extra]
        index: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in other.rows:
            index.setdefault(tuple(row[i] for i in bi), []).append(tuple(row[i] for i in be))
        rows = set()
        for row in self.rows:
            for tail in index.get(tuple(row[i] for i in ai), ()):
                rows.add(row + tail)
                if len(rows) > MAX_KEYS:
                    return None
        return Relation(self.columns + extra, frozenset(rows))


class _Relations(Visitor["Relation | None"]):
    def visit_const(self, node: ast.Const) -> Relation | None:
        return None

    def visit_not(self, node: ast.Not, part: Relation | None) -> Relation | None:
        return None

    def visit_and(self, node: ast.And, parts: Sequence[Relation | None]) -> Relation | None:
        rels = [r for r in parts if r is not None]
        if not rels:
            return None
        out: Relation | None = rels[0]
        for r in rels[1:]:
            assert out is not None
            out = out.join(r)
            if out is None:
                return None
        return out

    def visit_or(self, node: ast.Or, parts: Sequence[Relation | None]) -> Relation | None:
        rels = [r for r in parts if r is not None]
        if len(rels) < len(parts):
            return None
        common = set(rels[0].columns).intersection(*(r.columns for r in rels[1:]))
        if not common:
            return None
        cols = tuple(c for c in rels[0].columns if c in common)
        rows: set[tuple[Any, ...]] = set()
        for r in rels:
            rows.update(r.project(cols))
        return Relation(cols, frozenset(rows))

    def visit_atom(self, node: ast.Atom) -> Relation | None:
        if isinstance(node, ast.Compare) and node.op == "=":
            if isinstance(node.left, ast.Col) and isinstance(node.right, ast.Lit):
                return Relation((node.left.name,), frozenset([(node.right.value,)]))
            return None
        if isinstance(node, ast.In) and not node.negated:
            return Relation((node.column.name,), frozenset((v.value,) for v in node.values))
        return None


def _sort_key(row: Iterable[Any]) -> tuple[Any, ...]:
    return tuple((type(v).__name__, v) for v in row)


def key_values(node: ast.Node, key_columns: Sequence[str]) -> list[tuple[Any, ...]] | None:
    """The sorted distinct key tuples (in ``key_columns`` order) ``node`` restricts rows to.

    None when ``node`` does not pin every key column to finitely many values.
    """
    rel = visit(node, _Relations())
    if rel is None or not set(key_columns) <= set(rel.columns):
        return None
    return sorted(rel.project(key_columns), key=_sort_key)
