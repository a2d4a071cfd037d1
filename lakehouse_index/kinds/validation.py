"""Checking any index spec against a table snapshot (dispatch to the kind's own rules)."""

from __future__ import annotations

from lakehouse_index.kinds import secondary, skipping
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec, SkippingIndex


def validate_spec(spec: IndexSpec, snapshot: Snapshot) -> None:
    """InvalidIndexSpecError unless ``spec`` fits the table's schema at ``snapshot``."""
    if isinstance(spec, SkippingIndex):
        skipping.validate_spec(spec, snapshot)
    else:
        secondary.validate_spec(spec, snapshot)
