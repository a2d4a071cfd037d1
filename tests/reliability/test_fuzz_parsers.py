"""Fuzzing of every parser of bytes the project does not write itself (or reads back).

Hypothesis feeds each parser mutations of a real file of its format (bits flipped, bytes
set, inserted, deleted, the tail cut), and for JSON formats also structurally mutated
documents (a node of the real document replaced by any JSON value). Every parser must
either return a well-formed result or raise one of our typed errors: never another
exception, a hang (the suite's timeout), or rows that differ from an independent reader.

CI runs ``LAKEHOUSE_INDEX_FUZZ_EXAMPLES`` inputs per target (default 40). The long run,
recorded in docs/RELIABILITY.md::

    LAKEHOUSE_INDEX_FUZZ_EXAMPLES=2000 LAKEHOUSE_INDEX_FUZZ_REPORT=fuzz.json \\
        .venv/bin/python -m pytest -q tests/reliability/test_fuzz_parsers.py

``LAKEHOUSE_INDEX_FUZZ_REPORT`` names a JSON file receiving the inputs tried per target.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import struct
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import DeltaSource
from lakehouse_index_delta.actions import parse_json_lines
from lakehouse_index_delta.deletion_vectors import (
    PORTABLE_MAGIC,
    DeletionVectorDescriptor,
    parse_roaring_bitmap_array,
    read_deletion_vector,
    z85_encode,
)
from lakehouse_index_iceberg.deletes import decode_deletion_vector
from lakehouse_index_iceberg.manifests import read_manifest, read_manifest_list
from pyroaring import BitMap64

from lakehouse_index.errors import IndexLogError, LakehouseIndexError, TableFormatError
from lakehouse_index.io import Storage
from lakehouse_index.log.entry import (
    Content,
    IndexFile,
    IndexState,
    LogEntry,
    Move,
    Operation,
    Pending,
    SourceFile,
    SourceState,
    data_file_path,
)
from lakehouse_index.read import datafiles, footers
from lakehouse_index.read.page_index import PageIndexError, load_page_index
from lakehouse_index.read.page_reads import read_group_rows
from lakehouse_index.spec import SecondaryIndex

EXAMPLES = int(os.environ.get("LAKEHOUSE_INDEX_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
#: Inputs tried per target in this run (reported at the end of the module).
TRIED: Counter[str] = Counter()
#: The slowest single input per target, seconds.
SLOWEST: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    """After the module: every target was fed inputs; the counts go to the report file if asked."""
    yield
    out = os.environ.get("LAKEHOUSE_INDEX_FUZZ_REPORT")
    if out:
        doc = {"examples_setting": EXAMPLES, "tried": dict(TRIED), "slowest_s": SLOWEST}
        Path(out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


class _Timed:
    """Counts one input of ``target`` and records the slowest."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        TRIED[self.target] += 1
        took = time.perf_counter() - self.start
        SLOWEST[self.target] = max(SLOWEST.get(self.target, 0.0), took)


# --------------------------------------------------------------------------- strategies

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, seed: bytes, region: tuple[int, int] | None = None) -> bytes:
    """``seed`` with 1..6 random edits (inside ``region`` when given)."""
    data = bytearray(seed)
    lo, hi = region if region is not None else (0, len(seed))
    for _ in range(draw(st.integers(1, 6))):
        hi = min(hi, len(data))
        if hi <= lo:
            data += draw(st.binary(min_size=1, max_size=8))
            hi = len(data)
            continue
        i = draw(st.integers(lo, hi - 1))
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = (
                draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
                if draw(st.booleans())
                else draw(st.integers(0, 255))
            )
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[i : i + draw(st.integers(1, 16))]
    return bytes(data)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every node's path in a JSON document (the root is ``()``)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def tree_mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with 1..3 nodes replaced by any JSON value (or removed from their object)."""
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            return draw(json_values)
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return doc


# --------------------------------------------------------------------------- seeds


@pytest.fixture(scope="module")
def delta_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "delta"
    for i in range(3):
        deltalake.write_deltalake(str(path), pa.table({"id": [i, i + 10], "s": ["a", None]}), mode="append")
    return path


def _commit(path: Path, v: int) -> Path:
    return path / "_delta_log" / f"{v:020d}.json"


@pytest.fixture(scope="module")
def iceberg_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A pyiceberg table (appends and a copy-on-write delete): its manifest list and manifests."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo

    root = tmp_path_factory.mktemp("fuzz-iceberg")
    cat = SqlCatalog("fuzz", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}")
    cat.create_namespace("db")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]})
    t = cat.create_table("db.t", data.schema)
    t.append(data)
    t.append(data)
    t.delete(EqualTo("id", 2))
    t = cat.load_table("db.t")
    snap = t.current_snapshot()
    storage = Storage.for_uri(str(root))
    manifests = read_manifest_list(storage, snap.manifest_list)
    return {"root": root, "storage": storage, "list": snap.manifest_list, "manifests": manifests}


def _entry() -> LogEntry:
    """A log entry using every field (files, moves, pending changes, key bounds)."""
    sf = SourceFile(7, "file:///t/a.parquet", 100, 5, 10, "dv1", 2, 3, None, (), ("eq.parquet",))
    gone = dataclasses.replace(
        sf, id=8, path="file:///t/b.parquet", removed_ordinal=4, moves=(Move(0, 3, 7, 2),)
    )
    return LogEntry(
        id=3,
        spec=SecondaryIndex("idx", key="k", record_key="id"),
        state=IndexState.ACTIVE,
        operation=Operation.REFRESH_INCREMENTAL,
        source=SourceState("delta", "file:///t", 4, 4, 1_700_000_000_000, (sf, gone), 9),
        content=Content((IndexFile("data/u1/part-0.parquet", 10, 999, min_key=("a",), max_key=("z",)),), 0),
        pending=Pending(5, 5, (dataclasses.replace(sf, id=9),), (8,), ()),
        timestamp_ms=1_700_000_000_001,
        writer="fuzz@host",
        base_id=2,
    )


def _parquet_seed() -> tuple[bytes, pa.Table]:
    """A Parquet file with a page index: 3 row groups, small pages, two columns."""
    n = 3_000
    table = pa.table({"k": [f"k{i % 97}" for i in range(n)], "v": pa.array(range(n), pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=1_000, data_page_size=512, write_page_index=True)
    return sink.getvalue().to_pybytes(), table


PARQUET, PARQUET_TABLE = _parquet_seed()


def _after_data_pages(data: bytes) -> int:
    """Where the last column chunk of a Parquet file ends: the column and offset indexes and
    the footer follow. Edits there leave the data pages intact, so the rows of the intact
    file stay the oracle (an edit inside a data page can decode to other valid values, for
    pyarrow as for us: Parquet pages carry no checksum by default)."""
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    ends = []
    for g in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(g).column(c)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            ends.append(start + col.total_compressed_size)
    return max(ends)


#: The column and offset indexes and the footer.
_FOOTER_REGION = (_after_data_pages(PARQUET), len(PARQUET) - 8)

LOG_ENTRY = _entry().to_json()
BITMAP = struct.pack("<i", PORTABLE_MAGIC) + BitMap64([0, 3, 5, 2**33 + 1, 70_000]).serialize()


def _puffin_blob(positions: list[int]) -> bytes:
    body = bytes.fromhex("D1D33964") + BitMap64(positions).serialize()
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


PUFFIN = _puffin_blob([1, 2, 3, 90_000, 2**40])


# --------------------------------------------------------------------------- Delta


def _json_lines(doc: Any) -> bytes:
    """A commit file of the actions in ``doc`` (one line each), or of ``doc`` itself."""
    return "\n".join(json.dumps(x) for x in (doc if isinstance(doc, list) else [doc])).encode()


@FUZZ
@given(data=st.data())
def test_delta_commit_json(delta_table: Path, data: st.DataObject) -> None:
    seed = _commit(delta_table, 1).read_bytes()
    lines = [json.loads(x) for x in seed.decode().splitlines()]
    raw = data.draw(mutated(seed) | tree_mutated(lines).map(_json_lines))
    with _Timed("delta commit JSON"):
        try:
            actions = parse_json_lines(raw, "file:///t", "fuzz.json")
            for a in actions.adds:  # relative paths never climb out of the table root
                assert not (a.path.startswith("file:///t/") and ".." in a.path.split("/")), a.path
            actions.in_commit_timestamp  # noqa: B018  (parsed on access)
            actions.operation  # noqa: B018
        except LakehouseIndexError:
            pass


@FUZZ
@given(data=st.data())
def test_delta_log_of_a_table(
    delta_table: Path, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    """A table whose commit 1 is fuzzed: opening, snapshots and changes raise typed errors."""
    seed = _commit(delta_table, 1).read_bytes()
    raw = data.draw(mutated(seed))
    path = tmp_path_factory.mktemp("delta-log")
    (path / "_delta_log").mkdir()
    for v in range(3):
        _commit(path, v).write_bytes(raw if v == 1 else _commit(delta_table, v).read_bytes())
    with _Timed("Delta table log"):
        try:
            src = DeltaSource.open(str(path), Storage.for_uri(str(path)))
            snap = src.snapshot()
            list(src.changes(0, snap.version))
        except LakehouseIndexError:
            pass


@FUZZ
@given(raw=mutated(BITMAP) | st.binary(max_size=64))
def test_delta_deletion_vector_bitmap(raw: bytes) -> None:
    with _Timed("Delta DV bitmap"), contextlib.suppress(TableFormatError):
        parse_roaring_bitmap_array(raw, "fuzz")


@FUZZ
@given(data=st.data())
def test_delta_deletion_vector_file(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """A DV file (format byte, size, bitmap, CRC) fuzzed, read through a descriptor."""
    payload = BITMAP
    seed = b"\x01" + struct.pack(">i", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    raw = data.draw(mutated(seed))
    inline = data.draw(st.booleans())
    path = tmp_path_factory.mktemp("dv") / "dv.bin"
    path.write_bytes(raw)
    desc = {
        "storageType": "i" if inline else "p",
        "pathOrInlineDv": z85_encode(raw[: len(raw) - len(raw) % 4]) if inline else str(path),
        "offset": None if inline else data.draw(st.integers(0, 8)),
        "sizeInBytes": data.draw(st.sampled_from([len(payload), len(raw)]) | st.integers(0, 2**31)),
        "cardinality": data.draw(st.sampled_from([5]) | st.integers(0, 2**31)),
    }
    with _Timed("Delta DV file / inline DV"):
        try:
            d = DeletionVectorDescriptor.from_json(desc, "file:///t")
            got = read_deletion_vector(d, Storage.for_uri(str(path)))
            assert len(got) == d.cardinality
        except TableFormatError:
            pass


# --------------------------------------------------------------------------- Iceberg


@FUZZ
@given(data=st.data())
def test_iceberg_manifest_list(iceberg_files: dict[str, Any], data: st.DataObject) -> None:
    storage: Storage = iceberg_files["storage"]
    seed = storage.read_bytes(iceberg_files["list"])
    path = Path(iceberg_files["root"]) / "fuzz-list.avro"
    path.write_bytes(data.draw(mutated(seed)))
    with _Timed("Iceberg manifest list"), contextlib.suppress(TableFormatError):
        read_manifest_list(storage, str(path))


@FUZZ
@given(data=st.data())
def test_iceberg_manifest(iceberg_files: dict[str, Any], data: st.DataObject) -> None:
    storage: Storage = iceberg_files["storage"]
    manifest = data.draw(st.sampled_from(iceberg_files["manifests"]))
    seed = storage.read_bytes(manifest.path)
    path = Path(iceberg_files["root"]) / "fuzz-manifest.avro"
    path.write_bytes(data.draw(mutated(seed)))
    with _Timed("Iceberg manifest"), contextlib.suppress(TableFormatError):
        read_manifest(storage, dataclasses.replace(manifest, path=str(path)))


@FUZZ
@given(raw=mutated(PUFFIN) | st.binary(max_size=64))
def test_iceberg_puffin_deletion_vector(raw: bytes) -> None:
    with _Timed("Iceberg Puffin DV blob"), contextlib.suppress(TableFormatError):
        decode_deletion_vector(raw, "fuzz.puffin")


# --------------------------------------------------------------------------- index log


@FUZZ
@given(raw=mutated(LOG_ENTRY) | tree_mutated(json.loads(LOG_ENTRY)).map(lambda d: json.dumps(d).encode()))
def test_index_log_entry(raw: bytes) -> None:
    with _Timed("index log entry"):
        try:
            entry = LogEntry.from_json(raw, "fuzz.json")
        except IndexLogError:
            return
        assert LogEntry.from_json(entry.to_json()) == entry
        for f in entry.content.files:
            assert data_file_path(f.path) == f.path


# --------------------------------------------------------------------------- Parquet footers


@FUZZ
@given(raw=mutated(PARQUET, _FOOTER_REGION))
def test_parquet_footer_and_page_index(raw: bytes) -> None:
    """The page-index reader decodes the footer and offset indexes itself: fed corrupt ones
    (with the metadata pyarrow read from the intact file), it raises PageIndexError or reads
    exactly the rows pyarrow reads from the intact file."""
    pf = pq.ParquetFile(pa.BufferReader(PARQUET))
    handle = pa.BufferReader(raw)
    with _Timed("Parquet footer (page index reader)"):
        try:
            index = load_page_index(handle, pf.metadata, pf.schema_arrow)
            local = np.array([0, 7, 500, 999], np.int64)
            for group in range(pf.metadata.num_row_groups):
                got = read_group_rows(handle, index, pf.schema_arrow, group, local, ["k", "v"]).table
                want = pf.read_row_group(group).take(pa.array(local))
                for name in got.column_names:
                    assert got.column(name).to_pylist() == want.column(name).to_pylist()
        except PageIndexError:
            pass


@FUZZ
@given(data=st.data())
def test_parquet_data_file_footer(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """A table's data file with a corrupt footer: TableFormatError exactly when pyarrow cannot
    read it, else the rows pyarrow reads."""
    path = tmp_path_factory.mktemp("pq")
    deltalake.write_deltalake(str(path), PARQUET_TABLE)
    src = DeltaSource.open(str(path), Storage.for_uri(str(path)))
    snap = src.snapshot()
    (entry,) = snap.files.values()
    file = entry.path.removeprefix("file://")
    seed = Path(file).read_bytes()
    footer = int.from_bytes(seed[-8:-4], "little")
    Path(file).write_bytes(data.draw(mutated(seed, (len(seed) - 8 - footer, len(seed)))))
    footers.clear_footer_cache()
    try:
        want = pq.read_table(file)
    except Exception:  # pyarrow, the oracle, refuses it: so must we (any error of its own)
        want = None
    with _Timed("Parquet data file footer"):
        try:
            got = datafiles.read_file(src, snap, entry)
        except LakehouseIndexError:
            return
    assert want is not None, "a file pyarrow cannot read was answered"
    assert got.num_rows == want.num_rows
    for name in got.column_names:
        # A column the (corrupt) footer no longer names reads as nulls, as a column added
        # to the table after the file was written does.
        expected = want.column(name).to_pylist() if name in want.column_names else [None] * want.num_rows
        assert got.column(name).to_pylist() == expected, name


def test_every_target_was_fuzzed() -> None:
    """Runs last in this module: each parser got its inputs (fails when a target silently ran none)."""
    if len(TRIED) < 10:
        pytest.skip("run with the whole module")
    assert all(n >= EXAMPLES // 2 for n in TRIED.values()), TRIED
