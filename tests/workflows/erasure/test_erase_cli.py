"""``lakehouse-index erase`` and ``audit`` run as a user runs them (subprocesses of the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.api.test_cli import _batch, cli


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, _batch(100 * i, 100), mode="append")
    li.open_table(path).create_index(li.SecondaryIndex("by_email", key="email"))
    li.open_table(path).create_index(li.SecondaryIndex("by_id", key="id"))
    return path


def _emails(path: str) -> list[str]:
    return DeltaTable(path).to_pyarrow_table()["email"].to_pylist()


def test_erase_dry_run_then_erase_from_a_keys_file_then_audit(tmp_path: Path) -> None:
    path = _table(tmp_path)
    v = DeltaTable(path).version()
    dry = cli("erase", path, "by_email", "u1@x", "u150@x", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dryRun"] and report["rowsErased"] == 2 and len(report["files"]) == 2
    assert DeltaTable(path).version() == v
    keys = tmp_path / "keys.txt"
    keys.write_text("u1@x\nu150@x\n\nu299@x\n")
    done = cli("erase", path, "by_email", "--keys-file", str(keys))
    assert done.returncode == 0, done.stderr
    assert "erased 3 row(s) of 3 subject(s)" in done.stdout
    assert not {"u1@x", "u150@x", "u299@x"} & set(_emails(path))
    assert len(_emails(path)) == 297
    # numbers are keys of an integer column, text of a string column
    by_id = cli("erase", path, "by_id", "7", "--json")
    assert by_id.returncode == 0, by_id.stderr
    assert json.loads(by_id.stdout)["rowsErased"] == 1
    listed = cli("audit", path, "--json")
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["rowsErased"] for r in records] == [3, 1]
    assert all(s.startswith("sha256:") for r in records for s in r["subjects"])
    assert "u150@x" not in listed.stdout
    table = cli("audit", path)
    assert table.returncode == 0 and "2 erasure(s)" in table.stdout


def test_erase_errors_are_one_clear_line(tmp_path: Path) -> None:
    path = _table(tmp_path)
    v = DeltaTable(path).version()
    for args, message in [
        (("erase", path, "by_email"), "at least one key"),
        (("erase", path, "nope", "x"), "no index 'nope'"),
        (("erase", path, "by_id", "abc"), "does not fit"),
    ]:
        out = cli(*args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        assert message in out.stderr, (args, out.stderr)
    assert DeltaTable(path).version() == v
