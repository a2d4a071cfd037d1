"""What the workflows need of a table with indexes: the :class:`IndexedTable` protocol.

``lakehouse_index.api.Table`` is one. The workflows sit below the API facade (which
offers them as ``Table.append`` … ``Table.sync_indexes``, ``Table.verify_index``), so they
name the table by this protocol instead of importing the facade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from lakehouse_index.config import Config
from lakehouse_index.io import Storage
from lakehouse_index.kinds.base import BuildContext
from lakehouse_index.log.entry import IndexState
from lakehouse_index.log.store import IndexLog
from lakehouse_index.maintenance.lineage import Rewritten
from lakehouse_index.source import Snapshot, TableSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class IndexSummary(Protocol):
    """One index as ``IndexedTable.indexes()`` lists it."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> IndexState: ...
    @property
    def indexed_version(self) -> int | None: ...


class IndexedTable(Protocol):
    """A table and its side-car indexes, as the write, sync, watch and verify workflows use it."""

    source: TableSource
    storage: Storage
    index_root: str
    config: Config

    @property
    def uri(self) -> str: ...
    @property
    def format(self) -> str: ...
    def latest_version(self) -> int: ...
    def snapshot(self, version_as_of: int | str | None = None, timestamp_as_of: Any = None) -> Snapshot: ...
    def indexes(self) -> Sequence[IndexSummary]: ...
    def refresh_index(
        self,
        name: str,
        mode: Any = ...,
        *,
        spark: SparkSession | None = None,
        rewritten: Mapping[str, Rewritten] | None = None,
    ) -> Any: ...
    def cancel_index(self, name: str) -> Any: ...
    def locate(self, name: str, keys: Sequence[Any], *, version_as_of: int | str | None = None) -> Any: ...
    def optimize_index(self, name: str, mode: Any = ..., *, spark: SparkSession | None = None) -> Any: ...
    def vacuum_index(self, name: str, *, retention_hours: float | None = None) -> Any: ...
    def _log(self, name: str) -> IndexLog: ...
    def _build_context(
        self, log: IndexLog, data_dir: str, spark: SparkSession | None, local_max_rows: int | None
    ) -> BuildContext: ...
