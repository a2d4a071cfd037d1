"""Fixtures for the Iceberg connector tests: a SQLite-backed pyiceberg catalog per test."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

# tests/support (the Spark+Iceberg jar builder) is imported as ``tests.support``: make the
# repository root importable whatever pytest's rootdir/import mode is.
_ROOT = Path(__file__).resolve().parents[3]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

warnings.filterwarnings("ignore", message=".*Delete operation did not match any records.*")


@pytest.fixture()
def catalog(tmp_path):
    """An embedded SqlCatalog with namespace ``db`` and its warehouse under tmp_path."""
    from pyiceberg.catalog.sql import SqlCatalog

    wh = tmp_path / "warehouse"
    wh.mkdir()
    cat = SqlCatalog("test", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    return cat
