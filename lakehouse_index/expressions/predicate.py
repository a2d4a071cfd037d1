"""The :class:`Predicate`: a ``where`` argument bound to a table schema, with its renderings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions.arrow import to_pyarrow
from lakehouse_index.expressions.ast import Node
from lakehouse_index.expressions.binder import parse_sql
from lakehouse_index.expressions.constants import might_match
from lakehouse_index.expressions.keys import key_values
from lakehouse_index.expressions.spark import to_spark_sql
from lakehouse_index.expressions.visitors import has_tests, referenced_columns

__all__ = ["Predicate", "Where"]


@dataclass(frozen=True)
class Predicate:
    """A row predicate bound to a table schema. Build with :meth:`parse` or :meth:`of`.

    ``node`` is the typed AST, or None when the predicate was given as a pyarrow
    Expression (``arrow``), which only the pyarrow executors can evaluate.
    """

    node: Node | None
    schema: pa.Schema
    arrow: pc.Expression | None = None
    text: str | None = None
    zone: str = "UTC"

    # ----------------------------------------------------------------- construction

    @classmethod
    def of(cls, where: Where | None, schema: pa.Schema, zone: str = "UTC") -> Predicate | None:
        """A predicate from any accepted ``where`` form (None stays None); ``zone`` is the
        session time zone of its expressions (a Predicate keeps its own).

        A Predicate bound to another schema (an older table version) is re-bound.
        """
        if where is None:
            return None
        if isinstance(where, Predicate):
            if where.schema.equals(schema):
                return where
            if where.text is not None:
                return cls.parse(where.text, schema, where.zone)
            assert where.arrow is not None
            return cls.from_arrow(where.arrow, schema)
        if isinstance(where, str):
            return cls.parse(where, schema, zone)
        if isinstance(where, pc.Expression):
            return cls.from_arrow(where, schema)
        raise QueryError(f"where must be a SQL string or a pyarrow Expression, not {type(where).__name__}")

    @classmethod
    def parse(cls, text: str, schema: pa.Schema, zone: str = "UTC") -> Predicate:
        """Parse a SQL boolean expression; QueryError on bad SQL, unknown columns or types.

        Scalar expressions follow Spark SQL with ``spark.sql.ansi.enabled=false`` in session
        time zone ``zone`` (:mod:`lakehouse_index.expressions.kernels`).
        """
        return cls(parse_sql(text, schema, zone), schema, text=text, zone=zone)

    @classmethod
    def from_arrow(cls, expression: pc.Expression, schema: pa.Schema) -> Predicate:
        """Wrap a pyarrow Expression (checked against ``schema`` once)."""
        try:
            schema.empty_table().filter(expression)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError) as e:
            raise QueryError(f"where expression {expression} does not fit the table schema: {e}") from e
        return cls(None, schema, arrow=expression)

    # ----------------------------------------------------------------- properties

    @property
    def columns(self) -> frozenset[str]:
        """Logical names of the columns the predicate reads."""
        cached = self.__dict__.get("_columns")
        if cached is None:
            cached = referenced_columns(self.node) if self.node is not None else self._arrow_columns()
            object.__setattr__(self, "_columns", cached)
        return cached

    def _arrow_columns(self) -> frozenset[str]:
        # pyarrow offers no public walk over an Expression's field references; a
        # column is referenced exactly when the expression no longer binds without it.
        assert self.arrow is not None
        used = []
        for i, name in enumerate(self.schema.names):
            try:
                self.schema.remove(i).empty_table().filter(self.arrow)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, KeyError):
                used.append(name)
        return frozenset(used)

    @property
    def has_expressions(self) -> bool:
        """Whether a condition is a scalar expression (``id % 7 = 1``): evaluated only by this
        library's readers and Spark, a filter on the rows read, never an index key or pruning."""
        return self.node is not None and has_tests(self.node)

    # ----------------------------------------------------------------- renderings

    def to_pyarrow(self) -> pc.Expression:
        """The predicate as a pyarrow compute Expression (for ``Table.filter``, datasets)."""
        if self.node is None:
            assert self.arrow is not None
            return self.arrow
        return to_pyarrow(self.node)

    def to_spark_sql(self) -> str:
        """The predicate as Spark SQL text (identifiers in backticks, typed literals)."""
        if self.node is None:
            raise QueryError(
                "a pyarrow Expression cannot run on Spark; pass the where clause as a SQL string"
            )
        return to_spark_sql(self.node)

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        return str(self.arrow)

    # ----------------------------------------------------------------- analysis

    def might_match(self, constants: Mapping[str, Any]) -> bool:
        """False when no row whose ``constants`` columns hold these values can match.

        ``constants`` maps column names to Python values (a file's partition values);
        columns not in it are unknown. Used to prune files; never prunes wrongly: an
        uncomparable value makes the result unknown (True).
        """
        if self.node is None or not constants:
            return True
        return might_match(self.node, constants)

    def key_values(self, key_columns: Sequence[str]) -> list[tuple[Any, ...]] | None:
        """The key tuples the predicate restricts ``key_columns`` to, or None.

        Returns a sorted list of distinct tuples (values in ``key_columns`` order) such
        that every row satisfying the predicate has its key in the list. None when the
        predicate does not pin every key column to finitely many values by = / IN
        (combined with AND / OR), e.g. ranges, negations or a key column left free.
        """
        if self.node is None:
            return None
        return key_values(self.node, key_columns)


Where: TypeAlias = str | pc.Expression | Predicate
