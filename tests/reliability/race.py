"""The race harness: 8 processes mix every index operation on one index while the table changes.

Entry point for any store: :func:`run_race` with a :class:`RaceStore` (a Delta table URI plus
the storage options deltalake and ``open_table`` take; ``{}`` on local disk)::

    from tests.reliability.race import RaceStore, run_race
    report = run_race(RaceStore("s3://bucket/t", {"AWS_ENDPOINT_URL": ..., ...}))

The table must not exist yet. Processes (``spawn``, :mod:`tests.reliability.race_workers`):
eight index racers (refresh incremental / full / quick, optimize quick / full, delete then
restore, vacuum with zero retention, cancel of whatever operation holds the index), one API
writer (appends and deletes, each maintaining the indexes) and two watchers; the parent is a
second table writer (the format library's own appends and deletes). Afterwards:

* **one writer per log slot**: the log, read as plain JSON, has contiguous slots; every
  operation is its transient entry followed by its final entry by the same process, or by a
  canceller's CANCELLING entry and restoring entry; no final entry is reported by two processes,
  and every final entry a racer wrote is one it reported;
* **no lost PUT or DEL**: after one last incremental refresh the index's ``locate`` of every
  key at the latest version gives exactly the (file, row) addresses of the key's live rows,
  read from the data files with pyarrow (answered from index entries alone: the window is exact);
* **final answers equal a plain scan at every version**: lookups of every key and a planned
  scan with a predicate, at every table version, equal deltalake's read of that version.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.io import canonical_uri
from lakehouse_index.log.store import IndexCatalog, parse_expiry_mark_name
from tests.reliability.race_workers import INDEX, ROLES, attempt, race_worker
from tests.workflows.helpers import KEYS, SCHEMA, multiset, rows

#: The index racers; with the writer and two watchers, eleven processes.
RACERS: tuple[str, ...] = tuple(ROLES)
TRANSIENT = {"CREATING", "REFRESHING", "OPTIMIZING", "DELETING", "RESTORING", "VACUUMING"}


@dataclass(frozen=True)
class RaceStore:
    """Where the race runs: a Delta table URI (not existing yet) and its storage options."""

    table_uri: str
    storage_options: dict[str, str] = field(default_factory=dict)

    @property
    def options(self) -> dict[str, str] | None:
        """The options as ``open_table``/deltalake take them (``None`` for none)."""
        return dict(self.storage_options) or None


@dataclass(frozen=True)
class RaceReport:
    """What happened: operations completed per kind, retries per reason, table commits, log slots."""

    operations: dict[str, int]
    retries: dict[str, int]
    table_versions: int
    log_slots: int
    cancels_of_live_operations: int


def run_race(store: RaceStore, *, seconds: float = 6.0, parent_writes: int = 6) -> RaceReport:
    """Run the race on ``store`` for about ``seconds`` and check its invariants (module doc)."""
    uri, opts = store.table_uri, store.options
    write_deltalake(
        uri,
        rows([(i, KEYS[i % 3], i % 3, i, "xy"[i % 2]) for i in range(6)]),
        partition_by=["p"],
        storage_options=opts,
    )
    t = li.open_table(uri, storage_options=opts)
    t.create_index(li.SecondaryIndex(INDEX, key="k"))

    ctx = mp.get_context("spawn")
    roles = (*RACERS, "writer", "watcher", "watcher")
    barrier, stop, results = ctx.Barrier(len(roles) + 1), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=race_worker, args=(r, uri, opts, barrier, stop, results), daemon=True)
        for r in roles
    ]
    for p in procs:
        p.start()
    try:
        barrier.wait(timeout=600)
        pause = seconds / parent_writes
        for i in range(parent_writes):  # the second table writer: the format library itself
            _native_write(uri, opts, i)
            time.sleep(pause)
        stop.set()
        outcomes = [results.get(timeout=600) for _ in procs]
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.kill()
    errors = [o for o in outcomes if o[2] != "ok"]
    assert not errors, "\n".join(f"{role} (pid {pid}):\n{tb}" for role, pid, _, tb, _ in errors)

    entries = _raw_log(t)
    live_cancels = check_log(entries, {pid: done for role, pid, _, done, _ in outcomes if role in RACERS})
    # Bring the index up (a racer may have left it deleted? never: whole rounds), then prove it.
    tally: dict[str, int] = Counter()
    attempt(lambda: t.refresh_index(INDEX, "incremental"), tally, time.monotonic() + 600)
    check_addresses(t, uri, opts)
    versions = DeltaTable(uri, storage_options=opts).version() + 1
    for v in range(versions):
        check_version(t, DeltaTable(uri, version=v, storage_options=opts).to_pyarrow_table(), v)

    retries: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    for _, _, _, done, tl in outcomes:
        retries.update(tl)
        ops.update(op for op, _ in done)
    assert retries["busy"] + retries["lost"] > 0, f"no process ever lost a race: {dict(retries)}"
    return RaceReport(dict(ops), dict(retries), versions, len(entries), live_cancels)


def _native_write(uri: str, opts: dict[str, str] | None, i: int) -> None:
    """An append with deltalake, and every other time a copy-on-write delete of one row."""
    while True:
        try:
            write_deltalake(
                uri, rows([(500 + i, KEYS[i % 3], i % 3, 50 + i, "y")]), mode="append", storage_options=opts
            )
            if i % 2:
                DeltaTable(uri, storage_options=opts).delete(f"id = {500 + i - 1}")
            return
        except Exception as e:  # a commit conflict with the API writer: retried (nothing committed)
            if "conflict" not in str(e).lower() and "CommitFailed" not in type(e).__name__:
                raise
            time.sleep(0.01)


def _raw_log(t: li.Table) -> dict[int, dict[str, Any]]:
    import json

    log = IndexCatalog(t.storage, t.index_root).log(INDEX)
    out, marks = {}, []
    for status in t.storage.list_dir(log.uri("_log")):
        name = status.path.rsplit("/", 1)[-1]
        mark = parse_expiry_mark_name(name)
        if mark is not None:
            marks.append(mark)
            continue
        assert name.endswith(".json") and len(name) == 25, f"stray file in the log: {name}"
        out[int(name[:20])] = json.loads(t.storage.read_bytes(status.path))
    # Vacuum's expiry marks (usually one; a cancelled vacuum still running may leave a lower
    # one): the highest is the first retained slot. A late entry written below it by a
    # cancelled operation is removed by its writer, so none is left.
    if marks:
        assert min(out) == max(marks), f"entries below the expiry mark {max(marks)}: {sorted(out)}"
    return dict(sorted(out.items()))


def _pid(entry: dict[str, Any]) -> int:
    return int(entry["writer"].rsplit(":", 1)[1])


def check_log(entries: dict[int, dict[str, Any]], racers: dict[int, list[tuple[str, int]]]) -> int:
    """One writer per slot (module doc); returns how many live operations were cancelled."""
    ids = list(entries)
    # Vacuum expires the entries below the newest stable one: the retained ones are contiguous
    # from a stable entry on.
    first = ids[0]
    assert ids == list(range(first, first + len(ids))), f"holes in the log: {ids}"
    assert first == 0 or entries[first]["state"] not in TRANSIENT, (
        f"retained log starts at a transient {first}"
    )
    finals: dict[int, int] = {}  # final entry id -> writer pid
    i, cancelled = first + (first > 0), 0
    while i < first + len(ids):
        e = entries[i]
        assert e["state"] in TRANSIENT, f"slot {i} should open an operation: {e['state']}"
        if i:
            assert e["baseId"] == i - 1, f"slot {i} starts from {e['baseId']}, not {i - 1}"
        nxt = entries.get(i + 1)
        assert nxt is not None, f"the operation of slot {i} ({e['operation']}) never finished"
        if nxt["state"] == "CANCELLING":
            restored = entries.get(i + 2)
            assert restored is not None and restored["operation"] == "cancel", (
                f"cancel at {i + 1} never finished"
            )
            assert _pid(restored) == _pid(nxt), f"slots {i + 1}, {i + 2} by different processes"
            finals[i + 2] = _pid(restored)
            cancelled += 1
            i += 3
            continue
        assert nxt["operation"] == e["operation"] and nxt["state"] not in TRANSIENT, (i, nxt)
        assert _pid(nxt) == _pid(e), f"slots {i}, {i + 1} written by different processes"
        finals[i + 1] = _pid(nxt)
        i += 2
    # No retained slot is claimed by two processes: each reports the final entry its operation
    # wrote (or, for a no-op, the stable entry it was handed, written by someone else).
    reported: dict[int, int] = {}
    for pid, done in racers.items():
        for op, entry_id in done:
            if finals.get(entry_id) != pid:
                continue  # a no-op (precheck): handed the stable entry someone else wrote
            assert entry_id not in reported or reported[entry_id] == pid, f"slot {entry_id} claimed twice"
            # (the delete-restore racer creates the index again when it was vacuumed while deleted)
            assert entries[entry_id]["operation"] in {op, "create" if op == "restore" else op}, (entry_id, op)
            reported[entry_id] = pid
    for slot, pid in finals.items():
        if pid in racers:
            assert reported.get(slot) == pid, f"final slot {slot} written by {pid} but not reported by it"
    return cancelled


def _located(t: li.Table) -> Counter[tuple[str, int, str]]:
    got = t.locate(INDEX, [*KEYS, "zz"])
    return Counter(
        (canonical_uri(f), r, k)
        for f, r, k in zip(
            got["_file"].to_pylist(), got["_row"].to_pylist(), got["k"].to_pylist(), strict=True
        )
    )


def check_addresses(t: li.Table, uri: str, opts: dict[str, str] | None) -> None:
    """No lost PUT or DEL: the index locates exactly the live rows of every key (by address)."""
    want: Counter[tuple[str, int, str]] = Counter()
    for f in DeltaTable(uri, storage_options=opts).file_uris():
        fs, path = t.storage.arrow(canonical_uri(f))
        keys = pq.read_table(path, columns=["k"], filesystem=fs)["k"].to_pylist()
        want.update((canonical_uri(f), row, k) for row, k in enumerate(keys))
    assert _located(t) == want


def check_version(t: li.Table, oracle: Any, v: int) -> None:
    """Lookups of every key and a planned scan at version ``v`` equal the oracle's rows."""
    cols = SCHEMA.names
    oracle = oracle.select(cols)
    got = t.lookup(INDEX, [*KEYS, "zz"], version_as_of=v)
    assert multiset(got, cols) == multiset(oracle, cols), (v, "lookup")
    scanned = t.scan(version_as_of=v, where="k = 'a' OR v < 3")
    want = oracle.filter(pc.or_kleene(pc.equal(oracle["k"], "a"), pc.less(oracle["v"], 3)))
    assert multiset(scanned, cols) == multiset(want, cols), (v, "scan")
