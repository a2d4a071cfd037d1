"""Spark DataFrames written by Iceberg's own Spark writer, when the frame's session has it.

Iceberg's Spark runtime enforces what it defines for writers: required columns, the table's
write modes (``write.merge.mode``: copy-on-write rewrites, merge-on-read position deletes or,
in format version 3, deletion vectors), its distribution and sort order, format version 3's
row lineage. An append is ``df.writeTo(table).append()``, an upsert one ``MERGE INTO`` on the
key columns, from a temporary view of the frame.

**How Spark reaches the table.** A table this package writes is opened through a pyiceberg
catalog (by path it has no atomic commit); Spark writes it through the Spark catalog of the same
name, so that both commit through the same catalog:

* the session's own ``spark.sql.catalog.<name>`` when it configures one (any kind Iceberg's
  runtime has: REST, Hive, Glue, JDBC, ...);
* else, for a pyiceberg ``SqlCatalog`` on SQLite, a catalog configured here: Iceberg's JDBC
  catalog on the same database file (the two share the catalog tables' layout and commit by the
  same compare-and-swap of the table's metadata location), with Spark's table cache off so a
  pyiceberg commit is seen at once. It needs SQLite's JDBC driver in the session
  (``org.xerial:sqlite-jdbc``).

The table Spark loads must be the very table (the same table UUID), else the write is not made
this way. Any other catalog: configure it in the session under the pyiceberg catalog's name.

**Which commit is the write's.** Its snapshot summary carries a token
(``lakehouse-index.write``): the append's ``snapshot-property.`` write option, the MERGE's commit
properties (Iceberg's ``CommitMetadata``, a thread-local of the driver thread running the
statement, set and restored around it: its public ``withCommitProperties`` takes a JVM
``Callable``; a Python thread runs on one JVM thread in pyspark's pinned thread mode, its
default). Another writer's commit before or after it is never taken for it; Iceberg's runtime
itself retries a lost commit race and checks the MERGE against what committed meanwhile.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from lakehouse_index.errors import WriteRefusedError
from lakehouse_index.sink.contract import Commit, SparkWriterMissing, SparkWrites
from lakehouse_index.sink.spark_session import count_of, error_summary, has_runtime
from lakehouse_index.source import Snapshot, TableSource

#: Iceberg's Spark catalog class, its SQL extension (MERGE INTO needs it) and its commit properties.
SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
EXTENSION = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata"
#: The snapshot summary key of the token that marks this package's commits.
TOKEN = "lakehouse-index.write"

_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sqlite_settings(catalog: Any, tbl: Any) -> dict[str, str]:
    """The settings of Iceberg's JDBC catalog over the SQLite database of pyiceberg ``SqlCatalog``
    ``catalog``; SparkWriterMissing for a catalog Spark cannot open so."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog

        sql = isinstance(catalog, SqlCatalog)
    except ImportError:  # the SQL catalog's dependencies are optional
        sql = False
    if not sql:
        raise SparkWriterMissing(
            f"the Spark session has no catalog {catalog.name!r} (configure spark.sql.catalog."
            f"{catalog.name} as an Iceberg catalog on the same {type(catalog).__name__})"
        )
    url = catalog.engine.url
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        raise SparkWriterMissing(
            f"the Spark session has no catalog {catalog.name!r}, and only a SQL catalog on a SQLite "
            f"file is configured for it here, not {url.get_backend_name()} (configure spark.sql."
            f"catalog.{catalog.name} as Iceberg's JDBC catalog on the same database)"
        )
    return {
        "": SPARK_CATALOG,
        ".type": "jdbc",
        ".uri": "jdbc:sqlite:" + os.path.abspath(database),
        ".warehouse": str(catalog.properties.get("warehouse") or tbl.location()),
        ".cache-enabled": "false",
    }


def spark_table(spark: Any, tbl: Any) -> str:
    """The Spark name of pyiceberg table ``tbl`` (``catalog.namespace.table``, quoted) in the
    Spark catalog of its pyiceberg catalog's name, configured here when the session has none;
    SparkWriterMissing, with nothing left configured, when Spark cannot load that very table."""
    name = tbl.catalog.name
    if not _CATALOG_NAME.fullmatch(name):
        raise SparkWriterMissing(f"pyiceberg catalog name {name!r} is not a Spark catalog name")
    key = f"spark.sql.catalog.{name}"
    added = {} if spark.conf.get(key, None) is not None else _sqlite_settings(tbl.catalog, tbl)
    for suffix, value in added.items():
        spark.conf.set(key + suffix, value)
    target = ".".join(_quoted(part) for part in (name, *tbl.name()))
    try:
        if not added:
            spark.catalog.refreshTable(target)  # a catalog caching tables may hold an older snapshot
        loaded = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, target)
        same = str(loaded.uuid()) == str(tbl.metadata.table_uuid)
    except Exception as e:  # py4j / Spark errors, e.g. no JDBC driver, no such table
        same, why = False, f"Spark cannot load {target}: {error_summary(e)}"
    else:
        why = f"Spark's catalog {name!r} holds another table as {target}"
    if not same:
        for suffix in added:
            spark.conf.unset(key + suffix)
        raise SparkWriterMissing(why)
    return target


def _pinned(spark: Any) -> bool:
    """Whether each Python thread drives one JVM thread (pyspark's pinned thread mode)."""
    from py4j.clientserver import ClientServer

    return isinstance(spark.sparkContext._gateway, ClientServer)


def open_writes(spark: Any, source: TableSource, tbl: Any) -> IcebergSparkWrites:
    """Iceberg's Spark writer for ``tbl`` (the pyiceberg table ``source`` was opened through);
    SparkWriterMissing when the session does not have it or cannot reach the table."""
    if not has_runtime(spark, SPARK_CATALOG, EXTENSION):
        raise SparkWriterMissing("Iceberg's Spark runtime is not in the Spark session")
    if not _pinned(spark):
        raise SparkWriterMissing(
            "the Spark session is not in pyspark's pinned thread mode (PYSPARK_PIN_THREAD=false), "
            "which marking a MERGE's commit needs"
        )
    if not _has_commit_properties(spark):
        raise SparkWriterMissing(
            f"this Iceberg Spark runtime keeps no per-thread commit properties "
            f"({COMMIT_METADATA}.COMMIT_PROPERTIES), which marking a MERGE's commit needs"
        )
    target = spark_table(spark, tbl)
    return IcebergSparkWrites(source, spark, source.snapshot(source.latest_version()), target)


def _commit_properties_field(spark: Any) -> Any:
    """Iceberg's private thread-local of commit properties (``CommitMetadata.COMMIT_PROPERTIES``)."""
    field = spark._jvm.java.lang.Class.forName(COMMIT_METADATA).getDeclaredField("COMMIT_PROPERTIES")
    field.setAccessible(True)
    return field.get(None)


def _has_commit_properties(spark: Any) -> bool:
    """Whether the runtime has the private field :func:`_commit_properties` sets (a later
    Iceberg release may rename it: the write then falls back, saying so)."""
    from py4j.protocol import Py4JError

    try:
        _commit_properties_field(spark)
    except Py4JError:
        return False
    return True


@contextmanager
def _commit_properties(spark: Any, properties: Mapping[str, str]) -> Iterator[None]:
    """Iceberg's commit properties of this thread set to ``properties`` inside (as its
    ``CommitMetadata.withCommitProperties`` does around a JVM callable), restored after."""
    local = _commit_properties_field(spark)
    prior = local.get()
    values = spark._jvm.java.util.HashMap()
    for key, value in properties.items():
        values.put(key, value)
    local.set(values)
    try:
        yield
    finally:
        local.set(prior)


class IcebergSparkWrites(SparkWrites):
    """Appends and upserts of Spark DataFrames by Iceberg's Spark runtime, in ``spark``, to the
    table Spark names ``target``."""

    name = "Iceberg's Spark writer"

    def __init__(self, source: TableSource, spark: Any, snapshot: Snapshot, target: str) -> None:
        self.source = source
        self.spark = spark
        self.snapshot = snapshot
        self.target = target

    def _committed(self, token: str) -> tuple[int, Mapping[str, str]] | None:
        """The snapshot id and summary of the snapshot carrying ``token``, if one committed."""
        tbl = self.source.catalog_table()  # type: ignore[attr-defined]
        for snap in reversed(tbl.snapshots()):
            props = snap.summary.additional_properties if snap.summary is not None else {}
            if props.get(TOKEN) == token:
                return snap.snapshot_id, props
        return None

    @contextmanager
    def _refused_unless_committed(self, what: str, token: str) -> Iterator[None]:
        """WriteRefusedError when the write inside raises having committed nothing."""
        try:
            yield
        except Exception as e:
            if self._committed(token) is None:
                raise WriteRefusedError(
                    f"{self.source.uri}: Iceberg's Spark writer refused the {what}; nothing was "
                    f"committed: {error_summary(e)}"
                ) from e
            raise

    def _found(self, token: str) -> tuple[int, Mapping[str, str]]:
        found = self._committed(token)
        if found is None:
            raise WriteRefusedError(
                f"{self.source.uri}: Iceberg's Spark writer made no commit for this write"
            )
        return found

    def append(self, frame: Any) -> Commit:
        """``frame.writeTo(table).append()``, its snapshot marked by a ``snapshot-property.`` option."""
        token = f"append {uuid.uuid4().hex}"
        with self._refused_unless_committed("append", token):
            frame.writeTo(self.target).option(f"snapshot-property.{TOKEN}", token).append()
        version, summary = self._found(token)
        return Commit(version, rows_written=count_of(summary, "added-records"))

    def upsert(self, frame: Any, on: Sequence[str]) -> Commit:
        """``MERGE INTO`` the table on equal ``on`` columns: matched rows updated, others inserted."""
        token = f"upsert {uuid.uuid4().hex}"
        view = f"lakehouse_index_upsert_{uuid.uuid4().hex}"
        match = " AND ".join(f"t.{_quoted(c)} = s.{_quoted(c)}" for c in on)
        frame.createOrReplaceTempView(view)
        try:
            with (
                self._refused_unless_committed("upsert", token),
                _commit_properties(self.spark, {TOKEN: token}),
            ):
                self.spark.sql(
                    f"MERGE INTO {self.target} AS t USING {view} AS s ON {match} "
                    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
                ).collect()
        finally:
            self.spark.catalog.dropTempView(view)
        version, _ = self._found(token)
        return Commit(version)
