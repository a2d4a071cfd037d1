"""The sizing policy: in process while the entries fit in memory, a cluster when one is configured,
explicit bounds above both; and the choice it makes for a real build."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors import sizing
from lakehouse_index.executors.sizing import (
    available_memory,
    entry_bytes,
    local_bound,
    runs_locally,
)
from lakehouse_index.spark import MASTER_ENV

ADDRESS = [("_file_id", pa.int64()), ("_row", pa.int64()), ("_version", pa.int64()), ("_op", pa.int8())]


def test_entry_bytes_counts_fixed_widths_and_variable_values() -> None:
    assert entry_bytes(pa.schema([("k", pa.int64()), *ADDRESS])) == 2 * (8 + 25)
    assert entry_bytes(pa.schema([("k", pa.string()), *ADDRESS])) == 2 * (sizing.VARIABLE_WIDTH_BYTES + 25)
    assert entry_bytes(pa.schema([("b", pa.bool_()), ("d", pa.decimal128(38, 10))])) == 2 * (1 + 16)


def test_an_explicit_bound_wins_over_memory_and_cluster() -> None:
    cfg = ExecutorConfig(local_max_rows=5, local_max_entries=7)
    for cluster in (False, True):
        assert local_bound(cfg, 66, cluster=cluster) == 5
        assert local_bound(cfg, 66, cluster=cluster, compaction=True) == 7
        assert runs_locally(cfg, 5, cluster=cluster) and not runs_locally(cfg, 6, cluster=cluster)


def test_with_a_cluster_the_cluster_bounds_apply() -> None:
    cfg = ExecutorConfig(cluster_local_max_rows=100, cluster_local_max_entries=1000)
    assert local_bound(cfg, 66, cluster=True) == 100
    assert local_bound(cfg, 66, cluster=True, compaction=True) == 1000


def test_without_a_cluster_the_bound_is_what_fits_in_memory() -> None:
    cfg = ExecutorConfig(local_memory_share=0.25)
    narrow, wide = local_bound(cfg, 66, cluster=False), local_bound(cfg, 660, cluster=False)
    budget = available_memory() * 0.25
    # Memory moves between the calls; a tenth of a percent covers it.
    assert abs(narrow * 66 - budget) < budget * 1e-3 + 66
    assert abs(wide * 660 - budget) < budget * 1e-3 + 660
    assert local_bound(cfg.__class__(local_memory_share=0.0), 66, cluster=False) == 0


def test_available_memory_is_the_cgroup_headroom_when_smaller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = available_memory()
    (tmp_path / "memory.max").write_text(f"{3 << 20}\n")
    (tmp_path / "memory.current").write_text(f"{1 << 20}\n")
    monkeypatch.setattr(sizing, "_CGROUP_V2", tmp_path)
    assert available_memory() == min(system, 2 << 20)
    (tmp_path / "memory.max").write_text("max\n")  # v2 without a limit
    monkeypatch.setattr(sizing, "_CGROUP_V1", tmp_path / "absent")
    assert available_memory() > 2 << 20


def _fresh(code: str, env: dict[str, str]) -> str:
    """``code``'s output in a fresh interpreter (no Spark session of another test around)."""
    import os
    import subprocess
    import sys

    full = {k: v for k, v in os.environ.items() if k != MASTER_ENV} | env
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, check=True)
    return done.stdout.strip()


MASTERS = [(None, False), ("local[2]", False), ("spark://head:7077", True)]


@pytest.mark.parametrize(("master", "cluster"), MASTERS)
def test_a_cluster_is_configured_by_a_master_that_is_not_local(master: str | None, cluster: bool) -> None:
    code = "from lakehouse_index.executors.sizing import cluster_configured; print(cluster_configured())"
    assert _fresh(code, {MASTER_ENV: master} if master else {}) == str(cluster)


def test_a_build_that_fits_in_memory_runs_in_process_above_the_old_row_bound(tmp_path: Path) -> None:
    """1.2M rows (more than the former fixed bound of 1M rows) are indexed in process: pyspark is
    never imported, and the lookups equal the rows written."""
    import numpy as np

    path = str(tmp_path / "t")
    ids = np.arange(1_200_000, dtype=np.int64)
    deltalake.write_deltalake(path, pa.table({"id": ids, "v": ids % 97}))
    code = (
        "import sys, lakehouse_index as li\n"
        f"t = li.open_table({path!r})\n"
        "t.create_index(li.SecondaryIndex('by_id', key='id'))\n"
        "hits = t.lookup('by_id', [7, 1_199_999, -1])\n"
        "print(sorted(hits.column('v').to_pylist()), 'pyspark' in sys.modules)"
    )
    assert _fresh(code, {}) == f"{sorted([7 % 97, 1_199_999 % 97])} False"
