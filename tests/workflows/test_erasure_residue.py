"""The residue scan finds every place real tables and indexes keep a value, and nothing else.

Tables are real: Delta written and deleted from by deltalake (commitInfo predicate, stats in
commits and a checkpoint, CDF files, Hive partition folders), a Spark-written Delta table
with a deletion vector (the masked rows are still in the data file), Iceberg written by
pyiceberg (manifest bounds, with deflate and zstandard Avro codecs), and lakehouse-index
secondary, covering and skipping indexes. Each expected place is established by an
independent reader (deltalake, pyiceberg, pyarrow, json) before the scan is asked.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import json
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.erasure.verify.residue import ResidueReport, find_residue
from tests.support.paths import PEER_TABLES

SUBJECT = "subject-7"


def rows(n: int, *, key: Any = None) -> pa.Table:
    """n rows: ids from 1000, keys subject-7/8/9 (or all ``key``), n from 5000 by 1000."""
    keys = [key or f"subject-{7 + i % 3}" for i in range(n)]
    return pa.table(
        {
            "id": pa.array(range(1000, 1000 + n), pa.int64()),
            "k": pa.array(keys, pa.string()),
            "n": pa.array([5000 + 1000 * i for i in range(n)], pa.int64()),
        }
    )


def hits_of(report: ResidueReport, number: int) -> set[tuple[str, str, str]]:
    """(path relative to the table, decoder, location) of the hits of one value."""
    return {
        (h.path.split("/t/", 1)[-1], h.decoder, h.location) for h in report.hits if h.value_number == number
    }


def commit_lines(table: Path) -> dict[str, list[dict[str, Any]]]:
    """The Delta log's commits, parsed: file name → actions."""
    return {
        p.name: [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
        for p in sorted((table / "_delta_log").glob("*.json"))
    }


# --------------------------------------------------------------------------- Delta


@pytest.fixture
def delta_table(tmp_path: Path) -> Path:
    """CDF on, two appends, a deltalake DELETE of SUBJECT, then a checkpoint."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows(30), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(str(path), rows(6), mode="append")
    dtable = DeltaTable(str(path))
    dtable.delete(f"k = '{SUBJECT}'")
    dtable.create_checkpoint()
    return path


def test_delta_every_place_is_found(delta_table: Path) -> None:
    values: list[object] = [SUBJECT, "subject-9", 6000, "subject-1", 12, 600]
    report = find_residue([str(delta_table)], values)
    commits = commit_lines(delta_table)

    # 1. The DELETE's commitInfo holds the predicate text (read here with json, not the scanner).
    (delete_commit,) = [
        name
        for name, actions in commits.items()
        if any(a.get("commitInfo", {}).get("operation") == "DELETE" for a in actions)
    ]
    predicate_line = next(
        n for n, a in enumerate(commits[delete_commit], 1) if "commitInfo" in a and SUBJECT in json.dumps(a)
    )
    assert (
        f"_delta_log/{delete_commit}",
        "ndjson",
        f"line {predicate_line}: $.commitInfo.operationParameters.predicate",
    ) in hits_of(report, 0)

    # 2. Per-file min/max statistics in commits: every add whose stats name the value.
    for name, actions in commits.items():
        for n, action in enumerate(actions, 1):
            stats = json.loads(action.get("add", {}).get("stats") or "{}")
            for bound in ("minValues", "maxValues"):
                if stats.get(bound, {}).get("k") == "subject-9":
                    assert (
                        f"_delta_log/{name}",
                        "ndjson",
                        f"line {n}: $.add.stats (json).{bound}.k",
                    ) in hits_of(report, 1)
                if stats.get(bound, {}).get("n") == 6000:
                    assert (
                        f"_delta_log/{name}",
                        "ndjson",
                        f"line {n}: $.add.stats (json).{bound}.n",
                    ) in hits_of(report, 2)

    # 3. The checkpoint (Parquet): its add.stats strings are parsed JSON.
    (checkpoint,) = (delta_table / "_delta_log").glob("*.checkpoint.parquet")
    ck = pq.read_table(checkpoint).column("add").combine_chunks()
    ck_stats = [json.loads(s) for s in pc.struct_field(ck, "stats").to_pylist() if s]
    assert any(s["maxValues"]["k"] == "subject-9" for s in ck_stats)
    assert (
        f"_delta_log/{checkpoint.name}",
        "parquet",
        "row group 0 column add.stats (json).maxValues.k",
    ) in hits_of(report, 1)

    # 4. Data files, live or removed, and the CDF files: every Parquet file holding the key
    #    (read with pyarrow) is hit in column k, its statistics and its decompressed pages.
    holders = {
        str(p.relative_to(delta_table))
        for p in delta_table.rglob("*.parquet")
        if "_delta_log" not in p.parts and SUBJECT in pq.read_table(p).column("k").to_pylist()
    }
    assert any(h.startswith("_change_data/") for h in holders)
    removed = {a["remove"]["path"] for actions in commits.values() for a in actions if "remove" in a}
    assert holders & removed  # the rewritten originals are still on disk
    got = hits_of(report, 0)
    for rel in holders:
        assert (rel, "parquet", "row group 0 column k") in got
        assert (rel, "parquet", "row group 0 column k pages (uncompressed)") in {
            (p, d, loc.split(" at byte")[0]) for p, d, loc in got
        }
    assert {p for p, d, loc in got if d == "parquet"} == holders

    # The live table no longer has the key (deltalake), so all of the above is residue.
    assert SUBJECT not in DeltaTable(str(delta_table)).to_pyarrow_table().column("k").to_pylist()

    # 5. Near values never hit: subject-1 (subject-1x absent, but 'subject-7' etc. present),
    #    12 (rows have _row-like small numbers nowhere in data; 5000-based n), 600 (6000 present).
    assert hits_of(report, 3) == set()
    assert hits_of(report, 4) == set()
    assert hits_of(report, 5) == set()
    assert report.files_by_decoder["parquet"] == len(list(delta_table.rglob("*.parquet")))
    assert report.files_by_decoder["ndjson"] == len(commits)
    assert report.files_checked == sum(1 for p in delta_table.rglob("*") if p.is_file())
    assert report.bytes_checked == sum(p.stat().st_size for p in delta_table.rglob("*") if p.is_file())
    assert not report.ok


def test_near_values_do_not_hit(tmp_path: Path) -> None:
    """subject-1 is not found in subject-10; 12 is not found in 123, 3.12, 12.5 or subject-12."""
    path = tmp_path / "t"
    data = pa.table(
        {
            "k": ["subject-10", "subject-11", "subject-12"],
            "n": pa.array([123, 1234, 112], pa.int64()),
            "f": [3.12, 12.5, 120.0],
            "note": ["x 123 y", "v3.12", "id=120"],
        }
    )
    write_deltalake(str(path), data)
    DeltaTable(str(path)).delete("k = 'subject-11'")
    report = find_residue([str(path)], ["subject-1", 12, "ubject-10", 12.0])
    assert report.hits == ()
    assert report.ok
    # Positive controls on the same files: the exact values are found.
    found = find_residue([str(path)], ["subject-10", 123, 12.5])
    assert {h.value_number for h in found.hits} == {0, 1, 2}


def test_partition_folder_names(tmp_path: Path) -> None:
    """Hive partition folders named after the key are hits of the 'path' decoder, redacted."""
    path = tmp_path / "t"
    data = pa.table(
        {"k": [SUBJECT, "subject-70", "other"], "g": pa.array([12, 123, 7], pa.int64()), "v": [1, 2, 3]}
    )
    write_deltalake(str(path), data, partition_by=["k", "g"])
    DeltaTable(str(path)).delete(f"k = '{SUBJECT}'")
    report = find_residue([str(path)], [SUBJECT, 12])
    folders = {h.path for h in report.hits if h.decoder == "path"}
    assert folders == {f"{path.as_uri()}/k=<value #0>", f"{path.as_uri()}/k=<value #0>/g=<value #1>"}
    assert all(h.location == "name" for h in report.hits if h.decoder == "path")
    # The folders exist (the report only redacts their names).
    assert (path / f"k={SUBJECT}" / "g=12").is_dir()
    # Commit JSON holds the partition values (strings, so also the int's text "12").
    assert any(
        h.decoder == "ndjson" and "partitionValues.k" in h.location
        for h in report.hits
        if h.value_number == 0
    )


def test_deletion_vector_masked_rows(tmp_path: Path) -> None:
    """Spark wrote a DV masking values 0 and 9: deltalake no longer returns them, but the data
    file still holds them (typed hit) and the DELETE predicate names them."""
    path = tmp_path / "t"
    shutil.copytree(PEER_TABLES / "table-with-dv-small", path)
    live = (
        pa.RecordBatchReader.from_stream(DeltaTable(str(path)).scan()).read_all().column("value").to_pylist()
    )
    assert 0 not in live and 9 not in live and 5 in live
    report = find_residue([str(path)], [0, 9])
    (data_file,) = [p.name for p in path.glob("*.parquet")]
    # Spark's predicate is a JSON list of SQL strings: parsed, then its text searched.
    predicate = (
        "_delta_log/00000000000000000001.json",
        "ndjson",
        "line 1: $.commitInfo.operationParameters.predicate (json)[0]",
    )
    for number in (0, 1):
        assert (data_file, "parquet", "row group 0 column value") in hits_of(report, number)
        assert predicate in hits_of(report, number)
    # 0 is the file's minimum: the stats of both adds name it. Bookkeeping zeros do not hit
    # (nullCount, offsets), and the DV file is scanned raw without a hit.
    assert (
        "_delta_log/00000000000000000000.json",
        "ndjson",
        "line 4: $.add.stats (json).minValues.value",
    ) in hits_of(report, 0)
    assert not any("nullCount" in loc or "deletionVector" in loc for _, _, loc in hits_of(report, 0))
    assert report.files_by_decoder["raw"] == 1  # the deletion vector


# --------------------------------------------------------------------------- Iceberg


@pytest.mark.parametrize("codec", ["gzip", "zstd", "bzip2", "null"])
def test_iceberg_manifest_bounds(tmp_path: Path, codec: str) -> None:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.manifest import ManifestContent

    long_key = "subject-0000000000007-long"  # Iceberg truncates its bounds to 16 characters
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("k", pa.string())])
    table = catalog.create_table("db.t", schema, properties={"write.avro.compression-codec": codec})
    table.append(pa.table({"id": pa.array([424242], pa.int64()), "k": [long_key]}, schema=schema))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64()), "k": ["a", "b"]}, schema=schema))
    table.delete(f"k == '{long_key}'")
    table = catalog.load_table("db.t")

    avro_codec = {"gzip": b"deflate", "zstd": b"zstandard"}.get(codec, codec.encode())
    manifests = list(Path(table.location().removeprefix("file://")).rglob("*.avro"))
    assert manifests and all(avro_codec in m.read_bytes()[:4096] for m in manifests)  # the header
    report = find_residue([table.location()], [long_key, 424242, 4242])
    k_id, id_id = table.schema().find_field("k").field_id, table.schema().find_field("id").field_id
    # Oracle: pyiceberg reads every manifest of every snapshot, deleted entries included.
    want_k, want_id = set(), set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            if manifest.content != ManifestContent.DATA:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                lower = entry.data_file.lower_bounds or {}
                if lower.get(k_id) == long_key[:16].encode():
                    want_k.add(manifest.manifest_path)
                if lower.get(id_id) == struct.pack("<q", 424242):
                    want_id.add(manifest.manifest_path)
    assert want_k and want_k == want_id
    bounds_k = {h.path for h in report.hits if h.value_number == 0 and "lower_bounds" in h.location}
    bounds_id = {h.path for h in report.hits if h.value_number == 1 and "lower_bounds" in h.location}
    assert bounds_k == want_k and bounds_id == want_id
    assert all(
        h.decoder == "avro" and h.location.endswith("(bound truncated to 16)")
        for h in report.hits
        if h.value_number == 0 and "bounds" in h.location
    )
    # The data file of the first append still holds both values; 4242 is nowhere.
    assert any(
        h.decoder == "parquet" and h.location == "row group 0 column k"
        for h in report.hits
        if h.value_number == 0
    )
    assert not [h for h in report.hits if h.value_number == 2]
    assert report.files_by_decoder["avro"] == len(
        list(Path(table.location().removeprefix("file://")).rglob("*.avro"))
    )


# --------------------------------------------------------------------------- lakehouse-index side-car


def test_index_files_and_log(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows(30))
    t = li.open_table(str(path))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    t.create_index(li.CoveringIndex("cov", indexed="n", included=["k"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip", columns=["n"]))
    write_deltalake(str(path), rows(3), mode="append")
    t.refresh_index("by_k")
    # 12: the index rows' _row reaches 29, but no key, id or n is 12.
    report = find_residue([str(path)], [SUBJECT, 6000, 12])
    index_root = path / "_lakehouse_index"
    holders = {
        str(p.relative_to(path))
        for p in index_root.rglob("*.parquet")
        if SUBJECT in json.dumps(pq.read_table(p).to_pylist(), default=str)
    }
    assert {rel.split("/")[1] for rel in holders} == {"by_k", "cov"}
    got_k = {(p, loc) for p, d, loc in hits_of(report, 0) if p.startswith("_lakehouse_index/")}
    for rel in holders:
        assert (rel, "row group 0 column k") in got_k
    # The index log records per-file key bounds: SUBJECT is the smallest key of by_k.
    logs = sorted((index_root / "by_k" / "_log").glob("*.json"))
    with_bounds = [p for p in logs if SUBJECT in json.dumps(json.loads(p.read_text()).get("content"))]
    assert with_bounds
    for p in with_bounds:
        assert any(rel == str(p.relative_to(path)) and ".minKey[0]" in loc for rel, loc in got_k), p
    # The covering index (bucket folders) and the skipping index hold 6000 as n.
    n_holders = {p for p, d, loc in hits_of(report, 1) if p.startswith("_lakehouse_index/")}
    assert {rel.split("/")[1] for rel in n_holders} == {"cov", "skip"}
    assert any(
        "column n.min" in loc or "column n.values" in loc for p, d, loc in hits_of(report, 1) if "/skip/" in p
    )
    # _row, _file_id, _version, sizes and counts never match 12.
    assert hits_of(report, 2) == set()


# --------------------------------------------------------------------------- formats by content


def _puffin(blobs: list[tuple[bytes, str | None]], footer_lz4: bool) -> bytes:
    """A Puffin file as the spec lays it out: magic, blobs, footer (magic, JSON, size, flags, magic)."""
    out = bytearray(b"PFA1")
    meta = []
    for body, codec in blobs:
        stored = body
        if codec is not None:
            stored = pa.compress(body, codec={"zstd": "zstd", "lz4": "lz4"}[codec], asbytes=True)
        entry: dict[str, Any] = {
            "type": "test-blob-v1",
            "fields": [1],
            "snapshot-id": 1,
            "sequence-number": 1,
            "offset": len(out),
            "length": len(stored),
        }
        if codec is not None:
            entry["compression-codec"] = codec
        meta.append(entry)
        out += stored
    payload = json.dumps({"blobs": meta, "properties": {"created-by": "test"}}).encode()
    if footer_lz4:
        payload = pa.compress(payload, codec="lz4", asbytes=True)
    out += b"PFA1" + payload + struct.pack("<ii", len(payload), 1 if footer_lz4 else 0) + b"PFA1"
    return bytes(out)


def test_formats_by_content(tmp_path: Path) -> None:
    from pyiceberg.table.puffin import PuffinFile

    root = tmp_path / "t"
    root.mkdir()
    secret = f"name: {SUBJECT}; "
    zstd_blob = (secret * 50).encode()
    plain_blob = b"\x00\x01" + SUBJECT.encode() + b"\x00"
    puffin = _puffin([(zstd_blob, "zstd"), (plain_blob, None)], footer_lz4=False)
    assert PuffinFile(puffin).get_blob_payload(PuffinFile(puffin).footer.blobs[0]) == zstd_blob  # the oracle
    (root / "stats.bin").write_bytes(puffin)  # no telling extension
    (root / "lz4footer.puffin").write_bytes(_puffin([(zstd_blob, "lz4")], footer_lz4=True))
    doc = '{"a": [{"b": "SUBJECT"}], "c": 12, "price": 0.10, "other": 0.1000001}'.replace("SUBJECT", SUBJECT)
    (root / "doc.dat").write_bytes(gzip.compress(doc.encode()))
    ndjson = "\n".join(json.dumps({"x": {"when": "2024-01-02T03:04:05.000Z"}, "n": i}) for i in range(3))
    (root / "log").write_bytes(pa.compress(ndjson.encode(), codec="zstd", asbytes=True))
    (root / "raw.bin").write_bytes(b"\x00\xff" + SUBJECT.encode() + b"\x01\x02")
    (root / "notes.txt").write_text(f"erase {SUBJECT}, keep {SUBJECT}0")
    orc_table = pa.table({"k": [SUBJECT, "x"], "n": pa.array([12, 13], pa.int64())})
    pyarrow.orc.write_table(orc_table, root / "part-0.orc", compression="zstd")
    (root / "ORCHESTRA.txt").write_text(f"ORC is not this: {SUBJECT}")
    # One string holding two values, another only the second: each value at each place.
    (root / "two.json").write_text(json.dumps({"x": f"{SUBJECT} and subject-8", "y": "subject-8"}))
    values: list[object] = [
        SUBJECT,
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
        12,
        decimal.Decimal("0.1"),
        0.1,
        "subject-8",
    ]
    report = find_residue([root.as_uri()], values)
    got = {
        (h.path.rsplit("/", 1)[-1], h.decoder, h.location.split(" at byte")[0], h.value_number)
        for h in report.hits
    }
    assert ("stats.bin", "puffin", "blob 0 (test-blob-v1)", 0) in got
    assert ("stats.bin", "puffin", "blob 1 (test-blob-v1)", 0) in got
    assert ("lz4footer.puffin", "puffin", "blob 0 (test-blob-v1)", 0) in got
    assert ("doc.dat", "gzip/json", "$.a[0].b", 0) in got
    assert ("doc.dat", "gzip/json", "$.c", 2) in got  # a plain JSON file: numbers are data
    # 0.10 in JSON is the Decimal 0.1 and the float 0.1 (exactly, not 0.1000001).
    assert {(loc, n) for name, _, loc, n in got if name == "doc.dat" and n in (3, 4)} == {
        ("$.price", 3),
        ("$.price", 4),
    }
    assert ("log", "zstd/ndjson", "line 1: $.x.when", 1) in got
    assert ("raw.bin", "raw", "bytes", 0) in got
    assert ("notes.txt", "text", "text", 0) in got
    assert {(loc, n) for name, _, loc, n in got if name == "part-0.orc"} == {
        ("stripe 0 column k", 0),
        ("stripe 0 column n", 2),
    }
    assert ("ORCHESTRA.txt", "text", "text", 0) in got
    assert {(loc, n) for name, _, loc, n in got if name == "two.json"} == {("$.x", 0), ("$.x", 5), ("$.y", 5)}
    assert report.files_by_decoder == {
        "puffin": 2,
        "gzip/json": 1,
        "zstd/ndjson": 1,
        "raw": 1,
        "text": 2,
        "json": 1,
        "orc": 1,
    }
    assert report.unreadable == ()
    # The Puffin blob's offset is where the value is in the decompressed blob.
    (offset,) = [
        int(h.location.rsplit(" ", 1)[-1])
        for h in report.hits
        if h.location.startswith("blob 1") and "stats.bin" in h.path
    ]
    assert plain_blob[offset:].startswith(SUBJECT.encode())


def test_parquet_nested_stats_and_metadata(tmp_path: Path) -> None:
    """Nested columns leaf by leaf, typed values of every kind, key-value metadata."""
    root = tmp_path / "t"
    root.mkdir()
    day = dt.date(2021, 5, 6)
    when = dt.datetime(2021, 5, 6, 7, 8, 9, 123000)
    table = pa.table(
        {
            "s": pa.array(
                [{"a": [SUBJECT], "m": [("k", day)]}],
                pa.struct([("a", pa.list_(pa.string())), ("m", pa.map_(pa.string(), pa.date32()))]),
            ),
            "ts": pa.array([when], pa.timestamp("ms")),
            "d": pa.array([decimal.Decimal("12.50")], pa.decimal128(6, 2)),
            "b": pa.array([b"\x01\x02\x03\x04\x05"], pa.binary()),
            "note": [f"call {SUBJECT} back"],
        }
    ).replace_schema_metadata({"origin": json.dumps({"who": SUBJECT})})
    pq.write_table(table, root / "x.parquet", compression="zstd", use_dictionary=True, write_page_index=True)
    values: list[object] = [SUBJECT, day, when, decimal.Decimal("12.5"), b"\x01\x02\x03\x04\x05", 13]
    report = find_residue([str(root)], values)
    locations = {(h.location.split(" at byte")[0], h.value_number) for h in report.hits}
    assert ("row group 0 column s.a", 0) in locations
    assert ("row group 0 column s.m.value", 1) in locations
    assert ("row group 0 column ts", 2) in locations
    assert ("row group 0 column d", 3) in locations
    assert ("row group 0 column b", 4) in locations
    assert ("key-value metadata origin (json).who", 0) in locations
    assert ("row group 0 column s.a.list.element statistics min", 0) in locations
    # A typed string column matches by equality; free text inside it is found in its pages.
    assert ("row group 0 column note", 0) not in locations
    assert ("row group 0 column note pages (uncompressed)", 0) in locations
    assert not [h for h in report.hits if h.value_number == 5]


# --------------------------------------------------------------------------- the report


def test_never_held_values_and_plaintext_free_report(delta_table: Path) -> None:
    t = li.open_table(str(delta_table))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    absent: list[object] = ["subject-77", "bject-7", 7, dt.date(1999, 1, 1), b"\xde\xad\xbe\xef"]
    clean = find_residue([str(delta_table)], absent)
    assert clean.ok and clean.hits == () and clean.unreadable == ()
    assert clean.files_checked > 10

    # A report full of hits never spells the values: not in JSON, not in repr.
    values: list[object] = [SUBJECT, "subject-8", 6000]
    report = find_residue([str(delta_table)], values)
    assert {h.value_number for h in report.hits} == {0, 1, 2}
    text = json.dumps(report.to_json()) + repr(report)
    assert SUBJECT not in text and "subject-8" not in text
    # 6000 as a value: file names (random UUIDs), byte offsets and sizes can hold those digits
    # (a CI run's report did), so they are left out of the check.
    for hit in report.hits:
        text = text.replace(hit.path, "")
    assert re.search(r"\b6000\b", re.sub(r"(at byte |bytes_?[cC]hecked\W+)\d+", "", text)) is None
    assert json.loads(json.dumps(report.to_json()))["ok"] is False


def test_partitioned_report_redacts_paths(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows(4), partition_by=["k"])
    report = find_residue([str(path)], [SUBJECT])
    assert report.hits
    assert SUBJECT not in json.dumps(report.to_json())
    assert any("k=<value #0>" in h.path for h in report.hits)


def test_progress_and_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows(3))
    seen: list[tuple[int, int]] = []
    report = find_residue([str(path)], [SUBJECT], progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, report.files_checked) for i in range(1, report.files_checked + 1)]
    with pytest.raises(ValueError, match="at least one value"):
        find_residue([str(path)], [])
    with pytest.raises(ValueError, match="#1"):
        find_residue([str(path)], [SUBJECT, None])
    with pytest.raises(TypeError, match="#0") as bad:
        find_residue([str(path)], [object()])
    assert SUBJECT not in str(bad.value)
    with pytest.raises(FileNotFoundError):
        find_residue([str(tmp_path / "missing")], [SUBJECT])


def test_undecodable_file_is_not_ok(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    (root / "broken.parquet").write_bytes(b"PAR1\x00" + SUBJECT.encode() + b"\x00" * 8 + b"PAR1")
    report = find_residue([str(root)], [SUBJECT])
    assert report.unreadable == ((root / "broken.parquet").as_uri(),)
    assert not report.ok
    assert [(h.decoder, h.location.split(" at byte")[0]) for h in report.hits] == [("raw", "bytes")]


def test_s3_root_equals_local(tmp_path: Path) -> None:
    """The same table on S3 (moto on loopback, read through lakehouse_index.io) gives the same
    hits as the local copy, partition folders (implicit on S3) included."""
    from lakehouse_index.io import Storage
    from tests.support.moto import moto_s3, s3_client

    delta_table = tmp_path / "t"
    write_deltalake(str(delta_table), rows(9), partition_by=["k"])
    DeltaTable(str(delta_table)).delete(f"k = '{SUBJECT}'")
    values: list[object] = [SUBJECT, "subject-9", 6000]
    local = find_residue([str(delta_table)], values)
    with moto_s3("residue") as options:
        client: Any = s3_client(options)
        for p in delta_table.rglob("*"):
            if p.is_file():
                key = f"t/{p.relative_to(delta_table)}"
                client.put_object(Bucket="residue", Key=key, Body=p.read_bytes())
        remote = find_residue(["s3://residue/t"], values, storage=Storage.for_uri("s3://residue/t", options))

    def relative(report: ResidueReport, root: str) -> set[tuple[str, str, str, int]]:
        return {(h.path.removeprefix(root), h.decoder, h.location, h.value_number) for h in report.hits}

    assert any(h.decoder == "path" for h in local.hits)
    assert relative(remote, "s3://residue/t") == relative(local, delta_table.as_uri())
    assert (remote.files_checked, remote.bytes_checked) == (local.files_checked, local.bytes_checked)
    assert remote.files_by_decoder == local.files_by_decoder


def test_bookkeeping_numbers_are_not_hits(delta_table: Path, tmp_path: Path) -> None:
    """Small integers are everywhere in the formats' own metadata (versions, counts, sizes,
    field ids, row addresses, bucket folders): none of them is a hit when the data never held
    them, in Delta (CDF, DELETE, checkpoint, secondary/covering/skipping indexes) or Iceberg."""
    from pyiceberg.catalog.sql import SqlCatalog

    t = li.open_table(str(delta_table))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    t.create_index(li.CoveringIndex("cov", indexed="n", included=["k"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip", columns=["n"]))
    write_deltalake(str(delta_table), rows(3), mode="append")
    t.refresh_index("by_k")
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=(tmp_path / "wh").as_uri())
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("d", pa.date32())])
    iceberg = catalog.create_table("db.t", schema)
    for i in range(3):
        iceberg.append(
            pa.table({"id": pa.array([1000 + i], pa.int64()), "d": [dt.date(2020, 1, 1 + i)]}, schema=schema)
        )
    iceberg.delete("id == 1000")
    small: list[object] = list(range(40))
    for root in (str(delta_table), catalog.load_table("db.t").location()):
        assert find_residue([root], small).hits == ()
    # Positive control: a number the data holds is found, in data and index files alike.
    found = find_residue([str(delta_table)], [1001])
    assert {h.path.split("/t/", 1)[1].split("/")[0] for h in found.hits} >= {"_lakehouse_index"}
    assert any(h.decoder == "parquet" and h.location == "row group 0 column id" for h in found.hits)


@pytest.fixture(scope="module")
def spark_warehouse(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The run's Spark session with a Hadoop Iceberg catalog ``residue`` on a fresh warehouse."""
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("residue_wh")
    return spark_session(wh, catalog="residue"), wh


@pytest.mark.spark
@pytest.mark.iceberg_spark
@pytest.mark.parametrize("version", [2, 3])
def test_iceberg_spark_row_level_deletes(spark_warehouse: tuple[Any, Path], version: int) -> None:
    """Spark merge-on-read DELETE: v2 writes position-delete Parquet files, v3 Puffin deletion
    vectors. The deleted rows stay in the data files (found, typed); the delete files hold
    positions only (decoded, no hit); small integers in Java-written metadata never hit."""
    from pyiceberg.table import StaticTable

    session, wh = spark_warehouse
    table = f"residue.db.t{version}"
    session.sql(
        f"CREATE TABLE {table} (id BIGINT, k STRING) USING iceberg TBLPROPERTIES "
        f"('format-version'='{version}', 'write.delete.mode'='merge-on-read')"
    )
    session.sql(
        f"INSERT INTO {table} SELECT id + 1000, concat('subject-', CAST(id % 9 AS STRING)) FROM range(60)"
    )
    session.sql(f"DELETE FROM {table} WHERE k = '{SUBJECT}'")
    location = wh / "db" / f"t{version}"
    (metadata,) = sorted((location / "metadata").glob("v*.metadata.json"))[-1:]
    live = StaticTable.from_metadata(str(metadata)).scan().to_arrow().column("k").to_pylist()
    assert SUBJECT not in live and "subject-8" in live  # pyiceberg applies the deletes
    report = find_residue([location.as_uri()], [SUBJECT, *range(40)])
    delete_kind = "puffin" if version == 3 else "parquet"
    delete_files = [
        p
        for p in location.rglob("*")
        if p.is_file() and (p.suffix == ".puffin" or (version == 2 and "-deletes" in p.name))
    ]
    assert delete_files
    data_holders = {
        p.as_uri()
        for p in (location / "data").rglob("*.parquet")
        if p not in delete_files and SUBJECT in pq.read_table(p).column("k").to_pylist()
    }
    hit_files = {h.path for h in report.hits if h.value_number == 0 and h.decoder == "parquet"}
    assert data_holders and hit_files == data_holders
    assert not {h.path for h in report.hits} & {p.as_uri() for p in delete_files}
    assert report.files_by_decoder.get(delete_kind, 0) >= (len(delete_files) if version == 3 else 1)
    assert [h for h in report.hits if h.value_number > 0] == []
    assert report.unreadable == ()


def test_after_an_erase_with_purge_nothing_is_found(tmp_path: Path) -> None:
    """The erase workflow's own output (rewritten files, purged history, rewritten indexes,
    its commitInfo, audit and purge records) holds neither the erased keys nor anything the
    scan mistakes for them; before the erase the same scan finds the keys."""
    path = tmp_path / "t"
    write_deltalake(str(path), rows(30), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(str(path), rows(6), mode="append")
    t = li.open_table(str(path))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    t.create_index(li.SecondaryIndex("by_n", key="n", record_key="id"))
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["n"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip", columns=["k", "n"]))
    values: list[object] = [SUBJECT, 6000, 9000, *range(40)]
    before = find_residue([str(path)], values)
    assert {0, 1, 2} <= {h.value_number for h in before.hits}
    first = t.erase("by_k", [SUBJECT], purge=True, force=True)
    second = t.erase("by_n", [6000, 9000], purge=True, force=True)
    assert first.verification is not None and first.verification["ok"]
    assert second.verification is not None and second.verification["ok"]
    assert list((path / "_lakehouse_index" / "_erasure").rglob("*.json"))  # audit and purge records
    after = find_residue([str(path)], values)
    assert after.ok, after.hits
    # The erasure's records are checked for strings: a key written there in plain text is found.
    leak = path / "_lakehouse_index" / "_erasure" / "audit" / "leak.json"
    leak.write_text(json.dumps({"rowsErased": 12, "note": f"erased {SUBJECT}"}))
    leaked = find_residue([str(path)], values)
    assert [(h.path, h.location, h.value_number) for h in leaked.hits] == [(leak.as_uri(), "$.note", 0)]


@pytest.mark.parametrize("compression", ["NONE", "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_parquet_pages_every_codec(tmp_path: Path, compression: str, page_version: str) -> None:
    """Free text inside a string column is found in its decompressed pages (or, uncompressed,
    in the file bytes) whatever the codec and data page version; dictionary pages too."""
    path = tmp_path / "x.parquet"
    notes = [f"row {i}: call {SUBJECT} back" if i == 777 else f"row {i}" for i in range(2000)]
    table = pa.table({"note": notes, "tag": [f"t{i % 3}" for i in range(2000)]})
    pq.write_table(table, path, compression=compression, data_page_version=page_version, data_page_size=1024)
    # pyarrow writes LZ4_RAW for "LZ4" and reports it as "LZ4".
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == (
        "UNCOMPRESSED" if compression == "NONE" else compression
    )
    report = find_residue([str(path)], [SUBJECT, "t2"])
    places = {(h.location.split(" at byte")[0], h.value_number) for h in report.hits}
    if compression == "NONE":
        assert ("file bytes", 0) in places
    else:
        assert ("row group 0 column note pages (uncompressed)", 0) in places
    assert ("row group 0 column note", 0) not in places  # typed: no string is the value
    assert ("row group 0 column tag", 1) in places  # equality, from the dictionary-encoded column
    assert report.unreadable == ()
