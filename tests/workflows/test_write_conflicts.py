"""Each conflict rule (``lakehouse_index.sink.conflicts``) on real tables of both formats.

Between a write's begin and its commit (the ``write.before_commit`` point; the erase's
``erase.after_locate``) the format library commits on its own: an append of rows elsewhere
(the write commits), of a row the write reads (conflict, unless the isolation level lets
that append through), a delete or compaction of a file the write reads (conflict), a schema
change (conflict). Each outcome is checked against the format library's own read of the
table (the rows a serial order of the two commits gives) and the index against that read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.errors import WriteConflictError, WriteRefusedError
from lakehouse_index.workflows import writes
from lakehouse_index.workflows.erasure import erase

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.int64())])
#: Two data files: ids 1-3 and 4-6, every v 0.
FIRST, SECOND = [1, 2, 3], [4, 5, 6]


def data(ids: list[int], v: int = 0) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())}, schema=SCHEMA
    )


@dataclass
class Case:
    """A table of either format, its indexed ``Table`` and the format library's own commits."""

    fmt: str
    t: li.Table
    append: Callable[..., Any]
    delete: Callable[[str], Any]
    read: Callable[[], pa.Table]
    latest: Callable[[], int]
    set_properties: Callable[[dict[str, str]], Any]

    def rows(self) -> Counter[tuple[int, int]]:
        table = self.read()
        return Counter(zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True))

    def check_index(self) -> None:
        """The index's lookup of every id equals the format library's rows."""
        self.t.sync_indexes()
        ids = sorted({i for i, _ in self.rows()} | {2, 100})
        got = self.t.lookup("by_id", ids)
        assert Counter(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True)) == self.rows()


def _delta(tmp_path: Path) -> Case:
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, data(FIRST))
    write_deltalake(path, data(SECOND), mode="append")

    def append(rows: pa.Table, *, blind: bool = False) -> None:
        props = CommitProperties(custom_metadata={"isBlindAppend": True}) if blind else None
        write_deltalake(path, rows, mode="append", commit_properties=props)

    return Case(
        "delta",
        li.open_table(path),
        append,
        lambda where: DeltaTable(path).delete(where),
        lambda: DeltaTable(path).to_pyarrow_table(),
        lambda: DeltaTable(path).version(),
        lambda props: DeltaTable(path).alter.set_table_properties(props),
    )


def _iceberg(tmp_path: Path) -> Case:
    from tests.api.iceberg_index_support import sql_catalog

    catalog = sql_catalog(str(tmp_path))
    catalog.create_table("db.t", schema=SCHEMA)
    load = lambda: catalog.load_table("db.t")  # noqa: E731
    load().append(data(FIRST))
    load().append(data(SECOND))

    def set_properties(props: dict[str, str]) -> None:
        with load().transaction() as tx:
            tx.set_properties(props)

    return Case(
        "iceberg",
        li.open_table("db.t", catalog=catalog),
        lambda rows: load().append(rows),
        lambda where: load().delete(where),
        lambda: load().scan().to_arrow(),
        lambda: int(load().current_snapshot().snapshot_id),
        set_properties,
    )


@pytest.fixture(params=["delta", "iceberg"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    c = _delta(tmp_path) if request.param == "delta" else _iceberg(tmp_path)
    c.t.create_index(li.SecondaryIndex("by_id", key="id"))
    yield c


class Between:
    """Runs ``commit`` once, at the named point of ``module`` (between a write's begin and its
    commit); ``version`` is the table version it made."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, case: Case, commit: Callable[[], Any], point: str
    ) -> None:
        self.version: int | None = None
        real = writes.crash_point

        def hook(name: str) -> None:
            if name == point and self.version is None:
                commit()
                self.version = case.latest()
            real(name)

        monkeypatch.setattr(writes if point.startswith("write.") else erase, "crash_point", hook)


def between(monkeypatch: pytest.MonkeyPatch, case: Case, commit: Callable[[], Any]) -> Between:
    return Between(monkeypatch, case, commit, "write.before_commit")


#: API writes of the row id 2 (file 1-3) and what they leave of it: (id, v) rows.
WRITES: dict[str, tuple[Callable[[li.Table], Any], list[tuple[int, int]]]] = {
    "delete": (lambda t: t.delete("id = 2"), []),
    "update": (lambda t: t.update("id = 2", {"v": 7}), [(2, 7)]),
    "upsert": (lambda t: t.upsert(data([2], 7), on=["id"]), [(2, 7)]),
    "overwrite-where": (lambda t: t.overwrite(data([2], 7), where="id = 2"), [(2, 7)]),
}


def base_rows() -> Counter[tuple[int, int]]:
    return Counter((i, 0) for i in FIRST + SECOND)


@pytest.mark.parametrize("op", list(WRITES))
def test_an_append_elsewhere_commits(case: Case, monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    write, after = WRITES[op]
    b = between(monkeypatch, case, lambda: case.append(data([100], 9)))
    result = write(case.t)
    assert b.version is not None and result.table_version not in (None, b.version)
    want = base_rows() - Counter([(2, 0)]) + Counter([*after, (100, 9)])
    assert case.rows() == want
    case.check_index()


@pytest.mark.parametrize("op", list(WRITES))
def test_an_append_of_a_row_the_write_reads_conflicts(
    case: Case, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    write, _ = WRITES[op]
    b = between(monkeypatch, case, lambda: case.append(data([2], 9)))
    with pytest.raises(WriteConflictError, match="added file") as e:
        write(case.t)
    assert e.value.version == b.version
    assert case.rows() == base_rows() + Counter([(2, 9)])  # nothing of the write committed
    case.check_index()


def test_appends_never_conflict_with_appends(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    between(monkeypatch, case, lambda: case.append(data([2], 9)))
    case.t.append(data([2], 8))
    assert case.rows() == base_rows() + Counter([(2, 9), (2, 8)])
    case.check_index()


def test_a_blind_append_does_not_refuse_a_write_serializable_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Delta's WriteSerializable: an append that declares it read nothing (Spark's INSERT) does
    # not conflict. deltalake's checker refuses the delete all the same; the rules let it run
    # again on the newer version, where it deletes the appended row too: the outcome of the
    # history's order (append, then delete).
    case = _delta(tmp_path)
    between(monkeypatch, case, lambda: case.append(data([2], 9), blind=True))
    assert case.t.delete("id = 2").retries == 1
    assert case.rows() == base_rows() - Counter([(2, 0)])


def test_a_blind_append_of_a_read_row_conflicts_when_serializable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _delta(tmp_path)
    case.set_properties({"delta.isolationLevel": "Serializable"})
    b = between(monkeypatch, case, lambda: case.append(data([2], 9), blind=True))
    with pytest.raises(WriteConflictError, match=r"isolation level Serializable") as e:
        case.t.upsert(data([2], 7), on=["id"])
    assert e.value.version == b.version
    assert case.rows() == base_rows() + Counter([(2, 9)])


def test_iceberg_snapshot_isolation_lets_an_append_of_a_read_row_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _iceberg(tmp_path)
    case.set_properties({"write.delete.isolation-level": "snapshot"})
    between(monkeypatch, case, lambda: case.append(data([2], 9)))
    case.t.delete("id = 2")
    assert case.rows() == base_rows() - Counter([(2, 0)]) + Counter([(2, 9)])


#: The isolation property of a delete, by format.
ISOLATION = {"delta": "delta.isolationLevel", "iceberg": "write.delete.isolation-level"}


def test_an_unknown_isolation_level_is_refused(case: Case) -> None:
    case.set_properties({ISOLATION[case.fmt]: "ReadUncommitted"})
    with pytest.raises(WriteRefusedError, match="ReadUncommitted"):
        case.t.delete("id = 2")
    assert case.rows() == base_rows()


@pytest.mark.parametrize("op", list(WRITES))
def test_a_concurrent_delete_in_a_file_the_write_reads_conflicts(
    case: Case, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    write, _ = WRITES[op]
    b = between(monkeypatch, case, lambda: case.delete("id = 3"))  # rewrites file 1-3
    with pytest.raises(WriteConflictError, match="removed or rewrote file") as e:
        write(case.t)
    assert e.value.version == b.version
    assert case.rows() == base_rows() - Counter([(3, 0)])
    case.check_index()


@pytest.mark.parametrize("op", list(WRITES))
def test_a_concurrent_delete_in_another_file_commits(
    case: Case, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    write, after = WRITES[op]
    between(monkeypatch, case, lambda: case.delete("id = 5"))  # file 4-6
    write(case.t)
    assert case.rows() == base_rows() - Counter([(2, 0), (5, 0)]) + Counter(after)
    case.check_index()


def test_a_compaction_of_a_file_the_write_reads_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import DeltaTable

    case = _delta(tmp_path)
    b = between(monkeypatch, case, lambda: DeltaTable(str(tmp_path / "t")).optimize.compact())
    with pytest.raises(WriteConflictError, match="compacted file") as e:
        case.t.delete("id = 2")
    assert e.value.version == b.version
    assert case.rows() == base_rows()


def test_a_schema_change_conflicts_even_with_an_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalake import DeltaTable
    from deltalake.schema import Field

    case = _delta(tmp_path)
    b = between(
        monkeypatch, case, lambda: DeltaTable(str(tmp_path / "t")).alter.add_columns(Field("w", "long"))
    )
    with pytest.raises(WriteConflictError, match="schema") as e:
        case.t.delete("id = 2")
    assert e.value.version == b.version
    assert case.rows() == base_rows()


class Locates:
    """Counts the erase's locates."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = erase._locate

        def counted(*args: Any) -> Any:
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(erase, "_locate", counted)


def _erased(case: Case, monkeypatch: pytest.MonkeyPatch, concurrent: Callable[[], Any]) -> int:
    """Erase subject 2 with ``concurrent`` committed after its locate; how many locates it took."""
    locates = Locates(monkeypatch)
    b = Between(monkeypatch, case, concurrent, "erase.after_locate")
    result = case.t.erase("by_id", [2])
    assert b.version is not None and result.version not in (None, b.version)
    assert 2 not in {i for i, _ in case.rows()}
    case.check_index()
    return locates.calls


def test_erase_commits_its_rewrites_past_an_unrelated_append(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _erased(case, monkeypatch, lambda: case.append(data([100], 9))) == 1
    assert case.rows() == base_rows() - Counter([(2, 0)]) + Counter([(100, 9)])


def test_erase_locates_again_after_an_append_of_a_subject_row(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _erased(case, monkeypatch, lambda: case.append(data([2], 9))) == 2
    assert case.rows() == base_rows() - Counter([(2, 0)])


def test_erase_locates_again_after_a_change_of_a_file_it_rewrites(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _erased(case, monkeypatch, lambda: case.delete("id = 1")) == 2
    assert case.rows() == base_rows() - Counter([(1, 0), (2, 0)])
