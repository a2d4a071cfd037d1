"""Delta Lake connector: reads ``_delta_log`` (commits, checkpoints, deletion vectors) in pure Python."""

from lakehouse_index_delta.source import DeltaSource

__all__ = ["DeltaSource"]
