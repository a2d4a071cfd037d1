"""Two watcher processes and an API writer on one table (a short version of the soak test):
every commit is applied once (incremental entries strictly ascend), answers equal deltalake."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.log.entry import IndexState, Operation
from lakehouse_index.log.store import IndexCatalog
from tests.support.paths import code_env
from tests.workflows.helpers import check_all, create_indexes, rows

ROOT = Path(__file__).resolve().parents[2]


def _watcher(path: str) -> subprocess.Popen[str]:
    env = code_env()
    return subprocess.Popen(
        [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--interval", "0.1", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )


def test_two_watchers_and_an_api_writer(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(0, "a", 0, 0, "x")]), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    watchers = [_watcher(path), _watcher(path)]
    outputs: list[list[dict[str, object]]] = [[], []]
    try:
        for w, out in zip(watchers, outputs, strict=True):  # each has made its first poll
            assert w.stdout is not None
            out.append(json.loads(w.stdout.readline()))
        for i in range(1, 9):
            if i % 3 == 0:
                write_deltalake(path, rows([(i, "b", i % 3, i, "y")]), mode="append")  # a foreign commit
            elif i == 7:
                assert t.delete("k = 'a' AND id < 3").ok
            else:
                result = t.append(rows([(i, "abc"[i % 3], i % 3, i, "xy"[i % 2])]))
                by_k = {r.name: r for r in result.indexes}["by_k"]
                assert by_k.indexed_version == result.table_version  # ours or a watcher's refresh
            time.sleep(0.05)
        latest = t.latest_version()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            info = {i.name: i for i in t.indexes()}
            if info["by_k"].indexed_version == latest and info["by_k"].state is IndexState.ACTIVE:
                break
            time.sleep(0.1)
        for w in watchers:
            w.send_signal(signal.SIGTERM)
        for w, lines in zip(watchers, outputs, strict=True):
            out, err = w.communicate(timeout=60)
            assert w.returncode == 0, err
            lines.extend(json.loads(x) for x in out.splitlines() if x.strip())
    finally:
        for w in watchers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == latest
    # no commit applied twice: each incremental refresh starts where the previous one ended
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    versions = [
        e.source.version
        for e in log.stable_entries()
        if e.state is IndexState.ACTIVE and e.operation is Operation.REFRESH_INCREMENTAL
    ]
    assert versions == sorted(set(versions)), versions
    assert all(line.get("error") is None for lines in outputs for line in lines)
    check_all(t, list(range(latest + 1)), lambda v: DeltaTable(path, version=v).to_pyarrow_table())
