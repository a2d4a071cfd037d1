"""Helpers of the Iceberg index oracle: catalogs, the Python-side filter, crafted equality
deletes, and a Spark+Iceberg writer running in its own process.

The writer runs in a child process because the Iceberg Spark runtime must be on the JVM's
class path when the JVM starts, while the test run shares one plain Spark session (the
``spark`` fixture) that builds and refreshes the indexes. The child reads one JSON request
per line on stdin and answers one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def sql_catalog(directory: str) -> Any:
    """An embedded pyiceberg SqlCatalog (SQLite) with namespace ``db``, warehouse under ``directory``."""
    from pyiceberg.catalog.sql import SqlCatalog

    wh = Path(directory) / "warehouse"
    wh.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("oracle", uri=f"sqlite:///{directory}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("db")
    return catalog


def key_filter(full: pa.Table, probe: Sequence[Any], key: Sequence[str]) -> pa.Table:
    """Rows of ``full`` whose key is one of ``probe`` (tuples for composite keys; None matches null)."""
    wanted = set(probe)
    cols = [full[c].to_pylist() for c in key]
    mask = [(t if len(key) > 1 else t[0]) in wanted for t in zip(*cols, strict=True)]
    return full.filter(pa.array(mask, pa.bool_()))


def main_lineage(table: Any) -> list[int]:
    """Snapshot ids of the main branch's ancestry, oldest first (pyiceberg metadata)."""
    meta = table.metadata
    out = []
    snap = table.current_snapshot()
    while snap is not None:
        out.append(snap.snapshot_id)
        snap = meta.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return out[::-1]


def commit_equality_delete(table: Any, column: str, values: Sequence[Any], arrow_type: pa.DataType) -> None:
    """Commit an equality-delete file on ``column`` (unpartitioned table) as a new snapshot of main.

    pyiceberg cannot write equality deletes: the Parquet file is written with pyarrow and
    committed with pyiceberg's low-level manifest and manifest-list writers.
    """
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        write_manifest_list,
    )
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
    from pyiceberg.typedef import Record

    from tests.support.iceberg_manifests import DeleteManifestWriter

    field_id = table.schema().find_field(column).field_id
    cur = table.current_snapshot()
    new_id = abs(uuid.uuid4().int) >> 65
    seq = table.metadata.last_sequence_number + 1
    loc = table.location().removeprefix("file://")
    path = f"{loc}/data/eq-delete-{uuid.uuid4().hex}.parquet"
    fid_meta = {b"PARQUET:field_id": str(field_id).encode()}
    schema = pa.schema([pa.field(column, arrow_type, metadata=fid_meta)])
    pq.write_table(pa.table({column: pa.array(list(values), arrow_type)}, schema=schema), path)
    data_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=f"file://{path}",
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(values),
        file_size_in_bytes=os.path.getsize(path),
        equality_ids=[field_id],
    )
    spec = table.spec()
    data_file.spec_id = spec.spec_id
    io = table.io
    manifest_path = f"file://{loc}/metadata/{uuid.uuid4()}-m-deletes.avro"
    with DeleteManifestWriter(spec, table.schema(), io.new_output(manifest_path), new_id, "deflate") as w:
        w.add(
            ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=new_id, data_file=data_file)
        )
    list_path = f"file://{loc}/metadata/snap-{new_id}-{uuid.uuid4()}.avro"
    with write_manifest_list(2, io.new_output(list_path), new_id, cur.snapshot_id, seq, "deflate") as lw:
        lw.add_manifests([*cur.manifests(io), w.to_manifest_file()])
    # pyiceberg's metadata classes are pydantic models with aliased fields: keyword dicts keep mypy quiet.
    snapshot_fields: dict[str, Any] = {
        "snapshot_id": new_id,
        "parent_snapshot_id": cur.snapshot_id,
        "sequence_number": seq,
        "timestamp_ms": cur.timestamp_ms + 1,
        "manifest_list": list_path,
        "summary": Summary(Operation.DELETE),
        "schema_id": table.schema().schema_id,
    }
    snap = Snapshot(**snapshot_fields)
    assert_ref: dict[str, Any] = {"snapshot_id": cur.snapshot_id, "ref": "main"}
    set_ref: dict[str, Any] = {"ref_name": "main", "type": SnapshotRefType.BRANCH, "snapshot_id": new_id}
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(**assert_ref),),
        (AddSnapshotUpdate(snapshot=snap), SetSnapshotRefUpdate(**set_ref)),
    )


def index_snapshots(table: Any, name: str) -> list[Any]:
    """The retained ACTIVE snapshots (log entries) of an index, oldest first."""
    from lakehouse_index.log.store import IndexCatalog

    return list(IndexCatalog(table.storage, table.index_root).log(name).active_snapshots())


def locate_via(table: Any, entry: Any, version: int, probe: Sequence[Any]) -> tuple[pa.Table, Any]:
    """``locate`` answered from one given index snapshot (not the planner's choice), and its coverage.

    Forcing each snapshot proves every (index snapshot, table version) pair: exact windows
    through the LSM entries and hybrid repairs in both directions.
    """
    from lakehouse_index.io import join_uri
    from lakehouse_index.query import lookup as lk

    plan = lk.plan_lookup(table.source, entry, table.snapshot(version), probe)
    return lk.locate(table.source, table.storage, join_uri(table.index_root, entry.name), plan), plan.coverage


# ---------------------------------------------------------------------- Spark+Iceberg in a child


class SparkIcebergWriter:
    """A Spark session with the Iceberg runtime in a child process (Hadoop catalog ``local``)."""

    def __init__(self, warehouse: str) -> None:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.api.iceberg_index_support", warehouse],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            cwd=str(ROOT),
            env=env,
        )
        self._call({"op": "ping"})

    def _call(self, request: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Spark+Iceberg child exited (code {self.proc.poll()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"Spark+Iceberg child failed on {request}: {reply['error']}")
        return reply["result"]

    def sql(self, statement: str) -> list[list[Any]]:
        """Run one statement; its result rows (lists of JSON values)."""
        rows: list[list[Any]] = self._call({"op": "sql", "sql": statement})
        return rows

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _serve(warehouse: str) -> None:
    """The child's loop: stdout carries only replies (Spark logs go to stderr)."""
    from tests.support.spark_iceberg import spark_session

    out = sys.stdout
    sys.stdout = sys.stderr
    spark = spark_session(warehouse)
    spark.sparkContext.setLogLevel("ERROR")
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "ping":
                result: Any = "pong"
            else:
                result = [list(r) for r in spark.sql(request["sql"]).collect()]
            out.write(json.dumps({"result": result}) + "\n")
        except Exception as e:  # reported to the parent, which raises
            out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
    spark.stop()


if __name__ == "__main__":
    _serve(sys.argv[1])
