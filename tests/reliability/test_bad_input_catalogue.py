"""The bad-input catalogue of docs/RELIABILITY.md: each row is a test here (or names the one
elsewhere). Every test feeds one kind of bad input to an indexed table through the public
API and asserts the error, then that nothing changed: every file under the table root
(table log, data, ``_lakehouse_index``) byte-identical, compared by SHA-256, or, for the
faults that strike mid-write, the last stable index state unchanged and answering like
the oracle (deltalake / pyiceberg / pyarrow).

Indexes are small, so they are built and refreshed in process (no Spark).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakehouse_index as li
from lakehouse_index.errors import IndexLogError, TableFormatError, UnsupportedFeatureError

INDEX = "by_k"


# --------------------------------------------------------------------------- helpers


def tree(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (relative path → digest)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@contextlib.contextmanager
def unchanged(root: Path) -> Iterator[None]:
    """The block leaves every file under ``root`` byte-identical."""
    before = tree(root)
    yield
    assert tree(root) == before


@contextlib.contextmanager
def rolled_back(path: Path) -> Iterator[None]:
    """For failures found inside an operation's body (after its transient entry): the table
    and the index data byte-identical, and the log grown only by the operation's transient
    entries and the entries restoring the previous stable state, field for field."""
    index = path / "_lakehouse_index" / INDEX
    outside = {k: v for k, v in tree(path).items() if not k.startswith("_lakehouse_index/")}
    data = tree(index / "data")
    log_before = tree(index / "_log")
    stable = _snapshot_fields(_latest_stable(index / "_log"))
    yield
    assert {k: v for k, v in tree(path).items() if not k.startswith("_lakehouse_index/")} == outside
    assert tree(index / "data") == data
    log_after = tree(index / "_log")
    assert all(log_after[k] == v for k, v in log_before.items())
    for name in sorted(set(log_after) - set(log_before)):
        entry = json.loads((index / "_log" / name).read_bytes())
        if entry["state"] == "ACTIVE":
            assert _snapshot_fields(entry) == stable
        else:
            assert entry["state"] in ("REFRESHING", "OPTIMIZING"), entry["state"]
    assert _snapshot_fields(_latest_stable(index / "_log")) == stable


def _snapshot_fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("state", "spec", "source", "content", "pending")}


def _latest_stable(log_dir: Path) -> dict[str, Any]:
    entries = [json.loads(p.read_bytes()) for p in sorted(log_dir.glob("*.json"))]
    return next(e for e in reversed(entries) if e["state"] in ("ACTIVE", "DELETED"))


def batch(b: int, keys: list[Any] | None = None, key_type: pa.DataType | None = None) -> pa.Table:
    key_type = key_type or pa.string()
    keys = keys if keys is not None else [f"k{(b + i) % 5}" if i % 7 else None for i in range(20)]
    return pa.table(
        {"id": pa.array([b * 1000 + i for i in range(len(keys))], pa.int64()), "k": pa.array(keys, key_type)}
    )


def delta_table(path: Path, batches: int = 3, **kw: Any) -> li.Table:
    """A Delta table of ``batches`` appends, with the secondary index ``by_k`` on ``k`` built."""
    for b in range(batches):
        deltalake.write_deltalake(str(path), batch(b, **kw), mode="append")
    t = li.open_table(str(path))
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))
    return t


def answers(t: li.Table, keys: list[Any]) -> Counter[tuple[Any, int]]:
    """(k, id) of the index's lookup of ``keys`` (NaN as the string 'nan', comparable)."""
    got = t.lookup(INDEX, keys, columns=["k", "id"]).to_pylist()
    return Counter((_comparable(r["k"]), r["id"]) for r in got)


def delta_oracle(path: Path, keys: list[Any]) -> Counter[tuple[Any, int]]:
    """The same, from deltalake's read of the latest version (null keys match null)."""
    wanted = {_comparable(k) for k in keys}
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["k", "id"]).to_pylist()
    return Counter((_comparable(r["k"]), r["id"]) for r in rows if _comparable(r["k"]) in wanted)


def _comparable(v: Any) -> Any:
    return "nan" if isinstance(v, float) and math.isnan(v) else v


def commit_file(path: Path, v: int) -> Path:
    return path / "_delta_log" / f"{v:020d}.json"


def append_and_corrupt(path: Path, corrupt: Any) -> None:
    """One more commit, then ``corrupt(commit_file)`` on it."""
    deltalake.write_deltalake(str(path), batch(9), mode="append")
    corrupt(commit_file(path, deltalake.DeltaTable(str(path)).version()))


# --------------------------------------------------------------------------- table logs: Delta


@pytest.mark.parametrize(
    ("corrupt", "error", "match"),
    [
        (lambda f: f.write_bytes(f.read_bytes()[:-20]), TableFormatError, "is not valid JSON"),
        (lambda f: f.write_bytes(b"\x00\xff garbage\n"), TableFormatError, "not UTF-8|not valid JSON"),
        (lambda f: f.write_text('{"add": 5}\n'), TableFormatError, "not a JSON object"),
        (
            lambda f: f.write_text('{"add": {"path": "../../x.parquet", "size": 1}}\n'),
            TableFormatError,
            "leaves",
        ),
    ],
    ids=["truncated", "garbage", "add-not-object", "path-escape"],
)
def test_delta_corrupt_commit(tmp_path: Path, corrupt: Any, error: type[Exception], match: str) -> None:
    path = tmp_path / "t"
    t = delta_table(path)
    append_and_corrupt(path, corrupt)
    with unchanged(path):
        for mode in ("incremental", "full", "quick"):
            with pytest.raises(error, match=match):
                t.refresh_index(INDEX, mode)
        with pytest.raises(error, match=match):
            t.lookup(INDEX, ["k1"])
        with pytest.raises(error, match=match):
            li.open_table(str(path)).lookup(INDEX, ["k1"])


def test_delta_missing_commit(tmp_path: Path) -> None:
    """A hole in the history (commit 3 gone, no checkpoint covers it) is refused by a fresh
    open. A ``Table`` opened before keeps answering the last version it saw (it finds new
    commits by probing upward from it, and 3 is missing)."""
    path = tmp_path / "t"
    delta_table(path)
    deltalake.write_deltalake(str(path), batch(9), mode="append")
    deltalake.write_deltalake(str(path), batch(10), mode="append")
    commit_file(path, 3).unlink()
    with unchanged(path):
        for mode in ("incremental", "full", "quick"):
            with pytest.raises(TableFormatError, match=f"gap in the Delta log.*{commit_file(path, 3).name}"):
                li.open_table(str(path)).refresh_index(INDEX, mode)
        with pytest.raises(TableFormatError, match="gap in the Delta log"):
            li.open_table(str(path)).lookup(INDEX, ["k1"])


# --------------------------------------------------------------------------- table logs: Iceberg


@pytest.fixture
def iceberg(tmp_path: Path) -> tuple[Any, li.Table]:
    """A pyiceberg table (SQLite catalog) of two appends, indexed by path."""
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog("bad", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    first = batch(0)
    table = cat.create_table("db.t", first.schema)
    table.append(first)
    table.append(batch(1))
    t = li.open_table(table.location())
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))
    return cat.load_table("db.t"), t


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def test_iceberg_corrupt_metadata_and_manifests(iceberg: tuple[Any, li.Table]) -> None:
    table, t = iceberg
    table.append(batch(2))
    table = table.refresh()
    root = _local(table.location())
    snap = table.current_snapshot()
    manifest_list = _local(snap.manifest_list)
    manifest = _local(snap.manifests(table.io)[0].manifest_path)
    metadata = _local(table.metadata_location)
    cases = [
        (manifest_list, lambda b: b[: len(b) // 2], "manifest list"),
        (manifest_list, None, "manifest list"),  # missing
        (manifest, lambda b: b[:40] + bytes(len(b) - 40), "manifest"),
        (manifest, None, "missing"),
        (metadata, lambda b: b[: len(b) // 2], metadata.name),
    ]
    for f, corrupt, match in cases:
        original = f.read_bytes()
        if corrupt is None:
            f.unlink()
        else:
            f.write_bytes(corrupt(original))
        with unchanged(root):
            for mode in ("incremental", "full", "quick"):
                with pytest.raises(TableFormatError, match=match):
                    li.open_table(table.location()).refresh_index(INDEX, mode)
        f.write_bytes(original)
    # Restored: the index catches up and answers like pyiceberg.
    t = li.open_table(table.location())
    t.refresh_index(INDEX, "incremental")
    rows = table.scan().to_arrow().to_pylist()
    assert answers(t, ["k1", None]) == Counter((r["k"], r["id"]) for r in rows if r["k"] in ("k1", None))


# --------------------------------------------------------------------------- data and DV files


def test_missing_data_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = delta_table(path)
    deltalake.write_deltalake(str(path), batch(9), mode="append")
    (gone,) = set(deltalake.DeltaTable(str(path)).file_uris()) - set(
        deltalake.DeltaTable(str(path), version=2).file_uris()
    )
    Path(gone.removeprefix("file://")).unlink()
    with rolled_back(path):
        for mode in ("incremental", "full"):
            with pytest.raises(TableFormatError, match="missing"):
                t.refresh_index(INDEX, mode)
        # The quick refresh records the new file without reading it; the lookup must scan it.
        with pytest.raises(TableFormatError, match="missing"):
            t.lookup(INDEX, ["k1"])
    # A covered file gone: lookups that need its rows fail naming it.
    first = sorted(deltalake.DeltaTable(str(path), version=0).file_uris())[0]
    Path(first.removeprefix("file://")).unlink()
    with unchanged(path), pytest.raises(TableFormatError, match="missing"):
        t.lookup(INDEX, ["k0", "k1", "k2", "k3", "k4"])


def _dv_commit(path: Path) -> Path:
    """A hand-written commit putting a deletion vector (rows 0 and 2) on the first data file
    (deltalake writes none); returns the DV file."""
    import struct
    import uuid
    import zlib

    from lakehouse_index_delta.deletion_vectors import PORTABLE_MAGIC, z85_encode
    from pyroaring import BitMap64

    log = [json.loads(x) for x in commit_file(path, 0).read_text().splitlines()]
    add = next(a["add"] for a in log if "add" in a)
    payload = struct.pack("<i", PORTABLE_MAGIC) + BitMap64([0, 2]).serialize()
    file_id = uuid.uuid4()
    dv_file = path / f"deletion_vector_{file_id}.bin"
    dv_file.write_bytes(
        b"\x01" + struct.pack(">i", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    )
    dv = {
        "storageType": "u",
        "pathOrInlineDv": z85_encode(file_id.bytes),
        "offset": 1,
        "sizeInBytes": len(payload),
        "cardinality": 2,
    }
    version = deltalake.DeltaTable(str(path)).version() + 1
    actions = [
        {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "DELETE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        },
        {"remove": {"path": add["path"], "dataChange": True, "deletionTimestamp": 1}},
        {"add": {**add, "deletionVector": dv, "dataChange": True}},
    ]
    commit_file(path, version).write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    return dv_file


def test_missing_or_corrupt_deletion_vector_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = delta_table(path)
    dv_file = _dv_commit(path)
    original = dv_file.read_bytes()
    for corrupt, match in (
        (None, "missing"),
        (original[:-3], "past the end"),
        (original[:-1] + b"\x00", "CRC"),
    ):
        if corrupt is None:
            dv_file.unlink()
        else:
            dv_file.write_bytes(corrupt)
        with rolled_back(path):
            for mode in ("incremental", "full"):
                with pytest.raises(TableFormatError, match=match):
                    li.open_table(str(path)).refresh_index(INDEX, mode)
            with pytest.raises(TableFormatError, match=match):
                li.open_table(str(path)).lookup(INDEX, ["k1"])
        dv_file.write_bytes(original)
    # Intact again: the deleted rows are gone from the answers (deltalake's scan is the oracle).
    t = li.open_table(str(path))
    t.refresh_index(INDEX, "incremental")
    dt = deltalake.DeltaTable(str(path))
    live = pa.RecordBatchReader.from_stream(dt.scan()).read_all().to_pylist()
    keys = ["k0", "k1", "k2", "k3", "k4", None]
    assert answers(t, keys) == Counter((r["k"], r["id"]) for r in live if r["k"] in keys)


# --------------------------------------------------------------------------- schema evolution


def test_iceberg_rename_drop_and_widen_the_key(tmp_path: Path) -> None:
    """Iceberg schema evolution of the indexed column (pyiceberg): widening int → long keeps
    answering like pyiceberg; a rename or a drop is refused by name and changes nothing."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.types import LongType

    cat = SqlCatalog("evo", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    data = batch(0, keys=[i % 4 for i in range(20)], key_type=pa.int32())
    table = cat.create_table("db.t", data.schema)
    table.append(data)
    t = li.open_table(table.location())
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))

    with table.update_schema() as u:
        u.update_column("k", LongType())
    table = cat.load_table("db.t")
    table.append(batch(1, keys=[2**40 + i % 3 for i in range(20)], key_type=pa.int64()))
    table = cat.load_table("db.t")
    t = li.open_table(table.location())
    t.refresh_index(INDEX, "incremental")
    rows = table.scan().to_arrow().to_pylist()
    keys = [1, 2**40 + 1]
    assert answers(t, keys) == Counter((r["k"], r["id"]) for r in rows if r["k"] in keys)

    root = _local(table.location())
    with table.update_schema() as u:
        u.rename_column("k", "k2")
    table = cat.load_table("db.t")
    table.append(table.scan().to_arrow().slice(0, 3))
    with unchanged(root / "_lakehouse_index"):
        for mode in ("incremental", "full", "quick"):
            with pytest.raises(li.LakehouseIndexError, match="no column 'k'"):
                li.open_table(table.location()).refresh_index(INDEX, mode)
        with pytest.raises(li.LakehouseIndexError, match="no column 'k'"):
            li.open_table(table.location()).lookup(INDEX, [1])

    with table.update_schema() as u:
        u.delete_column("k2")
    table = cat.load_table("db.t")
    with unchanged(root / "_lakehouse_index"):
        for mode in ("incremental", "full"):
            with pytest.raises(li.LakehouseIndexError, match="no column 'k'"):
                li.open_table(table.location()).refresh_index(INDEX, mode)


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    ("keys", "key_type", "probe"),
    [
        ([None, "a", None, "b"] * 5, pa.string(), [None, "a"]),
        (["x" * 1_000_000, "y", "x" * 1_000_000 + "z", "y"], pa.string(), ["x" * 1_000_000, "y"]),
        (["é", "日本語", "\U0001f600", "a\x00b", "é"], pa.string(), ["é", "\U0001f600", "a\x00b"]),
        ([b"\x00\xff", b"", b"\x80abc", b"\x00\xff"], pa.binary(), [b"\x00\xff", b""]),
        ([float("nan"), 1.5, -0.0, 0.0, float("nan")], pa.float64(), [float("nan"), 0.0]),
    ],
    ids=["null", "huge-1MB", "unicode", "binary", "nan"],
)
def test_unusual_keys_answer_like_the_oracle(
    tmp_path: Path, keys: list[Any], key_type: pa.DataType, probe: list[Any]
) -> None:
    path = tmp_path / "t"
    t = delta_table(path, batches=2, keys=keys, key_type=key_type)
    deltalake.write_deltalake(str(path), batch(5, keys=keys[::-1], key_type=key_type), mode="append")
    for mode in ("quick", "incremental"):
        assert answers(t, probe) == _key_oracle(path, probe, key_type), mode
        t.refresh_index(INDEX, mode)
    assert answers(t, probe) == _key_oracle(path, probe, key_type)


def _key_oracle(path: Path, probe: list[Any], key_type: pa.DataType) -> Counter[tuple[Any, int]]:
    """Rows whose key equals a probe: NaN matches NaN and -0.0 matches 0.0 (as in Spark SQL)."""
    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table(columns=["k", "id"]).to_pylist()
    wanted = {_comparable(k) for k in probe}
    return Counter((_comparable(r["k"]), r["id"]) for r in rows if _comparable(r["k"]) in wanted)


# --------------------------------------------------------------------------- table features


def test_unknown_delta_reader_feature(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = delta_table(path)
    version = deltalake.DeltaTable(str(path)).version() + 1
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["futureFeatureX"],
        "writerFeatures": ["futureFeatureX"],
    }
    commit_file(path, version).write_text(
        json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000)}})
        + "\n"
        + json.dumps({"protocol": protocol})
        + "\n"
    )
    with unchanged(path):
        for mode in ("incremental", "full", "quick"):
            with pytest.raises(UnsupportedFeatureError, match="futureFeatureX"):
                t.refresh_index(INDEX, mode)
        with pytest.raises(UnsupportedFeatureError, match="futureFeatureX"):
            li.open_table(str(path)).lookup(INDEX, ["k1"])
        with pytest.raises(UnsupportedFeatureError, match="futureFeatureX"):
            li.open_table(str(path)).append(batch(7))


# --------------------------------------------------------------------------- forged index log


def test_forged_index_log_entry_naming_files_outside_the_index(tmp_path: Path) -> None:
    """An entry naming an index data file outside ``data/`` (here: a data file of the table)
    is refused on read; vacuum deletes nothing."""
    path = tmp_path / "t"
    delta_table(path)
    log_dir = path / "_lakehouse_index" / INDEX / "_log"
    latest = sorted(log_dir.glob("*.json"))[-1]
    doc = json.loads(latest.read_bytes())
    victim = sorted(path.glob("*.parquet"))[0]
    doc["id"] += 1
    doc["content"]["files"][0]["path"] = f"data/../../../{victim.name}"
    forged = log_dir / f"{doc['id']:020d}.json"
    forged.write_text(json.dumps(doc))
    with unchanged(path):
        for call in (
            lambda: li.open_table(str(path)).lookup(INDEX, ["k1"]),
            lambda: li.open_table(str(path)).vacuum_index(INDEX, retention_hours=0),
            lambda: li.open_table(str(path)).refresh_index(INDEX, "full"),
        ):
            with pytest.raises(IndexLogError, match="not a relative path under data/"):
                call()
    assert victim.is_file()


# --------------------------------------------------------------------------- permissions and disk


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Run the block as a user without write permission on the index root: as ``nobody``
    (effective ids) when the tests run as root, whom file modes do not stop."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_index_root_without_write_permission() -> None:
    base = Path(tempfile.mkdtemp(prefix="li-perm-"))  # not under pytest's 0700 folder: nobody reads it
    try:
        base.chmod(0o755)
        path = base / "t"
        t = delta_table(path)
        deltalake.write_deltalake(str(path), batch(9), mode="append")
        expected = delta_oracle(path, ["k1", None])
        index_root = path / "_lakehouse_index"
        dirs = [index_root, *[p for p in index_root.rglob("*") if p.is_dir()]]
        for d in dirs:
            d.chmod(0o555)
        with unchanged(path), unprivileged():
            for call in (
                lambda: li.open_table(str(path)).refresh_index(INDEX, "incremental"),
                lambda: li.open_table(str(path)).refresh_index(INDEX, "quick"),
                lambda: li.open_table(str(path)).create_index(li.SecondaryIndex("other", key="k")),
            ):
                with pytest.raises(PermissionError):
                    call()
            # Operations with nothing to do here may succeed without writing (the tree is
            # compared afterwards); any that must write fail the same way.
            for call in (
                lambda: li.open_table(str(path)).optimize_index(INDEX, "full"),
                lambda: li.open_table(str(path)).vacuum_index(INDEX, retention_hours=0),
            ):
                with contextlib.suppress(PermissionError):
                    call()
            # Reads still work, answering the latest table version (hybrid scan).
            assert answers(li.open_table(str(path)), ["k1", None]) == expected
        for d in dirs:
            d.chmod(0o755)
        t.refresh_index(INDEX, "incremental")
        assert answers(t, ["k1", None]) == expected
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def small_disk() -> Iterator[Path]:
    """A 4 MiB tmpfs (mounted for the test; needs root, as CI's container runs)."""
    mount = Path(tempfile.mkdtemp(prefix="li-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=True)
        mount.rmdir()


def _fill(disk: Path, leave: int) -> Path:
    """A file taking all free space of ``disk`` but ``leave`` bytes."""
    filler = disk / "filler"
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as f:
        f.write(b"\x00" * max(0, free - leave))
    return filler


def test_full_disk_mid_write(small_disk: Path) -> None:
    """The disk fills while a refresh writes index data: the error is the OS's ENOSPC, the
    last stable snapshot stays and answers like the oracle, and once space is back the
    operation is cancelled or rerun and vacuum leaves no orphan."""
    path = small_disk / "t"
    t = delta_table(path)
    # Enough new rows that their index file cannot fit in the space left.
    for b in range(10, 13):
        deltalake.write_deltalake(
            str(path), batch(b, keys=[f"key-{b}-{i}" * 40 for i in range(2000)]), mode="append"
        )
    log_dir = path / "_lakehouse_index" / INDEX / "_log"
    stable_before = _latest_stable(log_dir)
    expected = delta_oracle(path, ["k1", "key-11-7" * 40, None])
    filler = _fill(small_disk, leave=48 * 1024)
    with pytest.raises(OSError, match=r"No space left|Errno 28"):
        t.refresh_index(INDEX, "full")
    assert _latest_stable(log_dir) == stable_before
    assert answers(li.open_table(str(path)), ["k1", "key-11-7" * 40, None]) == expected
    filler.unlink()
    t = li.open_table(str(path))
    state = next(i for i in t.indexes() if i.name == INDEX).state
    if state is not li.IndexState.ACTIVE:  # the failure could not even record its rollback
        t.cancel_index(INDEX)
    t.refresh_index(INDEX, "full")
    assert answers(t, ["k1", "key-11-7" * 40, None]) == expected
    t.vacuum_index(INDEX, retention_hours=0)
    named = {f["path"] for f in _latest_stable(log_dir)["content"]["files"]}
    on_disk = {
        str(p.relative_to(log_dir.parent)) for p in (log_dir.parent / "data").rglob("*") if p.is_file()
    }
    assert on_disk == named


# --------------------------------------------------------------------------- clock skew


@pytest.mark.parametrize("skew_s", [-86_400 * 30, 86_400 * 30])
def test_clock_skew_between_writers(tmp_path: Path, skew_s: int) -> None:
    """A writer whose clock is 30 days off: the log orders entries by id, not time, so a
    writer with a true clock reads, refreshes and vacuums (zero retention included) without
    losing what the latest snapshot needs, and answers stay equal to the oracle."""
    path = tmp_path / "t"
    delta_table(path)
    deltalake.write_deltalake(str(path), batch(9), mode="append")
    code = (
        "import time, sys\n"
        f"real = time.time\ntime.time = lambda: real() + {skew_s}\n"
        "import lakehouse_index as li\n"
        f"t = li.open_table({str(path)!r})\n"
        f"t.refresh_index({INDEX!r}, 'incremental')\n"
        f"t.optimize_index({INDEX!r}, 'full')\n"
    )
    from tests.support.paths import code_env

    subprocess.run([os.sys.executable, "-c", code], check=True, env=code_env())
    deltalake.write_deltalake(str(path), batch(10), mode="append")
    t = li.open_table(str(path))
    keys = ["k1", "k3", None]
    assert answers(t, keys) == delta_oracle(path, keys)
    t.refresh_index(INDEX, "incremental")
    t.vacuum_index(INDEX, retention_hours=0)
    assert answers(t, keys) == delta_oracle(path, keys)
    t.vacuum_index(INDEX)
    assert answers(li.open_table(str(path)), keys) == delta_oracle(path, keys)
    # A skewed writer again, after the true one.
    subprocess.run([os.sys.executable, "-c", code], check=True, env=code_env())
    assert answers(li.open_table(str(path)), keys) == delta_oracle(path, keys)


# --------------------------------------------------------------------------- corrupt page index


def test_corrupt_page_index_of_a_data_file(tmp_path: Path) -> None:
    """A data file whose offset index is noise: lookups fall back to whole row-group reads
    and answer like deltalake; nothing is written."""
    import numpy as np

    path = tmp_path / "t"
    n = 12_000
    keys = [f"k{i % 5}" if i % 9 else None for i in range(n)]
    deltalake.write_deltalake(
        str(path),
        pa.table({"id": pa.array(range(n), pa.int64()), "k": pa.array(keys)}),
        writer_properties=deltalake.WriterProperties(data_page_row_count_limit=100, max_row_group_size=n),
    )
    t = li.open_table(str(path))
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))
    (f,) = path.glob("*.parquet")
    md = pq.ParquetFile(f).metadata
    with open(f, "r+b") as out:
        for c in range(md.num_columns):
            col = md.row_group(0).column(c)
            assert col.has_offset_index
            loc = col.to_dict()
            offset, length = loc.get("offset_index_offset"), loc.get("offset_index_length")
            if offset is None:
                continue
            out.seek(offset)
            out.write(np.random.default_rng(c).integers(0, 256, length, dtype=np.uint8).tobytes())
    with unchanged(path):
        t2 = li.open_table(str(path))
        assert answers(t2, ["k1", None]) == delta_oracle(path, ["k1", None])


def test_forged_source_file_path_outside_the_table(tmp_path: Path) -> None:
    """An entry whose file-id map names a Parquet file outside the table: the file is never
    read (covered files are matched against the table's own snapshot), so its rows never
    appear; the real file it replaced is scanned instead."""
    path = tmp_path / "t"
    delta_table(path)
    outside = tmp_path / "elsewhere.parquet"
    pq.write_table(batch(777), outside)
    log_dir = path / "_lakehouse_index" / INDEX / "_log"
    doc = json.loads(sorted(log_dir.glob("*.json"))[-1].read_bytes())
    doc["id"] += 1
    doc["source"]["files"][0]["path"] = f"file://{outside}"
    (log_dir / f"{doc['id']:020d}.json").write_text(json.dumps(doc))
    keys = ["k0", "k1", "k2", "k3", "k4", None]
    with unchanged(path):
        got = answers(li.open_table(str(path)), keys)
    assert got == delta_oracle(path, keys)
    assert not any(i >= 777_000 for _, i in got)


@pytest.mark.parametrize("folder", ["audit", "purges"])
def test_corrupt_erasure_records(tmp_path: Path, folder: str) -> None:
    """A malformed audit or purge record under ``_erasure/`` is an IndexLogError naming it."""
    path = tmp_path / "t"
    t = delta_table(path)
    record = path / "_lakehouse_index" / "_erasure" / folder / "0.json"
    record.parent.mkdir(parents=True)
    for text in (b"{not json", b'{"id": 1}', b"[1, 2]", b"\xff\xfe"):
        record.write_bytes(text)
        with unchanged(path), pytest.raises(IndexLogError, match=r"0\.json"):
            if folder == "audit":
                li.open_table(str(path)).erasures()
            else:  # read when a version is not found, to say whether a purge removed it
                t.lookup(INDEX, ["k1"], version_as_of=99)
