"""Expression indexes (``SecondaryIndex(key="lower(email)")``...) on both formats, against DuckDB.

Random tables (nulls, non-ASCII text) go through random histories of this library's writes
and of the format library's own writes (which the indexes only see when refreshed). At each
version, every lookup, scan and time-travel read through an expression index is compared
with DuckDB evaluating the same ``where`` (transpiled from Spark SQL) over the rows the
format's own reader returns, and with this library's plain scan; the chosen plan must name
the index. The expressions and characters used mean the same in Spark SQL and DuckDB.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.errors import InvalidIndexSpecError
from tests.api.iceberg_index_support import sql_catalog

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [("id", pa.int64()), ("email", pa.string()), ("ts", pa.timestamp("us", tz="UTC")), ("name", pa.string())]
)
#: Letters whose case maps agree between Java (Spark), Python and DuckDB (no final sigma, no
#: dotted I, no sharp s), and characters without case.
LETTERS = "aAbBzZäÄöÖüÜéÉçÇñÑøØåÅωΩжЖ日本09._-"
EPOCH = dt.datetime(2024, 1, 1, tzinfo=UTC)
FORCED = li.Config().replace(planner={"force_index": True})


def _rows(ids: range, words: list[str], seed: int) -> pa.Table:
    out = []
    for i in ids:
        w = words[(i * 7 + seed) % len(words)]
        out.append(
            {
                "id": i,
                "email": None if (i + seed) % 9 == 0 else f"{w}{i % 4}@Example.COM",
                "ts": None if (i + seed) % 11 == 0 else EPOCH + dt.timedelta(hours=5 * i + seed),
                "name": None if (i + seed) % 7 == 0 else w.upper() if i % 2 else w,
            }
        )
    return pa.Table.from_pylist(out, schema=SCHEMA)


def _open(
    tmp_path: Path, fmt: str, first: pa.Table
) -> tuple[li.Table, Callable[[], pa.Table], Callable[[pa.Table], None]]:
    """The table opened by this library (planner forced onto indexes), the format's own read of
    the latest version, and the format library's own append (not seen by the indexes)."""
    if fmt == "delta":
        path = str(tmp_path / "t")
        write_deltalake(path, first)

        def engine_append(rows: pa.Table) -> None:
            write_deltalake(path, rows, mode="append")

        return li.open_table(path, config=FORCED), lambda: DeltaTable(path).to_pyarrow_table(), engine_append
    catalog = sql_catalog(str(tmp_path))
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    tbl.append(first)
    return (
        li.open_table("db.t", catalog=catalog, config=FORCED),
        lambda: catalog.load_table("db.t").scan().to_arrow(),
        lambda rows: catalog.load_table("db.t").append(rows),
    )


def _duckdb_ids(rows: pa.Table, where: str) -> list[int]:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", rows)
    sql = sqlglot.transpile(f"SELECT id FROM t WHERE {where}", read="spark", write="duckdb")[0]
    return sorted(r[0] for r in con.execute(sql).fetchall())


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def _create(t: li.Table, auto_refresh: str = "incremental", **build: Any) -> None:
    t.create_index(
        li.SecondaryIndex("by_login", key="LOWER( email )", record_key="id", auto_refresh=auto_refresh),
        **build,
    )
    t.create_index(
        li.CoveringIndex("by_day", indexed=["date(ts)"], included=["id"], auto_refresh=auto_refresh), **build
    )
    t.create_index(li.SkippingIndex("by_name", columns=["upper(name)"], auto_refresh=auto_refresh), **build)


def _check(t: li.Table, rows: pa.Table, version: int | None = None) -> None:
    """Every expression index answers as DuckDB does over ``rows`` (the table at ``version``)."""
    emails = sorted({e.lower() for e in rows.column("email").to_pylist() if e is not None})
    probes = [*emails[:3], *emails[-2:], "nobody@example.com"]
    at = {} if version is None else {"version_as_of": version}
    for p in probes:
        where = f"lower(email) = '{p}'"
        want = _duckdb_ids(rows, where)
        assert _ids(t.lookup("by_login", [p], **at)) == want, p
        assert _ids(t.scan(where=where, **at)) == want, where
        assert _ids(t.scan(where=where.replace("lower", "LOWER"), use_indexes=False, **at)) == want, where
    located = t.locate("by_login", probes, **at)
    assert sorted(located["id"].to_pylist()) == _duckdb_ids(rows, f"lower(email) IN ({_list(probes)})")
    days = sorted({d.date() for d in rows.column("ts").to_pylist() if d is not None})
    name = next((n for n in rows.column("name").to_pylist() if n is not None), "none")
    wheres = [
        f"lower(email) IN ({_list(probes)}) AND id % 2 = 0",
        f"'{probes[0]}' = LOWER(email) OR id = 3",
        f"date(ts) = '{days[len(days) // 2]}'",
        f"date(ts) BETWEEN '{days[1]}' AND '{days[4]}' AND id > 2",
        f"upper(name) = '{name.upper()}'",
        f"upper(name) IN ('{name.upper()}', 'NONE') AND date(ts) >= '{days[2]}'",
    ]
    for where in wheres:
        want = _duckdb_ids(rows, where)
        assert _ids(t.scan(where=where, **at)) == want, where
        assert _ids(t.scan(where=where, use_indexes=False, **at)) == want, where
    for where, index in [(wheres[0], "by_login"), (wheres[2], "by_day"), (wheres[4], "by_name")]:
        plan = t.explain(where=where, **at)
        assert plan.chosen.index == index, str(plan)


def _list(values: list[str]) -> str:
    return ", ".join(f"'{v}'" for v in values)


WORDS = st.lists(st.text(LETTERS, min_size=1, max_size=6), min_size=3, max_size=8, unique=True)
STEPS = st.lists(
    st.sampled_from(["append", "engine_append", "delete", "update", "upsert"]), min_size=2, max_size=4
)


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=WORDS, steps=STEPS, seed=st.integers(0, 50))
def test_expression_indexes_answer_as_duckdb_through_random_histories(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, words: list[str], steps: list[str], seed: int
) -> None:
    tmp = tmp_path_factory.mktemp(fmt)
    t, read_back, engine_append = _open(tmp, fmt, _rows(range(0, 40), words, seed))
    _create(t)
    versions = [(t.latest_version(), read_back())]
    _check(t, versions[-1][1])
    next_id = 40
    for step in steps:
        batch = _rows(range(next_id, next_id + 12), words, seed + next_id)
        next_id += 12
        if step == "append":
            t.append(batch)
        elif step == "engine_append":
            engine_append(batch)  # the indexes lag until refreshed: their repair scans the file
        elif step == "delete":
            t.delete(f"lower(email) = '{words[0].lower()}1@example.com' OR id % 5 = 0")
        elif step == "update":
            t.update(f"date(ts) = '{(EPOCH + dt.timedelta(days=1)).date()}'", {"email": "Moved@Example.COM"})
        else:
            t.upsert(
                batch.slice(0, 4).set_column(0, "id", pa.array([1, 2, 3, next_id + 100], pa.int64())), on="id"
            )
        versions.append((t.latest_version(), read_back()))
        _check(t, versions[-1][1])
    t.refresh_index("by_login", mode="incremental")
    _check(t, versions[-1][1])
    first_version, first_rows = versions[0]
    _check(t, first_rows, version=first_version)  # time travel: an older index snapshot, or a repair


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize("mode", ["incremental", "quick", "full"])
def test_refresh_modes_keep_expression_indexes_exact(tmp_path: Path, fmt: str, mode: str) -> None:
    words = ["Ärger", "Øre", "日本", "ωmega"]
    t, read_back, engine_append = _open(tmp_path, fmt, _rows(range(0, 30), words, 1))
    _create(t, auto_refresh="off")
    engine_append(_rows(range(30, 50), words, 2))
    t.append(_rows(range(50, 60), words, 3))
    t.delete("lower(email) = 'ärger1@example.com'")
    for name in ("by_login", "by_day", "by_name"):
        t.refresh_index(name, mode=mode)
    _check(t, read_back())
    if mode == "quick":  # pending files are scanned until applied
        for name in ("by_login", "by_day", "by_name"):
            t.refresh_index(name, mode="incremental")
        _check(t, read_back())
    t.optimize_index("by_login", mode="full")
    _check(t, read_back())
    for name in ("by_login", "by_day", "by_name"):  # the users' self-check agrees
        report = t.verify_index(name, sample=20)
        assert report.checks > 0 and not report.mismatches, report


def test_normalised_expressions_share_one_index_and_the_log_records_them(tmp_path: Path) -> None:
    t, _, _ = _open(tmp_path, "delta", _rows(range(0, 20), ["Ab", "cD"], 0))
    t.create_index(li.SecondaryIndex("by_login", key="LOWER(  email)"))
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    spec = next(i.spec for i in t.indexes() if i.name == "by_login")
    assert spec.key == ("lower(email)",) and spec.expressions == ("lower(email)",)
    root = Path(t.index_root.removeprefix("file://"))
    login = json.loads(sorted((root / "by_login" / "_log").glob("*.json"))[-1].read_text())
    plain = json.loads(sorted((root / "by_id" / "_log").glob("*.json"))[-1].read_text())
    assert login["formatVersion"] == 5 and login["spec"]["expressions"] == ["lower(email)"]
    assert plain["formatVersion"] == 4 and "expressions" not in plain["spec"]
    data = [f for f in (root / "by_login" / "data").rglob("*.parquet")]
    assert "lower(email)" in pq.read_schema(data[0]).names  # the values, under the canonical text
    assert t.explain(where="Lower(email) = 'ab1@example.com'").chosen.index == "by_login"
    # A spec written before expressions (no "expressions" field) reads as before: keys are columns.
    old = {k: v for k, v in plain["spec"].items() if k != "kind"}
    assert li.SecondaryIndex.from_json(old) == li.SecondaryIndex("by_id", key="id")


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("rand()", "not deterministic"),
        ("current_date()", "not deterministic"),
        ("lower(nope)", "unknown column 'nope'"),
        ("lower(id)", "lower needs STRING"),
        ("1 + 2", "reads no column"),
        ("upper(", "is not an expression"),
    ],
)
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_bad_expressions_are_refused_with_nothing_written(
    tmp_path: Path, fmt: str, key: str, message: str
) -> None:
    t, _, _ = _open(tmp_path, fmt, _rows(range(0, 10), ["a"], 0))
    with pytest.raises(InvalidIndexSpecError, match=message.replace("(", r"\(")):
        t.create_index(li.SecondaryIndex("bad", key=key))
    with pytest.raises(InvalidIndexSpecError, match=message.replace("(", r"\(")):
        t.create_index(li.SkippingIndex("bad", columns=["id", key]))
    assert t.indexes() == []
    assert not (Path(t.index_root.removeprefix("file://")) / "bad").exists()


def _entries(t: li.Table, name: str) -> list[dict[str, Any]]:
    """The live entries of an index by row address (file path, row), as stored."""
    log = t.context.log(name)
    stable = log.latest_stable()
    assert stable is not None
    paths = {f.id: f.path for f in stable.source.files}
    index_dir = t.context.index_dir(name)
    rows = pa.concat_tables([pq.read_table(f"{index_dir}/{f.path}") for f in stable.content.files])
    out = [{**r, "_file_id": paths[r["_file_id"]]} for r in rows.to_pylist()]
    return sorted(out, key=lambda r: (r["_file_id"], r["_row"], r["_version"]))


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_spark_executor_builds_the_in_process_entries(spark: Any, tmp_path: Path, fmt: str) -> None:
    words = ["Ärger", "Øre", "日本", "ωmega", "x"]
    t, read_back, engine_append = _open(tmp_path, fmt, _rows(range(0, 40), words, 4))
    specs = {
        "secondary": lambda n: li.SecondaryIndex(n, key="lower(email)", record_key="id", auto_refresh="off"),
        "covering": lambda n: li.CoveringIndex(n, indexed=["date(ts)"], included=["id"], auto_refresh="off"),
    }
    for kind, make in specs.items():
        t.create_index(make(f"{kind}_local"))
        t.create_index(make(f"{kind}_spark"), spark=spark, local_max_rows=0)  # forced onto Spark
    engine_append(_rows(range(40, 70), words, 5))
    for kind in specs:
        t.refresh_index(f"{kind}_local", mode="incremental")
        t.refresh_index(f"{kind}_spark", mode="incremental", spark=spark, local_max_rows=0)
        assert _entries(t, f"{kind}_spark") == _entries(t, f"{kind}_local"), kind
    rows = read_back()
    emails = sorted({e.lower() for e in rows.column("email").to_pylist() if e is not None})[:4]
    want = _duckdb_ids(rows, f"lower(email) IN ({_list(emails)})")
    assert _ids(t.lookup("secondary_spark", emails)) == want
    keys = spark.createDataFrame([(e,) for e in emails], "`lower(email)` string")
    assert sorted(r["id"] for r in t.lookup("secondary_spark", keys).collect()) == want
    where = f"lower(email) IN ({_list(emails)})"
    assert sorted(r["id"] for r in t.read(spark, where=where).select("id").collect()) == want


@pytest.mark.spark
def test_distributed_append_computes_expression_entries_in_its_tasks(spark: Any, tmp_path: Path) -> None:
    from lakehouse_index.workflows.reports import Action

    words = ["Ärger", "Øre", "日本", "ωmega"]
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(range(0, 20), words, 6))
    config = FORCED.replace(executor={"local_max_rows": 1, "format_spark_writer": False})
    t = li.open_table(path, config=config)
    _create(t)
    batch = _rows(range(20, 320), words, 7)
    result = t.append(
        spark.createDataFrame(batch.to_pylist(), "id long, email string, ts timestamp, name string")
    )
    by = {r.name: r for r in result.indexes}
    assert by["by_login"].action is Action.WRITE_JOB and by["by_day"].action is Action.WRITE_JOB
    _check(t, DeltaTable(path).to_pyarrow_table())
