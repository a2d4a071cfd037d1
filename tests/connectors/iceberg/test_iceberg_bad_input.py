"""Bad input gives clear lakehouse_index errors naming the file, never wrong rows."""

from __future__ import annotations

import glob
import json
import os
import struct
import zlib

import pyarrow as pa
import pytest
from iceberg_oracle import open_path
from lakehouse_index_iceberg import IcebergSource
from lakehouse_index_iceberg.deletes import decode_deletion_vector
from pyroaring import BitMap64

from lakehouse_index.io import Storage
from lakehouse_index.source import NotATableError, TableFormatError

ARROW = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def small_table(catalog):
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    t = catalog.create_table(
        "db.bad", Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "v", StringType()))
    )
    t.append(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=ARROW))
    t.append(pa.table({"id": [3], "v": ["c"]}, schema=ARROW))
    return catalog.load_table("db.bad")


def test_not_a_table(tmp_path):
    (tmp_path / "metadata").mkdir()
    io = Storage.for_uri(str(tmp_path))
    assert not IcebergSource.detect(str(tmp_path), io)
    with pytest.raises(NotATableError, match="no metadata"):
        IcebergSource.open(str(tmp_path), io)


def test_corrupt_metadata_json(catalog):
    table = small_table(catalog)
    loc = table.metadata_location.removeprefix("file://")
    with open(loc, "r+") as f:
        text = f.read()
        f.seek(0)
        f.write(text[: len(text) // 2])
        f.truncate()
    with pytest.raises(TableFormatError, match=os.path.basename(loc)):
        open_path(table.location())


def test_metadata_missing_required_field(catalog):
    table = small_table(catalog)
    loc = table.metadata_location.removeprefix("file://")
    with open(loc) as fh:
        doc = json.loads(fh.read())
    del doc["schemas"]
    del doc["current-schema-id"]
    with open(loc, "w") as fh:
        fh.write(json.dumps(doc))
    with pytest.raises(TableFormatError, match="corrupt Iceberg metadata"):
        open_path(table.location())


def test_missing_manifest(catalog):
    table = small_table(catalog)
    src = open_path(table.location())
    manifests = table.current_snapshot().manifests(table.io)
    os.remove(manifests[0].manifest_path.removeprefix("file://"))
    with pytest.raises(TableFormatError, match=os.path.basename(manifests[0].manifest_path)):
        src.snapshot()
    with pytest.raises(TableFormatError, match="missing"):
        list(src.changes(None))


def test_missing_manifest_list(catalog):
    table = small_table(catalog)
    os.remove(table.current_snapshot().manifest_list.removeprefix("file://"))
    with pytest.raises(TableFormatError, match="manifest list"):
        open_path(table.location()).snapshot()


def test_garbage_manifest(catalog):
    table = small_table(catalog)
    path = table.current_snapshot().manifests(table.io)[0].manifest_path.removeprefix("file://")
    with open(path, "wb") as fh:
        fh.write(b"Obj\x01 not really avro")
    with pytest.raises(TableFormatError, match="cannot decode manifest"):
        open_path(table.location()).snapshot()


def test_highest_numbered_metadata_wins_without_hint(catalog):
    table = small_table(catalog)
    files = sorted(glob.glob(table.location().removeprefix("file://") + "/metadata/*.metadata.json"))
    src = open_path(table.location())
    assert src.metadata_location.endswith(os.path.basename(files[-1]))
    assert src.latest_version() == table.current_snapshot().snapshot_id


def _dv_blob(positions: list[int]) -> bytes:
    body = bytes.fromhex("D1D33964") + BitMap64(positions).serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def test_deletion_vector_blob_checks():
    positions = [0, 5, 2**33 + 7]
    assert list(decode_deletion_vector(_dv_blob(positions), "x")) == positions
    bad = bytearray(_dv_blob(positions))
    bad[-6] ^= 0xFF  # inside the bitmap
    with pytest.raises(TableFormatError, match="CRC"):
        decode_deletion_vector(bytes(bad), "x.puffin@4")
    bad = bytearray(_dv_blob(positions))
    bad[4] = 0
    with pytest.raises(TableFormatError, match="magic"):
        decode_deletion_vector(bytes(bad), "x")
    with pytest.raises(TableFormatError, match="truncated"):
        decode_deletion_vector(b"\x00\x01", "x")


def test_version_hint_is_probed_forward(catalog):
    """Hadoop layout: the hint may lag one commit behind; a torn hint falls back to listing."""
    import shutil

    table = small_table(catalog)
    meta_dir = table.location().removeprefix("file://") + "/metadata"
    files = sorted(glob.glob(meta_dir + "/*.metadata.json"))
    for f in files[:-2]:
        os.remove(f)
    shutil.move(files[-2], meta_dir + "/v1.metadata.json")
    shutil.move(files[-1], meta_dir + "/v2.metadata.json")
    with open(meta_dir + "/version-hint.text", "w") as fh:
        fh.write("1\n")
    src = open_path(table.location())
    assert src.metadata_location.endswith("/v2.metadata.json")
    assert src.latest_version() == table.current_snapshot().snapshot_id
    with open(meta_dir + "/version-hint.text", "w") as fh:
        fh.write("garbage")
    assert open_path(table.location()).metadata_location.endswith("/v2.metadata.json")
