"""Delta Lake connector: reads ``_delta_log`` (commits, checkpoints, deletion vectors) in pure Python."""

from connectors.delta.source import DeltaSource

__all__ = ["DeltaSource"]
