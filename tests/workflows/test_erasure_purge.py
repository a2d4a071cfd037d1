"""Purge of table history and index data after a GDPR delete (issue #14, step 4), both formats.

Each table: subject rows spread over several appends (many files), three indexes (secondary,
covering, skipping) on the subject column, then either a native delete of the subjects (its
Delta commitInfo holds the keys) and one unrelated commit after it (the kept version), or the
erase workflow's commit (the kept version); indexes refreshed. After ``purge_history`` +
``purge_indexes``: the erasure's residue scan (``find_residue``: every file and directory name
under the table and the index root, decoded) finds no subject value, where it found them
before; the native reader (deltalake / pyiceberg) reads the kept version with exactly the rows
the plain scan read before the purge; time travel to every purged version (and timestamp,
tag) raises VersionPurgedError. Crash tests kill -9 a purging subprocess at every step and
rerun.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.errors import PurgeRefusedError, UnsupportedFeatureError, VersionPurgedError
from lakehouse_index.sink.history import PAUSE_ENV, STEPS
from lakehouse_index.workflows.erasure.purge import purge_blockers, purge_history, purge_indexes
from lakehouse_index.workflows.erasure.verify.residue import ResidueReport, find_residue
from tests.support.paths import code_env

SUBJECTS = ["subj-alice-7f3a", "subj-bob-91c2"]
OTHERS = ["carol", "dave", "erin", "frank"]
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64())])
COLUMNS = SCHEMA.names


def _rows(start: int, keys: list[str]) -> pa.Table:
    ids = list(range(start, start + len(keys)))
    return pa.table(
        [pa.array(ids, pa.int64()), pa.array(keys), pa.array([i * 10 for i in ids], pa.int64())], SCHEMA
    )


def _batches() -> list[pa.Table]:
    """Four appends, each with rows of both subjects and of others."""
    return [_rows(100 * b, SUBJECTS + OTHERS + SUBJECTS[:1]) for b in range(4)]


def multiset(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(table[c].to_pylist() for c in COLUMNS), strict=True))


# ---------------------------------------------------------------------- decoded search


def residue(case: Case) -> ResidueReport:
    """The erasure's decoded search of every file under the table (its index root included)."""
    return find_residue([str(case.root)], SUBJECTS)


# ---------------------------------------------------------------------- tables


@dataclass
class Case:
    """A table after the subjects' delete and one later commit, indexes refreshed."""

    fmt: str
    root: Path  # table folder
    table: li.Table
    keep: int
    expected: pa.Table  # the plain scan at keep, before the purge
    older: list[int]  # versions / snapshot ids before keep
    catalog_uri: str = ""
    warehouse: str = ""

    def native(self) -> pa.Table:
        """The latest version read by the format's own library (a fresh handle)."""
        if self.fmt == "delta":
            from deltalake import DeltaTable

            return DeltaTable(str(self.root)).to_pyarrow_table()
        return _catalog(self.catalog_uri, self.warehouse).load_table("db.t").scan().to_arrow()

    def reopen(self) -> li.Table:
        if self.fmt == "delta":
            return li.open_table(str(self.root))
        return li.open_table("db.t", catalog=_catalog(self.catalog_uri, self.warehouse))


def _catalog(uri: str, warehouse: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("purge", uri=uri, warehouse=warehouse)


def _index(t: li.Table) -> None:
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["v"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip_k", columns="k"))


def _finish(t: li.Table) -> None:
    for info in t.indexes():
        t.refresh_index(info.name)


def delta_case(
    tmp: Path, partitioned: bool, configuration: dict[str, str] | None = None, via_erase: bool = False
) -> Case:
    from deltalake import DeltaTable, write_deltalake

    root = tmp / "delta"
    parts = ["k"] if partitioned else None
    for i, batch in enumerate(_batches()):
        write_deltalake(
            str(root),
            batch,
            mode="append",
            partition_by=parts,
            configuration=configuration if i == 0 else None,
        )
    t = li.open_table(str(root))
    _index(t)
    if via_erase:  # the erase workflow's commit is the kept version
        # No audit record: the purge does not own it (it lists removed paths, which for a table
        # partitioned by the subject column hold the subject's value).
        t.erase("by_k", SUBJECTS, retain_audit=False)
    else:
        DeltaTable(str(root)).delete("k IN ('" + "', '".join(SUBJECTS) + "')")  # commitInfo holds the keys
        write_deltalake(str(root), _rows(900, ["gina"]), mode="append", partition_by=parts)
        _finish(t)
    keep = t.latest_version()
    return Case("delta", root, t, keep, t.scan(use_indexes=False), list(range(keep)))


def iceberg_case(
    tmp: Path, partitioned: bool, properties: dict[str, str] | None = None, via_erase: bool = False
) -> Case:
    from pyiceberg.expressions import In

    uri, warehouse = f"sqlite:///{tmp}/catalog.db", f"file://{tmp}/wh"
    (tmp / "wh").mkdir()
    cat = _catalog(uri, warehouse)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", schema=SCHEMA, properties=properties or {})
    if partitioned:
        with tbl.update_spec() as spec:
            spec.add_identity("k")
    for batch in _batches():
        tbl.append(batch)
    t = li.open_table("db.t", catalog=cat)
    _index(t)
    if via_erase:
        t.erase("by_k", SUBJECTS, retain_audit=False)  # as for Delta
    else:
        tbl = cat.load_table("db.t")
        tbl.delete(In("k", SUBJECTS))
        tbl = cat.load_table("db.t")
        tbl.append(_rows(900, ["gina"]))
        _finish(t)
    keep = t.latest_version()
    older = [s.snapshot_id for s in cat.load_table("db.t").metadata.snapshots if s.snapshot_id != keep]
    root = Path(tbl.location().removeprefix("file://"))
    return Case("iceberg", root, t, keep, t.scan(use_indexes=False), older, uri, warehouse)


def make_case(fmt: str, tmp: Path, partitioned: bool, via_erase: bool = False) -> Case:
    if fmt == "delta":
        return delta_case(tmp, partitioned, via_erase=via_erase)
    return iceberg_case(tmp, partitioned, via_erase=via_erase)


def listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------- checks


def check_purged(case: Case, t: li.Table) -> None:
    """No subject value anywhere; the rows of keep unchanged; indexes answer; time travel refused."""
    report = residue(case)
    assert report.ok, report.to_json()
    assert multiset(case.native()) == multiset(case.expected)
    assert multiset(t.scan(use_indexes=False)) == multiset(case.expected)
    assert not [v for v in multiset(case.expected) if v[1] in SUBJECTS]
    for name in ("by_k", "cov"):
        assert t.lookup(name, SUBJECTS).num_rows == 0
        want = Counter(r for r in multiset(case.expected).elements() if r[1] == "carol")
        assert multiset(t.lookup(name, ["carol"], columns=COLUMNS)) == want
    assert t.scan(where="k IN ('" + "', '".join(SUBJECTS) + "')").num_rows == 0
    states = {i.name: i.state for i in t.indexes()}
    assert {"by_k", "cov", "skip_k"} <= states.keys() and set(states.values()) == {li.IndexState.ACTIVE}
    for v in case.older:
        with pytest.raises(VersionPurgedError, match="purged for erasure"):
            t.snapshot(version_as_of=v)
    with pytest.raises(VersionPurgedError):
        t.lookup("by_k", SUBJECTS, version_as_of=case.older[0])
    with pytest.raises(VersionPurgedError):
        t.scan(version_as_of=case.older[-1])
    with pytest.raises(VersionPurgedError):
        t.locate("cov", SUBJECTS, version_as_of=case.older[-1])
    with pytest.raises(VersionPurgedError):
        t.explain(where="k = 'carol'", version_as_of=case.older[0])
    with pytest.raises(VersionPurgedError):  # refused before any Spark session is asked for
        t.read(version_as_of=case.older[0], where="k = 'carol'")


@pytest.mark.parametrize("via_erase", [False, True], ids=["native-delete", "erase"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_purge_removes_every_trace_and_keeps_every_other_row(
    tmp_path: Path, fmt: str, partitioned: bool, via_erase: bool
) -> None:
    """After a native delete plus one later commit, or after the erase workflow's commit
    (``Table.erase`` without purge: its commit is the kept version)."""
    case = make_case(fmt, tmp_path, partitioned, via_erase)
    t = case.table
    index_root = Path(t.index_root.removeprefix("file://"))
    before = residue(case).hits
    # The search is not vacuous: before the purge the table's files and the index hold the keys.
    assert any("_lakehouse_index" not in h.path for h in before)
    assert any("_lakehouse_index" in h.path for h in before)
    assert {h.value_number for h in before} == {0, 1}
    timestamps = {v.version: v.timestamp_ms for v in t.source.versions()}

    assert purge_blockers(t.context) == []
    history = purge_history(t.context, keep_version=case.keep)
    indexes = purge_indexes(t.context)
    reports = json.loads(json.dumps({"history": history.to_json(), "indexes": indexes.to_json()}))
    assert reports["history"]["removed"]["data"] == len(history.removed.data)
    assert not any(v in json.dumps(reports) for v in SUBJECTS)  # counts, no paths that spell values
    assert reports["indexes"]["filesWritten"] and all(i.files_written for i in indexes.indexes)

    assert history.versions_purged == tuple(sorted(case.older, key=timestamps.__getitem__)) + (
        (case.keep,) if fmt == "iceberg" else ()
    )
    assert history.removed.data and not history.dry_run
    assert history.record is not None and Path(history.record.removeprefix("file://")).exists()
    assert [i.name for i in indexes.indexes] == ["by_k", "cov", "skip_k"]
    assert all(i.files_removed and i.log_entries_expired for i in indexes.indexes)
    # Each index keeps exactly one log entry, naming every data file left, and the expiry mark
    # at its slot (no late writer can use an expired slot: docs/FORMAT.md).
    for name in ("by_k", "cov", "skip_k"):
        [entry] = (index_root / name / "_log").glob("*.json")
        assert sorted(p.name for p in (index_root / name / "_log").iterdir()) == sorted(
            [entry.name, entry.name.replace(".json", ".expired")]
        )
    check_purged(case, t)
    fresh = case.reopen()  # another process's view: same answers
    check_purged(case, fresh)
    # A time only purged versions covered is refused too.
    with pytest.raises(VersionPurgedError):
        fresh.snapshot(timestamp_as_of=timestamps[case.older[0]])
    if fmt == "delta":
        names = sorted(p.name for p in (case.root / "_delta_log").iterdir())
        keep = f"{case.keep:020d}"
        assert names == [f"{keep}.checkpoint.parquet", f"{keep}.json", "_last_checkpoint"]
    else:
        tbl = _catalog(case.catalog_uri, case.warehouse).load_table("db.t")
        assert [s.snapshot_id for s in tbl.metadata.snapshots] == [history.kept_version]
        assert tbl.current_snapshot().summary.operation.value == "replace"
        assert len(list((case.root / "metadata").glob("*.metadata.json"))) == 1


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_dry_run_changes_nothing_and_lists_what_the_purge_removes(tmp_path: Path, fmt: str) -> None:
    case = make_case(fmt, tmp_path, partitioned=False)
    before = listing(tmp_path)
    dry = purge_history(case.table.context, keep_version=case.keep, dry_run=True)
    assert listing(tmp_path) == before
    assert dry.dry_run and dry.record is None and set(dry.versions_purged) >= set(case.older)
    real = purge_history(case.table.context, keep_version=case.keep)
    assert dry.removed.data == real.removed.data and dry.removed.data
    assert set(dry.removed.log) == set(real.removed.log)
    if fmt == "iceberg":  # the real run also removes the metadata files it wrote itself
        assert set(dry.removed.manifests) <= set(real.removed.manifests)
        assert set(dry.removed.metadata) <= set(real.removed.metadata)
    assert not any(Path(p.removeprefix("file://")).exists() for p in real.removed.all())


def test_delta_retention_settings_refuse_the_purge_unless_forced(tmp_path: Path) -> None:
    case = delta_case(tmp_path, False, {"delta.logRetentionDuration": "interval 30 days"})
    reasons = purge_blockers(case.table.context)
    assert len(reasons) == 1 and "delta.logRetentionDuration" in reasons[0]
    before = listing(tmp_path)
    with pytest.raises(PurgeRefusedError, match=r"delta\.logRetentionDuration"):
        purge_history(case.table.context, keep_version=case.keep)
    assert listing(tmp_path) == before
    purge_history(case.table.context, keep_version=case.keep, force=True)
    purge_indexes(case.table.context)
    check_purged(case, case.table)


def test_iceberg_retention_settings_and_tags_refuse_the_purge_unless_forced(tmp_path: Path) -> None:
    case = iceberg_case(tmp_path, False, {"history.expire.min-snapshots-to-keep": "3"})
    tbl = _catalog(case.catalog_uri, case.warehouse).load_table("db.t")
    tbl.manage_snapshots().create_tag(case.older[0], "before-erase").commit()
    reasons = purge_blockers(case.table.context)
    assert any("history.expire.min-snapshots-to-keep" in r for r in reasons)
    assert any("'before-erase'" in r for r in reasons)
    before = listing(tmp_path)
    with pytest.raises(PurgeRefusedError, match="before-erase"):
        purge_history(case.table.context, keep_version=case.keep)
    assert listing(tmp_path) == before
    history = purge_history(case.table.context, keep_version=case.keep, force=True)
    assert history.refs_removed == ("before-erase",)
    purge_indexes(case.table.context)
    check_purged(case, case.table)
    with pytest.raises(VersionPurgedError):
        case.table.snapshot(version_as_of="before-erase")


def test_a_version_that_is_not_the_latest_is_refused(tmp_path: Path) -> None:
    case = delta_case(tmp_path, False)
    before = listing(tmp_path)
    with pytest.raises(PurgeRefusedError, match="not the latest"):
        purge_history(case.table.context, keep_version=case.keep - 1)
    assert listing(tmp_path) == before


def test_iceberg_v3_is_refused_whatever_force_says(tmp_path: Path) -> None:
    import sqlite3

    (tmp_path / "wh").mkdir()
    cat = _catalog(f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    v2 = cat.create_table("db.t", schema=SCHEMA)
    # pyiceberg 0.12 writes no v3 metadata: upgrade the empty table's metadata by hand.
    meta = json.loads(Path(v2.metadata_location.removeprefix("file://")).read_text())
    meta.update({"format-version": 3, "next-row-id": 0})
    v3 = Path(v2.location().removeprefix("file://")) / "metadata" / "00001-v3.metadata.json"
    v3.write_text(json.dumps(meta))
    with sqlite3.connect(tmp_path / "catalog.db") as db:
        db.execute("UPDATE iceberg_tables SET metadata_location = ?", (f"file://{v3}",))
    t = li.open_table("db.t", catalog=cat)
    assert (
        _catalog(f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/wh")
        .load_table("db.t")
        .metadata.format_version
        == 3
    )
    before = listing(tmp_path / "wh")
    with pytest.raises(UnsupportedFeatureError, match="format version 3"):
        purge_blockers(t.context)
    with pytest.raises(UnsupportedFeatureError, match="format version 3"):
        purge_history(t.context, keep_version=0, force=True)
    assert listing(tmp_path / "wh") == before


def test_iceberg_files_outside_the_table_location_are_refused(tmp_path: Path) -> None:
    (tmp_path / "wh").mkdir()
    cat = _catalog(f"sqlite:///{tmp_path}/catalog.db", f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    tbl = cat.create_table(
        "db.t", schema=SCHEMA, properties={"write.data.path": f"file://{tmp_path}/elsewhere"}
    )
    tbl.append(_rows(0, OTHERS))
    t = li.open_table("db.t", catalog=cat)
    before = listing(tmp_path)
    with pytest.raises(UnsupportedFeatureError, match=r"write\.data\.path"):
        purge_history(t.context, keep_version=t.latest_version(), force=True)
    assert listing(tmp_path) == before


V2_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["v2Checkpoint"],
    "writerFeatures": ["v2Checkpoint"],
}


def _commit(root: Path, version: int, *actions: dict[str, Any]) -> None:
    body = [{"commitInfo": {"timestamp": int(time.time() * 1000)}}, *actions]
    (root / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in body))


def _spark_style_v2_checkpoint(root: Path, version: int) -> None:
    """A UUID-named V2 checkpoint of ``version`` whose file actions sit in a sidecar file, as
    Spark writes them: made from deltalake's classic-named V2 checkpoint, which is then removed."""
    import uuid

    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    DeltaTable(str(root), version=version).create_checkpoint()
    log = root / "_delta_log"
    classic = log / f"{version:020d}.checkpoint.parquet"
    actions = pq.read_table(classic)
    assert pc.any(actions["checkpointMetadata"].is_valid()).as_py()
    files = pc.or_(actions["add"].is_valid(), actions["remove"].is_valid())
    (log / "_sidecars").mkdir(exist_ok=True)
    sidecar = log / "_sidecars" / f"{uuid.uuid4()}.parquet"
    pq.write_table(actions.filter(files).select(["add", "remove"]), sidecar)
    pointer = {
        "path": sidecar.name,
        "sizeInBytes": sidecar.stat().st_size,
        "modificationTime": 0,
        "tags": None,
    }
    main = actions.filter(pc.invert(files))
    row = pa.table(
        {
            c: pa.array([pointer if c == "sidecar" else None], main.schema.field(c).type)
            for c in main.column_names
        }
    )
    main = pa.concat_tables([main, row])
    pq.write_table(main, log / f"{version:020d}.checkpoint.{uuid.uuid4()}.parquet")
    classic.unlink()
    (log / "_last_checkpoint").write_text(json.dumps({"version": version, "size": main.num_rows}))


def test_delta_v2_checkpoint_tables_are_purged(tmp_path: Path) -> None:
    """A table upgraded to V2 checkpoints, with a Spark-style UUID-named checkpoint whose sidecar
    holds the delete's tombstones (their paths spell the subjects: partitioned by the key), and a
    commit after it. The purge writes a classic-named V2 checkpoint (``checkpointMetadata``)
    at the kept version and removes the older checkpoint and its sidecar with the history."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    case = delta_case(tmp_path, partitioned=True)
    root, t = case.root, case.table
    before_upgrade = DeltaTable(str(root)).to_pyarrow_table()  # deltalake cannot read V2 tables
    _commit(root, case.keep + 1, {"protocol": V2_PROTOCOL})
    _spark_style_v2_checkpoint(root, case.keep + 1)
    assert any(h.path.endswith(".parquet") and "_sidecars" in h.path for h in residue(case).hits)
    write_deltalake(str(root), _rows(950, ["hana"]), mode="append", partition_by=["k"])
    keep = case.keep + 2
    t = li.open_table(str(root))
    _finish(t)
    expected = pa.concat_tables([before_upgrade.select(COLUMNS), _rows(950, ["hana"]).select(COLUMNS)])
    assert multiset(t.scan(use_indexes=False)) == multiset(expected)

    assert purge_blockers(t.context) == []
    history = purge_history(t.context, keep_version=keep)
    purge_indexes(t.context)

    report = residue(case)
    assert report.ok, report.to_json()
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == [
        f"{keep:020d}.checkpoint.parquet",
        f"{keep:020d}.json",
        "_last_checkpoint",
        "_sidecars",  # an empty folder on a local disk (object stores have none)
    ]
    assert not list((root / "_delta_log" / "_sidecars").iterdir())
    kept = pq.read_table(root / "_delta_log" / f"{keep:020d}.checkpoint.parquet")
    assert [m["version"] for m in kept["checkpointMetadata"].drop_null().to_pylist()] == [keep]
    assert kept["protocol"].drop_null()[0]["readerFeatures"].as_py() == ["v2Checkpoint"]
    fresh = li.open_table(str(root))
    assert multiset(fresh.scan(use_indexes=False)) == multiset(expected)
    assert fresh.lookup("by_k", SUBJECTS).num_rows == 0
    assert multiset(fresh.lookup("by_k", ["hana"], columns=COLUMNS)) == multiset(_rows(950, ["hana"]))
    assert set(history.versions_purged) == set(range(keep))
    with pytest.raises(VersionPurgedError):
        fresh.snapshot(version_as_of=case.keep + 1)


def test_erase_with_purge_of_a_v2_checkpoint_table(tmp_path: Path) -> None:
    """The whole erase (commit, refresh, purge, verification) on a table upgraded to V2
    checkpoints before the subjects' rows were written."""
    from deltalake import DeltaTable, write_deltalake

    root = tmp_path / "v2"
    write_deltalake(str(root), _rows(0, OTHERS), partition_by=["k"])
    _commit(root, 1, {"protocol": V2_PROTOCOL})
    _spark_style_v2_checkpoint(root, 1)
    for i, batch in enumerate(_batches()):
        write_deltalake(str(root), batch, mode="append", partition_by=["k"])
        if i == 1:
            _spark_style_v2_checkpoint(root, DeltaTable(str(root)).version())
    t = li.open_table(str(root))
    _index(t)
    before = t.scan(use_indexes=False)
    result = t.erase("by_k", SUBJECTS, purge=True)
    assert result.verification is not None and result.verification["ok"]
    fresh = li.open_table(str(root))
    want = Counter(r for r in multiset(before).elements() if r[1] not in SUBJECTS)
    assert multiset(fresh.scan(use_indexes=False)) == want and sum(want.values()) > 0
    assert fresh.lookup("by_k", SUBJECTS).num_rows == 0
    assert not find_residue([str(root)], SUBJECTS).hits


def test_delta_v2_checkpoint_tables_need_a_deltalake_that_writes_v2_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a deltalake release before the one verified to write V2 checkpoints (the installed
    version is what the check reads; here it reports an older one), nothing is changed."""
    from lakehouse_index_delta.write import purge as purge_delta

    case = delta_case(tmp_path, partitioned=False)
    _commit(case.root, case.keep + 1, {"protocol": V2_PROTOCOL})
    t = li.open_table(str(case.root))
    before = listing(tmp_path)
    monkeypatch.setattr(purge_delta, "version", lambda _name: "1.5.2")
    with pytest.raises(UnsupportedFeatureError, match=r"deltalake 1\.5\.2 .*verified from 1\.6\.6"):
        purge_history(t.context, keep_version=case.keep + 1, force=True)
    assert listing(tmp_path) == before
    monkeypatch.undo()
    assert purge_blockers(t.context) == []  # the installed release writes them


def test_delta_v2_checkpoint_whose_kept_checkpoint_has_sidecars_is_refused(tmp_path: Path) -> None:
    """A classic-named checkpoint of the latest version keeping its file actions in sidecars:
    their tombstones would survive the purge, so it is refused, whatever ``force`` says."""
    case = delta_case(tmp_path, partitioned=False)
    root = case.root
    _commit(root, case.keep + 1, {"protocol": V2_PROTOCOL})
    _spark_style_v2_checkpoint(root, case.keep + 1)
    log = root / "_delta_log"
    (uuid_named,) = log.glob(f"{case.keep + 1:020d}.checkpoint.*.parquet")
    uuid_named.rename(log / f"{case.keep + 1:020d}.checkpoint.parquet")  # classic-named, sidecars kept
    before = listing(tmp_path)
    t = li.open_table(str(root))
    with pytest.raises(UnsupportedFeatureError, match="sidecar"):
        purge_blockers(t.context)
    with pytest.raises(UnsupportedFeatureError, match="sidecar"):
        purge_history(t.context, keep_version=case.keep + 1, force=True)
    assert listing(tmp_path) == before


# ---------------------------------------------------------------------- crashes

_PURGE_SCRIPT = textwrap.dedent(
    """
    import sys
    import lakehouse_index as li
    from lakehouse_index.workflows.erasure.purge import purge_history, purge_indexes

    fmt, where, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if fmt == "delta":
        t = li.open_table(where)
    else:
        from pyiceberg.catalog.sql import SqlCatalog

        uri, warehouse = where.split(" ")
        t = li.open_table("db.t", catalog=SqlCatalog("purge", uri=uri, warehouse=warehouse))
    purge_history(t.context, keep_version=keep, force=True)
    purge_indexes(t.context)
    """
)


def _kill_at(case: Case, step: str, tmp: Path) -> None:
    """Run a purge in a subprocess, kill -9 it when it reaches ``step``."""
    marker = tmp / f"paused-{step}"
    where = str(case.root) if case.fmt == "delta" else f"{case.catalog_uri} {case.warehouse}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _PURGE_SCRIPT, case.fmt, where, str(case.keep)],
        env=code_env(**{PAUSE_ENV: f"{step}:{marker}"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the purge ended before step {step}: {proc.stderr.read().decode()}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize(
    ("fmt", "step"),
    [(f, s) for f in ("delta", "iceberg") for s in STEPS[f] + STEPS["indexes"]],
)
def test_kill_at_each_step_leaves_the_table_readable_and_a_rerun_completes(
    tmp_path: Path, fmt: str, step: str
) -> None:
    case = make_case(fmt, tmp_path, partitioned=True, via_erase=True)
    _kill_at(case, step, tmp_path)
    # Killed: the latest version still reads with exactly the kept rows, natively and through us.
    assert multiset(case.native()) == multiset(case.expected)
    t = case.reopen()
    assert multiset(t.scan(use_indexes=False)) == multiset(case.expected)
    # A rerun completes the purge, naming the latest version as the erase's rerun does (for
    # Iceberg, after the first run's replace commit, that is the replace snapshot).
    purge_history(t.context, keep_version=t.latest_version(), force=True)
    purge_indexes(t.context)
    check_purged(case, t)


def _dv_rows(root: Path) -> Counter[tuple[Any, ...]]:
    """The latest version through deltalake's DV-aware scan."""
    from deltalake import DeltaTable

    table = pa.RecordBatchReader.from_stream(DeltaTable(str(root)).scan()).read_all()
    return Counter(tuple(r.values()) for r in table.to_pylist())


def test_delta_deletion_vectors_and_change_data_of_purged_versions_go(tmp_path: Path) -> None:
    """A Spark-written table with CDF files and deletion vectors: kept DVs stay, the rest goes."""
    import shutil

    from tests.support.paths import PEER_TABLES

    root = tmp_path / "t"
    shutil.copytree(PEER_TABLES / "cdf-table-with-cdc-and-dvs", root)
    t = li.open_table(str(root))
    keep = t.latest_version()
    rows = _dv_rows(root)
    kept_dvs = {f for e in t.snapshot().files.values() if e.deletes is not None for f in e.deletes.files()}
    on_disk_dvs = {f"file://{p}" for p in root.rglob("deletion_vector_*.bin")}
    cdc = {f"file://{p}" for p in (root / "_change_data").rglob("*.parquet")}
    assert kept_dvs and cdc and kept_dvs < on_disk_dvs

    history = purge_history(t.context, keep_version=keep, force=bool(purge_blockers(t.context)))

    assert set(history.removed.change_data) == cdc and not (root / "_change_data").exists()
    assert set(history.removed.deletes) == on_disk_dvs - kept_dvs
    assert {f"file://{p}" for p in root.rglob("deletion_vector_*.bin")} == kept_dvs
    assert _dv_rows(root) == rows
    fresh = li.open_table(str(root))
    assert Counter(tuple(r.values()) for r in fresh.scan(use_indexes=False).to_pylist()) == rows
    for v in range(keep):
        with pytest.raises(VersionPurgedError):
            fresh.snapshot(version_as_of=v)


def _live_entries(tbl: Any) -> dict[str, tuple[int, int, int | None]]:
    """Live manifest entries of the head: path → (content, data sequence number, file sequence number)."""
    head = tbl.current_snapshot()
    return {
        e.data_file.file_path: (int(e.data_file.content), e.sequence_number, e.file_sequence_number)
        for m in head.manifests(tbl.io)
        for e in m.fetch_manifest_entry(tbl.io, discard_deleted=True)
    }


def test_iceberg_delete_files_stay_live_with_their_sequence_numbers(tmp_path: Path) -> None:
    """The replace snapshot carries live delete files in a delete manifest, sequence numbers kept."""
    from tests.api.iceberg_index_support import commit_equality_delete

    case = iceberg_case(tmp_path, False)
    cat = _catalog(case.catalog_uri, case.warehouse)
    commit_equality_delete(cat.load_table("db.t"), "k", ["dave"], pa.string())
    cat.load_table("db.t").append(_rows(950, ["hank"]))
    _finish(case.table)
    keep = case.table.latest_version()
    before = _live_entries(cat.load_table("db.t"))
    assert sorted(c for c, _, _ in before.values()).count(2) == 1  # one equality-delete file
    inserted = pa.concat_tables([*_batches(), _rows(900, ["gina"]), _rows(950, ["hank"])])
    want = Counter(r for r in multiset(inserted).elements() if r[1] not in [*SUBJECTS, "dave"])
    assert multiset(case.table.scan(use_indexes=False)) == want

    history = purge_history(case.table.context, keep_version=keep)
    purge_indexes(case.table.context)

    tbl = cat.load_table("db.t")
    assert tbl.current_snapshot().snapshot_id == history.kept_version
    assert _live_entries(tbl) == before
    contents = {int(m.content) for m in tbl.current_snapshot().manifests(tbl.io)}
    assert contents == {0, 1}  # a data manifest and a delete manifest
    fresh = case.reopen()
    assert multiset(fresh.scan(use_indexes=False)) == want
    assert fresh.lookup("by_k", ["dave", *SUBJECTS]).num_rows == 0
    report = residue(case)
    assert report.ok, report.to_json()


def _transient(t: li.Table, name: str, pid: int) -> None:
    """What a process killed mid-optimize leaves: a transient entry by ``host:pid``, no final one."""
    import socket
    from dataclasses import replace

    from lakehouse_index.log.entry import IndexState, Operation

    log = t.context.log(name)
    stable = log.latest_stable()
    assert stable is not None
    log.write(
        replace(
            stable.next(state=IndexState.OPTIMIZING, operation=Operation.OPTIMIZE_FULL),
            writer=f"{socket.gethostname()}:{pid}",
            base_id=stable.id,
        )
    )


def test_an_index_operation_of_a_dead_process_is_cancelled_a_live_one_is_not(tmp_path: Path) -> None:
    from lakehouse_index.errors import IndexBusyError

    case = delta_case(tmp_path, False)
    t = case.table
    purge_history(t.context, keep_version=case.keep)
    _transient(t, "cov", os.getpid())  # alive: this process
    with pytest.raises(IndexBusyError):
        purge_indexes(t.context)
    t.cancel_index("cov")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _transient(t, "by_k", dead.pid)
    report = purge_indexes(t.context)
    assert {i.name: i.state for i in report.indexes} == dict.fromkeys(
        ("by_k", "cov", "skip_k"), li.IndexState.ACTIVE
    )
    check_purged(case, t)


def test_soft_deleted_and_quick_indexes_are_purged_too(tmp_path: Path) -> None:
    """A soft-deleted index is vacuumed away (log included); a quick-refreshed one is refreshed."""
    from deltalake import write_deltalake

    root = tmp_path / "delta"
    for batch in _batches():
        write_deltalake(str(root), batch, mode="append", partition_by=["k"])
    t = li.open_table(str(root))
    _index(t)
    t.create_index(li.SecondaryIndex("gone", key="k"))
    t.create_index(li.SecondaryIndex("quick", key="k", auto_refresh="quick"))
    t.delete_index("gone")
    t.erase("by_k", SUBJECTS, retain_audit=False)  # refreshes the active indexes (quick: pending)
    case = Case(
        "delta", root, t, t.latest_version(), t.scan(use_indexes=False), list(range(t.latest_version()))
    )
    purge_history(t.context, keep_version=case.keep)
    report = purge_indexes(t.context)
    states = {i.name: i.state for i in report.indexes}
    assert states["gone"] is li.IndexState.DOES_NOT_EXIST and states["quick"] is li.IndexState.ACTIVE
    assert [i.name for i in t.indexes()] == ["by_k", "cov", "quick", "skip_k"]
    assert len(list((root / "_lakehouse_index" / "gone" / "_log").glob("*.json"))) == 1
    assert t.lookup("quick", ["carol"]).num_rows == sum(
        1 for r in multiset(case.expected).elements() if r[1] == "carol"
    )
    check_purged(case, t)
