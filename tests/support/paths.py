"""Where the shared fixtures live: ``<repo>/../shared`` (CI puts shared/ beside the clone)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LAKEHOUSE_INDEX_SHARED", REPO_ROOT.parent / "shared")).resolve()
#: Real Delta tables written by Spark, Databricks and delta-rs (read-only: copy before writing).
PEER_TABLES = SHARED / "peer-tables" / "delta-rs"
