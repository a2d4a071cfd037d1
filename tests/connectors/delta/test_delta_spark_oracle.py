"""Oracle: histories written by delta-spark itself, indexed here, answered like delta-spark reads them.

Each example creates a table through delta-spark's SQL with a random set of features
(deletion vectors on or off, column mapping by name, row tracking, liquid clustering on
``k``, V2 checkpoints with sidecars, change data feed; a checkpoint every other commit) and
runs a random history of delta-spark statements: INSERT, MERGE (update, delete and insert
clauses), UPDATE, DELETE, OPTIMIZE (ZORDER BY on unclustered tables), REORG ... APPLY
(PURGE), RENAME / DROP / ADD COLUMN under column mapping, RESTORE, and a log cleanup (the log
files aged past ``delta.logRetentionDuration``, then removed by deltalake's
``cleanup_metadata``). A secondary index on ``k`` and a covering
index on ``g`` are created and refreshed (incremental or quick) at random points, so
versions are answered by exact windows, hybrid scans and plain scans.

After every step, at the latest version and an earlier one: ``lookup`` (both indexes),
``locate`` (data file, position and, on tables tracking rows, ``_row_id`` against
delta-spark's ``_metadata.file_path`` / ``row_index`` / ``row_id``), ``scan(where)``,
``read(spark, where)`` and, on pyspark >= 4.1 (``make test-spark4``), the
``lakehouse_index`` data source all equal ``spark.read.format("delta")`` at that version
(``versionAsOf``) with the same filter; the version's columns are delta-spark's. A version
delta-spark no longer reads (its log was cleaned up) is refused by a table opened after the
cleanup.

Spark statements cost seconds each on a small machine: two examples of eight steps by
default; ``LAKEHOUSE_INDEX_LONG=1`` runs ten of twelve.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from importlib.metadata import version as installed
from pathlib import Path
from typing import Any

import deltalake
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

import lakehouse_index as li
from lakehouse_index.errors import VersionNotFoundError
from lakehouse_index.io import canonical_uri
from lakehouse_index.spark_source import MIN_PYSPARK
from tests.support.oracle import SMALL_FILES

pytestmark = pytest.mark.spark

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"
#: The columns every version has; the one other column (``w`` renamed, dropped, added again) varies.
CORE = ("id", "k", "g", "v")
KEYS = [f"k{i}" for i in range(6)]
#: The predicates read with ``where``: through the secondary index, the covering one, or both.
WHERES = ["k = '{key}'", "k IN ('{key}', 'k5') OR g = 1", "g = 2 AND v >= 30"]
#: Pyspark >= 4.1 has the lakehouse_index data source.
SOURCE = tuple(int(p) for p in installed("pyspark").split(".")[:2]) >= MIN_PYSPARK
#: Delta 4's refusal of a version older than ``delta.deletedFileRetentionDuration``.
RETENTION_REFUSAL = "BEYOND_DELETED_FILE_RETENTION_DURATION"
COMMIT = re.compile(r"\d{20}\.json")
CONFIG = SMALL_FILES.replace(planner={"force_index": True})

row = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 99))
rows = st.lists(row, min_size=1, max_size=4)


def _sql_value(value: Any) -> str:
    return "NULL" if value is None else repr(value)


class DeltaSparkHistory(RuleBasedStateMachine):
    """One delta-spark table with a random feature set, its history, and this project's indexes."""

    def __init__(self, spark: Any) -> None:
        super().__init__()
        self.spark = spark
        self.dir = Path(tempfile.mkdtemp(prefix="li-delta-spark-"))
        self.path = str(self.dir / "t")
        self.name = f"delta.`{self.path}`"
        self.next_id = 0
        self.renames = 0
        self.indexed = False
        #: Per version: delta-spark's columns and rows (with file path, row index, row id), once read.
        self.oracle: dict[int, tuple[list[str], list[dict[str, Any]]]] = {}
        self.rng = random.Random(0)
        #: Versions delta-spark refused (their log was cleaned up): gone for good.
        self.gone: set[int] = set()

    # ------------------------------------------------------------------ delta-spark

    def _sql(self, statement: str) -> None:
        self.spark.sql(statement).collect()

    def _columns(self, version: int | None = None) -> list[str]:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return list(reader.load(self.path).columns)

    def _extra(self) -> str | None:
        """The current name of the column beside CORE (None when dropped)."""
        extra = [c for c in self._columns() if c not in CORE]
        return extra[0] if extra else None

    def _latest(self) -> int:
        """The newest commit, from the log's listing (not through either reader)."""
        log = Path(self.path) / "_delta_log"
        return max(int(f.name[:20]) for f in log.glob("*.json") if COMMIT.fullmatch(f.name))

    def _values(self, batch: list[tuple[str, int | None, int]], ids: list[int]) -> str:
        extra = self._extra() is not None
        out = []
        for i, (k, g, v) in zip(ids, batch, strict=True):
            cells = [str(i), repr(k), _sql_value(g), str(v)] + ([repr(f"w{i}")] if extra else [])
            out.append(f"({', '.join(cells)})")
        return ", ".join(out)

    def _insert(self, batch: list[tuple[str, int | None, int]]) -> None:
        ids = list(range(self.next_id, self.next_id + len(batch)))
        self.next_id += len(batch)
        extra = self._extra()
        cols = ", ".join([*CORE, *([extra] if extra else [])])
        self._sql(f"INSERT INTO {self.name} ({cols}) VALUES {self._values(batch, ids)}")

    @initialize(
        first=rows,
        dv=st.booleans(),
        mapping=st.booleans(),
        tracking=st.booleans(),
        clustered=st.booleans(),
        v2=st.booleans(),
        cdf=st.booleans(),
    )
    def create(
        self,
        first: list[tuple[str, int | None, int]],
        dv: bool,
        mapping: bool,
        tracking: bool,
        clustered: bool,
        v2: bool,
        cdf: bool,
    ) -> None:
        props = {
            "delta.enableDeletionVectors": str(dv).lower(),
            "delta.checkpointInterval": "2",
            "delta.logRetentionDuration": "interval 1 days",
            "delta.deletedFileRetentionDuration": "interval 1 days",  # at most the log's (Delta 4)
        }
        if mapping:
            props["delta.columnMapping.mode"] = "name"
        if tracking:
            props["delta.enableRowTracking"] = "true"
        if v2:
            props["delta.checkpointPolicy"] = "v2"
        if cdf:
            props["delta.enableChangeDataFeed"] = "true"
        self.features = {"dv": dv, "mapping": mapping, "tracking": tracking, "clustered": clustered}
        listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        cluster = "CLUSTER BY (k)" if clustered else ""
        self._sql(
            f"CREATE TABLE {self.name} (id BIGINT, k STRING, g INT, v BIGINT, w STRING) USING delta "
            f"{cluster} TBLPROPERTIES ({listed})"
        )
        self._insert(first)
        self.t = li.open_table(self.path, config=CONFIG)

    @rule(batch=rows)
    def insert(self, batch: list[tuple[str, int | None, int]]) -> None:
        self._insert(batch)

    @rule(batch=rows, back=st.integers(0, 6))
    def merge(self, batch: list[tuple[str, int | None, int]], back: int) -> None:
        """Source ids from ``back`` ids before the newest: some match (updated, or deleted when
        ``v < 20``), the others are inserted."""
        lo = max(0, self.next_id - back)
        ids = list(range(lo, lo + len(batch)))
        self.next_id = max(self.next_id, ids[-1] + 1)
        values = ", ".join(
            f"({i}, {k!r}, {_sql_value(g)}, {v})" for i, (k, g, v) in zip(ids, batch, strict=True)
        )
        self._sql(
            f"MERGE INTO {self.name} t USING (SELECT * FROM VALUES {values} AS s(id, k, g, v)) s "
            "ON t.id = s.id WHEN MATCHED AND s.v < 20 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET k = s.k, g = s.g, v = s.v "
            "WHEN NOT MATCHED THEN INSERT (id, k, g, v) VALUES (s.id, s.k, s.g, s.v)"
        )

    @rule(key=st.sampled_from(KEYS), g=st.one_of(st.none(), st.integers(0, 3)), step=st.integers(1, 40))
    def update(self, key: str, g: int | None, step: int) -> None:
        self._sql(f"UPDATE {self.name} SET v = v + {step}, g = {_sql_value(g)} WHERE k = '{key}'")

    @rule(key=st.sampled_from(KEYS), modulo=st.integers(2, 4))
    def delete(self, key: str, modulo: int) -> None:
        self._sql(f"DELETE FROM {self.name} WHERE k = '{key}' OR id % {modulo} = 1")

    @rule(zorder=st.booleans())
    def optimize(self, zorder: bool) -> None:
        by = " ZORDER BY (g)" if zorder and not self.features["clustered"] else ""
        self._sql(f"OPTIMIZE {self.name}{by}")

    @precondition(lambda self: self.features["dv"])
    @rule()
    def reorg_purge(self) -> None:
        self._sql(f"REORG TABLE {self.name} APPLY (PURGE)")

    @precondition(lambda self: self.features["mapping"])
    @rule()
    def rename_or_drop_or_add(self) -> None:
        """Column mapping: rename the extra column, else drop it when renamed twice, else add it back."""
        extra = self._extra()
        if extra is None:
            self._sql(f"ALTER TABLE {self.name} ADD COLUMNS (w STRING)")
        elif self.renames % 3 == 2:
            self._sql(f"ALTER TABLE {self.name} DROP COLUMN {extra}")
        else:
            self._sql(f"ALTER TABLE {self.name} RENAME COLUMN {extra} TO w{self.renames}")
        self.renames += 1

    @rule(back=st.integers(1, 5))
    def restore(self, back: int) -> None:
        latest = self._latest()
        target = max(self._earliest(), latest - back)
        if target < latest and self._readable(target):
            self._sql(f"RESTORE TABLE {self.name} TO VERSION AS OF {target}")

    @rule(batch=rows)
    def log_cleanup(self, batch: list[tuple[str, int | None, int]]) -> None:
        """Age the log files past ``delta.logRetentionDuration`` and clean the log up now, by
        deltalake's ``cleanup_metadata`` with the same retention (delta-spark cleans up after
        some of its own later checkpoints: the history may reach one); delta-spark then forgets
        the snapshots it cached, which name files now deleted."""
        self._insert(batch)
        old = time.time() - 3 * 24 * 3600
        for f in (Path(self.path) / "_delta_log").rglob("*"):
            if f.is_file():
                os.utime(f, (old, old))
        deltalake.DeltaTable(self.path).cleanup_metadata()
        self.spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()

    # ------------------------------------------------------------------ this project's indexes

    @precondition(lambda self: not self.indexed)
    @rule()
    def create_indexes(self) -> None:
        self.t.create_index(li.SecondaryIndex("by_k", key="k"))
        self.t.create_index(li.CoveringIndex("cov_g", indexed="g", included=["id", "v"], num_buckets=2))
        self.indexed = True

    @precondition(lambda self: self.indexed)
    @rule(name=st.sampled_from(["by_k", "cov_g"]), mode=st.sampled_from(["incremental", "quick"]))
    def refresh(self, name: str, mode: str) -> None:
        self.t.refresh_index(name, mode=mode)

    # ------------------------------------------------------------------ the oracle

    def _earliest(self) -> int:
        """The oldest version delta-spark still reads (versions before a log cleanup are gone)."""
        latest = self._latest()
        for v in range(latest + 1):
            if self._readable(v):
                return v
        raise AssertionError("delta-spark reads no version")

    def _readable(self, version: int) -> bool:
        if version in self.gone:
            return False
        try:
            self._columns(version)
        except Exception as e:  # delta-spark's own refusal of a version it cannot reconstruct
            if RETENTION_REFUSAL in str(e):
                # Delta 4 refuses versions committed before delta.deletedFileRetentionDuration
                # (their files may be vacuumed; the aged log makes them old): a policy, not a
                # version gone from the log, so neither compared nor required to be refused.
                return False
            if not any(
                m in str(e) for m in ("Cannot time travel", "DELTA_CANNOT_TIME_TRAVEL", "VERSION_NOT_FOUND")
            ):
                raise
            self.gone.add(version)
            return False
        return True

    def _spark_rows(self, version: int, where: str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
        """delta-spark's rows of ``version`` (filtered by ``where`` in Spark), with their addresses."""
        df = self.spark.read.format("delta").option("versionAsOf", version).load(self.path)
        columns = list(df.columns)
        if where is not None:
            df = df.where(where)
        fields = set(df.select("_metadata").schema[0].dataType.fieldNames())
        meta = {"file_path": "_path", "row_index": "_index", "row_id": "_rid"}
        picked = [f"_metadata.{f} AS {alias}" for f, alias in meta.items() if f in fields]
        got = [r.asDict() for r in df.selectExpr("*", *picked).collect()]
        for r in got:
            r["_path"] = canonical_uri(r["_path"])
        return columns, got

    def _version_rows(self, version: int) -> tuple[list[str], list[dict[str, Any]]]:
        if version not in self.oracle:
            self.oracle[version] = self._spark_rows(version)
        return self.oracle[version]

    @invariant()
    def answers_equal_delta_spark(self) -> None:
        if not hasattr(self, "t"):
            return
        latest = self._latest()
        earliest = self._earliest()
        # A version delta-spark no longer reads is refused by a table opened now (the warm one
        # serves what it read before the cleanup until its listing ages: LISTING_MAX_AGE_S).
        cold = li.open_table(self.path) if self.gone else None
        for v in sorted(self.gone):
            with pytest.raises(VersionNotFoundError):
                cold.scan(version_as_of=v)  # type: ignore[union-attr]
        for v in sorted({latest, self.rng.randint(earliest, latest)}):
            if self._readable(v):  # Delta 4 may refuse an aged version (RETENTION_REFUSAL)
                self._check_version(v)

    def _check_version(self, version: int) -> None:
        columns, everything = self._version_rows(version)
        assert self.t.snapshot(version).schema.names == columns, version

        def multiset(found: list[dict[str, Any]], cols: list[str] | tuple[str, ...]) -> Counter[Any]:
            return Counter(tuple(r[c] for c in cols) for r in found)

        present = sorted({r["k"] for r in everything if r["k"] is not None})
        keys = [*present[:2], "k-missing"]
        want = [r for r in everything if r["k"] in keys]
        if self.indexed:
            got = self.t.lookup("by_k", keys, version_as_of=version).to_pylist()
            assert multiset(got, columns) == multiset(want, columns), (version, "lookup by_k", keys)
            located = self.t.locate("by_k", keys, version_as_of=version)
            # delta-spark exposes a row's position on tables with deletion vectors, its id on
            # tables tracking rows
            address = ["k", "_path", *sorted({"_index", "_rid"} & set(everything[0] if everything else ()))]
            found = [
                {
                    "k": r["k"],
                    "_path": canonical_uri(r["_file"]),
                    "_index": r["_row"],
                    "_rid": r.get("_row_id"),
                }
                for r in located.to_pylist()
            ]
            assert multiset(found, address) == multiset(want, address), (version, "locate by_k", keys)
            gs = [1, None]
            got = self.t.lookup("cov_g", gs, version_as_of=version, columns=["g", "id", "v"]).to_pylist()
            want_g = [r for r in everything if r["g"] in gs]
            assert multiset(got, ["g", "id", "v"]) == multiset(want_g, ["g", "id", "v"]), (version, "cov_g")
        where = self.rng.choice(WHERES).format(key=keys[0])
        _, filtered = self._spark_rows(version, where)
        scanned = self.t.scan(version_as_of=version, where=where).to_pylist()
        assert multiset(scanned, columns) == multiset(filtered, columns), (version, "scan", where)
        read = [r.asDict() for r in self.t.read(self.spark, version_as_of=version, where=where).collect()]
        assert multiset(read, columns) == multiset(filtered, columns), (version, "read", where)
        if SOURCE:
            df = (
                self.spark.read.format("lakehouse_index")
                .option("versionAsOf", str(version))
                .option("where", where)
                .load(self.path)
            )
            got = [r.asDict() for r in df.collect()]
            assert multiset(got, columns) == multiset(filtered, columns), (version, "source", where)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def delta_spark(spark: Any) -> Iterator[Any]:
    """The shared session with few shuffle partitions and V2 checkpoints cut into sidecars."""
    conf = {"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.checkpoint.partSize": "3"}
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    if SOURCE:
        li.register_spark_source(spark)
    yield spark
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def test_delta_spark_histories(delta_spark: Any) -> None:
    run_state_machine_as_test(
        lambda: DeltaSparkHistory(delta_spark),
        settings=settings(
            max_examples=10 if LONG else 2,
            stateful_step_count=12 if LONG else 8,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a step costs seconds
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_log_cleanup_and_restore_on_every_feature(delta_spark: Any) -> None:
    """One fixed history through the same steps, every feature on: the log cleanup happens (the
    oldest versions are gone for delta-spark and here), a RESTORE and refreshes follow."""
    h = DeltaSparkHistory(delta_spark)
    try:
        h.create(
            [("k1", 1, 10), ("k2", None, 50)],
            dv=True,
            mapping=True,
            tracking=True,
            clustered=True,
            v2=True,
            cdf=True,
        )
        h.create_indexes()
        h.update("k1", 2, 5)
        h.delete("k2", 2)
        h.rename_or_drop_or_add()
        h.refresh("by_k", "incremental")
        h.log_cleanup([("k3", 2, 30), ("k1", 1, 70)])
        assert h._earliest() > 0 and h.gone  # delta-spark cleaned up the log
        h.restore(2)
        h.merge([("k1", 3, 15), ("k4", 0, 90)], 2)
        h.refresh("cov_g", "quick")
        h.answers_equal_delta_spark()
        h.refresh("cov_g", "incremental")
        for v in range(h._earliest(), h._latest() + 1):
            if h._readable(v):
                h._check_version(v)
    finally:
        h.teardown()
