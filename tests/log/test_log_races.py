"""Many OS processes on one index at once (local disk and moto S3 on loopback), and processes
killed at every step of an operation.

The checks read the log back with plain ``json`` from a raw listing of the storage (not
through ``IndexLog``) and the index data bytes directly.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from logtest_helpers import create_body, source, spec, tokens_of
from logtest_workers import crash_worker, race_worker

from lakehouse_index.errors import IllegalIndexStateError
from lakehouse_index.log.entry import IndexState, LogEntry, Operation
from lakehouse_index.log.garbage import orphans, referenced_paths
from lakehouse_index.log.lifecycle import IndexBusyError, cancel, run_operation
from lakehouse_index.log.store import IndexLog
from tests.log.conftest import Backend, make_backend

SPAWN = mp.get_context("spawn")
N_PROCS = 8
N_OPS = 3


def raw_log(backend) -> dict[int, dict]:
    """Every log slot, parsed with json from a plain listing, by id."""
    out = {}
    for status in backend.storage.list_dir(f"{backend.index_dir}/_log"):
        name = status.path.rsplit("/", 1)[-1]
        assert name.endswith(".json") and len(name) == 25, f"stray file in the log: {name}"
        out[int(name[:20])] = json.loads(backend.storage.read_bytes(status.path))
    return dict(sorted(out.items()))


def test_processes_racing_to_create_then_operate_on_one_index(backend) -> None:
    barrier, queue = SPAWN.Barrier(N_PROCS), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=race_worker, args=(backend.index_dir, backend.options, w, N_OPS, barrier, queue))
        for w in range(N_PROCS)
    ]
    for p in procs:
        p.start()
    messages = [queue.get(timeout=300) for _ in range(2 * N_PROCS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    created = {wid: o for kind, wid, o in messages if kind == "created"}
    results = {wid: r for kind, wid, r in messages if kind == "ops"}
    entries = raw_log(backend)

    # Phase 1, eight processes create the same index: exactly one succeeds, the others get a
    # concurrency error (lost the slot / saw it in progress) or find it existing.
    winners = [w for w, o in created.items() if o == "created 1"]
    assert len(winners) == 1, created
    assert set(created.values()) - {"created 1"} <= {"busy", "lost", "exists"}
    assert [entries[0]["state"], entries[1]["state"]] == ["CREATING", "ACTIVE"]
    assert entries[0]["writer"] == entries[1]["writer"] == f"w{winners[0]}"

    # Phase 2, everyone runs refresh / optimize / refresh at once, retrying lost races.
    n_entries = 2 + 2 * N_PROCS * N_OPS
    assert list(entries) == list(range(n_entries))  # contiguous, no torn or doubled slot
    claimed: dict[int, int] = {}
    for wid, r in results.items():
        assert len(r["done"]) == N_OPS
        for op, final_id in r["done"]:
            assert final_id not in claimed  # every slot has exactly one writer
            claimed[final_id] = wid
            assert entries[final_id]["operation"] == op
    # The log is a valid sequence: transient n+1 then final n+2 by the same writer, based on n.
    for i in range(2, n_entries, 2):
        t, f = entries[i], entries[i + 1]
        assert t["state"] in ("REFRESHING", "OPTIMIZING") and f["state"] == "ACTIVE"
        assert t["writer"] == f["writer"] == f"w{claimed[i + 1]}"
        assert t["operation"] == f["operation"]
        assert t["baseId"] == i - 1 and t["content"] == {"files": [], "baseOrdinal": None}
    # No lost update: the final index holds every operation's token exactly once.
    index = IndexLog(backend.storage, backend.index_dir)
    final = index.latest_stable()
    assert final.id == n_entries - 1
    expected = [f"c{winners[0]}"] + [f"w{w}-{k}" for w in range(N_PROCS) for k in range(N_OPS)]
    assert Counter(tokens_of(index, final)) == Counter(expected)
    assert sum(r["lost_slot"] + r["busy"] for r in results.values()) > 0  # there was contention
    assert orphans(index) == []  # losers lose before writing any data


def _data_files(backend, data_uri: str) -> list[str]:
    return sorted(s.path for s in backend.storage.list_tree(data_uri))


STEPS = [
    ("precheck", "sigkill"),  # before the transient entry
    ("before-data", "sigkill"),  # after the transient entry
    ("mid-data", "exit"),
    ("after-data", "sigkill"),  # before the final entry
    ("after-final", "sigkill"),
]


@dataclass
class Crash:
    backend: Backend
    before: LogEntry
    cached_reader: IndexLog
    exitcode: int | None
    info: dict | None


@pytest.fixture(scope="module", params=["local", "s3"])
def crashes(request, tmp_path_factory) -> dict[str, Crash]:
    """One index per step; a child per index, all killed at once (spawning is the slow part)."""
    s3 = request.getfixturevalue("s3_options") if request.param == "s3" else None
    runs = {}
    for step, how in STEPS:
        tmp = tmp_path_factory.mktemp(f"crash-{step}")
        b = make_backend(request.param, tmp, s3)
        log = IndexLog(b.storage, b.index_dir)
        before = run_operation(log, Operation.CREATE, create_body(), spec=spec(), source=source(0))
        cached = IndexLog(b.storage, b.index_dir)
        assert cached.latest_stable() == before
        info_path = str(tmp / "info.json")
        proc = SPAWN.Process(target=crash_worker, args=(b.index_dir, b.options, step, how, info_path))
        proc.start()
        runs[step] = (b, before, cached, proc, info_path)
    out = {}
    for step, (b, before, cached, proc, info_path) in runs.items():
        proc.join(timeout=120)
        info = json.loads(Path(info_path).read_text()) if os.path.exists(info_path) else None
        out[step] = Crash(b, before, cached, proc.exitcode, info)
    return out


@pytest.mark.parametrize(("step", "how"), STEPS, ids=[s for s, _ in STEPS])
def test_kill_at_each_step(crashes, step: str, how: str) -> None:
    crash = crashes[step]
    backend, before, cached_reader, info = crash.backend, crash.before, crash.cached_reader, crash.info
    assert crash.exitcode == (-9 if how == "sigkill" else 9)

    fresh = IndexLog(backend.storage, backend.index_dir)
    if step == "after-final":
        after = fresh.latest_stable()
        assert after.id == 3 and tokens_of(fresh, after) == ["create", "crash-a", "crash-b"]
        assert cached_reader.latest_stable() == after
        assert orphans(fresh) == []
        with pytest.raises(IllegalIndexStateError, match="no operation is in progress"):
            cancel(fresh)
        return
    # Readers keep answering from the last stable entry, cached or not.
    for reader in (cached_reader, fresh):
        assert reader.latest_stable() == before
        assert tokens_of(reader, reader.latest_stable()) == ["create"]
    if step == "precheck":
        assert list(raw_log(backend)) == [0, 1] and orphans(fresh) == [] and info is None
        return

    assert info is not None
    stuck = fresh.latest()
    assert stuck.id == info["transient"] == 2 and stuck.state is IndexState.REFRESHING
    with pytest.raises(IndexBusyError, match=r"refresh-full of index 'idx' refused: a refresh-incremental"):
        run_operation(fresh, Operation.REFRESH_FULL)
    written = _data_files(backend, info["data_uri"])
    assert len(written) == {"before-data": 0, "mid-data": 1, "after-data": 2}[step]
    assert [o.path for o in orphans(fresh)] == written  # the dead operation's data, nothing else

    recovered = cancel(fresh, writer="operator")
    assert recovered.state is IndexState.ACTIVE and recovered.id == 4
    assert (recovered.content, recovered.source) == (before.content, before.source)
    assert [e["state"] for e in raw_log(backend).values()] == [
        "CREATING",
        "ACTIVE",
        "REFRESHING",
        "CANCELLING",
        "ACTIVE",
    ]
    assert cached_reader.latest_stable() == recovered
    # Vacuum's part: delete the orphans; everything the log names is still there.
    for o in orphans(fresh):
        backend.storage.delete(o.path)
    assert orphans(fresh) == []
    assert all(backend.storage.exists(fresh.uri(p)) for p in referenced_paths(fresh))
    again = run_operation(fresh, Operation.REFRESH_INCREMENTAL, create_body("again"))
    assert again.state is IndexState.ACTIVE and tokens_of(fresh, again) == ["again"]
