"""Where the test fixtures live: inside the project (``tests/data``), so a clone alone passes."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = REPO_ROOT / "tests" / "data"
#: Real Delta tables written by Spark, Databricks and delta-rs (Apache-2.0, see
#: ``tests/data/peer-tables/NOTICE``). Read-only: copy before writing.
PEER_TABLES = TEST_DATA / "peer-tables" / "delta-rs"


def code_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess that must run this checkout's code (not an installed copy)."""
    path = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "connectors")])
    return {**os.environ, "PYTHONPATH": path, **extra}
