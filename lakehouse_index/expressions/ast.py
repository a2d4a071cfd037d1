"""The predicate AST: typed, immutable nodes (build them with :mod:`.binder`).

Columns are referenced by logical name; every literal carries the Arrow type both
engines compare it as (the binder types it for the column it meets). Atoms
(:data:`Atom`) test columns against literals; :class:`And`, :class:`Or`, :class:`Not`
and :class:`Const` combine them in SQL three-valued logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa

__all__ = [
    "COMPARISONS",
    "FLIP",
    "And",
    "Atom",
    "Between",
    "Col",
    "ColumnTest",
    "Compare",
    "Const",
    "In",
    "IsNull",
    "Like",
    "Lit",
    "Node",
    "Not",
    "Operand",
    "Or",
]

#: Comparison operators, in their SQL spelling.
COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
#: The operator of ``b op a`` when ``a op b`` is written.
FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(frozen=True)
class Col:
    """A reference to a top-level column by its logical name."""

    name: str


@dataclass(frozen=True)
class Lit:
    """A literal, already typed for the column it is compared with.

    ``value`` is a Python value (str, int, float, bool, Decimal, date, datetime, bytes);
    ``type`` the Arrow type both engines compare it as.
    """

    value: Any
    type: pa.DataType


Operand: TypeAlias = Col | Lit


@dataclass(frozen=True)
class Compare:
    """``left op right`` with op one of :data:`COMPARISONS`."""

    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True)
class ColumnTest:
    """An atom testing one column; ``negated`` (last field of each subclass) inverts it."""

    column: Col


@dataclass(frozen=True)
class In(ColumnTest):
    """``column [NOT] IN (values...)`` (values never null).

    ``column_type`` is the column's Arrow type; values of another type cannot equal
    any value of the column (``int_col IN (1.5)``) and only matter to Spark's rendering.
    """

    values: tuple[Lit, ...]
    column_type: pa.DataType
    negated: bool = False


@dataclass(frozen=True)
class IsNull(ColumnTest):
    """``column IS [NOT] NULL``."""

    negated: bool = False


@dataclass(frozen=True)
class Between(ColumnTest):
    """``column [NOT] BETWEEN low AND high`` (inclusive)."""

    low: Lit
    high: Lit
    negated: bool = False


@dataclass(frozen=True)
class Like(ColumnTest):
    """``column [NOT] LIKE pattern`` (``%`` any run, ``_`` one character, ``\\`` escapes)."""

    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class And:
    """Conjunction of two or more predicates."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Disjunction of two or more predicates."""

    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """Negation."""

    part: Node


@dataclass(frozen=True)
class Const:
    """``TRUE`` or ``FALSE``."""

    value: bool


#: A single-column (or column-to-column) test: what an evaluator asks its oracle about.
Atom: TypeAlias = Compare | In | IsNull | Between | Like
Node: TypeAlias = Atom | And | Or | Not | Const
