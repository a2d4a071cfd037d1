"""The one three-valued evaluator: which outcomes may a predicate take on partly known data.

A predicate over rows we only know something about (a file's partition values, a
file's min/max and value lists) cannot be computed, only bounded: for each of N items
(files) the evaluator finds which SQL outcomes, true, false and null, the predicate
may take on *some* row of the item. :class:`Outcomes` holds three masks over the
items; an :class:`AtomOracle` answers for the atoms (what it knows about the columns),
and :func:`evaluate` combines the answers through AND, OR and NOT, here and nowhere
else.

Combining sets of outcomes treats the parts as independent (the set of every
combination of a possible left and a possible right outcome), which can only add
outcomes: an item dropped because true is impossible holds no matching row, as long
as the oracle never leaves out an outcome an atom can take.

The masks are numpy boolean arrays for many items (skipping indexes, one entry per
file), or plain bools for one item (:mod:`.constants`, evaluated per file): the same
code serves both, ``&`` and ``|`` being all it uses.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from lakehouse_index.expressions import ast
from lakehouse_index.expressions.visitors import Visitor, visit

__all__ = ["AtomOracle", "Outcomes", "evaluate"]

#: A mask over the items: a numpy bool array, or a bool for a single item.
M = TypeVar("M", np.ndarray, bool)


@dataclass(frozen=True)
class Outcomes(Generic[M]):
    """Per item: whether the predicate may be true, false, null on some row of it."""

    true: M
    false: M
    null: M

    def negate(self) -> Outcomes[M]:
        """``NOT``: true and false swap, null stays null."""
        return Outcomes(self.false, self.true, self.null)

    def and_(self, other: Outcomes[M]) -> Outcomes[M]:
        """SQL ``AND`` of every possible pair of outcomes."""
        a, b = self, other
        null = (a.null & (b.true | b.null)) | (b.null & (a.true | a.null))
        return Outcomes(a.true & b.true, a.false | b.false, null)

    def or_(self, other: Outcomes[M]) -> Outcomes[M]:
        """SQL ``OR`` of every possible pair of outcomes."""
        a, b = self, other
        null = (a.null & (b.false | b.null)) | (b.null & (a.false | a.null))
        return Outcomes(a.true | b.true, a.false & b.false, null)


class AtomOracle(Generic[M]):
    """What is known about the items' columns, asked one atom at a time."""

    def fixed(self, true: bool, false: bool, null: bool) -> Outcomes[M]:
        """The same possible outcomes for every item."""
        raise NotImplementedError

    def unknown(self) -> Outcomes[M]:
        """Nothing is known: every outcome is possible."""
        return self.fixed(True, True, True)

    def atom(self, node: ast.Atom) -> Outcomes[M]:
        """Every outcome ``node`` may take on some row of each item (more is safe, less is not)."""
        raise NotImplementedError


class _ThreeValued(Visitor[Outcomes[M]]):
    def __init__(self, oracle: AtomOracle[M]) -> None:
        self.oracle: AtomOracle[M] = oracle

    def visit_const(self, node: ast.Const) -> Outcomes[M]:
        return self.oracle.fixed(node.value, not node.value, False)

    def visit_not(self, node: ast.Not, part: Outcomes[M]) -> Outcomes[M]:
        return part.negate()

    def visit_and(self, node: ast.And, parts: Sequence[Outcomes[M]]) -> Outcomes[M]:
        return functools.reduce(Outcomes.and_, parts)

    def visit_or(self, node: ast.Or, parts: Sequence[Outcomes[M]]) -> Outcomes[M]:
        return functools.reduce(Outcomes.or_, parts)

    def visit_atom(self, node: ast.Atom) -> Outcomes[M]:
        return self.oracle.atom(node)


def evaluate(node: ast.Node, oracle: AtomOracle[M]) -> Outcomes[M]:
    """The outcomes ``node`` may take on some row of each item ``oracle`` knows about."""
    return visit(node, _ThreeValued(oracle))
