"""The benchmark data cache under parallel writers (pytest-xdist workers, two benchmarks): a
table published first stays in place, whoever generates it a second time."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from deltalake import DeltaTable

from integration.bench import datagen


def test_two_generators_of_one_table_leave_one_readable_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKEHOUSE_INDEX_BENCH_CACHE", str(tmp_path))
    params = datagen.TableParams(2_000, 2)
    found: list[Path] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2, timeout=60)
    rename = os.rename

    def racing(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        barrier.wait()  # both have generated: both publish at once
        rename(src, dst)

    monkeypatch.setattr(datagen.os, "rename", racing)

    def generate() -> None:
        try:
            found.append(datagen.delta_table(params, log=False))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=generate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert found[0] == found[1]
    assert DeltaTable(str(found[0])).to_pyarrow_table().num_rows == params.rows
    # Only the published copy is left (no scratch directories).
    assert sorted(os.listdir(tmp_path)) == [params.name]
