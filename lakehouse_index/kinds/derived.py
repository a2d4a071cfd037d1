"""The columns an index stores: table columns, or the values of indexed expressions.

A spec's keys may be expressions (``SecondaryIndex(key="lower(email)")``): creating the index
resolves each key naming no column of the table as an expression (:func:`resolve_expressions`)
and the spec keeps its canonical text, which is also the name of the index column holding
its values (``IndexSpec.expressions``). :class:`IndexedColumns` is every spec column at one
table version: its type, and for an expression its typed tree. Whoever computes entries
reads the data files' *source* columns (:attr:`IndexedColumns.sources`) and derives the
stored ones (:meth:`IndexedColumns.derive`, or the Spark executor's rendering of the same
tree), so an expression index is built and maintained on every path a column index is.
Queries rewrite a ``where`` for the index (:func:`on_index`): conditions on the expression
become conditions on its column (``expressions.indexed.substitute``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from lakehouse_index.errors import InvalidIndexSpecError, QueryError
from lakehouse_index.expressions import Predicate, ast
from lakehouse_index.expressions.indexed import bind_expression, substitute, values
from lakehouse_index.expressions.visitors import fields
from lakehouse_index.read.datafiles import ROW_COLUMN, read_file
from lakehouse_index.source import FileEntry, Snapshot
from lakehouse_index.spec import IndexSpec

if TYPE_CHECKING:
    from lakehouse_index.read.footers import FileAccess


@dataclass(frozen=True)
class IndexedColumns:
    """The columns an index stores at one table version (``schema``, in the spec's order), and
    the typed tree of each that is an expression's value (``expressions``: name, tree)."""

    schema: pa.Schema
    expressions: tuple[tuple[str, ast.Scalar], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The stored column names."""
        return tuple(self.schema.names)

    def tree(self, name: str) -> ast.Scalar | None:
        """The expression stored as ``name`` (None: a table column)."""
        return next((t for n, t in self.expressions if n == name), None)

    def sources_of(self, columns: Sequence[str]) -> list[str]:
        """The table columns to read for ``columns`` (stored names or table columns)."""
        out: list[str] = []
        for c in columns:
            tree = self.tree(c)
            out += [c] if tree is None else sorted(fields(tree))
        return list(dict.fromkeys(out))

    @property
    def sources(self) -> list[str]:
        """The table columns the index's values are computed from."""
        return self.sources_of(self.names)

    def derive(self, rows: pa.Table, columns: Sequence[str] | None = None) -> pa.Table:
        """``columns`` (default every stored column) of ``rows``, which holds their sources:
        expressions computed, table columns as they are; ``_row`` kept when ``rows`` has it."""
        wanted = list(self.names if columns is None else columns)
        if not self.expressions and all(c in rows.column_names for c in wanted):
            arrays: list[Any] = [rows[c] for c in wanted]
        else:
            arrays = [rows[c] if (t := self.tree(c)) is None else values(t, rows) for c in wanted]
        if ROW_COLUMN in rows.column_names and ROW_COLUMN not in wanted:
            arrays.append(rows[ROW_COLUMN])
            wanted.append(ROW_COLUMN)
        return pa.table(arrays, names=wanted)

    def read_file(
        self, source: FileAccess, snapshot: Snapshot, entry: FileEntry, columns: Sequence[str], **options: Any
    ) -> pa.Table:
        """``read_file`` of ``columns`` (stored names or table columns) of one data file,
        expressions computed from their sources."""
        rows = read_file(source, snapshot, entry, columns=self.sources_of(columns), **options)
        return (
            self.derive(rows, columns)
            if self.expressions
            else rows.select(
                [*dict.fromkeys(columns), *([ROW_COLUMN] if ROW_COLUMN in rows.column_names else [])]
            )
        )


def indexed_columns(spec: IndexSpec, snapshot: Snapshot) -> IndexedColumns:
    """The columns ``spec`` stores at ``snapshot``; InvalidIndexSpecError when a column is
    missing or an expression no longer binds to the table's schema."""
    return _indexed(spec.name, spec.columns, spec.expressions, snapshot.schema)


@functools.lru_cache(maxsize=256)
def _indexed(
    index: str, columns: tuple[str, ...], expressions: tuple[str, ...], schema: pa.Schema
) -> IndexedColumns:
    out: list[pa.Field] = []
    trees: list[tuple[str, ast.Scalar]] = []
    for c in columns:
        if c in expressions:
            tree = _bound(index, c, schema)[1]
            trees.append((c, tree))
            out.append(pa.field(c, tree.type))
        elif c in schema.names:
            out.append(pa.field(c, schema.field(c).type))
        else:
            raise InvalidIndexSpecError(
                f"index {index!r}: table has no column {c!r} (columns: {sorted(schema.names)})"
            )
    return IndexedColumns(pa.schema(out), tuple(trees))


def _bound(index: str, text: str, schema: pa.Schema) -> tuple[str, ast.Scalar]:
    try:
        return bind_expression(text, schema)
    except QueryError as e:
        raise InvalidIndexSpecError(f"index {index!r}: {text!r} cannot be indexed: {e}") from None


def _column_reference(index: str, text: str, schema: pa.Schema) -> bool:
    """Whether ``text`` names a column (present or not) rather than an expression; an
    InvalidIndexSpecError when it is neither a column of the table nor an expression."""
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except (sqlglot.errors.SqlglotError, ValueError) as e:
        raise InvalidIndexSpecError(
            f"index {index!r}: table has no column {text!r} (columns: {sorted(schema.names)}), and it "
            f"is not an expression: {e}"
        ) from None
    return isinstance(tree, exp.Column) and not tree.table


def resolve_expressions(spec: IndexSpec, snapshot: Snapshot) -> IndexSpec:
    """``spec`` with each key naming no column of ``snapshot`` read as an expression: replaced
    by its canonical text and listed in ``expressions`` (InvalidIndexSpecError when it is not
    a deterministic expression of the table's columns). Kinds without expression keys, and
    specs already resolved, are returned as they are."""
    if not spec.expression_fields or spec.expressions:
        return spec
    names = set(snapshot.schema.names)
    changes: dict[str, tuple[str, ...]] = {}
    found: list[str] = []
    for name in spec.expression_fields:
        keys: list[str] = []
        for k in getattr(spec, name):
            if k in names or _column_reference(spec.name, k, snapshot.schema):
                keys.append(k)  # a column (validate names a missing one)
                continue
            canonical, _ = _bound(spec.name, k, snapshot.schema)
            keys.append(canonical)
            found.append(canonical)
        changes[name] = tuple(keys)
    if not found:
        return spec
    return dataclasses.replace(spec, **changes, expressions=tuple(dict.fromkeys(found)))  # type: ignore[type-var]


def on_index(predicate: Predicate, spec: IndexSpec) -> Predicate:
    """``predicate`` as the index's columns read it: conditions on an indexed expression made
    conditions on the column holding its values (``predicate`` itself for a spec without)."""
    if not spec.expressions or predicate.node is None:
        return predicate
    try:
        ic = _indexed(spec.name, spec.columns, spec.expressions, predicate.schema)
    except InvalidIndexSpecError:
        return predicate  # the expression does not bind at this version: the index cannot help
    node = substitute(predicate.node, ic.expressions)
    if node == predicate.node:
        return predicate
    extra = [ic.schema.field(n) for n, _ in ic.expressions if n not in predicate.schema.names]
    schema = pa.schema([*predicate.schema, *extra])
    return Predicate(node, schema, zone=predicate.zone)
