"""Spark DataFrames written by delta-spark itself, when the frame's session has it.

delta-spark enforces what this package's commits and deltalake's do not: CHECK
constraints, invariants, generated and identity columns, column mapping, row tracking and
the change data feed. An append is ``df.write.format("delta").mode("append")``, an upsert
one ``MERGE INTO`` on the key columns. The commit is found afterwards by a token in its
``commitInfo.userMetadata`` (delta-spark's
``spark.databricks.delta.commitInfo.userMetadata``, set for the write and then restored; a
value the session already had is kept in front of the token), so a concurrent writer's
commit is never taken for this one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from lakehouse_index.errors import WriteRefusedError
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.io.uri import local_path
from lakehouse_index.sink.contract import Commit, SparkWrites
from lakehouse_index.sink.spark_session import count_of, error_summary, has_runtime
from lakehouse_index.source import Snapshot, TableSource

#: delta-spark's Scala API class, and the SQL extension its MERGE INTO needs.
DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def available(spark: Any) -> bool:
    """Whether ``spark`` is a classic session with delta-spark's classes and SQL extension."""
    return has_runtime(spark, DELTA_TABLE_CLASS, DELTA_EXTENSION)


def spark_path(uri: str) -> str:
    """The path delta-spark opens a table URI by (local paths, ``s3a://`` for ``s3://``)."""
    scheme = uri.split(":", 1)[0]
    if scheme == "file":
        return local_path(uri)
    if scheme == "s3":
        return "s3a" + uri[len("s3") :]
    return uri


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaSparkWrites(SparkWrites):
    """Appends and upserts of Spark DataFrames by delta-spark, in ``spark``."""

    name = "delta-spark"

    def __init__(self, source: TableSource, storage: Storage, spark: Any, snapshot: Snapshot) -> None:
        self.source = source
        self.storage = storage
        self.spark = spark
        self.snapshot = snapshot
        self.path = spark_path(source.uri)

    @contextmanager
    def _tagged(self, what: str) -> Iterator[str]:
        """The token this write's commit carries in ``commitInfo.userMetadata``; the write
        inside is refused (WriteRefusedError) when it raises having committed nothing."""
        prior = self.spark.conf.get(USER_METADATA, None)
        token = f"{prior + ' ' if prior else ''}[lakehouse-index {what} {uuid.uuid4().hex}]"
        self.spark.conf.set(USER_METADATA, token)
        try:
            yield token
        except Exception as e:
            if self._commit_info(token) is None:
                raise WriteRefusedError(
                    f"{self.source.uri}: delta-spark refused the {what}; nothing was committed: "
                    f"{error_summary(e)}"
                ) from e
            raise
        finally:
            if prior is None:
                self.spark.conf.unset(USER_METADATA)
            else:
                self.spark.conf.set(USER_METADATA, prior)

    def _commit_info(self, token: str) -> tuple[int, Mapping[str, Any]] | None:
        """The version and ``commitInfo`` of the commit after the snapshot carrying ``token``."""
        latest = self.source.latest_version()
        for version in range(latest, self.snapshot.version, -1):
            uri = join_uri(self.source.uri, "_delta_log", f"{version:020d}.json")
            for line in self.storage.read_bytes(uri).splitlines():
                action = json.loads(line) if line.strip() else {}
                info = action.get("commitInfo")
                if info is not None and info.get("userMetadata") == token:
                    return version, info
        return None

    def _found(self, token: str) -> tuple[int, Mapping[str, Any]]:
        found = self._commit_info(token)
        if found is None:
            raise WriteRefusedError(f"{self.source.uri}: delta-spark wrote no commit for this write")
        return found

    def append(self, frame: Any) -> Commit:
        """``frame.write.format("delta").mode("append")`` on the table."""
        with self._tagged("append") as token:
            frame.write.format("delta").mode("append").save(self.path)
        version, info = self._found(token)
        metrics = info.get("operationMetrics") or {}
        return Commit(version, rows_written=count_of(metrics, "numOutputRows"))

    def upsert(self, frame: Any, on: Sequence[str]) -> Commit:
        """``MERGE INTO`` the table on equal ``on`` columns: matched rows updated, others inserted.

        The statement names the frame's columns (not ``UPDATE SET *`` / ``INSERT *``), so
        delta-spark fills in the columns the table computes when the frame leaves them out:
        identity values for inserted rows (an identity column cannot be updated), generated
        columns from their expressions. Another column the frame leaves out keeps its value in
        an updated row and is null in an inserted one, as in delta-spark's appends.
        """
        view = f"lakehouse_index_upsert_{uuid.uuid4().hex}"
        frame.createOrReplaceTempView(view)
        match = " AND ".join(f"t.{_quoted(c)} = s.{_quoted(c)}" for c in on)
        names = [_quoted(c) for c in frame.columns]
        sets = ", ".join(f"t.{c} = s.{c}" for c in names)
        values = ", ".join(f"s.{c}" for c in names)
        target = "delta." + _quoted(self.path)
        try:
            with self._tagged("upsert") as token:
                self.spark.sql(
                    f"MERGE INTO {target} AS t USING {view} AS s ON {match} "
                    f"WHEN MATCHED THEN UPDATE SET {sets} "
                    f"WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) VALUES ({values})"
                ).collect()
        finally:
            self.spark.catalog.dropTempView(view)
        version, info = self._found(token)
        metrics = info.get("operationMetrics") or {}
        return Commit(
            version,
            rows_written=count_of(metrics, "numTargetRowsInserted"),
            rows_updated=count_of(metrics, "numTargetRowsUpdated"),
        )
