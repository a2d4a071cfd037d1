"""Lifecycle corner cases of issue 5, through the public API on real tables:

* a refresh with nothing to do is a no-op, not a new version — every mode, every index
  kind, Delta and Iceberg; and a quick refresh's pending changes are something to do;
* cancel returns a stuck index to its last stable state — for every kind of operation a
  process can die in (create, refresh, optimize, delete, restore, vacuum), the process is
  really killed (SIGKILL) right after its transient entry;
* an index on a column later dropped from the table (secondary key, record key, covering
  indexed and included columns) → clear errors naming the column, nothing changed, time
  travel to before the drop still answered, the other indexes unaffected — Delta and Iceberg.

Oracles: deltalake / pyiceberg reads, log entries and the side-car tree read as plain files.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from enginetest_helpers import (
    INDEX,
    SNAPSHOT_FIELDS,
    batch,
    check_answers,
    latest_stable,
    log_entries,
    make_table,
    secondary,
    sidecar_tree,
)
from enginetest_stuck_workers import OPERATIONS, operate_and_die

import lakehouse_index as li
from lakehouse_index.errors import IndexBusyError

pytestmark = pytest.mark.spark


# ---------------------------------------------------------------------- tables of both formats


class Fmt:
    """A small table of one format: batches of ``enginetest_helpers.batch`` rows, and its reader."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind = kind
        self.root = root
        if kind == "iceberg":
            from pyiceberg.catalog.sql import SqlCatalog

            wh = root / "wh"
            wh.mkdir()
            self.catalog = SqlCatalog("noop", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{wh}")
            self.catalog.create_namespace("db")
            self.ice = self.catalog.create_table("db.t", batch(0).schema, properties={"format-version": "2"})
            self.path = Path(self.ice.location().removeprefix("file://"))
        else:
            self.path = root / "t"

    def append(self, b: int) -> None:
        if self.kind == "iceberg":
            self.ice.append(batch(b))
        else:
            write_deltalake(str(self.path), batch(b), mode="append")

    def open(self) -> li.Table:
        if self.kind == "iceberg":
            return li.open_table("db.t", catalog=self.catalog)
        return li.open_table(str(self.path))

    def rows(self) -> pa.Table:
        if self.kind == "iceberg":
            return self.catalog.load_table("db.t").scan().to_arrow()
        return DeltaTable(str(self.path)).to_pyarrow_table()


def answers_equal(t: li.Table, fmt: Fmt, keys: list[Any]) -> None:
    full = fmt.rows()
    wanted = set(keys)
    want = Counter((r["k"], r["id"]) for r in full.to_pylist() if r["k"] in wanted)
    for name in (INDEX, "cov"):
        got = t.lookup(name, keys, columns=["k", "id"]).to_pylist()
        assert Counter((r["k"], r["id"]) for r in got) == want, name


# ---------------------------------------------------------------------- no-op refreshes


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_refresh_with_nothing_to_do_writes_nothing(tmp_path: Path, spark: Any, kind: str) -> None:
    fmt = Fmt(kind, tmp_path)
    for b in range(3):
        fmt.append(b)
    t = fmt.open()
    t.create_index(secondary(), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id", "batch"], num_buckets=2), spark=spark)
    t.create_index(li.SkippingIndex("skip", columns=["k", "batch"]))
    names = (INDEX, "cov", "skip")
    keys: list[Any] = ["k0", "k3", "rare", None, "absent"]

    def no_op(modes: tuple[str, ...]) -> None:
        tree = sidecar_tree(fmt.path)
        infos = {n: next(i for i in t.indexes() if i.name == n) for n in names}
        for name in names:
            for mode in modes:
                info = t.refresh_index(name, mode, spark=spark)
                assert info == infos[name], (name, mode)
        assert sidecar_tree(fmt.path) == tree  # no log entry, no data written
        answers_equal(t, fmt, keys)

    no_op(("full", "incremental", "quick"))
    fmt.append(3)
    for name in names:
        before = len(log_entries(fmt.path, name))
        t.refresh_index(name, "quick")  # something to do: record the appended file
        assert len(log_entries(fmt.path, name)) == before + 2
    answers_equal(t, fmt, keys)
    no_op(("quick",))  # pending already records everything
    for name in names:
        before = len(log_entries(fmt.path, name))
        # Pending changes are something to do for the other modes (apply them to the index data).
        t.refresh_index(name, "incremental", spark=spark)
        assert len(log_entries(fmt.path, name)) == before + 2
        assert latest_stable(fmt.path, name)["pending"] is None
    no_op(("full", "incremental", "quick"))


# ---------------------------------------------------------------------- stuck operations


def _stuck(path: Path, operation: str) -> int:
    """Run ``operation`` in a child that dies after its transient entry; the child's pid."""
    child = mp.get_context("spawn").Process(target=operate_and_die, args=(str(path), operation))
    child.start()
    child.join(timeout=600)
    assert child.exitcode == -signal.SIGKILL, f"child ended with {child.exitcode}, not killed"
    assert child.pid is not None
    return child.pid


def _other_operations(t: li.Table, spark: Any) -> list[Callable[[], Any]]:
    return [
        lambda: t.create_index(secondary()),
        lambda: t.refresh_index(INDEX, "quick"),
        lambda: t.refresh_index(INDEX, "incremental", spark=spark),
        lambda: t.optimize_index(INDEX, "full", spark=spark),
        lambda: t.delete_index(INDEX),
        lambda: t.restore_index(INDEX),
        lambda: t.vacuum_index(INDEX, retention_hours=0),
    ]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_cancel_returns_an_index_stuck_in_any_operation_to_its_last_stable_state(
    tmp_path: Path, spark: Any, operation: str
) -> None:
    path = tmp_path / "t"
    make_table(path, range(4))
    t = li.open_table(str(path))
    if operation != "create":
        t.create_index(secondary(), spark=spark)
    if operation == "refresh-quick":
        make_table(path, [10])
    if operation == "optimize-full":
        make_table(path, [10])
        t.refresh_index(INDEX, "incremental", spark=spark)  # a delta file to compact
    if operation == "restore":
        t.delete_index(INDEX)
    before = latest_stable(path) if operation != "create" else None
    slots = set(log_entries(path))

    pid = _stuck(path, operation)
    entries = log_entries(path)
    [slot] = set(entries) - slots
    assert entries[slot]["state"] not in ("ACTIVE", "DELETED", "DOES_NOT_EXIST")
    assert entries[slot]["writer"].endswith(f":{pid}")

    # Readers use the last stable entry; every operation but cancel is refused, changing nothing.
    if before is not None and before["state"] == "ACTIVE":
        check_answers(t, path)
    elif before is None:
        with pytest.raises(li.IndexNotFoundError):
            t.lookup(INDEX, ["k1"])
    else:
        with pytest.raises(li.IllegalIndexStateError, match="DELETED"):
            t.lookup(INDEX, ["k1"])
    tree = sidecar_tree(path)
    for op in _other_operations(t, spark):
        with pytest.raises(IndexBusyError, match=rf"is in progress.*:{pid}.*cancel"):
            op()
    assert sidecar_tree(path) == tree

    t.cancel_index(INDEX)
    after = latest_stable(path)
    if before is None:
        assert after["state"] == "DOES_NOT_EXIST"
        assert t.indexes() == []
        t.create_index(secondary(), spark=spark)  # the name is free again
    else:
        assert {k: after[k] for k in SNAPSHOT_FIELDS} == {k: before[k] for k in SNAPSHOT_FIELDS}
        # The interrupted operation now runs to the end.
        rerun = {
            "refresh-quick": lambda: t.refresh_index(INDEX, "quick"),
            "optimize-full": lambda: t.optimize_index(INDEX, "full", spark=spark),
            "delete": lambda: t.delete_index(INDEX),
            "restore": lambda: t.restore_index(INDEX),
            "vacuum": lambda: t.vacuum_index(INDEX, retention_hours=0),
        }[operation]
        rerun()
        if operation == "delete":
            t.restore_index(INDEX)
    check_answers(t, path)


# ---------------------------------------------------------------------- dropped columns

#: (dropped column, the index that uses it). ``by_k``: key k, record key id; ``cov``: indexed
#: batch, included note.
DROPS = [("k", INDEX), ("id", INDEX), ("batch", "cov"), ("note", "cov")]


def _with_note(b: int) -> pa.Table:
    data = batch(b)
    return data.append_column("note", pa.array([f"n{b}-{i}" for i in range(data.num_rows)], pa.string()))


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
@pytest.mark.parametrize(("column", "index"), DROPS)
def test_an_index_on_a_dropped_column_fails_clearly_and_changes_nothing(
    tmp_path: Path, spark: Any, kind: str, column: str, index: str
) -> None:
    root = tmp_path / "t"
    if kind == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        (tmp_path / "wh").mkdir()
        catalog = SqlCatalog("drop", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
        catalog.create_namespace("db")
        ice = catalog.create_table("db.t", _with_note(0).schema, properties={"format-version": "2"})
        for b in range(3):
            ice.append(_with_note(b))
        root = Path(ice.location().removeprefix("file://"))
    else:
        for b in range(3):
            write_deltalake(str(root), _with_note(b), mode="append")
    t = li.open_table(str(root))
    t.create_index(secondary(), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="batch", included=["note"], num_buckets=2), spark=spark)
    before_drop = t.latest_version()

    def rows(version: int | None = None) -> pa.Table:
        if kind == "iceberg":
            tbl = catalog.load_table("db.t")
            return tbl.scan(snapshot_id=version).to_arrow()
        return DeltaTable(str(root), version=version).to_pyarrow_table()

    # Drop the column, then append more rows (something for a refresh to do).
    if kind == "iceberg":
        with ice.update_schema() as update:
            update.delete_column(column)
        ice = catalog.load_table("db.t")
        ice.append(_with_note(3).drop_columns([column]))
    else:
        data = DeltaTable(str(root)).to_pyarrow_table().drop_columns([column])
        write_deltalake(str(root), data, mode="overwrite", schema_mode="overwrite")
        write_deltalake(str(root), _with_note(3).drop_columns([column]), mode="append")
    t = li.open_table(str(root)) if kind == "delta" else li.open_table("db.t", catalog=catalog)
    other = "cov" if index == INDEX else INDEX
    probe: list[Any] = ["k1", None] if index == INDEX else [1, 2]
    message = f"no column '{column}'"

    tree = sidecar_tree(root)
    for call in (
        lambda: t.lookup(index, probe),
        lambda: t.locate(index, probe),
        *(
            lambda mode=mode: t.refresh_index(index, mode, spark=spark)
            for mode in ("incremental", "full", "quick")
        ),
    ):
        with pytest.raises(li.LakehouseIndexError, match=message):
            call()
    assert sidecar_tree(root) == tree  # nothing changed
    assert latest_stable(root, index)["state"] == "ACTIVE"

    # Time travel to before the drop is still answered by the index.
    old = rows(before_drop)
    key = ("k",) if index == INDEX else ("batch",)
    want = Counter(tuple(r[c] for c in ("id", *key)) for r in old.to_pylist() if r[key[0]] in set(probe))
    got = t.lookup(index, probe, version_as_of=before_drop, columns=["id", *key])
    assert Counter(zip(*(got[c].to_pylist() for c in ("id", *key)), strict=True)) == want

    # The other index does not use the column: it refreshes and answers as before.
    t.refresh_index(other, "incremental", spark=spark)
    now = rows()
    okey = "k" if other == INDEX else "batch"
    oprobe: list[Any] = ["k1", None] if other == INDEX else [1, 3]
    ocols = ["id", okey] if "id" in now.column_names else [okey]
    want_o = Counter(tuple(r[c] for c in ocols) for r in now.to_pylist() if r[okey] in set(oprobe))
    got_o = t.lookup(other, oprobe, columns=ocols)
    assert Counter(zip(*(got_o[c].to_pylist() for c in ocols), strict=True)) == want_o
