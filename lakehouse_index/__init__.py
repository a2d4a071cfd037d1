"""lakehouse-index: side-car secondary and covering indexes for Delta Lake and Iceberg tables.

Example::

    import lakehouse_index as li

    t = li.open_table("/data/events")
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    rows = t.lookup("by_email", ["ada@example.com"])

The public names below are imported on first use (PEP 562), so ``import lakehouse_index``
or a submodule (a connector importing only ``lakehouse_index.source``) costs nothing beyond
what is used: importing the whole API up front adds ~16 MB to every process.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        ErasedSubjectsWarning,
        EraseRefusedError,
        ErasureVerificationError,
        HistoryTruncatedError,
        IllegalIndexStateError,
        IndexBusyError,
        IndexExistsError,
        IndexLogError,
        IndexNotFoundError,
        InvalidIndexSpecError,
        LakehouseIndexError,
        NotATableError,
        PurgeRefusedError,
        QueryError,
        SparkUnavailableError,
        TableFormatError,
        UnsupportedFeatureError,
        VersionNotFoundError,
        VersionPurgedError,
    )
    from lakehouse_index.kinds.base import IndexKind
    from lakehouse_index.kinds.multicolumn.spec import MultiColumnIndex
    from lakehouse_index.log.entry import IndexState
    from lakehouse_index.sink.contract import WriteMode
    from lakehouse_index.spark_source import SourceRead, explain_spark_source, register_spark_source
    from lakehouse_index.spec import AutoRefresh, CoveringIndex, IndexSpec, SecondaryIndex, SkippingIndex
    from lakehouse_index.workflows.reports import IndexReport, SyncResult, WritePath, WriteResult
    from lakehouse_index.workflows.verify import Mismatch, VerifyReport

__version__ = "0.1.0"

#: Module defining each public name.
_MODULES = {
    "lakehouse_index.api": ("IndexInfo", "OptimizeMode", "RefreshMode", "Table", "open_table", "watch"),
    "lakehouse_index.config": (
        "CacheConfig",
        "Config",
        "ExecutorConfig",
        "LogConfig",
        "PlannerConfig",
        "ReadConfig",
        "configure_caches",
    ),
    "lakehouse_index.errors": (
        "ConcurrentIndexUpdate",
        "ErasedSubjectsWarning",
        "EraseRefusedError",
        "ErasureVerificationError",
        "HistoryTruncatedError",
        "IllegalIndexStateError",
        "IndexBusyError",
        "IndexExistsError",
        "IndexLogError",
        "IndexNotFoundError",
        "InvalidIndexSpecError",
        "LakehouseIndexError",
        "NotATableError",
        "PurgeRefusedError",
        "QueryError",
        "SparkUnavailableError",
        "TableFormatError",
        "UnsupportedFeatureError",
        "VersionNotFoundError",
        "VersionPurgedError",
    ),
    "lakehouse_index.kinds.base": ("IndexKind",),
    "lakehouse_index.kinds.multicolumn.spec": ("MultiColumnIndex",),
    "lakehouse_index.log.entry": ("IndexState",),
    "lakehouse_index.spark_source": ("SourceRead", "explain_spark_source", "register_spark_source"),
    "lakehouse_index.sink.contract": ("WriteMode",),
    "lakehouse_index.spec": ("AutoRefresh", "CoveringIndex", "IndexSpec", "SecondaryIndex", "SkippingIndex"),
    "lakehouse_index.workflows.reports": ("IndexReport", "SyncResult", "WritePath", "WriteResult"),
    "lakehouse_index.workflows.verify": ("Mismatch", "VerifyReport"),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}

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
    "MultiColumnIndex",
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
    # the Spark data source (pyspark >= 4.1)
    "SourceRead",
    "explain_spark_source",
    "register_spark_source",
    # writes, sync and the watcher
    "IndexReport",
    "SyncResult",
    "WriteResult",
    "WritePath",
    "WriteMode",
    "watch",
    "Mismatch",
    "VerifyReport",
    # GDPR erasure (Table.erase)
    "ErasedSubjectsWarning",
    "EraseRefusedError",
    "ErasureVerificationError",
    "PurgeRefusedError",
    "VersionPurgedError",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first access (then a plain attribute)."""
    module = _MODULE_OF.get(name)
    if module is None:
        try:  # a subpackage not imported yet (``li.api``), as the eager package allowed
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
