"""The source's time travel against the formats' own Spark sources: same versions, same failures.

Oracles: delta-spark's ``format("delta")`` and Iceberg's ``format("iceberg")`` in the shared
session, on tables they wrote. For every option value the source reads what the format's source
reads with the same filter; for every bad value both fail, and where the format's message has a
telling phrase the source's message has it too. Iceberg's runtime for Spark 4 refuses its own
``snapshot-id``, ``as-of-timestamp`` and ``tag`` options in favour of Spark's ``versionAsOf`` /
``timestampAsOf``: those are compared with the built-in option of the same meaning.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.delta_spark, pytest.mark.iceberg_spark, pytest.mark.integration]

WHERE = "id % 3 = 1"


def _rows(df: Any) -> list[int]:
    return sorted(r.id for r in df.where(WHERE).select("id").collect())


def _ours(spark: Any, path: str, **options: Any) -> list[int]:
    return _rows(
        spark.read.format("lakehouse_index").options(**{k: str(v) for k, v in options.items()}).load(path)
    )


def _theirs(spark: Any, fmt: str, path: str, **options: Any) -> list[int]:
    return _rows(spark.read.format(fmt).options(**{k: str(v) for k, v in options.items()}).load(path))


def _failure(read: Any) -> str:
    with pytest.raises(Exception) as caught:
        read()
    return str(caught.value)


def _iso(moment: dt.datetime) -> str:
    return moment.replace(tzinfo=dt.timezone.utc).isoformat(timespec="milliseconds")


@pytest.fixture(scope="module")
def delta(source_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Any]]]:
    """A Delta table of 4 versions written by delta-spark, and its history (version, timestamp)."""
    path = str(tmp_path_factory.mktemp("tt") / "delta")
    for i in range(3):
        source_spark.range(i * 30, i * 30 + 30).write.format("delta").mode("append").save(path)
    source_spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 10 = 4")
    history = source_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "timestamp").collect()
    yield path, sorted(history)


def test_delta_versions_and_timestamps(source_spark: Any, delta: tuple[str, list[Any]]) -> None:
    path, history = delta
    times = [h.timestamp for h in history]
    for i, h in enumerate(history):
        assert _ours(source_spark, path, versionAsOf=h.version) == _theirs(
            source_spark, "delta", path, versionAsOf=h.version
        )
        if i + 1 == len(times) or times[i] < times[i + 1]:  # the timestamp names this version alone
            at = _iso(h.timestamp)
            want = _theirs(source_spark, "delta", path, timestampAsOf=at)
            assert _ours(source_spark, path, timestampAsOf=at) == want, h


@pytest.mark.parametrize(
    ("options", "phrase"),
    [
        ({"versionAsOf": 99}, "Cannot time travel Delta table to version 99"),
        ({"versionAsOf": "abc"}, "versionAsOf needs to be a valid begin value"),
        ({"timestampAsOf": "2000-01-01T00:00:00"}, "is before the earliest version available to"),
        ({"timestampAsOf": "2100-01-01T00:00:00"}, "is after the"),
        ({"timestampAsOf": "nope"}, None),
        ({"versionAsOf": 1, "timestampAsOf": "2100-01-01T00:00:00"}, None),
    ],
)
def test_delta_failures(
    source_spark: Any, delta: tuple[str, list[Any]], options: dict[str, Any], phrase: str | None
) -> None:
    path, _ = delta
    theirs = _failure(lambda: _theirs(source_spark, "delta", path, **options))
    ours = _failure(lambda: _ours(source_spark, path, **options))
    if phrase is not None:
        assert phrase in theirs and phrase in ours, (theirs, ours)


def test_iceberg_options_on_a_delta_table_are_refused(
    source_spark: Any, delta: tuple[str, list[Any]]
) -> None:
    """delta-spark ignores them (and reads the latest version); the source says what they are."""
    path, _ = delta
    assert _theirs(source_spark, "delta", path, **{"snapshot-id": 1}) == _theirs(source_spark, "delta", path)
    assert "Apache Iceberg's time travel" in _failure(lambda: _ours(source_spark, path, **{"snapshot-id": 1}))


@pytest.fixture(scope="module")
def iceberg(source_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Any]]:
    """An Iceberg table by Spark: 2 snapshots, tag ``tg``, branch ``br`` with a commit, 1 more on main."""
    from tests.support.spark_iceberg import spark_session

    warehouse = tmp_path_factory.mktemp("tt-wh")
    spark = spark_session(warehouse, catalog="tt")
    spark.sql("CREATE TABLE tt.db.t (id bigint) USING iceberg")
    spark.sql("INSERT INTO tt.db.t SELECT id FROM range(0, 30)")
    spark.sql("INSERT INTO tt.db.t SELECT id FROM range(30, 60)")
    spark.sql("ALTER TABLE tt.db.t CREATE TAG tg")
    spark.sql("ALTER TABLE tt.db.t CREATE BRANCH br")
    spark.sql("INSERT INTO tt.db.t.branch_br SELECT id FROM range(60, 90)")
    spark.sql("INSERT INTO tt.db.t SELECT id FROM range(90, 120)")
    snapshots = spark.sql(
        "SELECT snapshot_id, committed_at FROM tt.db.t.snapshots ORDER BY committed_at"
    ).collect()
    return str(Path(warehouse) / "db" / "t"), snapshots


def test_iceberg_snapshots_refs_and_times(source_spark: Any, iceberg: tuple[str, list[Any]]) -> None:
    path, snapshots = iceberg
    for s in snapshots:
        want = _theirs(source_spark, "iceberg", path, versionAsOf=s.snapshot_id)
        assert _ours(source_spark, path, versionAsOf=s.snapshot_id) == want
        assert _ours(source_spark, path, **{"snapshot-id": s.snapshot_id}) == want
        ms = int(s.committed_at.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
        want = _theirs(source_spark, "iceberg", path, timestampAsOf=_iso(s.committed_at))
        assert _ours(source_spark, path, timestampAsOf=_iso(s.committed_at)) == want
        assert _ours(source_spark, path, **{"as-of-timestamp": ms}) == want
    for ref in ("tg", "br", "main"):
        want = _theirs(source_spark, "iceberg", path, versionAsOf=ref)
        assert _ours(source_spark, path, versionAsOf=ref) == want, ref
        assert _ours(source_spark, path, tag=ref) == want, ref
        assert (
            _ours(source_spark, path, branch=ref)
            == _theirs(source_spark, "iceberg", path, branch=ref)
            == want
        )


@pytest.mark.parametrize(
    ("ours", "theirs", "phrase"),
    [
        (
            {"versionAsOf": "nope"},
            {"versionAsOf": "nope"},
            "Cannot find matching snapshot ID or reference name",
        ),
        ({"snapshot-id": 123}, {"versionAsOf": 123}, None),
        ({"branch": "nope"}, {"branch": "nope"}, None),
        ({"tag": "nope"}, {"versionAsOf": "nope"}, None),
        (
            {"as-of-timestamp": 1},
            {"timestampAsOf": "1970-01-01T00:00:00.001Z"},
            "Cannot find a snapshot older than",
        ),
        ({"timestampAsOf": "2000-01-01T00:00:00"}, {"timestampAsOf": "2000-01-01T00:00:00"}, None),
        ({"snapshot-id": "abc"}, {"versionAsOf": "abc"}, None),
    ],
)
def test_iceberg_failures(
    source_spark: Any,
    iceberg: tuple[str, list[Any]],
    ours: dict[str, Any],
    theirs: dict[str, Any],
    phrase: str | None,
) -> None:
    path, _ = iceberg
    their_error = _failure(lambda: _theirs(source_spark, "iceberg", path, **theirs))
    our_error = _failure(lambda: _ours(source_spark, path, **ours))
    if phrase is not None:
        assert phrase in their_error and phrase in our_error, (their_error, our_error)


@pytest.mark.parametrize(
    "options",
    [
        {"snapshot-id": 1, "branch": "br"},
        {"tag": "tg", "branch": "br"},
        {"as-of-timestamp": 1, "snapshot-id": 1},
        {"versionAsOf": "tg", "branch": "br"},
    ],
)
def test_iceberg_options_one_at_a_time(
    source_spark: Any, iceberg: tuple[str, list[Any]], options: dict[str, Any]
) -> None:
    """Iceberg's source takes one of its options at a time, and none beside Spark's versionAsOf."""
    path, _ = iceberg
    message = _failure(lambda: _ours(source_spark, path, **options))
    assert "Can specify only one of" in message or "not both" in message
