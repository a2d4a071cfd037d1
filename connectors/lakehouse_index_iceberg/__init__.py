"""Apache Iceberg connector: snapshots, tailing, diffs and row-level deletes of Iceberg tables.

Registered under the ``lakehouse_index.connectors`` entry point as ``iceberg``.
"""

from lakehouse_index_iceberg.deletes import IcebergRowDeletes
from lakehouse_index_iceberg.source import IcebergSource

__all__ = ["IcebergRowDeletes", "IcebergSource"]
