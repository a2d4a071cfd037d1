"""Fixtures of the engine tests: a small Delta table written by deltalake, indexed once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from enginetest_helpers import make_table, secondary

import lakehouse_index as li


@pytest.fixture
def indexed_table(tmp_path: Path, spark: Any) -> tuple[Path, li.Table]:
    """A Delta table of 4 one-file batches with the secondary index ``by_k`` on ``k`` built."""
    path = tmp_path / "t"
    make_table(path, range(4))
    t = li.open_table(str(path))
    t.create_index(secondary(), spark=spark)
    return path, t
