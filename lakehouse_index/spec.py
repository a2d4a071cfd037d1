"""Index specifications: what a user declares when creating an index.

Pure data (frozen dataclasses) with a JSON form; behaviour lives in ``kinds``.

Example::

    import lakehouse_index as li
    li.SecondaryIndex("by_email", key="email", record_key="id")
    li.CoveringIndex("by_cust", indexed=["customer_id"], included=["amount"], num_buckets=8)
    li.SecondaryIndex("by_login", key="lower(email)")  # an expression index

A key (``key``, ``indexed``, a skipping index's ``columns``) may be a deterministic Spark SQL
expression of the table's columns instead of a column name: creating the index resolves each
key that names no column of the table as an expression (``kinds.derived``), stores it as its
canonical text (``LOWER( email )`` → ``lower(email)``) and lists it in ``expressions``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from lakehouse_index.errors import InvalidIndexSpecError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class AutoRefresh(str, Enum):
    """What writes with auto-maintenance and the watcher do after a commit."""

    INCREMENTAL = "incremental"
    QUICK = "quick"
    OFF = "off"


def _columns(value: str | list[str] | tuple[str, ...] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    cols = (value,) if isinstance(value, str) else tuple(value)
    if any(not isinstance(c, str) or not c for c in cols):
        raise InvalidIndexSpecError(f"{what} must be column names, got {value!r}")
    if len(set(cols)) != len(cols):
        raise InvalidIndexSpecError(f"{what} names a column twice: {value!r}")
    return cols


def validate_index_name(name: str) -> str:
    """Index names are path-safe: letters, digits, ``_ . -``; no ``/``; at most 128 chars."""
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise InvalidIndexSpecError(
            f"invalid index name {name!r}: use letters, digits, '_', '.', '-' (no '/'), "
            "starting with a letter or digit"
        )
    return name


class IndexSpec:
    """Base of every index spec: a frozen dataclass naming its kind, with a JSON form.

    Each subclass sets ``kind``: the name of the :class:`~lakehouse_index.kinds.base.IndexKind`
    plug-in that maintains it, whose ``spec_type`` it is (the kind registry,
    :mod:`lakehouse_index.kind_registry`, parses the JSON form through that plug-in).
    """

    kind: ClassVar[str]
    name: str
    auto_refresh: AutoRefresh

    #: Declared record-key columns (only secondary indexes have them).
    record_key: tuple[str, ...] = ()
    #: The keys that are expressions, as their canonical text (each also among ``key``): the
    #: index stores the expression's values under that name. Set when the index is created.
    expressions: tuple[str, ...] = ()
    #: The fields whose names may be expressions (resolved against the table at create time).
    expression_fields: ClassVar[tuple[str, ...]] = ()

    if TYPE_CHECKING:

        @property
        def key(self) -> tuple[str, ...]:
            """The columns lookups (or pruning) key on."""

        @property
        def columns(self) -> tuple[str, ...]:
            """Every table column the index stores."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form (see docs/FORMAT.md) without ``kind``: every field, named in camelCase;
        ``expressions`` only when there are some (a spec without is written as before)."""
        out = {_camel(f.name): _json_value(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        if not out.get("expressions", True):
            del out["expressions"]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> IndexSpec:
        """Inverse of :meth:`to_json` (the constructor takes every field by name)."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        d = {"expressions": [], **d} if "expressions" in names else d
        return cls(**{f.name: d[_camel(f.name)] for f in dataclasses.fields(cls)})  # type: ignore[arg-type]

    def _set_expressions(self, expressions: str | list[str] | tuple[str, ...] | None) -> None:
        """Set ``expressions`` (each must be one of the spec's keys)."""
        exprs = _columns(expressions, "expressions")
        keys = self.key
        stray = [e for e in exprs if e not in keys]
        if stray:
            raise InvalidIndexSpecError(f"expressions {stray} are not keys of the index ({list(keys)})")
        object.__setattr__(self, "expressions", exprs)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _json_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, init=False)
class SecondaryIndex(IndexSpec):
    """RFC-77 secondary index: secondary key → record key, with tombstones.

    ``key`` and ``record_key`` are one column name or a list (composite). Without a
    record key, the table's stable row id is used where it has one, else the row
    address (file, position).
    """

    name: str
    key: tuple[str, ...]
    record_key: tuple[str, ...]
    auto_refresh: AutoRefresh
    expressions: tuple[str, ...]

    def __init__(
        self,
        name: str,
        key: str | list[str] | tuple[str, ...],
        record_key: str | list[str] | tuple[str, ...] | None = None,
        auto_refresh: AutoRefresh | str = AutoRefresh.INCREMENTAL,
        expressions: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        object.__setattr__(self, "name", validate_index_name(name))
        object.__setattr__(self, "key", _columns(key, "key"))
        object.__setattr__(self, "record_key", _columns(record_key, "record_key"))
        object.__setattr__(self, "auto_refresh", AutoRefresh(auto_refresh))
        if not self.key:
            raise InvalidIndexSpecError("a secondary index needs at least one key column")
        if set(self.key) & set(self.record_key):
            raise InvalidIndexSpecError("key and record_key must not share columns")
        self._set_expressions(expressions)

    kind: ClassVar[str] = "secondary"
    expression_fields: ClassVar[tuple[str, ...]] = ("key",)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every table column the index stores."""
        return self.key + self.record_key


@dataclass(frozen=True, init=False)
class CoveringIndex(IndexSpec):
    """Hyperspace covering index: indexed + included columns, hash-bucketed on the leading indexed one.

    ``layout_version`` says how rows are bucketed (``kinds.layout``): 2 (the default) by
    Spark's own bucketing function, in files Spark reads as a bucketed table (index-accelerated
    joins, ``Table.read``); 1 by crc32 of the string form in ``bucket=<n>/`` directories, as
    indexes created before version 2 are (read as they are; recreate one to move it to 2).
    """

    name: str
    indexed: tuple[str, ...]
    included: tuple[str, ...]
    num_buckets: int
    auto_refresh: AutoRefresh
    layout_version: int
    expressions: tuple[str, ...]

    def __init__(
        self,
        name: str,
        indexed: str | list[str] | tuple[str, ...],
        included: str | list[str] | tuple[str, ...] | None = None,
        num_buckets: int = 8,
        auto_refresh: AutoRefresh | str = AutoRefresh.INCREMENTAL,
        layout_version: int = 2,
        expressions: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        object.__setattr__(self, "name", validate_index_name(name))
        object.__setattr__(self, "indexed", _columns(indexed, "indexed"))
        object.__setattr__(self, "included", _columns(included, "included"))
        object.__setattr__(self, "num_buckets", int(num_buckets))
        object.__setattr__(self, "auto_refresh", AutoRefresh(auto_refresh))
        if not self.indexed:
            raise InvalidIndexSpecError("a covering index needs at least one indexed column")
        if set(self.indexed) & set(self.included):
            raise InvalidIndexSpecError("indexed and included must not share columns")
        if not 1 <= self.num_buckets <= 65536:
            raise InvalidIndexSpecError(f"num_buckets must be in 1..65536, got {num_buckets}")
        if type(layout_version) is not int or layout_version not in (1, 2):
            raise InvalidIndexSpecError(f"layout_version must be 1 or 2, got {layout_version!r}")
        object.__setattr__(self, "layout_version", layout_version)
        self._set_expressions(expressions)

    kind: ClassVar[str] = "covering"
    expression_fields: ClassVar[tuple[str, ...]] = ("indexed",)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> IndexSpec:
        """Inverse of :meth:`to_json`; a spec without ``layoutVersion`` (written before it) is layout 1."""
        return super().from_json({"layoutVersion": 1, **d})

    @property
    def key(self) -> tuple[str, ...]:
        """The lookup key columns."""
        return self.indexed

    @property
    def columns(self) -> tuple[str, ...]:
        """Every table column the index stores."""
        return self.indexed + self.included


@dataclass(frozen=True, init=False)
class SkippingIndex(IndexSpec):
    """Data-skipping index: one row per data file with min/max and a bloom filter (or value list).

    Prunes data files for equality, IN and range predicates on ``columns``. Columns with
    at most ``max_values`` distinct values in a file keep the exact value list there.
    """

    name: str
    columns: tuple[str, ...]
    bloom_fpp: float
    max_values: int
    auto_refresh: AutoRefresh
    expressions: tuple[str, ...]

    def __init__(
        self,
        name: str,
        columns: str | list[str] | tuple[str, ...],
        bloom_fpp: float = 0.01,
        max_values: int = 32,
        auto_refresh: AutoRefresh | str = AutoRefresh.INCREMENTAL,
        expressions: list[str] | tuple[str, ...] | None = None,
    ) -> None:
        object.__setattr__(self, "name", validate_index_name(name))
        object.__setattr__(self, "columns", _columns(columns, "columns"))
        object.__setattr__(self, "bloom_fpp", float(bloom_fpp))
        object.__setattr__(self, "max_values", int(max_values))
        object.__setattr__(self, "auto_refresh", AutoRefresh(auto_refresh))
        if not self.columns:
            raise InvalidIndexSpecError("a skipping index needs at least one column")
        if not 0 < self.bloom_fpp < 1:
            raise InvalidIndexSpecError(f"bloom_fpp must be in (0, 1), got {bloom_fpp}")
        if self.max_values < 0:
            raise InvalidIndexSpecError(f"max_values must be >= 0, got {max_values}")
        self._set_expressions(expressions)

    kind: ClassVar[str] = "skipping"
    expression_fields: ClassVar[tuple[str, ...]] = ("columns",)

    @property
    def key(self) -> tuple[str, ...]:
        """The columns predicates are pruned on."""
        return self.columns


def spec_to_json(spec: IndexSpec) -> dict[str, Any]:
    """The JSON form of a spec (see docs/FORMAT.md); parsed by
    :func:`lakehouse_index.kind_registry.spec_from_json`."""
    return {"kind": spec.kind, **spec.to_json()}
