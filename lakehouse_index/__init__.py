"""lakehouse-index: side-car secondary and covering indexes for Delta Lake and Iceberg tables.

Example::

    import lakehouse_index as li

    t = li.open_table("/data/events")
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    rows = t.lookup("by_email", ["ada@example.com"])
"""

from lakehouse_index.api import IndexInfo, OptimizeMode, RefreshMode, Table, open_table, watch
from lakehouse_index.config import (
    CacheConfig,
    Config,
    ExecutorConfig,
    LogConfig,
    PlannerConfig,
    ReadConfig,
    configure_caches,
)
from lakehouse_index.errors import (
    ConcurrentIndexUpdate,
    HistoryTruncatedError,
    IllegalIndexStateError,
    IndexBusyError,
    IndexExistsError,
    IndexLogError,
    IndexNotFoundError,
    InvalidIndexSpecError,
    LakehouseIndexError,
    NotATableError,
    QueryError,
    SparkUnavailableError,
    TableFormatError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lakehouse_index.kinds.base import IndexKind
from lakehouse_index.log.entry import IndexState
from lakehouse_index.spec import AutoRefresh, CoveringIndex, IndexSpec, SecondaryIndex, SkippingIndex
from lakehouse_index.workflows.reports import IndexReport, SyncResult, WriteResult
from lakehouse_index.workflows.verify import Mismatch, VerifyReport

__version__ = "0.1.0"

__all__ = [
    "AutoRefresh",
    "CacheConfig",
    "Config",
    "ExecutorConfig",
    "LogConfig",
    "ReadConfig",
    "configure_caches",
    "ConcurrentIndexUpdate",
    "CoveringIndex",
    "HistoryTruncatedError",
    "IllegalIndexStateError",
    "IndexBusyError",
    "IndexExistsError",
    "IndexInfo",
    "IndexKind",
    "IndexLogError",
    "IndexNotFoundError",
    "IndexSpec",
    "IndexState",
    "InvalidIndexSpecError",
    "LakehouseIndexError",
    "NotATableError",
    "OptimizeMode",
    "PlannerConfig",
    "QueryError",
    "RefreshMode",
    "SecondaryIndex",
    "SkippingIndex",
    "SparkUnavailableError",
    "Table",
    "TableFormatError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "open_table",
    # writes, sync and the watcher
    "IndexReport",
    "SyncResult",
    "WriteResult",
    "watch",
    "Mismatch",
    "VerifyReport",
]
