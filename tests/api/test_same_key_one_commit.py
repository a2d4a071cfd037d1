"""A delete and an insert/update of the same key in ONE commit must not lose (or duplicate) rows.

Hudi lost data when a delete and an update of the same record key met in one commit (its
index merged them by key and the delete won). Here each scenario is one table commit in
which the same (secondary key, record key) pair is deleted and written again, or a record
key changes its secondary key while a new row takes the old one:

* deltalake MERGE (copy-on-write): matched-delete of a row plus not-matched-insert of a
  row with the same ``k`` and ``id``; matched-update of ``k`` plus an insert of the old ``k``
  for the same ``id``;
* deltalake UPDATE of the key column (DEL of the old key + PUT of the new one, same ``id``);
* hand-made merge-on-read commits (deletion vector + added file in the same commit), the
  way Spark/Databricks write MERGE with deletion vectors — deltalake cannot write them but
  reads them, and is the oracle;
* Spark+Iceberg merge-on-read MERGE (position deletes / v3 deletion vectors + a new data
  file in one snapshot), checked against Spark's ``VERSION AS OF`` read.

After each refresh mode, ``lookup`` and ``locate`` of a secondary index (single record key
and composite record key), a composite-key index and a covering index, at EVERY table
version, equal the independent reader's rows; ``locate`` is answered through every
retained index snapshot (not only the planner's choice), and every located ``(_file,
_row)`` holds the row it claims.
"""

from __future__ import annotations

import json
import os
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_index_support import index_snapshots, key_filter, locate_via
from pyroaring import BitMap64

import lakehouse_index as li
from tests.support.oracle import rows_multiset

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()), ("note", pa.string())])
ALL = ["id", "k", "g", "note"]
#: Keys probed: every value the scenarios use, a missing one, null.
PROBE: list[Any] = ["a", "b", "c", "", "ü", None, "missing"]
INDEXES = ("by_k", "by_k_rk2", "by_kg", "cov")


def batch(ids: list[int], ks: list[Any], note: str = "n") -> pa.Table:
    return pa.table(
        {"id": ids, "k": ks, "g": [i % 3 for i in ids], "note": [f"{note}{i}" for i in ids]}, schema=SCHEMA
    )


def create_indexes(t: li.Table, spark: Any) -> None:
    t.planner_config = li.PlannerConfig(force_index=True)  # tiny tables: answer through the index
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    t.create_index(li.SecondaryIndex("by_k_rk2", key="k", record_key=["id", "g"]), spark=spark)
    t.create_index(li.SecondaryIndex("by_kg", key=["k", "g"], record_key="id"), spark=spark)
    t.create_index(
        li.CoveringIndex("cov", indexed="k", included=["id", "g", "note"], num_buckets=2), spark=spark
    )


def check_version(t: li.Table, full: pa.Table, version: int) -> None:
    """Every index answers ``version`` like ``full`` (the independent reader's rows of it)."""
    want = key_filter(full, PROBE, ("k",))
    for name in ("by_k", "by_k_rk2", "cov"):
        got = t.lookup(name, PROBE, version_as_of=version)
        assert rows_multiset(got, ALL) == rows_multiset(want, ALL), (name, version)
    cov_only = t.lookup("cov", PROBE, version_as_of=version, columns=["k", "id", "g", "note"])
    assert rows_multiset(cov_only, ALL) == rows_multiset(want, ALL), ("cov index-only", version)
    loc = t.locate("by_k", PROBE, version_as_of=version)
    assert rows_multiset(loc, ["k", "id"]) == rows_multiset(want, ["k", "id"]), version
    loc2 = t.locate("by_k_rk2", PROBE, version_as_of=version)
    assert rows_multiset(loc2, ["k", "id", "g"]) == rows_multiset(want, ["k", "id", "g"]), version
    probe_kg = [(k, g) for k in PROBE for g in (0, 1, 2, 10, 11, 12)]
    want_kg = key_filter(full, probe_kg, ("k", "g"))
    got_kg = t.lookup("by_kg", probe_kg, version_as_of=version, columns=ALL)
    assert rows_multiset(got_kg, ALL) == rows_multiset(want_kg, ALL), ("by_kg", version)
    # Each located address really holds its row (read with pyarrow, no deletes needed: the
    # oracle above already says the set of rows is right).
    for r in loc.to_pylist():
        data = pq.read_table(r["_file"].removeprefix("file://"), columns=["k", "id"]).slice(r["_row"], 1)
        assert data.to_pylist() == [{"k": r["k"], "id": r["id"]}], r
    # Every retained snapshot of by_k answers this version (exact window or repaired).
    for entry in index_snapshots(t, "by_k"):
        via, _ = locate_via(t, entry, version, PROBE)
        assert rows_multiset(via, ["k", "id"]) == rows_multiset(want, ["k", "id"]), (version, entry.id)


def assert_same_ids_deleted_and_written(before: pa.Table, after: pa.Table) -> None:
    """The commit from ``before`` to ``after`` removed rows and wrote rows with the same ``id``
    (and, for some, the same ``k``): the situation under test really happened."""
    b, a = rows_multiset(before, ALL), rows_multiset(after, ALL)
    gone, new = b - a, a - b
    assert {r[0] for r in gone} & {r[0] for r in new}, (gone, new)


# ---------------------------------------------------------------------- Delta


def delta_rows(path: str, version: int) -> pa.Table:
    """deltalake's rows of ``version`` (``scan()`` applies deletion vectors)."""
    dt = DeltaTable(path, version=version)
    return pa.RecordBatchReader.from_stream(dt.scan()).read_all().select(ALL).cast(SCHEMA)


def merge_delete_and_reinsert(path: str) -> None:
    """One MERGE: rows deleted and rows with the same (k, id) inserted; a key update plus the old
    key re-inserted for the same id; a null key deleted and re-inserted."""
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    by_id = {r["id"]: r for r in rows}
    deleted = [by_id[i] for i in (1, 9, 3)]  # k = 'b', 'a', None (see the fixture)
    updated = by_id[0]  # k = 'a' → 'c'
    src = []
    for r in deleted:
        src.append({**r, "note": "del", "op": "D"})
        src.append({**r, "g": r["g"] + 10, "note": "again", "op": "I"})  # same k and id, new row
    src.append({**updated, "k": "c", "note": "upd", "op": "U"})
    src.append({**updated, "g": updated["g"] + 10, "note": "old-key", "op": "I"})
    source = pa.Table.from_pylist(src, schema=SCHEMA.append(pa.field("op", pa.string())))
    (
        DeltaTable(path)
        .merge(source, predicate="t.id = s.id AND t.g = s.g", source_alias="s", target_alias="t")
        .when_matched_delete(predicate="s.op = 'D'")
        .when_matched_update(updates={"k": "s.k", "note": "s.note"}, predicate="s.op = 'U'")
        .when_not_matched_insert(updates={c: f"s.{c}" for c in ALL})
        .execute()
    )


def update_key(path: str) -> None:
    """One UPDATE moving ids between keys (DEL old key + PUT new key for the same id), null included."""
    DeltaTable(path).update(
        predicate="id % 4 = 1",
        updates={"k": "CASE WHEN k = 'a' THEN 'b' WHEN k = 'b' THEN NULL ELSE 'a' END"},
    )


# Hand-made merge-on-read commits (deletion vectors), checked by deltalake's reader.

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value, chunk = int.from_bytes(data[i : i + 4], "big"), ""
        for _ in range(5):
            value, r = divmod(value, 85)
            chunk = _Z85[r] + chunk
        out.append(chunk)
    return "".join(out)


def _inline_dv(positions: list[int]) -> dict[str, Any]:
    payload = struct.pack("<i", 1681511377) + BitMap64(positions).serialize()
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85(payload),
        "sizeInBytes": len(payload),
        "cardinality": len(positions),
    }


class DeltaCommitter:
    """Writes Delta commits by hand: deletion vectors and new files in one commit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.dvs: dict[str, dict[str, Any] | None] = {}
        self.protocol_done = False

    def _file(self, rel: str) -> dict[str, Any]:
        log = Path(self.path) / "_delta_log"
        for f in sorted(log.glob("*.json")):
            for line in f.read_text().splitlines():
                a = json.loads(line)
                if "add" in a and a["add"]["path"] == rel:
                    return dict(a["add"])
        raise KeyError(rel)

    def add_file(self, data: pa.Table) -> dict[str, Any]:
        rel = f"part-mor-{uuid.uuid4().hex}.parquet"
        pq.write_table(data, os.path.join(self.path, rel))
        return {
            "add": {
                "path": rel,
                "partitionValues": {},
                "size": os.path.getsize(os.path.join(self.path, rel)),
                "modificationTime": int(time.time() * 1000),
                "dataChange": True,
                "stats": json.dumps({"numRecords": data.num_rows}),
            }
        }

    def set_dv(self, rel: str, positions: list[int]) -> list[dict[str, Any]]:
        """remove + add of ``rel`` with a deletion vector of ``positions`` (the previous one removed)."""
        old = self.dvs.get(rel)
        f = self._file(rel)
        rm: dict[str, Any] = {"path": rel, "dataChange": True, "deletionTimestamp": int(time.time() * 1000)}
        if old is not None:
            rm["deletionVector"] = old
        dv = _inline_dv(positions) if positions else None
        add = {k: f[k] for k in ("path", "partitionValues", "size", "modificationTime", "stats")}
        add["dataChange"] = True
        if dv is not None:
            add["deletionVector"] = dv
        self.dvs[rel] = dv
        return [{"remove": rm}, {"add": add}]

    def commit(self, actions: list[dict[str, Any]]) -> None:
        version = DeltaTable(self.path).version() + 1
        head: list[dict[str, Any]] = [
            {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "MERGE"}}
        ]
        if not self.protocol_done:
            head.append(
                {
                    "protocol": {
                        "minReaderVersion": 3,
                        "minWriterVersion": 7,
                        "readerFeatures": ["deletionVectors"],
                        "writerFeatures": ["deletionVectors"],
                    }
                }
            )
            self.protocol_done = True
        text = "\n".join(json.dumps(a) for a in [*head, *actions]) + "\n"
        fd = os.open(
            os.path.join(self.path, "_delta_log", f"{version:020d}.json"),
            os.O_CREAT | os.O_EXCL | os.O_WRONLY,
        )
        with os.fdopen(fd, "w") as out:
            out.write(text)


def mor_commits(path: str) -> None:
    """Three merge-on-read commits, each a DV change and an added file with the same keys."""
    c = DeltaCommitter(path)
    first = sorted(os.path.relpath(u.removeprefix("file://"), path) for u in DeltaTable(path).file_uris())[0]
    rows = pq.read_table(os.path.join(path, first)).to_pylist()  # physical order = row positions
    same = [p for p, r in enumerate(rows) if r["k"] in ("a", None)]
    # 1. Rows with k 'a' / null deleted by a DV and written again, unchanged keys, new note, in a
    #    new file — plus one of them under a new key.
    again = [rows[p] for p in same]
    new = [{**r, "note": "mor1"} for r in again] + [{**again[0], "k": "b", "note": "mor1-moved"}]
    c.commit([*c.set_dv(first, same), c.add_file(pa.Table.from_pylist(new, schema=SCHEMA))])
    # 2. The DV grows by one row while another file re-adds that very row's (k, id).
    p = next(i for i, r in enumerate(rows) if i not in same)
    c.commit(
        [
            *c.set_dv(first, [*same, p]),
            c.add_file(pa.Table.from_pylist([{**rows[p], "note": "mor2"}], schema=SCHEMA)),
        ]
    )
    # 3. RESTORE-like: the DV shrinks (the first deleted row is live again) in the same commit as a
    #    new file holding a row with the same (k, id): two live rows with one key pair.
    c.commit(
        [
            *c.set_dv(first, [*same[1:], p]),
            c.add_file(pa.Table.from_pylist([{**rows[same[0]], "note": "mor3"}], schema=SCHEMA)),
        ]
    )


SCENARIOS: dict[str, Callable[[str], None]] = {
    "merge-delete-and-reinsert": merge_delete_and_reinsert,
    "update-key": update_key,
    "deletion-vector-and-add": mor_commits,
}


@pytest.fixture
def delta_table(tmp_path: Path, spark: Any) -> tuple[str, li.Table]:
    """Three files of 12 rows: duplicate keys, null keys, unicode and empty keys."""
    path = str(tmp_path / "t")
    pool: list[Any] = ["a", "b", "a", None, "c", "", "ü", "b", "a"]
    for f in range(3):
        ids = list(range(f * 12, f * 12 + 12))
        # id 0 → 'a', 1 → 'b', 3 → None, 9 → 'a' (the MERGE scenario relies on these)
        write_deltalake(path, batch(ids, [pool[i % 9] for i in ids]), mode="append")
    t = li.open_table(path)
    create_indexes(t, spark)
    return path, t


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("mode", ["incremental", "incremental-no-remap", "quick", "full"])
def test_delete_and_write_of_one_key_in_one_delta_commit(
    delta_table: tuple[str, li.Table], spark: Any, scenario: str, mode: str
) -> None:
    path, t = delta_table
    indexed = DeltaTable(path).version()
    SCENARIOS[scenario](path)
    head = DeltaTable(path).version()
    assert head > indexed
    reads = {v: delta_rows(path, v) for v in range(head + 1)}
    assert_same_ids_deleted_and_written(reads[indexed], reads[indexed + 1])

    # Stale index first (hybrid scan), then the refresh under test.
    for v in range(head + 1):
        check_version(t, reads[v], v)
    refresh_mode = mode.split("-")[0]
    for name in INDEXES:
        info = t.refresh_index(name, mode=refresh_mode, spark=spark, remap=mode != "incremental-no-remap")
        if refresh_mode != "quick":
            assert info.indexed_version == head
    for v in range(head + 1):
        check_version(t, reads[v], v)
    if mode == "incremental":
        # Tombstones dropped by a full optimize: the same answers.
        for name in INDEXES:
            t.optimize_index(name, mode="full", spark=spark)
        for v in range(head + 1):
            check_version(t, reads[v], v)


# ---------------------------------------------------------------------- Iceberg (Spark, merge-on-read)

MOR = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)
CATALOG = "samekey"


@pytest.fixture(scope="module")
def iceberg_spark(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The run's Spark session with a Hadoop Iceberg catalog of its own (``samekey``)."""
    from tests.support.spark_iceberg import spark_session

    wh = tmp_path_factory.mktemp("samekey_wh")
    return spark_session(wh, catalog=CATALOG), wh


def spark_rows(session: Any, table: str, sid: int) -> pa.Table:
    rows = session.sql(f"SELECT id, k, g, note FROM {table} VERSION AS OF {sid}").collect()
    return pa.Table.from_pylist([r.asDict() for r in rows], schema=SCHEMA)


@pytest.mark.integration
@pytest.mark.iceberg_spark
@pytest.mark.parametrize("format_version", [2, 3])
@pytest.mark.parametrize("mode", ["incremental", "quick", "full"])
def test_delete_and_write_of_one_key_in_one_iceberg_snapshot(
    iceberg_spark: tuple[Any, Path], spark: Any, format_version: int, mode: str
) -> None:
    session, wh = iceberg_spark
    name = f"t_v{format_version}_{mode}"
    table = f"{CATALOG}.db.{name}"
    session.sql(
        f"CREATE TABLE {table} (id bigint, k string, g int, note string) USING iceberg "
        f"TBLPROPERTIES ('format-version'='{format_version}', {MOR})"
    )
    k_expr = (
        "CASE WHEN id % 9 = 5 THEN NULL "
        "ELSE element_at(array('a', 'b', 'a', 'c', '', 'ü', 'b', 'a'), CAST(id % 8 AS INT) + 1) END"
    )
    for lo in (0, 12, 24):
        session.sql(
            f"INSERT INTO {table} SELECT id, {k_expr}, CAST(id % 3 AS INT), CONCAT('n', id) "
            f"FROM range({lo}, {lo + 12})"
        )
    t = li.open_table(str(wh / "db" / name))
    create_indexes(t, spark)
    indexed = t.latest_version()
    # One MERGE: delete rows and insert rows with the same (k, id); update a key and re-insert the
    # old key for the same id; a null key deleted and re-inserted.
    session.sql(
        f"MERGE INTO {table} d USING ("
        f"  SELECT id, k, g, 'D' AS op FROM {table} WHERE id IN (0, 1, 5) "
        f"  UNION ALL SELECT id, k, g + 10, 'I' FROM {table} WHERE id IN (0, 1, 5) "
        f"  UNION ALL SELECT id, 'c', g, 'U' FROM {table} WHERE id = 2 "
        f"  UNION ALL SELECT id, k, g + 10, 'I' FROM {table} WHERE id = 2"
        f") s ON d.id = s.id AND d.g = s.g "
        f"WHEN MATCHED AND s.op = 'D' THEN DELETE "
        f"WHEN MATCHED AND s.op = 'U' THEN UPDATE SET k = s.k, note = 'upd' "
        f"WHEN NOT MATCHED THEN INSERT (id, k, g, note) VALUES (s.id, s.k, s.g, 'again')"
    )
    # One UPDATE of the key (merge-on-read: a delete and an insert of each id in one snapshot).
    session.sql(f"UPDATE {table} SET k = CASE WHEN k = 'a' THEN 'b' ELSE 'a' END WHERE id % 4 = 1")
    lineage = [
        r[0]
        for r in session.sql(
            f"SELECT snapshot_id FROM {table}.history WHERE is_current_ancestor ORDER BY made_current_at"
        ).collect()
    ]
    assert lineage[-3] == indexed
    head = t.latest_version()
    snap = t.snapshot(head)
    assert any(f.deletes is not None for f in snap.files.values())  # really merge-on-read
    reads = {sid: spark_rows(session, table, sid) for sid in lineage}
    assert_same_ids_deleted_and_written(reads[lineage[-3]], reads[lineage[-2]])

    for sid in lineage:
        check_version_iceberg(t, reads[sid], sid)
    for name_ in INDEXES:
        info = t.refresh_index(name_, mode=mode, spark=spark)
        if mode != "quick":
            assert info.indexed_version == head
    for sid in lineage:
        check_version_iceberg(t, reads[sid], sid)


def check_version_iceberg(t: li.Table, full: pa.Table, sid: int) -> None:
    """As :func:`check_version`, without the raw Parquet check (Iceberg files hold field ids)."""
    want = key_filter(full, PROBE, ("k",))
    for name in ("by_k", "by_k_rk2", "cov"):
        got = t.lookup(name, PROBE, version_as_of=sid)
        assert rows_multiset(got, ALL) == rows_multiset(want, ALL), (name, sid)
    loc = t.locate("by_k_rk2", PROBE, version_as_of=sid)
    assert rows_multiset(loc, ["k", "id", "g"]) == rows_multiset(want, ["k", "id", "g"]), sid
    probe_kg = [(k, g) for k in PROBE for g in (0, 1, 2, 10, 11, 12)]
    want_kg = key_filter(full, probe_kg, ("k", "g"))
    got_kg = t.lookup("by_kg", probe_kg, version_as_of=sid, columns=ALL)
    assert rows_multiset(got_kg, ALL) == rows_multiset(want_kg, ALL), ("by_kg", sid)
    for entry in index_snapshots(t, "by_k"):
        via, _ = locate_via(t, entry, sid, PROBE)
        assert rows_multiset(via, ["k", "id"]) == rows_multiset(want, ["k", "id"]), (sid, entry.id)
