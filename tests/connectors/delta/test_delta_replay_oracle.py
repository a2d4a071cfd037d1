"""The columnar replay (checkpoint rows as Arrow columns, commits reconciled in one batch)
against deltalake on generated logs, and backward ``diff`` by undoing commits against the
forward rebuild.

Histories are written by hand so that they hold what deltalake's writer does not produce:
re-adds of a removed path, deletion-vector updates (remove + add of one path with another
DV), re-adds of a live file with ``dataChange=false``, classic checkpoints (by deltalake)
and multi-part checkpoints (deltalake's classic one split into parts).
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from delta_helpers import canonical, open_source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import checkpoints
from lakehouse_index_delta.deletion_vectors import z85_encode
from pyroaring import BitMap64

from lakehouse_index.source import Diff, FileEntry

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "k", "type": "long", "nullable": True, "metadata": {}},
    ],
}
OPS = ("add", "add", "remove", "readd", "dv", "replace")


def _inline_dv(rng: random.Random) -> dict[str, Any]:
    positions = sorted(rng.sample(range(50), rng.randint(1, 5)))
    payload = struct.pack("<i", 1681511377) + BitMap64(positions).serialize()
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(payload),
        "sizeInBytes": len(payload),
        "cardinality": len(positions),
    }


class _History:
    """Writes a random log; ``live`` mirrors the reconciled state (path -> add body)."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True)
        self.rng = random.Random(seed)
        self.live: dict[str, dict[str, Any]] = {}
        self.gone: dict[str, dict[str, Any]] = {}
        self.version = -1
        self.next_file = 0
        self.dv_ids: dict[int, dict[str, str | None]] = {}  # version -> path -> DV id

    def _add_body(self, path: str, k: int, dv: dict[str, Any] | None, data_change: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "path": path,
            "partitionValues": {"k": str(k)},
            "size": self.rng.randint(100, 10_000),
            "modificationTime": 1_700_000_000_000 + self.rng.randint(0, 10**6),
            "dataChange": data_change,
            "stats": json.dumps({"numRecords": self.rng.randint(50, 100)}),
        }
        if dv is not None:
            body["deletionVector"] = dv
        return body

    def commit(self, ops: list[str]) -> None:
        self.version += 1
        actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": 1_700_000_000_000 + self.version}}]
        if self.version == 0:
            actions.append(
                {
                    "protocol": {
                        "minReaderVersion": 3,
                        "minWriterVersion": 7,
                        "readerFeatures": ["deletionVectors"],
                        "writerFeatures": ["deletionVectors"],
                    }
                }
            )
            actions.append(
                {
                    "metaData": {
                        "id": "gen",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": json.dumps(SCHEMA),
                        "partitionColumns": ["k"],
                        "configuration": {"delta.enableDeletionVectors": "true"},
                        "createdTime": 1_700_000_000_000,
                    }
                }
            )
            ops = ["add", *ops]
        touched: set[str] = set()
        for op in ops:
            live = sorted(set(self.live) - touched)
            if op == "add" or (op in ("remove", "dv", "replace") and not live):
                k = self.rng.randint(0, 2)
                path = f"k={k}/part-{self.next_file:05d}.parquet"
                self.next_file += 1
                body = self._add_body(path, k, None, True)
                actions.append({"add": body})
                self.live[path] = body
            elif op == "readd":
                back = sorted(set(self.gone) - touched)
                if not back:
                    continue
                path = self.rng.choice(back)
                k = int(self.gone.pop(path)["partitionValues"]["k"])
                body = self._add_body(path, k, None, True)
                actions.append({"add": body})
                self.live[path] = body
            else:
                path = self.rng.choice(live)
                old = self.live[path]
                remove: dict[str, Any] = {"path": path, "dataChange": True, "deletionTimestamp": 1}
                if "deletionVector" in old:
                    remove["deletionVector"] = old["deletionVector"]
                k = int(old["partitionValues"]["k"])
                if op == "remove":
                    actions.append({"remove": remove})
                    self.gone[path] = self.live.pop(path)
                elif op == "dv":
                    actions.append({"remove": remove})
                    body = self._add_body(path, k, _inline_dv(self.rng), True)
                    actions.append({"add": body})
                    self.live[path] = body
                else:  # same logical file added again (new stats), no remove
                    body = self._add_body(path, k, old.get("deletionVector"), False)
                    actions.append({"add": body})
                    self.live[path] = body
            touched.add(path)
        (self.log / f"{self.version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
        self.dv_ids[self.version] = {
            canonical(str(self.root / p)): _dv_id(body.get("deletionVector")) for p, body in self.live.items()
        }

    def checkpoint(self, multi_part: bool) -> None:
        deltalake.DeltaTable(str(self.root), version=self.version).create_checkpoint()
        if not multi_part:
            return
        classic = self.log / f"{self.version:020d}.checkpoint.parquet"
        table = pq.read_table(classic)
        half = table.num_rows // 2
        for part, rows in ((1, table.slice(0, half)), (2, table.slice(half))):
            pq.write_table(rows, self.log / f"{self.version:020d}.checkpoint.{part:010d}.0000000002.parquet")
        classic.unlink()
        (self.log / "_last_checkpoint").unlink(missing_ok=True)


def _dv_id(dv: dict[str, Any] | None) -> str | None:
    """The protocol's DV unique id, computed from the descriptor the history wrote."""
    if dv is None:
        return None
    offset = dv.get("offset")
    return str(dv["storageType"] + dv["pathOrInlineDv"] + (f"@{offset}" if offset is not None else ""))


def _oracle(history: _History, version: int) -> dict[str, tuple[Any, ...]]:
    """deltalake's live files: path -> (size, k, records, deleted positions), with the written DV id."""
    dt = deltalake.DeltaTable(str(history.root), version=version)
    deleted = {
        canonical(row["filepath"]): sorted(i for i, keep in enumerate(row["selection_vector"]) if not keep)
        for row in pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all().to_pylist()
    }
    out = {}
    for row in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        path = canonical(str(history.root / row["path"]))
        dv = history.dv_ids[version][path]
        out[path] = (row["size_bytes"], row["partition.k"], row["num_records"], deleted.get(path, []), dv)
    return out


def _ours(source: Any, entries: Any) -> dict[str, tuple[Any, ...]]:
    out = {}
    for e in entries:
        positions = sorted(source.deleted_positions(e))
        assert e.deleted_count == len(positions)
        dv = e.deletes.id if e.deletes else None
        out[e.path] = (e.size, e.partition_dict["k"], e.num_records, positions, dv)
    return out


_DiffByPath = tuple[dict[str, FileEntry], dict[str, FileEntry], dict[str, tuple[FileEntry, FileEntry]]]


def _by_path(diff: Diff) -> _DiffByPath:
    """Added, removed and changed entries by path (the order of a Diff's tuples is not part of it)."""
    return (
        {f.path: f for f in diff.added},
        {f.path: f for f in diff.removed},
        {c.path: (c.before, c.after) for c in diff.delete_changes},
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    commits=st.lists(st.lists(st.sampled_from(OPS), min_size=1, max_size=4), min_size=2, max_size=14),
    checkpoints=st.lists(st.tuples(st.integers(0, 13), st.booleans()), max_size=3),
    seed=st.integers(0, 2**16),
)
def test_columnar_replay_and_backward_diff_match(
    tmp_path_factory: Any, commits: list[list[str]], checkpoints: list[tuple[int, bool]], seed: int
) -> None:
    root = tmp_path_factory.mktemp("replay") / "t"
    history = _History(root, seed)
    cp_at = dict(checkpoints)
    for i, ops in enumerate(commits):
        history.commit(ops)
        if i in cp_at:
            history.checkpoint(multi_part=cp_at[i])
    latest = history.version

    # Every version, cold and through the shared source, equals deltalake's file set.
    shared = open_source(root)
    for v in range(latest + 1):
        expected = _oracle(history, v)
        cold = open_source(root)
        snap = cold.snapshot(v)
        assert len(snap.files) == len(expected), v
        assert _ours(cold, snap.files.values()) == expected, v
        assert _ours(cold, [snap.files[p] for p in snap.files]) == expected, v
        assert snap.total_bytes == sum(x[0] for x in expected.values()), v
        assert _ours(shared, shared.snapshot(v).files.values()) == expected, v

    for a in sorted({latest, random.Random(seed).randint(1, latest)}):
        for b in range(a):
            _check_backward_diff(history, a, b)


def _check_backward_diff(history: _History, a: int, b: int) -> bool:
    """Backward diff by undoing commits (when possible) equals the forward rebuild; True if undone."""
    undoing = open_source(history.root)
    undone = undoing._replay.undo(undoing._replay.state_at(a), b)
    forward = open_source(history.root)
    forward._replay.state_at(b)  # cached: diff does not undo
    expected_diff = _by_path(forward.diff(a, b))
    assert _by_path(open_source(history.root).diff(a, b)) == expected_diff, (a, b)
    if undone is None:
        return False
    assert _by_path(undoing.diff(a, b)) == expected_diff, (a, b)
    assert _ours(undoing, undoing.snapshot(b).files.values()) == _oracle(history, b), (a, b)
    return True


def test_backward_diff_undoes_appends(tmp_path: Path) -> None:
    """Appends after a checkpoint are undone (no checkpoint read) and equal the forward rebuild."""
    history = _History(tmp_path / "t", 7)
    for v in range(12):
        history.commit(["add", "add"] if v != 3 else ["add", "dv", "remove"])
        if v == 4:
            history.checkpoint(multi_part=False)
    assert open_source(history.root)._replay.undo_reads_less(11, 9)
    assert all(_check_backward_diff(history, 11, b) for b in range(3, 11))
    assert not _check_backward_diff(history, 11, 2)  # commit 3 removes files live at 2


def test_checkpoints_decoded_in_many_batches(tmp_path: Path, monkeypatch: Any) -> None:
    """Checkpoints read a few rows at a time equal deltalake (as one batch would).

    Batches of 3 rows put adds, removes, metaData and protocol rows, DVs and partition
    values of one checkpoint in different batches, and the parts of a multi-part one in
    several batches each: the batches' columns, partition codes and DV rows must join.
    """
    monkeypatch.setattr(checkpoints, "_BATCH_ROWS", 3)
    history = _History(tmp_path / "t", 11)
    for v in range(10):
        history.commit(["add", "add", "add"] if v % 3 else ["add", "dv", "remove", "readd", "replace"])
        if v in (4, 9):
            history.checkpoint(multi_part=v == 9)
    for v in (4, 5, 9):
        source = open_source(history.root)
        snap = source.snapshot(v)
        assert source._replay.state_at(v).files.base is not None  # read from the checkpoint at 4 or 9
        expected = _oracle(history, v)
        assert len(expected) > 3 * checkpoints._BATCH_ROWS
        assert _ours(source, snap.files.values()) == expected, v
        assert _ours(source, [snap.files[p] for p in snap.files]) == expected, v
        assert snap.total_bytes == sum(x[0] for x in expected.values()), v
    _check_backward_diff(history, 9, 5)  # the diff back from the checkpointed state (asserts inside)
