"""The log store: JSON form, put-if-absent slots, incremental listing, expiry, catalog; and the
Storage put-if-absent it relies on, on local disk and on a moto S3 server (loopback)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from logtest_helpers import source, spec

from lakehouse_index.errors import ConcurrentIndexUpdate, IndexLogError
from lakehouse_index.io import ObjectExistsError, Storage
from lakehouse_index.log.entry import (
    Content,
    IndexFile,
    IndexState,
    Level,
    LogEntry,
    Move,
    Operation,
    Pending,
    SourceFile,
    SourceState,
)
from lakehouse_index.log.store import IndexCatalog, IndexLog
from lakehouse_index.spec import CoveringIndex, SecondaryIndex

# --------------------------------------------------------------------------- JSON round trip

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)
columns = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=10),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def specs(draw):
    name = draw(names)
    cols = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True))
    split = draw(st.integers(1, len(cols)))
    if draw(st.booleans()):
        return SecondaryIndex(
            name, cols[:split], cols[split:] or None, draw(st.sampled_from(["incremental", "quick", "off"]))
        )
    return CoveringIndex(
        name,
        cols[:split],
        cols[split:],
        draw(st.integers(1, 65536)),
        layout_version=draw(st.sampled_from([1, 2])),
    )


source_files = st.builds(
    SourceFile,
    id=st.integers(0, 2**40),
    path=st.text(max_size=30),
    size=st.integers(0, 2**50),
    mtime_ms=st.integers(0, 2**45),
    num_records=st.none() | st.integers(0, 2**40),
    deletes_id=st.none() | st.text(max_size=20),
    deleted_count=st.integers(0, 2**30),
    added_ordinal=st.integers(0, 2**40),
    removed_ordinal=st.none() | st.integers(0, 2**40),
    moves=st.lists(
        st.builds(
            Move, st.integers(0, 2**40), st.integers(1, 2**30), st.integers(0, 2**40), st.integers(0, 2**40)
        ),
        max_size=4,
    ).map(tuple),
    equality_applied=st.none() | st.lists(st.text(max_size=20), max_size=3).map(tuple),
)
key_tuples = st.none() | st.lists(scalars, min_size=1, max_size=3).map(tuple)
# Index file paths as writers make them: relative, under data/, no '.' or '..' segment.
index_file_paths = st.from_regex(
    r"data/[a-z0-9-]{1,12}(/[A-Za-z0-9_=-][A-Za-z0-9_=.-]{0,9}){0,2}", fullmatch=True
)
index_files = st.builds(
    IndexFile,
    path=index_file_paths,
    rows=st.integers(0, 2**40),
    size=st.integers(0, 2**40),
    level=st.sampled_from(Level),
    min_key=key_tuples,
    max_key=key_tuples,
    min_ordinal=st.none() | st.integers(-1, 2**40),
    max_ordinal=st.none() | st.integers(-1, 2**40),
    bucket=st.none() | st.integers(0, 65535),
)
source_states = st.builds(
    SourceState,
    format=st.sampled_from(["delta", "iceberg"]),
    table_uri=st.text(max_size=30),
    version=st.integers(-(2**63), 2**63 - 1),
    ordinal=st.integers(0, 2**40),
    timestamp_ms=st.integers(0, 2**45),
    files=st.lists(source_files, max_size=4).map(tuple),
    next_file_id=st.integers(0, 2**40),
)
pendings = st.none() | st.builds(
    Pending,
    version=st.integers(-(2**63), 2**63 - 1),
    ordinal=st.integers(0, 2**40),
    appended=st.lists(source_files, max_size=3).map(tuple),
    removed=st.lists(st.integers(0, 2**40), max_size=5).map(tuple),
    delete_changed=st.lists(source_files, max_size=3).map(tuple),
)
entries = st.builds(
    LogEntry,
    id=st.integers(0, 10**20 - 1),
    spec=specs(),
    state=st.sampled_from(IndexState),
    operation=st.sampled_from(Operation),
    source=source_states,
    content=st.builds(
        Content,
        files=st.lists(index_files, max_size=4).map(tuple),
        base_ordinal=st.none() | st.integers(0, 2**40),
    ),
    pending=pendings,
    timestamp_ms=st.integers(0, 2**45),
    writer=st.text(max_size=20),
    base_id=st.none() | st.integers(0, 2**40),
)


@settings(max_examples=200, deadline=None)
@given(entries)
def test_json_round_trip(entry: LogEntry) -> None:
    data = entry.to_json()
    assert LogEntry.from_json(data) == entry
    # Plain JSON any reader can parse (no NaN/Infinity extensions), with the documented top-level keys.
    doc = json.loads(data, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert set(doc) == {
        "formatVersion",
        "id",
        "spec",
        "state",
        "operation",
        "source",
        "content",
        "pending",
        "timestampMs",
        "writer",
        "baseId",
    }
    assert doc["formatVersion"] == 4


@settings(max_examples=200, deadline=None)
@given(entries)
def test_format_version_1_entries_are_still_read(entry: LogEntry) -> None:
    """Logs written before the lineage remap (version 1) have no ``moves``: read as none; nor
    ``equalityApplied``: read as unknown."""
    doc = json.loads(entry.to_json())
    doc["formatVersion"] = 1
    for f in doc["source"]["files"]:
        del f["moves"], f["equalityApplied"]
    old = LogEntry.from_json(json.dumps(doc).encode())
    assert all(f.moves == () for f in old.source.files)
    assert old.source.files == tuple(replace(f, moves=(), equality_applied=None) for f in entry.source.files)


@settings(max_examples=200, deadline=None)
@given(entries)
def test_format_version_2_entries_are_still_read(entry: LogEntry) -> None:
    """Logs written before equality deletes were applied (version 2): which ones the entries
    leave out is unknown (None), so queries verify every equality delete."""
    doc = json.loads(entry.to_json())
    doc["formatVersion"] = 2
    for f in doc["source"]["files"]:
        del f["equalityApplied"]
    old = LogEntry.from_json(json.dumps(doc).encode())
    assert old.source.files == tuple(replace(f, equality_applied=None) for f in entry.source.files)


@settings(max_examples=100, deadline=None)
@given(entries)
def test_format_version_3_covering_specs_are_layout_1(entry: LogEntry) -> None:
    """Covering indexes written before Spark's bucketing (version 3 has no ``layoutVersion``) keep
    the crc32 layout their files are in: lookups must look for keys in those buckets."""
    doc = json.loads(entry.to_json())
    doc["formatVersion"] = 3
    doc["spec"].pop("layoutVersion", None)
    old = LogEntry.from_json(json.dumps(doc).encode())
    if isinstance(entry.spec, CoveringIndex):
        assert old.spec == replace(entry.spec, layout_version=1)
    else:
        assert old.spec == entry.spec


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=entries)
def test_entries_survive_the_store(local, entry: LogEntry) -> None:
    name = entry.name
    root = local.root
    log = IndexLog(local.storage, f"{root}/{name}")
    fresh_id = len(log.list_ids())
    e = LogEntry(**{**entry.__dict__, "id": fresh_id})
    log.write(e)
    assert IndexLog(local.storage, f"{root}/{name}").read(fresh_id) == e


# --------------------------------------------------------------------------- bad entries


def _entry(i: int, name: str = "idx", state: IndexState = IndexState.ACTIVE) -> LogEntry:
    return LogEntry(id=i, spec=spec(name), state=state, operation=Operation.CREATE, source=source(i))


def _raw(backend, slot: int, doc: dict | bytes) -> None:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    backend.storage.put_if_absent(f"{backend.index_dir}/_log/{slot:020d}.json", data)


def _index_file_doc(path: str) -> dict:
    """The JSON of an index file record naming ``path``."""
    entry = replace(_entry(0), content=Content(files=(IndexFile(path="data/u/f.parquet", rows=1, size=1),)))
    return {**json.loads(entry.to_json())["content"]["files"][0], "path": path}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: {**d, "formatVersion": 6}, "format version 6"),
        (lambda d: {k: v for k, v in d.items() if k != "formatVersion"}, "format version None"),
        (lambda d: {**d, "state": "FROZEN"}, "malformed"),
        (lambda d: {k: v for k, v in d.items() if k != "source"}, "malformed"),
        (lambda d: {**d, "id": 5}, "holds id 5, not 0"),
        (lambda d: {**d, "spec": {**d["spec"], "name": "other"}}, "belongs to index 'other'"),
        (lambda d: b"{not json", "not valid JSON"),
        (lambda d: b"[1, 2]", "not a JSON object"),
        (lambda d: {**d, "source": {**d["source"], "version": "3"}}, "expected an integer"),
        *(
            (lambda d, p=p: {**d, "content": {"files": [_index_file_doc(p)], "baseOrdinal": None}}, "data/")
            for p in ("data/../../t/part-0.parquet", "/etc/passwd", "file:///t/x", "x.parquet", "data/")
        ),
    ],
)
def test_bad_entries_are_refused_naming_the_file(backend, mutate, message) -> None:
    doc = json.loads(_entry(0).to_json())
    _raw(backend, 0, mutate(doc))
    log = IndexLog(backend.storage, backend.index_dir)
    with pytest.raises(IndexLogError, match=message) as info:
        log.latest_stable()
    assert "00000000000000000000.json" in str(info.value)


# --------------------------------------------------------------------------- slots


def test_write_is_put_if_absent(backend) -> None:
    log = IndexLog(backend.storage, backend.index_dir)
    log.write(_entry(0))
    other = IndexLog(backend.storage, backend.index_dir)
    with pytest.raises(ConcurrentIndexUpdate, match=r"index 'idx': log slot 0 .*00000000000000000000\.json"):
        other.write(_entry(0, state=IndexState.DELETED))
    assert IndexLog(backend.storage, backend.index_dir).read(0).state is IndexState.ACTIVE
    with pytest.raises(IndexLogError, match="cannot go into the log"):
        log.write(_entry(1, name="other"))


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_storage_put_if_absent_has_one_winner_among_threads(kind, tmp_path, request) -> None:
    from tests.log.conftest import make_backend

    s3 = request.getfixturevalue("s3_options") if kind == "s3" else None
    b = make_backend(kind, tmp_path, s3)
    path = f"{b.index_dir}/_log/{7:020d}.json"
    n = 12
    barrier = threading.Barrier(n)
    outcome: dict[int, str] = {}

    def attempt(i: int) -> None:
        storage = Storage.for_uri(path, b.options)  # own client per thread, like separate writers
        barrier.wait()
        try:
            storage.put_if_absent(path, f"writer-{i}".encode())
            outcome[i] = "won"
        except ObjectExistsError:
            outcome[i] = "lost"

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcome.items() if o == "won"]
    assert len(outcome) == n and len(winners) == 1
    assert b.storage.read_bytes(path) == f"writer-{winners[0]}".encode()
    # No temp files or partial objects left next to the entry.
    assert [s.path.rsplit("/", 1)[-1] for s in b.storage.list_dir(f"{b.index_dir}/_log")] == [
        f"{7:020d}.json"
    ]


# --------------------------------------------------------------------------- incremental listing


@dataclass(frozen=True)
class CountingStorage(Storage):
    """A real Storage that counts the requests the log makes (instrumentation only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "calls", {"read": 0, "list": 0})

    def read_bytes(self, path: str) -> bytes:
        self.calls["read"] += 1  # type: ignore[attr-defined]
        return super().read_bytes(path)

    def list_dir(self, path: str):
        self.calls["list"] += 1  # type: ignore[attr-defined]
        return super().list_dir(path)


def test_latest_stable_is_one_probe_when_nothing_changed(backend) -> None:
    writer = IndexLog(backend.storage, backend.index_dir)
    for i in range(5):
        writer.write(_entry(i, state=IndexState.ACTIVE if i % 2 else IndexState.REFRESHING))
    counting = CountingStorage(backend.storage.scheme, backend.options)
    reader = IndexLog(counting, backend.index_dir)
    assert reader.latest_stable().id == 3
    assert counting.calls["list"] == 1
    counting.calls.update(read=0, list=0)
    for _ in range(10):
        assert reader.latest_stable().id == 3
    assert counting.calls == {"read": 10, "list": 0}  # one probe of slot 5 per call

    writer.write(_entry(5, state=IndexState.ACTIVE))
    writer.write(_entry(6, state=IndexState.REFRESHING))
    counting.calls.update(read=0, list=0)
    assert reader.latest_stable().id == 5
    assert reader.latest().id == 6
    assert counting.calls == {"read": 4, "list": 0}  # 5, 6, miss 7; then miss 7


def test_stray_files_in_the_log_dir_are_ignored(local) -> None:
    log = IndexLog(local.storage, local.index_dir)
    log.write(_entry(0))
    # What a writer killed between writing its temp file and linking it leaves behind.
    local.storage.write_bytes(f"{local.index_dir}/_log/{1:020d}.json.4242.abcdef.tmp", b"{")
    local.storage.write_bytes(f"{local.index_dir}/_log/README", b"hi")
    fresh = IndexLog(local.storage, local.index_dir)
    assert fresh.list_ids() == [0]
    fresh.write(_entry(1))
    assert IndexLog(local.storage, local.index_dir).list_ids() == [0, 1]


def test_expire_keeps_the_latest_stable_entry_and_newer(backend) -> None:
    log = IndexLog(backend.storage, backend.index_dir, relist_after_s=0)
    states = [
        IndexState.CREATING,
        IndexState.ACTIVE,
        IndexState.REFRESHING,
        IndexState.ACTIVE,
        IndexState.REFRESHING,
    ]
    for i, s in enumerate(states):
        log.write(_entry(i, state=s))
    assert log.expire(range(10), min_retention_s=3600) == []  # all too young
    assert log.expire(range(10), min_retention_s=0) == [0, 1, 2]
    fresh = IndexLog(backend.storage, backend.index_dir)
    assert fresh.list_ids() == [3, 4]
    assert fresh.latest_stable().id == 3 and fresh.stable_entries() == [fresh.read(3)]
    assert log.list_ids() == [3, 4]


def test_catalog_lists_indexes_with_a_log(backend) -> None:
    catalog = IndexCatalog(backend.storage, backend.root)
    assert catalog.names() == []
    for name in ("b_idx", "a_idx"):
        catalog.log(name).write(_entry(0, name=name))
    backend.storage.write_bytes(f"{backend.root}/not_an_index/data/x.bin", b"x")
    assert catalog.names() == ["a_idx", "b_idx"]
    assert catalog.log("a_idx").latest_stable().name == "a_idx"


def test_storage_pickles_after_s3_use(s3_options) -> None:
    import pickle

    from tests.log.conftest import BUCKET

    storage = Storage.for_uri(f"s3://{BUCKET}/p", s3_options)
    storage.put_if_absent(f"s3://{BUCKET}/p/{uuid_hex()}", b"x")  # caches the boto3 client
    clone = pickle.loads(pickle.dumps(storage))  # e.g. shipped to a Spark executor
    assert clone == storage


def uuid_hex() -> str:
    import uuid

    return uuid.uuid4().hex
