"""The multi-column index spec: indexed columns any subset of which a range may name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.spec import AutoRefresh, IndexSpec, _columns, validate_index_name

#: Rows per block (Parquet row group) by default: a range on one of ``n`` indexed columns reads
#: about its selectivity plus ``blocks ** (-1 / n)`` of the index, so blocks are small.
DEFAULT_BLOCK_ROWS = 512
#: Most indexed columns: the Z-order curve gives each column ``CURVE_BITS // n`` bits.
MAX_INDEXED = 8


@dataclass(frozen=True, init=False)
class MultiColumnIndex(IndexSpec):
    """A covering index answering ranges on any subset of ``columns``, and uniform samples.

    The index holds ``columns`` (indexed), ``included`` and ``record_key`` (payload) and each
    row's address. Rows are laid out by a Z-order curve over the indexed columns inside
    weight tiers, cut into blocks (row groups) of at most ``block_rows`` rows, so every indexed
    column's per-block bounds prune. ``record_key``
    (optional) joins the row identity the sampling weight is drawn from (see
    :mod:`lakehouse_index.kinds.multicolumn.weights`).
    """

    name: str
    indexed: tuple[str, ...]
    included: tuple[str, ...]
    record_key: tuple[str, ...]
    block_rows: int
    auto_refresh: AutoRefresh

    kind: ClassVar[str] = "multicolumn"

    def __init__(
        self,
        name: str,
        columns: str | list[str] | tuple[str, ...],
        included: str | list[str] | tuple[str, ...] | None = None,
        record_key: str | list[str] | tuple[str, ...] | None = None,
        block_rows: int = DEFAULT_BLOCK_ROWS,
        auto_refresh: AutoRefresh | str = AutoRefresh.INCREMENTAL,
    ) -> None:
        object.__setattr__(self, "name", validate_index_name(name))
        object.__setattr__(self, "indexed", _columns(columns, "columns"))
        object.__setattr__(self, "included", _columns(included, "included"))
        object.__setattr__(self, "record_key", _columns(record_key, "record_key"))
        object.__setattr__(self, "block_rows", int(block_rows))
        object.__setattr__(self, "auto_refresh", AutoRefresh(auto_refresh))
        if not 1 <= self.block_rows <= 1 << 20:
            raise InvalidIndexSpecError(f"block_rows must be in 1..{1 << 20}, got {block_rows}")
        if not 1 <= len(self.indexed) <= MAX_INDEXED:
            raise InvalidIndexSpecError(
                f"a multi-column index needs 1 to {MAX_INDEXED} indexed columns, got {len(self.indexed)}"
            )
        named = self.indexed + self.included + self.record_key
        if len(set(named)) != len(named):
            raise InvalidIndexSpecError("columns, included and record_key must not share columns")

    @property
    def key(self) -> tuple[str, ...]:
        """The indexed columns (lookups of a full tuple also work; ranges may name any subset)."""
        return self.indexed

    @property
    def columns(self) -> tuple[str, ...]:
        """Every table column the index stores: indexed, included, record key."""
        return self.indexed + self.included + self.record_key

    def to_json(self) -> dict[str, Any]:
        """``{"name", "columns", "included", "recordKey", "autoRefresh"}``."""
        return {
            "name": self.name,
            "columns": list(self.indexed),
            "included": list(self.included),
            "recordKey": list(self.record_key),
            "blockRows": self.block_rows,
            "autoRefresh": self.auto_refresh.value,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MultiColumnIndex:
        """Inverse of :meth:`to_json`."""
        return cls(d["name"], d["columns"], d["included"], d["recordKey"], d["blockRows"], d["autoRefresh"])
