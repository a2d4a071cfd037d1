"""The predicate AST: typed, immutable nodes (build them with :mod:`.binder`).

Columns are referenced by logical name; every literal carries the Arrow type both
engines compare it as (the binder types it for the column it meets). Atoms
(:data:`Atom`) test columns against literals; :class:`And`, :class:`Or`, :class:`Not`
and :class:`Const` combine them in SQL three-valued logic.

Any other condition (``id % 7 = 1``, ``lower(email) = 'a@b'``) is a :class:`Test`: a
boolean scalar expression, a typed tree of :class:`Field`, :class:`Lit` and
:class:`Call` nodes (:mod:`.functions` catalogues the calls, with Spark SQL's meaning).
The planner uses only the atoms above (key pins, ranges, pruning); a test is a residual
filter evaluated on the rows read.
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
    "Call",
    "Col",
    "ColumnTest",
    "Compare",
    "Const",
    "Field",
    "In",
    "IsNull",
    "Like",
    "Lit",
    "Node",
    "Not",
    "Operand",
    "Or",
    "Scalar",
    "Test",
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


@dataclass(frozen=True)
class Field:
    """A column inside a scalar expression, with its Arrow type."""

    name: str
    type: pa.DataType


@dataclass(frozen=True)
class Call:
    """Function ``fn`` (a name of :mod:`.functions`' catalogue) applied to ``args``.

    ``type`` is the result's Arrow type; the arguments are already of the types the
    function takes (the binder inserts the casts Spark's coercion rules would).
    ``option`` holds what the function needs besides its arguments (a cast's ``try``
    flag, a time zone, a unit), never a column.
    """

    fn: str
    args: tuple[Scalar, ...]
    type: pa.DataType
    option: str | None = None


Scalar: TypeAlias = Field | Lit | Call


@dataclass(frozen=True)
class Test:
    """A boolean scalar expression used as a condition: true keeps the row, false and null drop it.

    ``zone`` is the session time zone its timestamps meet dates, strings and calendar fields in.
    """

    expr: Scalar
    zone: str = "UTC"


#: A single-column (or column-to-column) test: what an evaluator asks its oracle about.
Atom: TypeAlias = Compare | In | IsNull | Between | Like | Test
Node: TypeAlias = Atom | And | Or | Not | Const
