"""Fixtures for the Delta connector tests (helpers live in delta_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """An empty directory for a new table."""
    d = tmp_path / "table"
    d.mkdir()
    return d
