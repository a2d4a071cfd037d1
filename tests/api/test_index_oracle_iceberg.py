"""The central oracle on Iceberg: random histories interleaved with every index operation.

Three proofs, each against an independent reader:

* a hypothesis state machine over pyiceberg writes on a SQLite catalog table (format v2:
  append, overwrite with a filter, copy-on-write delete, upsert, add column, rename of a
  non-key column) interleaved with refreshes of every mode, optimizes of both modes,
  delete/restore and vacuum; after every step ``lookup`` and ``locate`` at the current
  snapshot and at earlier snapshots of the main lineage equal pyiceberg's scan of that
  snapshot filtered in Python. The table is opened once by catalog and once by path;
* a Spark-written merge-on-read table (v2 position deletes, v3 deletion vectors) with
  DELETE / UPDATE / MERGE / ``rewrite_data_files``, refreshed incrementally after every
  statement; every snapshot's answers equal Spark's ``VERSION AS OF`` read;
* a crafted equality delete: answers equal pyiceberg's scan before it minus the deleted keys.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from iceberg_index_support import (
    commit_equality_delete,
    index_snapshots,
    key_filter,
    locate_via,
    main_lineage,
    sql_catalog,
)
from pyiceberg import expressions
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

import lakehouse_index as li
from tests.support.oracle import SMALL_FILES, rows_multiset

pytestmark = [
    pytest.mark.spark,
    # pyiceberg warns when a copy-on-write delete or overwrite filter matches nothing: expected here.
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

#: pyiceberg's expression classes are pydantic models whose positional constructors mypy cannot type.
X: Any = expressions

POOL = ["a", "b", "c", "ü", "", None, "日本"]
keys = st.sampled_from(POOL)
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "k", StringType(), required=False),
    NestedField(3, "g", IntegerType(), required=False),
    NestedField(4, "note", StringType(), required=False),
)
BY_G = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "g"))


def check_answers(
    table: li.Table, pyice: Any, snapshot_id: int, probe: list[Any], *, with_by_k: bool
) -> None:
    """``lookup``/``locate`` of both indexes at ``snapshot_id`` equal pyiceberg's scan, filtered."""
    full = pyice.scan(snapshot_id=snapshot_id).to_arrow()
    if with_by_k:
        want = key_filter(full, probe, ("k",))
        got = table.lookup("by_k", probe, version_as_of=snapshot_id)
        assert sorted(got.column_names) == sorted(want.column_names)
        assert rows_multiset(got, want.column_names) == rows_multiset(want, want.column_names), snapshot_id
        loc = table.locate("by_k", probe, version_as_of=snapshot_id)
        assert rows_multiset(loc, ["k", "id"]) == rows_multiset(want, ["k", "id"]), snapshot_id
    probe_kg = [(k, g) for k in probe for g in (0, 1, 2, None)]
    want2 = key_filter(full, probe_kg, ("k", "g"))
    got2 = table.lookup("by_kg", probe_kg, version_as_of=snapshot_id, columns=["id", "k", "g"])
    assert rows_multiset(got2, ["id", "k", "g"]) == rows_multiset(want2, ["id", "k", "g"]), snapshot_id
    loc2 = table.locate("by_kg", probe_kg, version_as_of=snapshot_id)
    assert rows_multiset(loc2, ["k", "g", "id"]) == rows_multiset(want2, ["k", "g", "id"]), snapshot_id


class IcebergIndexMachine(RuleBasedStateMachine):
    """A pyiceberg v2 table with a secondary index (k → id) and a composite one ((k, g) → id).

    ``self.table`` is opened one way (catalog or metadata folder), ``self.other`` the other
    way: both read the same side-car indexes, and both answer in every example.
    """

    spark: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="li-ice-oracle-")
        self.catalog = sql_catalog(self.dir)
        self.next_id = 0
        self.note = "note"  # the current name of the renamable column
        self.extra = False  # whether the added column exists
        self.deleted = False
        self.pyice: Any = None
        self.table: li.Table | None = None
        self.other: li.Table | None = None

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _batch(self, ks: list[Any], ids: list[int] | None = None) -> pa.Table:
        if ids is None:
            ids = list(range(self.next_id, self.next_id + len(ks)))
            self.next_id += len(ks)
        cols: dict[str, pa.Array] = {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array(ks, pa.string()),
            # g has nulls too: the composite key's second column.
            "g": pa.array([None if i % 7 == 6 else i % 3 for i in ids], pa.int32()),
            self.note: pa.array([f"n{i}" for i in ids], pa.string()),
        }
        if self.extra:
            cols["extra"] = pa.array([f"x{i}" if i % 2 else None for i in ids], pa.string())
        return pa.table(cols)

    @initialize(
        ks=st.lists(keys, min_size=1, max_size=20),
        partitioned=st.booleans(),
        by_catalog=st.booleans(),
        on_spark=st.booleans(),
        small_files=st.booleans(),
    )
    def create(
        self, ks: list[Any], partitioned: bool, by_catalog: bool, on_spark: bool, small_files: bool
    ) -> None:
        self.pyice = self.catalog.create_table(
            "db.t",
            SCHEMA,
            partition_spec=BY_G if partitioned else PartitionSpec(),
            properties={"format-version": "2"},
        )
        self.pyice.append(self._batch(ks))
        # small_files: index files of a few rows in groups of fewer, so that a key's entries
        # span row groups and files.
        config = SMALL_FILES if small_files else None
        by_cat = li.open_table("db.t", catalog=self.catalog, config=config)
        by_path = li.open_table(self.pyice.location(), config=config)
        assert by_cat.format == by_path.format == "iceberg"
        self.table, self.other = (by_cat, by_path) if by_catalog else (by_path, by_cat)
        for t in (by_cat, by_path):  # tiny tables: force the index path this oracle is about
            t.planner_config = li.PlannerConfig(force_index=True)
        # Built in process (small tables) or forced onto Spark: both build paths are checked.
        local = {"local_max_rows": 0} if on_spark else {}
        self.table.create_index(
            li.SecondaryIndex("by_k", key="k", record_key="id"), spark=self.spark, **local
        )
        self.table.create_index(
            li.SecondaryIndex("by_kg", key=["k", "g"], record_key="id"), spark=self.spark, **local
        )

    # ------------------------------------------------------------------ table writes (pyiceberg)

    @rule(ks=st.lists(keys, min_size=1, max_size=15))
    def append(self, ks: list[Any]) -> None:
        self.pyice.append(self._batch(ks))

    @rule(ks=st.lists(keys, max_size=10), at_least=st.integers(0, 40))
    def overwrite(self, ks: list[Any], at_least: int) -> None:
        """Replace the rows with ``id >= at_least`` (copy-on-write of the files that hold them)."""
        self.pyice.overwrite(self._batch(ks), overwrite_filter=X.GreaterThanOrEqual("id", at_least))

    @rule(
        how=st.sampled_from(["key", "null", "ids", "range"]),
        k=st.sampled_from([p for p in POOL if p is not None]),
        ids=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    )
    def delete(self, how: str, k: str, ids: list[int]) -> None:
        pred = {
            "key": X.EqualTo("k", k),
            "null": X.IsNull("k"),
            "ids": X.In("id", ids),
            "range": X.And(X.GreaterThanOrEqual("id", min(ids)), X.LessThan("id", max(ids) + 3)),
        }[how]
        self.pyice.delete(pred)

    @rule(ks=st.lists(keys, min_size=1, max_size=6), overlap=st.integers(0, 6))
    def upsert(self, ks: list[Any], overlap: int) -> None:
        """Update rows of existing ids (new key values) and insert new ids, keyed on ``id``.

        Every other write uses fresh ids, so ``id`` stays unique and the upsert is well defined.
        """
        start = max(0, self.next_id - overlap)
        ids = list(range(start, start + len(ks)))
        self.next_id = max(self.next_id, ids[-1] + 1)
        if self.pyice.current_snapshot().schema_id != self.pyice.schema().schema_id:
            # pyiceberg 0.12 reads the matched rows with the snapshot's older schema and
            # then fails to cast them to the evolved one: write something first.
            self.pyice.append(self._batch(ks[:1]))
        self.pyice.upsert(self._batch(ks, ids), join_cols=["id"])

    @precondition(lambda self: not self.extra)
    @rule()
    def add_column(self) -> None:
        with self.pyice.update_schema() as update:
            update.add_column("extra", StringType())
        self.extra = True

    @rule()
    def rename_note(self) -> None:
        new = "memo" if self.note == "note" else "note"
        with self.pyice.update_schema() as update:
            update.rename_column(self.note, new)
        self.note = new

    # ------------------------------------------------------------------ index operations

    @precondition(lambda self: not self.deleted)
    @rule(
        mode=st.sampled_from(["full", "incremental", "quick", "incremental"]),
        name=st.sampled_from(["by_k", "by_kg"]),
        remap=st.booleans(),
        on_spark=st.booleans(),
    )
    def refresh(self, mode: str, name: str, remap: bool, on_spark: bool) -> None:
        assert self.table is not None
        # Lineage remap on or off; appended rows indexed in-process or forced onto Spark.
        local = 0 if on_spark else 1_000_000
        info = self.table.refresh_index(name, mode=mode, spark=self.spark, remap=remap, local_max_rows=local)
        assert info.state is li.IndexState.ACTIVE

    @precondition(lambda self: not self.deleted)
    @rule(mode=st.sampled_from(["quick", "full"]), name=st.sampled_from(["by_k", "by_kg"]))
    def optimize(self, mode: str, name: str) -> None:
        assert self.table is not None
        self.table.optimize_index(name, mode=mode, spark=self.spark)

    @precondition(lambda self: not self.deleted)
    @rule()
    def delete_index(self) -> None:
        assert self.table is not None
        self.table.delete_index("by_k")
        self.deleted = True
        with pytest.raises(li.IllegalIndexStateError):
            self.table.lookup("by_k", ["a"])

    @precondition(lambda self: self.deleted)
    @rule()
    def restore_index(self) -> None:
        assert self.table is not None
        self.table.restore_index("by_k")
        self.deleted = False

    @precondition(lambda self: not self.deleted)
    @rule(name=st.sampled_from(["by_k", "by_kg"]))
    def vacuum(self, name: str) -> None:
        assert self.table is not None
        self.table.vacuum_index(name, retention_hours=0)

    # ------------------------------------------------------------------ the oracle

    @rule(pick=st.integers(0, 1 << 16), probe=st.lists(keys, min_size=1, max_size=4))
    def time_travel(self, pick: int, probe: list[Any]) -> None:
        """A random earlier snapshot of the main lineage, read through the other opening."""
        assert self.other is not None
        lineage = main_lineage(self.pyice)
        sid = lineage[pick % len(lineage)]
        check_answers(self.other, self.pyice, sid, [*probe, "missing"], with_by_k=not self.deleted)
        # The same version answered from a random retained snapshot of by_kg, not the planner's
        # choice: every (index snapshot, version) pair must be right, exact window or repaired.
        entries = index_snapshots(self.other, "by_kg")
        entry = entries[(pick // len(lineage)) % len(entries)]
        probe_kg = [(k, g) for k in probe for g in (0, 1, 2, None)]
        want = key_filter(self.pyice.scan(snapshot_id=sid).to_arrow(), probe_kg, ("k", "g"))
        got, _ = locate_via(self.other, entry, sid, probe_kg)
        assert rows_multiset(got, ["k", "g", "id"]) == rows_multiset(want, ["k", "g", "id"]), (sid, entry.id)

    @invariant()
    def answers_equal_pyiceberg(self) -> None:
        if self.table is None or self.other is None:
            return
        lineage = main_lineage(self.pyice)
        check_answers(
            self.table, self.pyice, lineage[-1], ["a", None, "ü", "missing"], with_by_k=not self.deleted
        )
        check_answers(
            self.other,
            self.pyice,
            lineage[len(lineage) // 2],
            ["b", "", "日本", None],
            with_by_k=not self.deleted,
        )


@pytest.fixture
def machine(spark: Any) -> type[IcebergIndexMachine]:
    IcebergIndexMachine.spark = spark
    return IcebergIndexMachine


def test_iceberg_index_oracle(machine: type[IcebergIndexMachine]) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=5,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )


# ---------------------------------------------------------------------- Spark merge-on-read tables

MOR = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)
#: k: duplicates, unicode, empty string and nulls; g: the composite key's second column.
K_EXPR = (
    "CASE WHEN id % 9 = 4 THEN NULL "
    "ELSE element_at(array('a', 'b', 'c', 'ü', '', '日本'), CAST(id % 6 AS INT) + 1) END"
)


@pytest.fixture(scope="module")
def spark_writer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from iceberg_index_support import SparkIcebergWriter

    wh = tmp_path_factory.mktemp("spark_iceberg_wh")
    writer = SparkIcebergWriter(str(wh))
    yield writer, wh
    writer.close()


def statements(t: str, name: str) -> list[str]:
    """The history after the two inserts: every merge-on-read statement, then compaction."""
    return [
        f"DELETE FROM {t} WHERE id % 7 = 0",
        f"UPDATE {t} SET k = 'ü' WHERE id % 5 = 0",  # DEL(old k) + PUT(new k) for the same id
        f"DELETE FROM {t} WHERE id % 11 = 0",  # a second delete on the same files
        f"MERGE INTO {t} d USING (SELECT id, CAST(NULL AS STRING) AS k, CAST(id % 3 AS INT) AS g "
        f"FROM range(280, 330)) s ON d.id = s.id "
        f"WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET k = s.k "
        f"WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
        f"CALL local.system.rewrite_data_files(table => 'db.{name}', where => 'g = 1', "
        f"options => map('min-input-files', '1'))",
        f"DELETE FROM {t} WHERE k = 'a' AND id < 150",
        f"INSERT INTO {t} VALUES (1000, 'a', 0), (1001, NULL, 1), (1002, '日本', NULL)",
    ]


@pytest.mark.integration
@pytest.mark.iceberg_spark
@pytest.mark.parametrize("format_version", [2, 3])
def test_spark_merge_on_read_index(spark: Any, spark_writer: Any, format_version: int) -> None:
    writer, wh = spark_writer
    name = f"mor_v{format_version}"
    t = f"local.db.{name}"
    writer.sql(
        f"CREATE TABLE {t} (id bigint, k string, g int) USING iceberg PARTITIONED BY (g) "
        f"TBLPROPERTIES ('format-version'='{format_version}', {MOR})"
    )
    writer.sql(f"INSERT INTO {t} SELECT id, {K_EXPR}, CAST(id % 3 AS INT) FROM range(200)")
    writer.sql(f"INSERT INTO {t} SELECT id, {K_EXPR}, CAST(id % 3 AS INT) FROM range(200, 300)")
    table = li.open_table(str(wh / "db" / name))
    table.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    table.create_index(li.SecondaryIndex("by_kg", key=["k", "g"], record_key="id"), spark=spark)

    reads: dict[int, pa.Table] = {}

    def spark_read(sid: int) -> pa.Table:
        """Spark's ``VERSION AS OF`` read (memoized: snapshots are immutable)."""
        if sid not in reads:
            rows = writer.sql(f"SELECT id, k, g FROM {t} VERSION AS OF {sid}")
            reads[sid] = pa.table(
                {
                    "id": pa.array([r[0] for r in rows], pa.int64()),
                    "k": pa.array([r[1] for r in rows], pa.string()),
                    "g": pa.array([r[2] for r in rows], pa.int32()),
                }
            )
        return reads[sid]

    def lineage() -> list[int]:
        rows = writer.sql(
            f"SELECT snapshot_id FROM {t}.history WHERE is_current_ancestor ORDER BY made_current_at"
        )
        return [r[0] for r in rows]

    probe: list[Any] = ["a", "ü", None, "", "日本", "missing"]
    probe_kg = [(k, g) for k in probe for g in (0, 1, 2, None)]

    def check_all(every_snapshot: bool = False) -> None:
        """Planner's answers at every version; the newest (or every) index snapshot forced too."""
        entries = index_snapshots(table, "by_k")
        forced = entries if every_snapshot else entries[-1:]
        for sid in lineage():
            full = spark_read(sid)
            want = key_filter(full, probe, ("k",))
            got = table.lookup("by_k", probe, version_as_of=sid)
            assert rows_multiset(got, ["id", "k", "g"]) == rows_multiset(want, ["id", "k", "g"]), sid
            loc = table.locate("by_k", probe, version_as_of=sid)
            assert rows_multiset(loc, ["k", "id"]) == rows_multiset(want, ["k", "id"]), sid
            want2 = key_filter(full, probe_kg, ("k", "g"))
            loc2 = table.locate("by_kg", probe_kg, version_as_of=sid)
            assert rows_multiset(loc2, ["k", "g", "id"]) == rows_multiset(want2, ["k", "g", "id"]), sid
            for entry in forced:
                via, _ = locate_via(table, entry, sid, probe)
                assert rows_multiset(via, ["k", "id"]) == rows_multiset(want, ["k", "id"]), (sid, entry.id)

    check_all()
    row_level = 0
    for statement in statements(t, name):
        writer.sql(statement)
        head = table.latest_version()
        snap = table.snapshot(head)
        row_level += sum(1 for f in snap.files.values() if f.deletes is not None)
        for index in ("by_k", "by_kg"):
            info = table.refresh_index(index, mode="incremental", spark=spark)
            assert info.indexed_version == head
        # Every version since the build is answered from index entries alone (exact window): the
        # rows deleted by position deletes / DVs are DEL entries, no data file is scanned.
        newest = index_snapshots(table, "by_k")[-1]
        for sid in lineage()[1:]:
            _, cov = locate_via(table, newest, sid, ["a"])
            assert cov.exact_window and not cov.scan, (statement, sid)
        check_all()
    assert row_level > 0  # the history really had row-level deletes
    check_all(every_snapshot=True)

    # Compacted, then older index snapshots vacuumed: past versions are answered by repair
    # from the newest snapshot (rows deleted then but live at v come back by scanning).
    table.optimize_index("by_k", mode="full", spark=spark)
    table.vacuum_index("by_k", retention_hours=0)
    writer.sql(f"DELETE FROM {t} WHERE id % 13 = 1")
    table.refresh_index("by_kg", mode="quick")
    check_all(every_snapshot=True)


# ---------------------------------------------------------------------- equality deletes


def test_equality_deletes_through_the_index(spark: Any, tmp_path: Any) -> None:
    """Crafted equality deletes on the record key and on the index key, with and without refresh.

    The expected rows come from a Python model of the history (appends, then equality
    deletes that remove matching rows of files committed before them), cross-checked with
    pyiceberg's scan while the table has no equality deletes (pyiceberg refuses them).
    """
    catalog = sql_catalog(str(tmp_path))
    schema = Schema(*SCHEMA.fields[:3])
    pyice = catalog.create_table("db.eq", schema, properties={"format-version": "2"})
    model: list[tuple[Any, ...]] = []
    next_id = 0

    def append(ks: list[Any]) -> None:
        nonlocal next_id
        ids = list(range(next_id, next_id + len(ks)))
        next_id += len(ks)
        pyice.append(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "k": pa.array(ks, pa.string()),
                    "g": pa.array([i % 3 for i in ids], pa.int32()),
                }
            )
        )
        model.extend(zip(ids, ks, [i % 3 for i in ids], strict=True))

    append(["a", "b", None, "ü", "a", "", "日本", "b"])
    append(["a", None, "c", "a", "ü"])
    head = pyice.current_snapshot().snapshot_id
    assert rows_multiset(pyice.scan(snapshot_id=head).to_arrow(), ["id", "k", "g"]) == Counter(model)
    table = li.open_table("db.eq", catalog=catalog)
    table.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    probe: list[Any] = ["a", "b", None, "ü", "", "日本", "c", "missing"]
    history: list[tuple[int, Counter[tuple[Any, ...]]]] = [(head, Counter(model))]

    def check(sid: int, expected: Counter[tuple[Any, ...]]) -> None:
        want = Counter(r for r in expected.elements() if r[1] in probe)
        got = table.lookup("by_k", probe, version_as_of=sid)
        assert rows_multiset(got, ["id", "k", "g"]) == want, sid
        loc = table.locate("by_k", probe, version_as_of=sid)
        assert rows_multiset(loc, ["id", "k"]) == Counter({(r[0], r[1]): n for r, n in want.items()}), sid

    def equality_delete(column: str, values: list[Any]) -> None:
        nonlocal pyice
        pos = {"id": 0, "k": 1}[column]
        arrow_type = pa.int64() if column == "id" else pa.string()
        commit_equality_delete(pyice, column, values, arrow_type)
        pyice = catalog.load_table("db.eq")
        # Equality deletes never match nulls by equality with a value; a null in the file matches null.
        model[:] = [r for r in model if r[pos] not in values]
        history.append((pyice.current_snapshot().snapshot_id, Counter(model)))

    # 1. On the record key: answered before any refresh (hybrid), then after an incremental one.
    equality_delete("id", [0, 4, 9, 99])
    for sid, expected in history:
        check(sid, expected)
    table.refresh_index("by_k", mode="incremental", spark=spark)
    for sid, expected in history:
        check(sid, expected)
    # Rows appended after the delete carry a newer sequence number: untouched by it.
    append(["a", "b"])
    history.append((pyice.current_snapshot().snapshot_id, Counter(model)))
    # 2. On the index key (not the record key), with a quick refresh then an incremental one.
    equality_delete("k", ["ü", "b"])
    table.refresh_index("by_k", mode="quick")
    for sid, expected in history:
        check(sid, expected)
    table.refresh_index("by_k", mode="incremental", spark=spark)
    for sid, expected in history:
        check(sid, expected)
    table.optimize_index("by_k", mode="full", spark=spark)
    for sid, expected in history:
        check(sid, expected)
    # 3. Another delete, then a full rebuild (which leaves the equality-deleted rows out) and older
    # index snapshots vacuumed: versions before the deletes must get those rows back by repair.
    equality_delete("id", [1, 2, 10])
    info = table.refresh_index("by_k", mode="full", spark=spark)
    assert info.indexed_version == history[-1][0]
    table.vacuum_index("by_k", retention_hours=0)
    for sid, expected in history:
        check(sid, expected)
        want = Counter((r[0], r[1]) for r in expected.elements() if r[1] in probe)
        for entry in index_snapshots(table, "by_k"):  # each retained snapshot, not only the cheapest
            got, _ = locate_via(table, entry, sid, probe)
            assert rows_multiset(got, ["id", "k"]) == want, (sid, entry.id)
