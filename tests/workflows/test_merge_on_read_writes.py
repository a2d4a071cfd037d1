"""Merge-on-read writes an index plans: the removed rows are marked (Delta deletion vectors, Iceberg
position deletes), no data file is rewritten.

Each scenario writes a table of several files (one key range per file) whose settings ask for
merge-on-read (Delta: the ``deletionVectors`` feature and ``delta.enableDeletionVectors``;
Iceberg v2: ``write.delete.mode`` / ``write.update.mode`` / ``write.merge.mode``), indexes
``id``, runs index-planned writes and checks, at every version, against the format library's
own read (deltalake's ``scan``, which applies deletion vectors; pyiceberg's scan): the rows;
that no data file was removed and exactly the located files were marked; and that the index's
lookup and locate answer the same rows (each located (file, position) read back by pyarrow).
The Spark tests read the same versions with delta-spark and the Iceberg runtime, and cover a
deletion vector Spark wrote that ours then extends.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.io.uri import local_path
from lakehouse_index.workflows.reports import Action

FILES = 4
PER_FILE = 100
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.int64())])
PROBE = [3, 4, 150, 151, 250, 399, 5000, 5001, 7]


def _rows(ids: range | list[int], v: int = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


def _deltalake_scan(path: str, version: int) -> pa.Table:
    """deltalake's read of ``version`` (its scan applies deletion vectors), in SCHEMA's types."""
    rows = pa.RecordBatchReader.from_stream(DeltaTable(path, version=version).scan()).read_all()
    return rows.select(SCHEMA.names).cast(SCHEMA)


class Delta:
    """A Delta table taking deletion vectors, written by deltalake (one file per append)."""

    def __init__(self, root: Path, dvs: bool = True) -> None:
        self.path = str(root / "t")
        config = {"delta.enableDeletionVectors": "true"} if dvs else None
        for f in range(FILES):
            write_deltalake(
                self.path, _rows(range(f * PER_FILE, (f + 1) * PER_FILE)), mode="append", configuration=config
            )
        self.t = li.open_table(self.path)

    def read(self, version: int) -> pa.Table:
        return _deltalake_scan(self.path, version)

    def files(self, version: int) -> set[str]:
        return {f.rsplit("/", 1)[-1] for f in DeltaTable(self.path, version=version).file_uris()}


MOR = {
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.merge.mode": "merge-on-read",
}


class Iceberg:
    """An Iceberg v2 table asking for merge-on-read, in a SQL catalog (one file per append)."""

    def __init__(self, root: Path, properties: dict[str, str] = MOR) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        root.mkdir(parents=True, exist_ok=True)
        catalog = SqlCatalog("w", uri=f"sqlite:///{root}/c.db", warehouse=f"file://{root}/wh")
        catalog.create_namespace("db")
        tbl = catalog.create_table("db.t", schema=SCHEMA, properties=properties)
        for f in range(FILES):
            tbl.append(_rows(range(f * PER_FILE, (f + 1) * PER_FILE)))
        self.catalog = catalog
        self.t = li.open_table("db.t", catalog=catalog)

    def read(self, version: int) -> pa.Table:
        return self.catalog.load_table("db.t").scan(snapshot_id=version).to_arrow()

    def files(self, version: int) -> set[str]:
        tasks = self.catalog.load_table("db.t").scan(snapshot_id=version).plan_files()
        return {t.file.file_path.rsplit("/", 1)[-1] for t in tasks}

    def metadata_location(self) -> str:
        return str(self.catalog.load_table("db.t").metadata_location)


@pytest.fixture(params=["delta", "iceberg"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    fmt = Delta(tmp_path) if request.param == "delta" else Iceberg(tmp_path)
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    return fmt


def _multiset(t: pa.Table, names: list[str] = SCHEMA.names) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(t[c].to_pylist() for c in names), strict=True))


def _check_index(t: li.Table, version: int, want: pa.Table) -> None:
    """lookup and locate of PROBE at ``version`` answer exactly the rows of ``want`` (the table's
    rows at that version, by an independent reader) holding those keys."""
    want = want.select(SCHEMA.names)
    want = want.filter(pc.is_in(want["id"], pa.array(PROBE)))
    got = t.lookup("by_id", PROBE, version_as_of=version).select(SCHEMA.names)
    assert _multiset(got) == _multiset(want), version
    located = t.locate("by_id", PROBE, version_as_of=version)
    assert Counter(located["id"].to_pylist()) == Counter(want["id"].to_pylist()), version
    for uri, row, key in zip(*(located[c].to_pylist() for c in ("_file", "_row", "id")), strict=True):
        assert pq.read_table(local_path(uri), columns=["id"])["id"][row].as_py() == key


def _check_every_version(fmt: Any, versions: list[int]) -> None:
    for v in versions:
        _check_index(fmt.t, v, fmt.read(v))


def test_a_keyed_delete_marks_rows_and_rewrites_no_file(table: Any) -> None:
    before = table.t.latest_version()
    result = table.t.delete("id IN (3, 150, 151) AND v = 0")  # files 0 and 1
    after = result.table_version
    assert result.path is li.WritePath.INDEX and result.mode == "merge-on-read"
    assert result.rows_deleted == 3 and result.files_rewritten == ()
    assert len(result.files_marked) == 2 and result.files_added == ()
    assert table.files(after) == table.files(before)  # no data file removed or added
    if isinstance(table, Delta):  # the marked files keep their bounds, from the data itself
        adds = pa.table(DeltaTable(table.path).get_add_actions(flatten=True))
        for uri, lo, hi in zip(*(adds[c].to_pylist() for c in ("path", "min.id", "max.id")), strict=True):
            ids = pq.read_table(f"{table.path}/{uri}", columns=["id"])["id"]
            assert (lo, hi) == (pc.min(ids).as_py(), pc.max(ids).as_py())
    rows = table.read(after)
    assert rows.num_rows == FILES * PER_FILE - 3 and not set(rows["id"].to_pylist()) & {3, 150, 151}
    _check_every_version(table, [before, after])


def test_a_delete_on_the_key_alone_reads_no_data_file(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the key index the only one, a delete whose where reads only the key is checked on the
    located index entries and takes its tombstones from them: no data file is read; a where on
    another column reads the located rows."""
    from lakehouse_index.maintenance import refresh
    from lakehouse_index.workflows import indexed_writes

    reads: list[str] = []
    for module, name in ((indexed_writes, "read_file"), (refresh, "_row_entries")):
        real = getattr(module, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    start = table.t.latest_version()
    dels = table.t.delete("id IN (3, 151, 250, 5000)")
    assert dels.mode == "merge-on-read" and dels.rows_deleted == 3 and not reads
    some = table.t.delete("id IN (4, 5) AND v = 0")
    assert some.rows_deleted == 2 and reads == ["read_file"]  # file 0, by position
    _check_every_version(table, [start, dels.table_version, some.table_version])


def test_a_second_delete_on_a_marked_file_keeps_the_first_marks(table: Any) -> None:
    first = table.t.delete("id IN (3, 150)")
    second = table.t.delete("id IN (4, 151, 399)")  # files 0 and 1 again, and file 3
    assert second.mode == "merge-on-read" and len(second.files_marked) == 3
    assert set(first.files_marked) < set(second.files_marked)
    rows = table.read(second.table_version)
    assert sorted(set(range(FILES * PER_FILE)) - set(rows["id"].to_pylist())) == [3, 4, 150, 151, 399]
    assert rows.num_rows == FILES * PER_FILE - 5
    _check_every_version(table, [first.previous_version, first.table_version, second.table_version])


def test_a_delete_of_every_row_of_a_file(table: Any) -> None:
    """Delta removes the file (as delta-spark does); Iceberg marks every row."""
    before = table.t.latest_version()
    result = table.t.delete(f"id IN ({', '.join(map(str, range(PER_FILE, 2 * PER_FILE)))})")  # file 1
    assert result.mode == "merge-on-read" and result.rows_deleted == PER_FILE
    gone = table.files(before) - table.files(result.table_version)
    assert len(gone) == (1 if isinstance(table, Delta) else 0) and len(result.files_marked) == 1 - len(gone)
    rows = table.read(result.table_version)
    assert sorted(rows["id"].to_pylist()) == [*range(PER_FILE), *range(2 * PER_FILE, FILES * PER_FILE)]
    _check_every_version(table, [before, result.table_version])


def test_update_and_upsert_mark_the_old_rows_and_add_the_new(table: Any) -> None:
    start = table.t.latest_version()
    up = table.t.update("id = 250", set={"v": 9})
    data = _rows([4, 7, 5000, 5001], v=7)  # two updates in file 0, two inserts
    ups = table.t.upsert(data, on="id")
    for result in (up, ups):
        assert result.path is li.WritePath.INDEX and result.mode == "merge-on-read"
        assert result.files_rewritten == () and len(result.files_marked) == 1 and len(result.files_added) == 1
    assert (ups.rows_updated, ups.rows_written) == (2, 2)
    assert table.files(start) < table.files(ups.table_version)  # only added files
    rows = table.read(ups.table_version)
    assert rows.num_rows == FILES * PER_FILE + 2
    assert _multiset(rows.filter(pc.equal(rows["v"], 7))) == _multiset(data)
    assert rows.filter(pc.equal(rows["id"], 250))["v"].to_pylist() == [9]
    _check_every_version(table, [start, up.table_version, ups.table_version])


def test_marked_rows_tombstones_come_from_the_write(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The located index takes its tombstones from the rows the write located (no data file read
    at their positions); an index on a column the write did not read reads them, and both answer
    as the format library's reader at every version."""
    from lakehouse_index.maintenance import refresh

    table.t.create_index(li.SecondaryIndex("by_name", key="name"))
    reads: list[str] = []
    real = refresh._row_entries

    def spy(*args: Any, **kwargs: Any) -> pa.Table:
        reads.append(args[4].path)  # the data file read at the positions
        return real(*args, **kwargs)

    monkeypatch.setattr(refresh, "_row_entries", spy)
    start = table.t.latest_version()
    ups = table.t.upsert(_rows([4, 7, 150, 5000], v=3), on="id")  # files 0 and 1 marked
    assert ups.mode == "merge-on-read" and len(ups.files_marked) == 2
    by = {r.name: r for r in ups.indexes}
    assert by["by_id"].action is Action.INCREMENTAL and by["by_name"].action is Action.INCREMENTAL
    assert len(reads) == 2  # by_name's tombstones only: one read per marked file
    # A delete carries every index's tombstone columns in its located rows (by_name's read
    # with them, once): the upkeep reads nothing.
    dels = table.t.delete("id IN (3, 151, 250)")
    assert dels.mode == "merge-on-read" and len(dels.files_marked) == 3
    assert len(reads) == 2
    # A where on more than the key is checked on the located rows' data: the v = 3 row only.
    some = table.t.delete("id IN (4, 5) AND v = 3")
    assert some.rows_deleted == 1 and len(reads) == 2
    versions = [start, ups.table_version, dels.table_version, some.table_version]
    _check_every_version(table, versions)
    for v in versions:
        want = table.read(v)
        for name in ("n4", "n150", "n9"):
            got = table.t.lookup("by_name", [name], version_as_of=v).select(SCHEMA.names)
            assert _multiset(got) == _multiset(want.filter(pc.equal(want["name"], name))), (v, name)


def test_the_copy_on_write_override_still_rewrites(table: Any) -> None:
    before = table.t.latest_version()
    result = table.t.delete("id = 3", mode="copy-on-write")
    assert result.mode == "copy-on-write" and len(result.files_rewritten) == 1 and result.files_marked == ()
    assert len(table.files(before) - table.files(result.table_version)) == 1
    _check_every_version(table, [before, result.table_version])


def test_tables_that_ask_for_copy_on_write_are_rewritten(tmp_path: Path) -> None:
    """A Delta table without deletion vectors and an Iceberg table with the default modes."""
    for fmt in (Delta(tmp_path / "d", dvs=False), Iceberg(tmp_path / "i", properties={})):
        fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
        result = fmt.t.delete("id = 3")
        assert (
            result.mode == "copy-on-write" and len(result.files_rewritten) == 1 and result.files_marked == ()
        )


def test_merge_on_read_asked_of_a_delta_table_without_deletion_vectors_goes_through_deltalake(
    tmp_path: Path,
) -> None:
    fmt = Delta(tmp_path, dvs=False)
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    result = fmt.t.delete("id = 3", mode="merge-on-read")
    assert result.path is li.WritePath.FORMAT_LIBRARY and "takes no deletion vectors" in (result.note or "")
    assert 3 not in fmt.read(result.table_version)["id"].to_pylist()


def test_an_unknown_iceberg_write_mode_is_refused(tmp_path: Path) -> None:
    fmt = Iceberg(tmp_path, properties={"write.delete.mode": "sideways"})
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    before = fmt.t.latest_version()
    with pytest.raises(li.errors.WriteRefusedError, match=r"write\.delete\.mode"):
        fmt.t.delete("id = 3")
    assert fmt.t.latest_version() == before


# ----------------------------------------------------------------------------- Spark oracles


def _spark_rows(df: Any) -> pa.Table:
    rows = df.select(*SCHEMA.names).collect()
    return pa.table({c: pa.array([r[c] for r in rows], SCHEMA.field(c).type) for c in SCHEMA.names})


@pytest.mark.spark
def test_delta_versions_equal_delta_spark_with_a_spark_deletion_vector_extended(
    spark: Any, tmp_path: Path
) -> None:
    """Spark writes the table (deletion vectors and row tracking on) and a DELETE that gives file 0 a
    deletion vector; our deletes then extend it and mark other files, an upsert adds rows; every
    version equals delta-spark's and deltalake's read, and each kept row keeps its row id."""
    path = str(tmp_path / "t")
    spark.sql(
        f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, v BIGINT) USING delta TBLPROPERTIES "
        "('delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true')"
    )
    for f in range(FILES):
        spark.createDataFrame(_rows(range(f * PER_FILE, (f + 1) * PER_FILE)).to_pandas()).coalesce(
            1
        ).write.format("delta").mode("append").save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN (1, 2)")  # Spark's own deletion vector
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    start = t.latest_version()
    assert sum(f.deleted_count for f in t.snapshot(start).files.values()) == 2  # a DV Spark wrote
    first = t.delete("id IN (3, 150)")
    second = t.delete("id IN (4, 399)")
    ups = t.upsert(_rows([5, 5000], v=7), on="id")
    assert {first.mode, second.mode, ups.mode} == {"merge-on-read"}
    versions = list(range(start, ups.table_version + 1))

    def row_ids(v: int) -> dict[int, int]:
        df = spark.read.format("delta").option("versionAsOf", v).load(path)
        return {r["id"]: r["rid"] for r in df.select("id", df["_metadata.row_id"].alias("rid")).collect()}

    for v in versions:
        want = _spark_rows(spark.read.format("delta").option("versionAsOf", v).load(path))
        assert _multiset(_deltalake_scan(path, v)) == _multiset(want), v
        _check_index(t, v, want)
        # Spark's data skipping on the statistics our commits wrote loses no row.
        where = f"id IN ({', '.join(map(str, PROBE))})"
        pruned = _spark_rows(spark.read.format("delta").option("versionAsOf", v).load(path).where(where))
        assert _multiset(pruned) == _multiset(want.filter(pc.is_in(want["id"], pa.array(PROBE)))), v
    assert sorted(set(range(FILES * PER_FILE)) - set(row_ids(ups.table_version))) == [1, 2, 3, 4, 150, 399]
    before, after = row_ids(start), row_ids(second.table_version)
    assert all(after[k] == before[k] for k in after)  # the marked files keep their baseRowId


@pytest.mark.spark
def test_iceberg_versions_equal_spark_with_the_iceberg_runtime(spark: Any, tmp_path: Path) -> None:
    fmt = Iceberg(tmp_path)
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    start = fmt.t.latest_version()
    results = [
        fmt.t.delete("id IN (3, 150)"),
        fmt.t.delete("id IN (4, 151, 399)"),
        fmt.t.update("id = 250", set={"v": 9}),
        fmt.t.upsert(_rows([7, 5000], v=7), on="id"),
    ]
    assert {r.mode for r in results} == {"merge-on-read"}
    location = fmt.metadata_location()
    for v in [start, *(r.table_version for r in results)]:
        want = _spark_rows(spark.read.format("iceberg").option("versionAsOf", v).load(location))
        assert _multiset(fmt.read(v)) == _multiset(want), v
        _check_index(fmt.t, v, want)
    final = fmt.read(results[-1].table_version)
    assert final.num_rows == FILES * PER_FILE - 5 + 1


def test_delta_deletes_write_change_data_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    config = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    for f in range(2):
        write_deltalake(
            path, _rows(range(f * PER_FILE, (f + 1) * PER_FILE)), mode="append", configuration=config
        )
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    result = t.delete("id IN (3, 150)")
    assert result.mode == "merge-on-read"
    cdf = pa.table(DeltaTable(path).load_cdf(starting_version=result.table_version).read_all())
    assert sorted(zip(cdf["id"].to_pylist(), cdf["_change_type"].to_pylist(), strict=True)) == [
        (3, "delete"),
        (150, "delete"),
    ]


class _Between:
    """Runs ``commit`` once, just before the write's own commit (a concurrent writer winning the race)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, commit: Any) -> None:
        from lakehouse_index.workflows import writes

        real, self.done = writes.crash_point, False

        def hook(name: str) -> None:
            if name == "write.before_commit" and not self.done:
                self.done = True
                commit()
            real(name)

        monkeypatch.setattr(writes, "crash_point", hook)


def _append(fmt: Any, rows: pa.Table) -> None:
    if isinstance(fmt, Delta):
        write_deltalake(fmt.path, rows, mode="append")
    else:
        fmt.catalog.load_table("db.t").append(rows)


def test_a_race_lost_to_an_append_elsewhere_commits_on_the_newer_version(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Between(monkeypatch, lambda: _append(table, _rows([5000], v=1)))
    result = table.t.delete("id IN (3, 150)")
    assert result.mode == "merge-on-read" and result.retries == 1
    rows = table.read(result.table_version)
    assert rows.num_rows == FILES * PER_FILE - 2 + 1 and not set(rows["id"].to_pylist()) & {3, 150}
    if isinstance(table, Delta):  # the lost attempt's deletion vector file was deleted
        assert len(list(Path(table.path).glob("deletion_vector_*.bin"))) == 1
    _check_every_version(table, [result.table_version])


def test_a_race_lost_to_a_delete_in_the_same_file_conflicts(
    table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = (
        li.open_table(table.t.uri)
        if isinstance(table, Delta)
        else li.open_table("db.t", catalog=table.catalog)
    )
    _Between(monkeypatch, lambda: other.delete("id = 4"))  # file 0, marked by the other writer
    with pytest.raises(li.errors.WriteConflictError):
        table.t.delete("id = 3")
    rows = table.read(table.t.latest_version())
    assert 3 in rows["id"].to_pylist() and 4 not in rows["id"].to_pylist()


def test_partitioned_tables(tmp_path: Path) -> None:
    """Deletion vectors of files in partition folders; position-delete files in the data file's
    partition (and its spec's delete manifest)."""
    from pyiceberg.catalog.sql import SqlCatalog

    rows = _rows(range(FILES * PER_FILE)).set_column(
        2, "v", pa.array([i % 3 for i in range(FILES * PER_FILE)])
    )
    delta = str(tmp_path / "d")
    write_deltalake(delta, rows, partition_by=["v"], configuration={"delta.enableDeletionVectors": "true"})
    catalog = SqlCatalog("w", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    tbl = catalog.create_table("db.t", schema=SCHEMA, properties=MOR)
    with tbl.update_spec() as update:
        update.add_identity("v")
    tbl.append(rows)
    readers = {
        delta: lambda v: _deltalake_scan(delta, v),
        "db.t": lambda v: catalog.load_table("db.t").scan(snapshot_id=v).to_arrow(),
    }
    for name, read in readers.items():
        t = li.open_table(name, catalog=catalog) if name == "db.t" else li.open_table(name)
        t.create_index(li.SecondaryIndex("by_id", key="id"))
        before = t.latest_version()
        gone = t.delete("id IN (3, 4, 5, 150)")  # every partition
        ups = t.upsert(_rows([7, 5000], v=2), on="id")
        assert gone.mode == ups.mode == "merge-on-read" and len(gone.files_marked) == 3, name
        want = Counter(range(FILES * PER_FILE)) - Counter([3, 4, 5, 150]) + Counter([5000])
        assert Counter(read(ups.table_version)["id"].to_pylist()) == want, name
        for v in (before, gone.table_version, ups.table_version):
            _check_index(t, v, read(v))


def test_an_overwrite_where_marks_and_adds(table: Any) -> None:
    before = table.t.latest_version()
    result = table.t.overwrite(_rows([250, 251, 6000], v=4), where="id IN (250, 251)")
    assert result.path is li.WritePath.INDEX and result.mode == "merge-on-read"
    assert len(result.files_marked) == 1 and result.files_rewritten == () and len(result.files_added) == 1
    rows = table.read(result.table_version)
    assert _multiset(rows.filter(pc.equal(rows["v"], 4))) == _multiset(_rows([250, 251, 6000], v=4))
    assert rows.num_rows == FILES * PER_FILE + 1
    _check_every_version(table, [before, result.table_version])


def test_merge_on_read_asked_of_an_iceberg_copy_on_write_table(tmp_path: Path) -> None:
    fmt = Iceberg(tmp_path, properties={})
    fmt.t.create_index(li.SecondaryIndex("by_id", key="id"))
    before = fmt.t.latest_version()
    result = fmt.t.delete("id IN (3, 4)", mode="merge-on-read")
    assert (
        result.path is li.WritePath.INDEX and result.mode == "merge-on-read" and len(result.files_marked) == 1
    )
    assert fmt.files(before) == fmt.files(result.table_version)
    _check_every_version(fmt, [before, result.table_version])
