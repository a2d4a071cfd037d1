"""The ``lakehouse-index`` command line, run as a user runs it (a subprocess of the real entry point).

Answers are checked against deltalake's reader of the same table; operation errors must be one
clear line with exit status 1 (usage errors: 2) and leave nothing behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.support.paths import code_env


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command line; wide output so Rich does not fold table cells."""
    env = code_env(COLUMNS="250", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "lakehouse_index.cli", *args], capture_output=True, text=True, env=env
    )


def _batch(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {"id": ids, "email": [f"u{i}@x" for i in ids], "country": [["DE", "FR"][i % 2] for i in ids]}
    )


@pytest.fixture
def table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, _batch(100 * i, 100), mode="append")
    return path


def _ids_for(path: str, email: str) -> list[int]:
    rows = DeltaTable(path).to_pyarrow_table()
    return sorted(
        i for i, e in zip(rows["id"].to_pylist(), rows["email"].to_pylist(), strict=True) if e == email
    )


def test_index_lifecycle_from_the_command_line(table: str) -> None:
    out = cli("create", table, "by_email", "--key", "email", "--record-key", "id")
    assert out.returncode == 0, out.stderr
    assert "by_email" in out.stdout and "ACTIVE" in out.stdout
    assert "by_email" in cli("list", table).stdout

    found = cli("lookup", table, "by_email", "u150@x", "nobody")
    assert found.returncode == 0, found.stderr
    assert "1 row(s)" in found.stdout and _ids_for(table, "u150@x") == [150]
    located = cli("lookup", table, "by_email", "u150@x", "--locate")
    (path,) = [f for f in li.open_table(table).snapshot().files if f.rsplit("/", 1)[-1] in located.stdout]
    assert li.open_table(table).locate("by_email", ["u150@x"])["_file"].to_pylist() == [path]

    plan = cli("explain", table, "--where", "email = 'u150@x'")
    assert plan.returncode == 0, plan.stderr
    assert "by_email: snapshot" in plan.stdout and "chosen" in plan.stdout
    assert "lookup via index 'by_email'" in cli("explain", table, "by_email", "u150@x").stdout

    write_deltalake(table, _batch(300, 50), mode="append")
    assert cli("refresh", table, "by_email", "--mode", "incremental").returncode == 0
    assert li.open_table(table).indexes()[0].indexed_version == 3
    new = cli("lookup", table, "by_email", "u320@x")
    assert "1 row(s)" in new.stdout and _ids_for(table, "u320@x") == [320]

    assert "DELETED" in cli("delete", table, "by_email").stdout
    assert "ACTIVE" in cli("restore", table, "by_email").stdout
    cli("delete", table, "by_email")
    assert cli("vacuum", table, "by_email").returncode == 0
    assert li.open_table(table).indexes() == []


def test_covering_and_skipping_indexes_from_the_command_line(table: str) -> None:
    cov = cli("create", table, "cov", "--covering", "--key", "country", "--include", "id", "--buckets", "2")
    assert cov.returncode == 0, cov.stderr
    skip = cli("create", table, "skip", "--skipping", "--key", "id", "--auto-refresh", "quick")
    assert skip.returncode == 0, skip.stderr
    kinds = {i.name: (i.kind, i.spec.auto_refresh.value) for i in li.open_table(table).indexes()}
    assert kinds == {"cov": ("covering", "incremental"), "skip": ("skipping", "quick")}
    both = cli("lookup", table, "cov", "DE")
    assert f"{sum(1 for i in range(300) if i % 2 == 0)} row(s)" in both.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("lookup", "{table}", "nope", "a"), "no index 'nope'"),
        (("create", "{table}", "bad/name", "--key", "email"), "index name"),
        (("create", "{table}", "by_x", "--key", "missing"), "no column 'missing'"),
        (("explain", "{table}"), "index name"),
        (("list", "{missing}"), "error:"),
    ],
)
def test_errors_are_one_clear_line(table: str, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    before = sorted(p.relative_to(table) for p in Path(table).rglob("*"))
    out = cli(*(a.format(table=table, missing=str(tmp_path / "nothing")) for a in args))
    assert out.returncode == 1
    text = " ".join((out.stdout + out.stderr).split())
    assert message in text and "Traceback" not in text
    assert sorted(p.relative_to(table) for p in Path(table).rglob("*")) == before  # nothing written


def test_bad_options_are_usage_errors(table: str) -> None:
    out = cli("refresh", table, "by_email", "--mode", "sometimes")
    assert out.returncode == 2 and "sometimes" in out.stderr


def test_rows_as_json_csv_and_parquet_and_indexes_as_json(table: str, tmp_path: Path) -> None:
    assert cli("create", table, "by_email", "--key", "email", "--record-key", "id").returncode == 0
    want = sorted(
        (r["id"], r["email"])
        for r in DeltaTable(table).to_pyarrow_table().to_pylist()
        if r["country"] == "DE"
    )
    as_json = cli("scan", table, "--where", "country = 'DE'", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert sorted((r["id"], r["email"]) for r in rows) == want
    as_csv = cli("scan", table, "--where", "country = 'DE'", "--column", "id", "--format", "csv")
    assert sorted(int(x) for x in as_csv.stdout.split()[1:]) == [i for i, _ in want]
    out = tmp_path / "found.parquet"
    found = cli("lookup", table, "by_email", "u150@x", "--format", "parquet", "-o", str(out))
    assert found.returncode == 0, found.stderr
    assert pq.read_table(out)["id"].to_pylist() == [150]
    [info] = [json.loads(line) for line in cli("list", table, "--json").stdout.splitlines()]
    assert info["name"] == "by_email" and info["kind"] == "secondary" and info["state"] == "ACTIVE"
    assert info["spec"]["recordKey"] == ["id"]


def test_sync_applies_each_policy(table: str) -> None:
    assert cli("create", table, "by_email", "--key", "email").returncode == 0
    assert cli("create", table, "lazy", "--key", "country", "--auto-refresh", "off").returncode == 0
    write_deltalake(table, _batch(300, 10), mode="append")
    out = cli("sync", table, "--json")
    assert out.returncode == 0, out.stderr
    reports = {r["name"]: r for r in json.loads(out.stdout)["indexes"]}
    latest = DeltaTable(table).version()
    assert reports["by_email"]["indexed_version"] == latest
    assert reports["lazy"]["lag"] == 1 and reports["lazy"]["action"] == "reported"
