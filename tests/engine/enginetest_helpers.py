"""Helpers of the engine-level race, crash and bad-input tests.

Everything here is an independent oracle or plain file inspection: table contents come
from deltalake (``DeltaTable.to_pyarrow_table``), log entries are read as plain JSON, the
side-car tree is hashed byte by byte. Child processes of the race and crash tests import
this module after a ``spawn``, so it must stay importable without pytest fixtures.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

INDEX = "by_k"
#: Keys looked up after every step: frequent ones, a rare one, a missing one and null.
KEYS: tuple[str | None, ...] = ("k0", "k3", "k6", "rare", "absent", None)

#: Entry fields a cancel restores from the entry the stuck operation started from.
SNAPSHOT_FIELDS = ("state", "spec", "source", "content", "pending")


def batch(b: int, n: int = 24) -> pa.Table:
    """Rows of batch ``b``: duplicate keys, a null key, one ``rare`` key; ids unique per batch."""
    keys: list[str | None] = [None if i % 11 == 5 else f"k{i % 7}" for i in range(n)]
    if b % 3 == 0:
        keys[0] = "rare"
    return pa.table(
        {
            "id": pa.array([b * 1000 + i for i in range(n)], pa.int64()),
            "k": pa.array(keys, pa.string()),
            "batch": pa.array([b] * n, pa.int64()),
        }
    )


def make_table(path: Path | str, batches: range | list[int]) -> None:
    """One Delta commit (and one data file) per batch, so a batch can be deleted as a whole file."""
    for b in batches:
        write_deltalake(str(path), batch(b), mode="append")


def secondary(name: str = INDEX) -> li.SecondaryIndex:
    return li.SecondaryIndex(name, key="k", record_key="id")


def oracle(path: Path | str, keys: tuple[str | None, ...] = KEYS) -> Counter[tuple[Any, int]]:
    """(k, id) of the live rows whose key is one of ``keys``, read by deltalake (the oracle)."""
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["k", "id"]).to_pylist()
    wanted = set(keys)
    return Counter((r["k"], r["id"]) for r in rows if r["k"] in wanted)


def check_answers(t: li.Table, path: Path | str, name: str = INDEX) -> None:
    """``lookup`` and ``locate`` at the latest version equal the oracle (as multisets), and
    every located (file, row) really holds that row."""
    expected = oracle(path)
    got = t.lookup(name, list(KEYS), columns=["k", "id"]).to_pylist()
    assert Counter((r["k"], r["id"]) for r in got) == expected
    located = t.locate(name, list(KEYS)).to_pylist()
    assert Counter((r["k"], r["id"]) for r in located) == expected
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in located:
        by_file.setdefault(r["_file"], []).append(r)
    for uri, rows in by_file.items():
        data = pq.read_table(uri.removeprefix("file://"), columns=["k", "id"]).to_pylist()
        for r in rows:
            assert data[r["_row"]] == {"k": r["k"], "id": r["id"]}, (uri, r)


def index_dir(path: Path | str, name: str = INDEX) -> Path:
    return Path(path) / "_lakehouse_index" / name


def log_entries(path: Path | str, name: str = INDEX) -> dict[int, dict[str, Any]]:
    """Every log entry of the index, read as plain JSON, by slot number."""
    out = {}
    for f in sorted((index_dir(path, name) / "_log").glob("*.json")):
        out[int(f.stem)] = json.loads(f.read_text())
    return out


def sidecar_tree(path: Path | str) -> dict[str, str]:
    """Relative path → sha256 of every file under the table's ``_lakehouse_index`` (dirs as ``<dir>``)."""
    root = Path(path) / "_lakehouse_index"
    out = {}
    for p in sorted(root.rglob("*")) if root.exists() else []:
        rel = str(p.relative_to(root))
        out[rel] = "<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def data_dirs(path: Path | str, name: str = INDEX) -> set[str]:
    """The ``data/<uuid>`` directories of an index (names only)."""
    d = index_dir(path, name) / "data"
    return {p.name for p in d.iterdir()} if d.exists() else set()


def named_files(path: Path | str, name: str = INDEX) -> set[str]:
    """Index data files (relative to the index dir) named by any retained log entry."""
    out: set[str] = set()
    for e in log_entries(path, name).values():
        out |= {f["path"] for f in e["content"]["files"]}
    return out


def latest_stable(path: Path | str, name: str = INDEX) -> dict[str, Any]:
    """The newest entry in a stable state (plain JSON)."""
    stable = ("ACTIVE", "DELETED", "DOES_NOT_EXIST")
    entries = log_entries(path, name)
    return next(entries[i] for i in sorted(entries, reverse=True) if entries[i]["state"] in stable)


STABLE = ("ACTIVE", "DELETED", "DOES_NOT_EXIST")
TRANSIENT = ("CREATING", "REFRESHING", "OPTIMIZING", "DELETING", "RESTORING", "VACUUMING", "CANCELLING")
#: The final state each operation ends in (no failures, no cancels in this test).
FINAL_STATE = {
    "refresh-full": "ACTIVE",
    "refresh-incremental": "ACTIVE",
    "refresh-quick": "ACTIVE",
    "optimize-quick": "ACTIVE",
    "optimize-full": "ACTIVE",
    "delete": "DELETED",
    "restore": "ACTIVE",
}


def check_race_log(entries: dict[int, dict[str, Any]], racers: dict[int, list[tuple[str, int]]]) -> None:
    """The log of a race (entries read as plain JSON, by slot; ``racers``: pid → operations and
    entry ids each racer reported): contiguous slots, each written once by one known process
    (a racer or this one), every operation a transient entry directly followed by its final
    entry by the same writer, and every slot a racer wrote reported by it."""
    ids = sorted(entries)
    assert ids == list(range(len(ids))), f"holes in the log: {ids}"
    for i, e in entries.items():
        assert e["id"] == i
        assert e["spec"]["name"] == INDEX
    writer_pid = {i: int(e["writer"].rsplit(":", 1)[1]) for i, e in entries.items()}
    known = set(racers) | {os.getpid()}  # this process created the index and refreshed it once
    assert set(writer_pid.values()) <= known, f"unknown writers: {set(writer_pid.values()) - known}"

    i = 0
    while i < len(ids):
        e = entries[i]
        assert e["state"] in TRANSIENT, f"slot {i} should open an operation: {e['state']}"
        assert e["state"] != "CANCELLING" and e["operation"] != "cancel", f"slot {i}: {e['operation']}"
        final = entries.get(i + 1)
        assert final is not None, f"operation of slot {i} ({e['operation']}) never finished"
        assert final["state"] in STABLE
        assert final["operation"] == e["operation"]
        assert writer_pid[i + 1] == writer_pid[i], f"slots {i}, {i + 1} written by different processes"
        if i:
            assert e["baseId"] == i - 1, f"slot {i} starts from {e['baseId']}, not the latest entry {i - 1}"
        i += 2

    # Each successful operation a racer reports is its own pair of slots, claimed by nobody else.
    claimed: dict[int, int] = {}
    for pid, done in racers.items():
        seen: set[int] = set()
        for op, entry_id in done:
            e = entries[entry_id]
            if writer_pid[entry_id] != pid or entry_id in seen:
                continue  # a no-op: the racer was handed the stable entry it or another wrote
            seen.add(entry_id)
            assert e["operation"] == op
            assert e["state"] == FINAL_STATE[op]
            for slot in (entry_id - 1, entry_id):
                assert slot not in claimed, f"slot {slot} claimed by {claimed.get(slot)} and {pid}"
                claimed[slot] = pid
    # Every slot a racer wrote is accounted for by an operation it reported.
    for i, pid in writer_pid.items():
        if pid in racers:
            assert claimed.get(i) == pid, f"slot {i} written by {pid} but not reported by it"
