"""Erase on Delta tables written by deltalake and by Spark (DVs), checked against deltalake as oracle."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.support.paths import PEER_TABLES
from tests.workflows.erasure.helpers import unreadable

SUBJECTS = [f"subject-{i:04d}@example.com" for i in range(200)]


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([SUBJECTS[i % len(SUBJECTS)] for i in ids], pa.string()),
            "country": pa.array([["de", "fr", "us"][i % 3] for i in ids], pa.string()),
            "amount": pa.array([i * 10 for i in ids], pa.int64()),
        }
    )


def _table(tmp_path: Path, partitioned: bool, files: int = 12, rows: int = 400) -> str:
    uri = str(tmp_path / ("part" if partitioned else "flat"))
    for f in range(files):
        write_deltalake(
            uri, _batch(f * rows, rows), mode="append", partition_by=["country"] if partitioned else None
        )
    return uri


def _rows(uri: str, version: int | None = None) -> Counter:
    dt = DeltaTable(uri, version=version) if version is not None else DeltaTable(uri)
    t = dt.to_pyarrow_table()
    cols = ["id", "email", "country", "amount"]
    return Counter(zip(*(t[c].to_pylist() for c in cols), strict=True))


def _log_text(uri: str) -> str:
    return "\n".join(p.read_text() for p in sorted(Path(uri, "_delta_log").glob("*.json")))


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("n_subjects", [1, 100])
def test_erase_removes_subjects_and_only_touches_their_files(
    tmp_path: Path, partitioned: bool, n_subjects: int
) -> None:
    uri = _table(tmp_path, partitioned)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email"], num_buckets=2))
    indexed = {_canon(p) for p in DeltaTable(uri).file_uris()}
    # a commit the index has not seen: the hybrid scan must find the subjects there too
    write_deltalake(
        uri, _batch(99_000, 300), mode="append", partition_by=["country"] if partitioned else None
    )
    before = _rows(uri)
    files_before = set(DeltaTable(uri).file_uris())
    subjects = SUBJECTS[:n_subjects]
    holding = {p for p, row in _located(t, subjects)}
    others = {_canon(p) for p in files_before} & indexed - holding

    with unreadable(others):  # the erase reads no indexed file that holds no subject
        result = t.erase("by_email", subjects)

    after = _rows(uri)
    assert after == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    assert not t.lookup("by_email", subjects).num_rows
    assert {f.path for f in result.files} == holding
    files_after = set(DeltaTable(uri).file_uris())
    # untouched files stay; only files holding subjects were removed
    assert {_canon(p) for p in files_before - files_after} == holding
    assert result.rows_erased == sum(before[r] for r in before if r[1] in subjects)
    newest = _log_text(uri).splitlines()
    commit = [json.loads(line) for line in newest if '"commitInfo"' in line][-1]
    text = json.dumps(commit)
    assert all(s not in text for s in subjects)
    new_commit = Path(uri, "_delta_log", f"{result.version:020d}.json").read_text()
    assert all(s not in new_commit for s in subjects)
    # every index answers like the plain scan afterwards
    assert t.verify_index("by_email", sample=50).ok
    assert not t.lookup(
        "cov", [r[0] for r in before if r[1] in subjects][:50], columns=["id", "email"]
    ).num_rows
    # the audit record names subjects only by salted hashes
    records = t.erasures()
    assert len(records) == 1 and len(records[0].subjects) == n_subjects
    audit_text = Path(result.audit_uri.removeprefix("file://")).read_text()
    assert all(s not in audit_text for s in subjects)
    # a rerun finds nothing and changes nothing
    again = t.erase("by_email", subjects)
    assert again.version is None and not again.files
    assert DeltaTable(uri).version() == result.version


def _canon(p: str) -> str:
    from lakehouse_index.source import canonical_uri

    return canonical_uri(p)


def _located(t: li.Table, keys: list[str]) -> list[tuple[str, int]]:
    loc = t.locate("by_email", keys)
    return list(zip(loc["_file"].to_pylist(), loc["_row"].to_pylist(), strict=True))


def test_erase_on_a_spark_table_with_deletion_vectors(tmp_path: Path) -> None:
    src = PEER_TABLES / "table-with-dv-small"
    uri = str(tmp_path / "dv")
    shutil.copytree(src, uri)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_value", key="value"))
    # deltalake cannot read DVs; our reader is proven on this table (tests/connectors)
    before = t.scan()["value"].to_pylist()
    target = before[0]
    result = t.erase("by_value", [target])
    after = li.open_table(uri).scan()["value"].to_pylist()
    assert sorted(after) == sorted(v for v in before if v != target)
    assert len(after) == len(before) - 1
    assert result.rows_erased == 1
    # the remove repeats the add's deletion vector, so the logical file is gone for every reader
    last = Path(uri, "_delta_log", f"{result.version:020d}.json").read_text().splitlines()
    removes = [json.loads(x)["remove"] for x in last if '"remove"' in x]
    assert removes and all("deletionVector" in r for r in removes)
    # the rewrite dropped the rows the DV had deleted: they do not come back
    adds = [json.loads(x)["add"] for x in last if '"add"' in x]
    assert sum(json.loads(a["stats"])["numRecords"] for a in adds) == len(after)


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    uri = _table(tmp_path, False, files=4, rows=100)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    v = DeltaTable(uri).version()
    listing = sorted(p.name for p in Path(uri).rglob("*"))
    result = t.erase("by_email", SUBJECTS[:3], dry_run=True)
    assert result.dry_run and result.version is None
    assert result.rows_erased == sum(1 for e in _batch(0, 400)["email"].to_pylist() if e in SUBJECTS[:3])
    assert DeltaTable(uri).version() == v
    assert sorted(p.name for p in Path(uri).rglob("*")) == listing


def test_bad_input_changes_nothing(tmp_path: Path) -> None:
    uri = _table(tmp_path, False, files=2, rows=50)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    v = DeltaTable(uri).version()
    with pytest.raises(li.errors.EraseRefusedError, match="empty"):
        t.erase("by_email", [])
    with pytest.raises(li.errors.EraseRefusedError, match="not on the subject column"):
        t.erase("by_id", [1], column="email")
    with pytest.raises(li.errors.EraseRefusedError, match="does not fit"):
        t.erase("by_id", ["not-a-number"])
    with pytest.raises(li.errors.EraseRefusedError, match="does not fit"):
        t.erase("by_email", [42])
    with pytest.raises(li.errors.IndexNotFoundError):
        t.erase("nope", ["x"])
    assert DeltaTable(uri).version() == v


def test_time_travel_before_an_erase_warns(tmp_path: Path) -> None:
    uri = _table(tmp_path, False, files=3, rows=100)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    old = DeltaTable(uri).version()
    t.erase("by_email", SUBJECTS[:2])
    with pytest.warns(li.errors.ErasedSubjectsWarning, match="erased by version"):
        rows = t.lookup("by_email", SUBJECTS[:2], version_as_of=old)
    assert rows.num_rows == _batch(0, 300)["email"].to_pylist().count(SUBJECTS[0]) * 2
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not t.lookup("by_email", SUBJECTS[:2]).num_rows  # the latest version: no warning


@pytest.mark.parametrize("point", ["located", "file_written", "committed", "refreshing", "audit"])
def test_kill_9_at_each_step_then_rerun_completes(tmp_path: Path, point: str) -> None:
    import subprocess
    import sys

    from tests.support.paths import REPO_ROOT, code_env

    uri = _table(tmp_path, True, files=6, rows=200)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    before = _rows(uri)
    subjects = SUBJECTS[:5]
    want = Counter({r: c for r, c in before.items() if r[1] not in subjects})
    proc = subprocess.run(
        [sys.executable, "-m", "tests.workflows.erasure.erase_crash_worker", uri, point, *subjects],
        cwd=REPO_ROOT,
        env=code_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    # never fewer rows than it should have: either nothing happened or exactly the subjects went
    assert _rows(uri) in (before, want)
    result = li.open_table(uri).erase("by_email", subjects)
    assert _rows(uri) == want
    t = li.open_table(uri)
    assert not t.lookup("by_email", subjects).num_rows
    assert t.verify_index("by_email", sample=30).ok
    assert result.audit_uri is not None


def _peer(tmp_path: Path, name: str) -> str:
    uri = str(tmp_path / name)
    shutil.copytree(PEER_TABLES / name, uri)
    return uri


def test_erase_honours_column_mapping(tmp_path: Path) -> None:
    uri = _peer(tmp_path, "table_with_column_mapping")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_company", key="Company Very Short"))
    before = DeltaTable(uri).to_pyarrow_table().to_pylist()
    target = before[0]["Company Very Short"]
    t.erase("by_company", [target])
    after = DeltaTable(uri).to_pyarrow_table().to_pylist()
    assert sorted(map(str, after)) == sorted(str(r) for r in before if r["Company Very Short"] != target)


def test_erase_writes_change_data_and_in_commit_timestamps(tmp_path: Path) -> None:
    uri = _peer(tmp_path, "cdc_ict_table")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_name", key="name"))
    before = DeltaTable(uri)
    previous_ict = before.history(1)[0].get("inCommitTimestamp")
    result = t.erase("by_name", ["Kate"])
    dt = DeltaTable(uri)
    assert dt.to_pyarrow_table()["name"].to_pylist() == ["Steve"]
    text = Path(uri, "_delta_log", f"{result.version:020d}.json").read_text()
    commit = [json.loads(x) for x in text.splitlines()]
    info = commit[0]["commitInfo"]
    assert info["inCommitTimestamp"] > (previous_ict or 0)
    assert any("cdc" in a for a in commit)
    changes = pa.table(dt.load_cdf(starting_version=result.version).read_all()).to_pylist()
    assert [(c["name"], c["_change_type"]) for c in changes] == [("Kate", "delete")]


def test_erase_of_a_legacy_change_data_feed_table(tmp_path: Path) -> None:
    uri = _peer(tmp_path, "cdf-table")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    before = DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()
    t.erase("by_id", [before[0], before[1]])
    assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == sorted(before[2:])


def test_erase_refuses_a_writer_feature_it_cannot_honour(tmp_path: Path) -> None:
    uri = _peer(tmp_path, "table_with_liquid_clustering")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    listing = sorted(str(p) for p in Path(uri).rglob("*") if "_lakehouse_index" not in p.parts)
    with pytest.raises(li.errors.UnsupportedWriterFeatureError, match="liquid"):
        t.erase("by_id", [1])
    assert sorted(str(p) for p in Path(uri).rglob("*") if "_lakehouse_index" not in p.parts) == listing


def test_erase_preserves_row_ids_of_a_row_tracking_table(tmp_path: Path) -> None:
    """A Databricks row-tracking table (10 one-row files, ids 0..9 = row ids 0..9) plus a crafted
    10-row file (ids 100..109, baseRowId 10). The erase keeps every other row's id: the rewrite
    materializes them, the new file gets fresh base ids and the high-water mark moves."""
    import pyarrow.parquet as pq

    uri = _peer(tmp_path, "table_with_liquid_clustering")
    log = Path(uri, "_delta_log")
    first = [json.loads(x) for x in (log / f"{0:020d}.json").read_text().splitlines()]
    config = next(a["metaData"] for a in first if "metaData" in a)["configuration"]
    mat_id = config["delta.rowTracking.materializedRowIdColumnName"]
    mat_version = config["delta.rowTracking.materializedRowCommitVersionColumnName"]
    pq.write_table(pa.table({"id": pa.array(range(100, 110), pa.int64())}), Path(uri, "multi.parquet"))
    stats = {"numRecords": 10, "minValues": {"id": 100}, "maxValues": {"id": 109}, "nullCount": {"id": 0}}
    crafted = [
        {"commitInfo": {"timestamp": 1694758300000, "operation": "WRITE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["domainMetadata", "deletionVectors", "rowTracking"],
            }
        },
        {
            "add": {
                "path": "multi.parquet",
                "partitionValues": {},
                "size": Path(uri, "multi.parquet").stat().st_size,
                "modificationTime": 1694758300000,
                "dataChange": True,
                "stats": json.dumps(stats),
                "baseRowId": 10,
                "defaultRowCommitVersion": 1,
            }
        },
        {
            "domainMetadata": {
                "domain": "delta.rowTracking",
                "configuration": json.dumps({"rowIdHighWaterMark": 19}),
                "removed": False,
            }
        },
    ]
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(a) for a in crafted) + "\n")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    kept = [i for i in range(100, 110) if i != 103] + [0, 9]
    before = dict(zip(*t.locate("by_id", kept).select(["id", "_row_id"]).to_pydict().values(), strict=True))
    assert before == {**{100 + j: 10 + j for j in range(10) if j != 3}, 0: 0, 9: 9}

    result = t.erase("by_id", [103, 5])

    t = li.open_table(uri)
    after = dict(zip(*t.locate("by_id", kept).select(["id", "_row_id"]).to_pydict().values(), strict=True))
    assert after == before
    commit = [json.loads(x) for x in (log / f"{result.version:020d}.json").read_text().splitlines()]
    adds = [a["add"] for a in commit if "add" in a]
    assert len(adds) == 1 and adds[0]["baseRowId"] == 20 and adds[0]["defaultRowCommitVersion"] == 2
    domains = [a["domainMetadata"] for a in commit if "domainMetadata" in a]
    assert [json.loads(d["configuration"]) for d in domains] == [{"rowIdHighWaterMark": 28}]
    # read the new file with plain pyarrow: ids and commit versions materialized
    new_file = pq.read_table(Path(uri, adds[0]["path"]))
    assert new_file["id"].to_pylist() == [i for i in range(100, 110) if i != 103]
    assert new_file[mat_id].to_pylist() == [10 + j for j in range(10) if j != 3]
    assert new_file[mat_version].to_pylist() == [1] * 9
    assert sorted(t.scan()["id"].to_pylist()) == sorted([i for i in range(10) if i != 5] + kept[:9])


def test_erase_places_its_rewrites_without_aligning_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh after the erase takes the rewrite's row alignment from the erase itself: no
    fingerprint alignment runs, the moved rows keep their entries, answers equal the scan."""
    from lakehouse_index.maintenance import lineage

    uri = _table(tmp_path, partitioned=True)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email", "amount"], num_buckets=2))
    before = _rows(uri)
    subjects = SUBJECTS[:3]

    def no_alignment(*_: object) -> None:
        raise AssertionError("the erase's rewrites were aligned by fingerprints")

    monkeypatch.setattr(lineage, "_fingerprints", no_alignment)
    result = t.erase("by_email", subjects)

    assert _rows(uri) == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    for name in ("by_email", "cov"):
        entry = t.context.log(name).latest_stable()
        assert entry is not None and entry.source.version == result.version
        moved = [f for f in entry.source.files if f.moves]
        assert len(moved) == len(result.files)  # every rewritten file's rows moved, none re-indexed
        assert t.verify_index(name).ok
    rest = [r for r in before if r[1] not in subjects]
    got = t.lookup("by_email", sorted({r[1] for r in rest}))
    assert Counter(got["id"].to_pylist()) == Counter(r[0] for r in rest for _ in range(before[r]))


def test_erase_names_the_data_file_replacing_each_rewritten_file(tmp_path: Path) -> None:
    """With change data written beside the rewrites, ``replaced_by`` is still the data file."""
    uri = str(tmp_path / "cdf")
    write_deltalake(
        uri, _batch(0, 400), configuration={"delta.enableChangeDataFeed": "true"}, partition_by=["country"]
    )
    for f in range(1, 4):
        write_deltalake(uri, _batch(f * 400, 400), mode="append", partition_by=["country"])
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    result = t.erase("by_email", SUBJECTS[:5])
    adds = {
        _canon(f"{uri}/{json.loads(x)['add']['path']}")
        for x in Path(uri, "_delta_log", f"{result.version:020d}.json").read_text().splitlines()
        if '"add"' in x
    }
    assert len(result.files) > 1 and {f.replaced_by for f in result.files} == adds
