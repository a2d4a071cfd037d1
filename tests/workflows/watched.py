"""A table of either format watched by ``lakehouse-index watch`` subprocesses, and its oracles.

``watched_table(tmp_path, fmt)`` gives a Delta table (by path) or an Iceberg table (SQLite
catalog, which subprocesses reach through ``PYICEBERG_CATALOG__*`` variables) with the
indexes of :func:`tests.workflows.helpers.create_indexes`, the format library's own writes
(foreign commits), and its readers: rows at a version, every version so far, the data
files live at a version and each version's ordinal. :func:`watcher` starts a watcher on
it; :func:`exactly_once` proves from the index log that every commit was applied once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import lakehouse_index as li
from lakehouse_index.io import canonical_uri
from lakehouse_index.kinds.entries import FILE_ID, OP, ROW, VERSION
from lakehouse_index.log.entry import IndexState, LogEntry, Operation
from lakehouse_index.log.store import IndexCatalog
from tests.support.paths import REPO_ROOT, code_env
from tests.workflows.helpers import create_indexes, rows

CATALOG = "watched"


@dataclass(frozen=True)
class Watched:
    """A watched table, its foreign writer and its oracles."""

    fmt: str
    t: li.Table
    #: Arguments naming the table on the ``lakehouse-index watch`` command line.
    cli_args: tuple[str, ...]
    #: Environment of subprocesses that open it (this checkout's code, the catalog).
    env: dict[str, str]
    native_append: Callable[[pa.Table], object]
    native_delete: Callable[[str], object]
    #: The format library's rows at a version.
    read: Callable[[Any], pa.Table]
    #: Every version so far, oldest first.
    versions: Callable[[], list[Any]]
    #: Canonical URIs of the data files live at a version.
    files_at: Callable[[Any], set[str]]
    #: The ordinal (Delta version, Iceberg sequence number) of a version.
    ordinal_of: Callable[[Any], int]


def watched_table(tmp_path: Path, fmt: str, first: list[tuple[int, str, int, int, str]]) -> Watched:
    """A Delta or Iceberg table partitioned by ``p`` holding ``first``, with the helpers' indexes."""
    return _delta(tmp_path, first) if fmt == "delta" else _iceberg(tmp_path, first)


def _delta(tmp_path: Path, first: list[tuple[int, str, int, int, str]]) -> Watched:
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, rows(first), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)

    loaded: list[DeltaTable] = []

    def files_at(v: Any) -> set[str]:
        # one table object moved from version to version: deltalake replays only the commits
        # in between when moving forward (the oracle walks every version in order)
        if not loaded:
            loaded.append(DeltaTable(path, version=v))
        loaded[0].load_as_version(v)
        return {canonical_uri(u) for u in loaded[0].file_uris()}

    return Watched(
        fmt="delta",
        t=t,
        cli_args=(path,),
        env=code_env(),
        native_append=lambda data: write_deltalake(path, data, mode="append"),
        native_delete=lambda where: DeltaTable(path).delete(where),
        read=lambda v: DeltaTable(path, version=v).to_pyarrow_table(),
        versions=lambda: list(range(DeltaTable(path).version() + 1)),
        files_at=files_at,
        ordinal_of=int,
    )


def _iceberg(tmp_path: Path, first: list[tuple[int, str, int, int, str]]) -> Watched:
    from pyiceberg.catalog.sql import SqlCatalog

    from tests.api.iceberg_index_support import main_lineage
    from tests.workflows.helpers import SCHEMA

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    props = {"uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{warehouse}"}
    catalog = SqlCatalog(CATALOG, **props)
    catalog.create_namespace("db")
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(first))
    t = li.open_table("db.t", catalog=catalog)
    create_indexes(t)

    def load() -> Any:
        return catalog.load_table("db.t")

    def files_at(v: Any) -> set[str]:
        return {canonical_uri(task.file.file_path) for task in load().scan(snapshot_id=v).plan_files()}

    def ordinal_of(v: Any) -> int:
        snapshot = load().metadata.snapshot_by_id(v)
        assert snapshot is not None
        return int(snapshot.sequence_number)

    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    return Watched(
        fmt="iceberg",
        t=t,
        cli_args=("db.t", "--catalog", CATALOG),
        env=code_env(**{prefix + k.upper(): v for k, v in props.items()}),
        native_append=lambda data: load().append(data),
        native_delete=lambda where: load().delete(where),
        read=lambda v: load().scan(snapshot_id=v).to_arrow(),
        versions=lambda: main_lineage(load()),
        files_at=files_at,
        ordinal_of=ordinal_of,
    )


class Watcher:
    """A ``lakehouse-index watch --json`` subprocess; its JSON lines are collected as they come."""

    def __init__(self, w: Watched, interval: float, *, python: str | None = None) -> None:
        """``python``: code run instead of the plain CLI (it must end by calling the CLI's main)."""
        head = (
            [sys.executable, "-m", "lakehouse_index.cli"]
            if python is None
            else [sys.executable, "-c", python]
        )
        self.proc = subprocess.Popen(
            [*head, "watch", *w.cli_args, "--interval", str(interval), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=w.env,
            cwd=str(REPO_ROOT),
        )
        self.lines: list[dict[str, Any]] = []
        self.first = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append(json.loads(line))
                self.first.set()
        self.first.set()

    def stop(self, sig: int) -> tuple[int, str]:
        """Send ``sig``, wait for the exit; (return code, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join()
        assert self.proc.stderr is not None
        return self.proc.returncode, self.proc.stderr.read()


def index_log(t: li.Table, name: str) -> list[LogEntry]:
    """Every entry of an index's log, oldest first."""
    return IndexCatalog(t.storage, t.index_root).log(name).entries()


def exactly_once(w: Watched, name: str) -> list[LogEntry]:
    """Prove that every table commit was applied to incremental index ``name`` exactly once.

    * the stable ACTIVE entries' versions strictly ascend (no commit range applied twice);
    * the final file-id map lists every data file that any version held exactly once,
      stamped with the ordinal of the commit that added it and (when gone) of the commit
      that removed it, as the format library's own history says (no commit skipped);
    * the index data holds no (file, row, version, op) entry twice.

    Returns the stable ACTIVE entries, oldest first.
    """
    log = IndexCatalog(w.t.storage, w.t.index_root).log(name)
    active = [e for e in log.entries() if e.state is IndexState.ACTIVE]
    assert {e.operation for e in active} <= {
        Operation.CREATE,
        Operation.REFRESH_INCREMENTAL,
        Operation.CANCEL,
    }
    # a cancel restores the state before the cancelled operation: it applies nothing
    applied = [e for e in active if e.operation is not Operation.CANCEL]
    ordinals = [e.source.ordinal for e in applied]
    assert ordinals == sorted(set(ordinals)), ordinals
    final = active[-1]
    added: dict[str, int] = {}
    removed: dict[str, int] = {}
    live: set[str] = set()
    for v in w.versions():
        ordinal = w.ordinal_of(v)
        files = w.files_at(v)
        for path in files - live:
            added[path] = ordinal
        for path in live - files:
            removed[path] = ordinal
        live = files
    paths = Counter(f.path for f in final.source.files)
    assert set(paths) == set(added) and set(paths.values()) == {1}, "file map differs from the table history"
    for f in final.source.files:
        assert f.added_ordinal == added[f.path], (f.path, f.added_ordinal, added[f.path])
        assert f.removed_ordinal == removed.get(f.path), (f.path, f.removed_ordinal, removed.get(f.path))
    keys: Counter[tuple[int, int, int, int]] = Counter()
    for index_file in final.content.files:
        fs, path = w.t.storage.arrow(log.uri(index_file.path))
        table = pq.read_table(path, filesystem=fs, columns=[FILE_ID, ROW, VERSION, OP])
        keys.update(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))
    assert keys and max(keys.values()) == 1, [k for k, n in keys.items() if n > 1][:5]
    return active


def watcher_script(marker: str) -> str:
    """Python for ``Watcher(python=...)``: the CLI watcher whose first incremental refresh
    signals ``marker`` (creates the file, holding its pid) from inside its body, after its
    transient log entry, and then blocks (the test kills it there)."""
    return (
        "import os, sys, time\n"
        "from lakehouse_index.maintenance import refresh\n"
        "def blocked(*args, **kwargs):\n"
        # Written whole, then renamed: the test reads the pid as soon as the file exists.
        f"    with open({marker + '.tmp'!r}, 'w') as f:\n"
        "        f.write(str(os.getpid()))\n"
        f"    os.replace({marker + '.tmp'!r}, {marker!r})\n"
        "    time.sleep(3600)\n"
        "refresh.incremental = blocked\n"
        "from lakehouse_index.cli import main\n"
        "sys.argv = ['lakehouse-index', *sys.argv[1:]]\n"
        "main()\n"
    )


def pid_alive(pid: int) -> bool:
    """Whether a process exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
