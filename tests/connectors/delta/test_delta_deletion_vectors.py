"""Deletion vectors crafted by hand (u / i / p storage, several DVs in one file, a RESTORE that
shrinks a DV), checked against deltalake's ``scan()`` and ``deletion_vectors()``."""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from delta_helpers import multiset, open_source, oracle_rows, read_snapshot_rows
from lakehouse_index_delta.deletion_vectors import z85_decode, z85_encode
from pyroaring import BitMap64

from lakehouse_index.source import TableFormatError

MAGIC = 1681511377


def bitmap_bytes(positions: list[int]) -> bytes:
    """A RoaringBitmapArray in the portable format."""
    return struct.pack("<i", MAGIC) + BitMap64(positions).serialize()


def write_dv_file(path: Path, payloads: list[bytes]) -> list[int]:
    """A DV file holding ``payloads``; returns each one's offset."""
    data = b"\x01"
    offsets = []
    for p in payloads:
        offsets.append(len(data))
        data += struct.pack(">i", len(p)) + p + struct.pack(">I", zlib.crc32(p))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return offsets


def rust_z85(data: bytes) -> str:
    """Z85 as the Rust ``z85`` crate pads it: a short tail chunk has one ``#`` per missing byte."""
    full = len(data) - len(data) % 4
    out = z85_encode(data[:full])
    tail = data[full:]
    if tail:
        missing = 4 - len(tail)
        value = int.from_bytes(tail, "big")
        digits = ""
        for _ in range(5):
            value, r = divmod(value, 85)
            digits = (
                "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"[r]
                + digits
            )
        out += "#" * missing + digits[missing:]
    return out


def commit(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "DELETE"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (table / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def add(file: dict[str, Any], dv: dict[str, Any] | None) -> dict[str, Any]:
    body = {k: file[k] for k in ("path", "partitionValues", "size", "modificationTime")}
    body.update(dataChange=True, stats=json.dumps({"numRecords": 10}))
    if dv is not None:
        body["deletionVector"] = dv
    return {"add": body}


def remove(file: dict[str, Any], dv: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"path": file["path"], "dataChange": True, "deletionTimestamp": 1}
    if dv is not None:
        body["deletionVector"] = dv
    return {"remove": body}


def u_dv(prefix: str, file_id: uuid.UUID, offset: int, payload: bytes, card: int) -> dict[str, Any]:
    return {
        "storageType": "u",
        "pathOrInlineDv": prefix + z85_encode(file_id.bytes),
        "offset": offset,
        "sizeInBytes": len(payload),
        "cardinality": card,
    }


def i_dv(encoded: str, payload: bytes, card: int) -> dict[str, Any]:
    return {"storageType": "i", "pathOrInlineDv": encoded, "sizeInBytes": len(payload), "cardinality": card}


@pytest.fixture
def dv_table(table_dir: Path) -> tuple[Path, dict[str, Any]]:
    """v0, v1: two appends of 10 rows (files A, B); v2..v5: hand-made DV commits."""
    for start in (0, 10):
        ids = list(range(start, start + 10))
        deltalake.write_deltalake(
            str(table_dir), pa.table({"id": ids, "s": [str(i) for i in ids]}), mode="append"
        )
    log0 = [json.loads(x) for x in (table_dir / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    log1 = [json.loads(x) for x in (table_dir / "_delta_log" / f"{1:020d}.json").read_text().splitlines()]
    file_a = next(a["add"] for a in log0 if "add" in a)
    file_b = next(a["add"] for a in log1 if "add" in a)

    # One DV file with two DVs at different offsets, below a random-prefix directory.
    p1, p2 = bitmap_bytes([1, 3]), bitmap_bytes([1, 3, 5])
    file_id = uuid.uuid4()
    off1, off2 = write_dv_file(table_dir / "ab" / f"deletion_vector_{file_id}.bin", [p1, p2])
    dv1 = u_dv("ab", file_id, off1, p1, 2)
    dv2 = u_dv("ab", file_id, off2, p2, 3)
    pi = bitmap_bytes([0, 9])
    dvi = i_dv(z85_encode(pi), pi, 2)  # Spark's zero padding
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors"],
        }
    }
    commit(table_dir, 2, [protocol, remove(file_a, None), add(file_a, dv1)])
    commit(table_dir, 3, [remove(file_a, dv1), add(file_a, dv2), remove(file_b, None), add(file_b, dvi)])
    # RESTORE-like: the DV of A shrinks back, so row 5 of A is live again.
    commit(table_dir, 4, [remove(file_a, dv2), add(file_a, dv1)])
    # An absolute-path DV (p) for B.
    pp = bitmap_bytes([4])
    pfile = table_dir / "abs" / "my_dv.bin"
    (offp,) = write_dv_file(pfile, [pp])
    dvp = {
        "storageType": "p",
        "pathOrInlineDv": pfile.as_uri(),
        "offset": offp,
        "sizeInBytes": len(pp),
        "cardinality": 1,
    }
    commit(table_dir, 5, [remove(file_b, dvi), add(file_b, dvp)])
    return table_dir, {"A": file_a, "B": file_b, "dv1": dv1, "dv2": dv2, "dvi": dvi, "dvp": dvp}


def oracle_dvs(path: Path, version: int) -> dict[str, set[int]]:
    dt = deltalake.DeltaTable(str(path), version=version)
    out = {}
    for row in pa.RecordBatchReader.from_stream(dt.deletion_vectors()).read_all().to_pylist():
        out[row["filepath"]] = {i for i, keep in enumerate(row["selection_vector"]) if not keep}
    return out


def test_dv_rows_match_deltalake_at_every_version(dv_table: tuple[Path, dict[str, Any]]) -> None:
    path, _ = dv_table
    src = open_source(path)
    assert src.latest_version() == 5
    for v in range(6):
        snap = src.snapshot(v)
        mine = read_snapshot_rows(src, snap)
        assert multiset(mine, snap.schema) == multiset(oracle_rows(path, v), snap.schema), v
        expected = oracle_dvs(path, v) if v >= 2 else {}
        got = {}
        for f in snap.files.values():
            if f.deletes is not None:
                positions = set(src.deleted_positions(f))
                assert len(positions) == f.deletes.cardinality
                got[f.path[len("file://") :]] = positions
        # deltalake's selection vector ends at the last deleted row: compare deleted positions.
        assert {k.removeprefix("file://"): v2 for k, v2 in expected.items()} == got, v


def test_dv_changes_are_delete_changes(dv_table: tuple[Path, dict[str, Any]]) -> None:
    path, meta = dv_table
    src = open_source(path)
    changes = {c.version: c for c in src.changes(1)}
    c2 = changes[2]
    assert not c2.added and not c2.removed and len(c2.delete_changes) == 1
    dc = c2.delete_changes[0]
    assert dc.before.deletes is None and dc.after.deletes is not None
    assert set(src.deleted_positions(dc.after)) == {1, 3}
    c4 = changes[4]
    (dc4,) = c4.delete_changes
    before, after = src.deleted_positions(dc4.before), src.deleted_positions(dc4.after)
    assert set(before - after) == {5} and not (after - before)  # row 5 re-inserted by the restore
    # The unique id includes the offset: two DVs in one file are different logical files.
    assert dc4.before.deletes is not None and dc4.after.deletes is not None
    assert dc4.before.deletes.id.endswith(f"@{meta['dv2']['offset']}")
    assert dc4.before.deletes.id != dc4.after.deletes.id
    # Backward diff from 5 to 2: A has the same DV at both versions; B's DV changes.
    d = src.diff(5, 2)
    assert not d.added and not d.removed
    assert {x.path.rsplit("/", 1)[-1] for x in d.delete_changes} == {
        meta["B"]["path"],
    }


def test_rust_z85_tail_inline_dv(table_dir: Path) -> None:
    deltalake.write_deltalake(str(table_dir), pa.table({"id": list(range(10))}))
    log0 = [json.loads(x) for x in (table_dir / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    file_a = next(a["add"] for a in log0 if "add" in a)
    payload = bitmap_bytes([2, 7, 8])
    if len(payload) % 4 == 0:  # make the inline payload need a tail chunk
        payload = bitmap_bytes([2, 7, 8, 9])
    assert len(payload) % 4
    encoded = rust_z85(payload)
    assert "#" in encoded and z85_decode(encoded) == payload
    card = len(BitMap64.deserialize(payload[4:]))
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors"],
        }
    }
    commit(table_dir, 1, [protocol, remove(file_a, None), add(file_a, i_dv(encoded, payload, card))])
    src = open_source(table_dir)
    snap = src.snapshot(1)
    (entry,) = snap.files.values()
    assert set(src.deleted_positions(entry)) == set(BitMap64.deserialize(payload[4:]))
    assert multiset(read_snapshot_rows(src, snap), snap.schema) == multiset(
        oracle_rows(table_dir, 1), snap.schema
    )


def test_dv_with_wrong_crc_or_missing_file_names_the_file(dv_table: tuple[Path, dict[str, Any]]) -> None:
    path, meta = dv_table
    src = open_source(path)
    entry = next(f for f in src.snapshot(2).files.values() if f.deletes is not None)
    dv_file = next((path / "ab").glob("deletion_vector_*.bin"))
    data = bytearray(dv_file.read_bytes())
    data[-1] ^= 0xFF  # corrupt the CRC of the second DV
    dv_file.write_bytes(bytes(data))
    entry3 = next(
        f for f in open_source(path).snapshot(3).files.values() if f.path.endswith(meta["A"]["path"])
    )
    with pytest.raises(TableFormatError, match=r"deletion_vector_.*CRC"):
        open_source(path).deleted_positions(entry3)
    dv_file.unlink()
    with pytest.raises(TableFormatError, match=r"deletion_vector_.*missing"):
        open_source(path).deleted_positions(entry)


def test_add_and_remove_of_same_logical_file_in_one_commit_is_refused(
    dv_table: tuple[Path, dict[str, Any]],
) -> None:
    """Actions in a commit are unordered: the protocol makes this commit invalid (readers differ:
    deltalake drops the file). The connector refuses it rather than guess."""
    path, meta = dv_table
    commit(path, 6, [remove(meta["A"], meta["dv1"]), add(meta["A"], meta["dv1"])])
    src = open_source_upto(path, 5)
    with pytest.raises(
        TableFormatError, match=r"00000000000000000006\.json: invalid commit.*same deletion vector"
    ):
        src.snapshot(6)
    with pytest.raises(TableFormatError, match="invalid commit"):
        list(src.changes(5))


def test_path_added_twice_in_one_commit_is_refused(table_dir: Path) -> None:
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [1]}))
    log0 = [json.loads(x) for x in (table_dir / "_delta_log" / f"{0:020d}.json").read_text().splitlines()]
    file_a = next(a["add"] for a in log0 if "add" in a)
    commit(table_dir, 1, [add(file_a, None), add(file_a, None)])
    with pytest.raises(TableFormatError, match="appears in two add actions"):
        open_source(table_dir)


def open_source_upto(path: Path, version: int) -> Any:
    from lakehouse_index_delta import DeltaSource

    from lakehouse_index.io import Storage

    src = DeltaSource(str(path), Storage.for_uri(str(path)))
    src.snapshot(version)
    return src
