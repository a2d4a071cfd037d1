"""Many OS processes on one index at once (local disk and moto S3 on loopback), and processes
killed at every step of an operation.

The checks read the log back with plain ``json`` from a raw listing of the storage (not
through ``IndexLog``) and the index data bytes directly.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections import Counter

import pytest
from logtest_helpers import create_body, source, spec, tokens_of
from logtest_workers import crash_worker, create_worker, race_worker

from lakehouse_index.errors import IllegalIndexStateError
from lakehouse_index.log.entry import IndexState, Operation
from lakehouse_index.log.garbage import orphans, referenced_paths
from lakehouse_index.log.lifecycle import IndexBusyError, cancel, run_operation
from lakehouse_index.log.store import IndexLog

SPAWN = mp.get_context("spawn")
N_PROCS = 8
N_OPS = 3


def raw_log(backend) -> dict[int, dict]:
    """Every log slot, parsed with json from a plain listing."""
    out = {}
    for status in backend.storage.list_dir(f"{backend.index_dir}/_log"):
        name = status.path.rsplit("/", 1)[-1]
        assert name.endswith(".json") and len(name) == 25, f"stray file in the log: {name}"
        out[int(name[:20])] = json.loads(backend.storage.read_bytes(status.path))
    return out


def _run_all(procs, queue, n) -> list:
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in range(n)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_processes_racing_to_create_one_index(backend) -> None:
    barrier, queue = SPAWN.Barrier(N_PROCS), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=create_worker, args=(backend.index_dir, backend.options, w, barrier, queue))
        for w in range(N_PROCS)
    ]
    outcomes = dict(_run_all(procs, queue, N_PROCS))
    winners = [w for w, o in outcomes.items() if o.startswith("created")]
    assert len(winners) == 1, outcomes
    assert set(outcomes.values()) - {"created 1"} <= {"busy", "lost", "exists"}
    log = raw_log(backend)
    assert sorted(log) == [0, 1]
    assert [log[0]["state"], log[1]["state"]] == ["CREATING", "ACTIVE"]
    assert {log[0]["writer"], log[1]["writer"]} == {f"w{winners[0]}"}
    index = IndexLog(backend.storage, backend.index_dir)
    assert tokens_of(index, index.latest_stable()) == [f"c{winners[0]}"]
    assert orphans(index) == []


def test_processes_racing_operations_on_one_index(backend) -> None:
    log = IndexLog(backend.storage, backend.index_dir)
    run_operation(log, Operation.CREATE, create_body(), spec=spec(), source=source(0), writer="setup")
    barrier, queue = SPAWN.Barrier(N_PROCS), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=race_worker, args=(backend.index_dir, backend.options, w, N_OPS, barrier, queue))
        for w in range(N_PROCS)
    ]
    results = _run_all(procs, queue, N_PROCS)

    entries = raw_log(backend)
    n_entries = 2 + 2 * N_PROCS * N_OPS
    assert sorted(entries) == list(range(n_entries))  # contiguous, no torn or doubled slot
    claimed: dict[int, int] = {}
    for r in results:
        assert len(r["done"]) == N_OPS
        for op, final_id in r["done"]:
            assert final_id not in claimed  # every slot has exactly one writer
            claimed[final_id] = r["wid"]
            assert entries[final_id]["operation"] == op
    # The log is a valid sequence: transient n+1 then final n+2 by the same writer, based on n.
    for i in range(2, n_entries, 2):
        t, f = entries[i], entries[i + 1]
        assert t["state"] in ("REFRESHING", "OPTIMIZING") and f["state"] == "ACTIVE"
        assert t["writer"] == f["writer"] == f"w{claimed[i + 1]}"
        assert t["operation"] == f["operation"]
        assert t["baseId"] == i - 1 and t["content"] == entries[i - 1]["content"]
    # No lost update: the final index holds every operation's token exactly once.
    index = IndexLog(backend.storage, backend.index_dir)
    final = index.latest_stable()
    assert final.id == n_entries - 1
    expected = ["create"] + [f"w{w}-{k}" for w in range(N_PROCS) for k in range(N_OPS)]
    assert Counter(tokens_of(index, final)) == Counter(expected)
    assert sum(r["lost_slot"] + r["busy"] for r in results) > 0  # there was contention
    assert orphans(index) == []  # losers lose before writing data


def _data_files(backend, data_uri: str) -> list[str]:
    return sorted(s.path for s in backend.storage.list_tree(data_uri))


STEPS = [
    ("precheck", "sigkill"),
    ("before-data", "sigkill"),
    ("mid-data", "exit"),
    ("after-data", "sigkill"),
    ("after-final", "sigkill"),
]


@pytest.mark.parametrize(("step", "how"), STEPS, ids=[s for s, _ in STEPS])
def test_kill_at_each_step(backend, tmp_path, step: str, how: str) -> None:
    log = IndexLog(backend.storage, backend.index_dir)
    before = run_operation(log, Operation.CREATE, create_body(), spec=spec(), source=source(0))
    cached_reader = IndexLog(backend.storage, backend.index_dir)
    assert cached_reader.latest_stable() == before

    info_path = str(tmp_path / "info.json")
    p = SPAWN.Process(target=crash_worker, args=(backend.index_dir, backend.options, step, how, info_path))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == (-9 if how == "sigkill" else 9)
    info = json.load(open(info_path)) if step != "precheck" else None

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
        assert sorted(raw_log(backend)) == [0, 1] and orphans(fresh) == []
        return

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
        "CREATING", "ACTIVE", "REFRESHING", "CANCELLING", "ACTIVE"
    ]
    # Vacuum's part: delete the orphans; everything the log names is still there.
    for o in orphans(fresh):
        backend.storage.delete(o.path)
    assert orphans(fresh) == []
    assert all(backend.storage.exists(fresh.uri(p)) for p in referenced_paths(fresh))
    again = run_operation(fresh, Operation.REFRESH_INCREMENTAL, create_body("again"))
    assert again.state is IndexState.ACTIVE and tokens_of(fresh, again) == ["again"]
