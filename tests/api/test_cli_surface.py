"""The command line's surface (issue #15, "CLI"), run as a user runs it: subprocesses of the real
entry point.

Every subcommand has help with an example and ``--json``; tables open by path, through an
Iceberg catalog or on an object store (``--storage-option``); ``list`` shows the lag and the
quick-refresh backlog; ``explain`` prints the cost table; progress shows on standard error
and ``--quiet`` silences it; errors are exit codes and one line (``--debug`` adds the
traceback); ``NO_COLOR`` is honoured; bash completion completes. Answers are checked against
deltalake, pyiceberg and pyarrow reads of the same data.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing as mp
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakehouse_index.spark import MASTER_ENV
from tests.api.test_cli import _batch
from tests.engine.enginetest_stuck_workers import operate_and_die
from tests.support.moto import moto_s3
from tests.support.paths import code_env

#: The script ``pip install`` puts next to the interpreter (the ``[project.scripts]`` entry point).
SCRIPT = Path(sys.executable).with_name("lakehouse-index")

#: The subcommands issue #15 asks for, plus verify.
COMMANDS = {
    "create",
    "refresh",
    "optimize",
    "list",
    "lookup",
    "locate",
    "explain",
    "scan",
    "delete",
    "restore",
    "vacuum",
    "cancel",
    "watch",
    "erase",
    "audit",
    "sync",
    "demo",
    "verify",
}
#: Commands that show a progress display (and take --quiet).
LONG = {
    "create",
    "refresh",
    "optimize",
    "lookup",
    "locate",
    "scan",
    "vacuum",
    "sync",
    "verify",
    "erase",
    "demo",
}


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``lakehouse-index`` script; wide output so Rich folds nothing."""
    assert SCRIPT.exists(), f"{SCRIPT} missing: the package is not installed"
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, env=code_env(COLUMNS="250", **env)
    )


def ok(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    out = run(*args, **env)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out


def json_lines(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.stdout.splitlines()]


def complete(words: str) -> list[str]:
    """What bash completion offers for the command line ``words`` (typer's env-var protocol)."""
    parts = shlex.split(words) + ([""] if words.endswith(" ") else [])
    out = run(_LAKEHOUSE_INDEX_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(len(parts) - 1))
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def plain(text: str) -> str:
    """``text`` without its colour and style escape sequences."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def colours(text: str) -> set[int]:
    """The colour codes (SGR 30-38, 90-97) among the terminal escape sequences of ``text``."""
    params = {int(p) for seq in re.findall(r"\x1b\[([0-9;]*)m", text) for p in seq.split(";") if p}
    return {p for p in params if 30 <= p <= 38 or 90 <= p <= 97}


@pytest.fixture
def table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    for i in range(3):
        write_deltalake(path, _batch(100 * i, 100), mode="append")
    return path


def _commit_times(path: str) -> list[int]:
    """Each version's timestamp (ms) by the Delta protocol without in-commit timestamps: its
    commit file's modification time, made strictly increasing (as Spark's history manager does)."""
    out: list[int] = []
    for v in range(DeltaTable(path).version() + 1):
        raw = Path(path, "_delta_log", f"{v:020d}.json").stat().st_mtime_ns // 1_000_000
        out.append(raw if not out else max(raw, out[-1] + 1))
    return out


def _rows(path: str, **filters: Any) -> list[tuple[int, str, str]]:
    """(id, email, country) of the Delta table's rows matching ``filters``, read by deltalake."""
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(
        (r["id"], r["email"], r["country"])
        for r in rows
        if all(r[k] in (v if isinstance(v, list) else [v]) for k, v in filters.items())
    )


# ---------------------------------------------------------------------------------------- help


def test_every_subcommand_has_help_with_an_example_json_and_table_options() -> None:
    listed = set(complete(f"{SCRIPT.name} "))
    assert listed == COMMANDS
    for command in sorted(COMMANDS):
        text = ok(command, "--help").stdout
        assert f"Example: lakehouse-index {command} " in text, command
        assert "--json" in text, command
        assert ("--quiet" in text) == (command in LONG), command
        if command != "demo":
            assert "--storage-option" in text and "--catalog" in text and "--index-root" in text, command
    top = ok("--help").stdout
    assert "--debug" in top and "NO_COLOR" in top


def test_bash_completion_completes_commands_options_and_choices(tmp_path: Path) -> None:
    # The bash script, as `--show-completion` prints it when it detects bash (asked for by name here).
    script = ok(_LAKEHOUSE_INDEX_COMPLETE="source_bash").stdout
    assert "_LAKEHOUSE_INDEX_COMPLETE=complete_bash" in script
    assert sorted(complete("lakehouse-index lo")) == ["locate", "lookup"]
    assert complete("lakehouse-index list --js") == ["--json"]
    assert sorted(complete("lakehouse-index refresh t i --mode ")) == ["full", "incremental", "quick"]
    # End to end: the script bash would source, asked as bash asks it.
    (tmp_path / "completion.bash").write_text(script)
    bash = (
        f"source {tmp_path / 'completion.bash'}; COMP_WORDS=(lakehouse-index cre); COMP_CWORD=1; "
        "_lakehouse_index_completion lakehouse-index; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    path = f"{SCRIPT.parent}:{code_env()['PATH']}"
    out = subprocess.run(["bash", "-c", bash], capture_output=True, text=True, env=code_env(PATH=path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["create"]


# ---------------------------------------------------------------------------------------- json


def _stuck_delete(path: str) -> None:
    """Leave index ``by_k`` as a process killed in the middle of a delete leaves it."""
    child = mp.get_context("spawn").Process(target=operate_and_die, args=(path, "delete"))
    child.start()
    child.join(timeout=600)
    assert child.exitcode == -signal.SIGKILL


def test_every_command_prints_json(table: str, tmp_path: Path) -> None:
    info = json_lines(ok("create", table, "by_email", "--key", "email", "--record-key", "id", "--json"))
    assert [(i["name"], i["kind"], i["state"], i["indexed_version"], i["rows"]) for i in info] == [
        ("by_email", "secondary", "ACTIVE", DeltaTable(table).version(), len(_rows(table)))
    ]
    assert info[0]["spec"]["recordKey"] == ["id"]
    write_deltalake(table, _batch(300, 50), mode="append")
    [refreshed] = json_lines(ok("refresh", table, "by_email", "--json"))
    assert (refreshed["indexed_version"], refreshed["rows"]) == (DeltaTable(table).version(), 350)
    [optimized] = json_lines(ok("optimize", table, "by_email", "--mode", "full", "--json"))
    assert optimized["state"] == "ACTIVE" and optimized["rows"] == 350 and optimized["files"] >= 1
    [listed] = json_lines(ok("list", table, "--json"))
    assert (listed["table_version"], listed["lag"], listed["pending_files"]) == (
        DeltaTable(table).version(),
        0,
        0,
    )

    keys = ["u320@x", "u1@x", "nobody"]
    found = json_lines(ok("lookup", table, "by_email", *keys, "--json"))
    assert sorted((r["id"], r["email"], r["country"]) for r in found) == _rows(table, email=keys)
    located = json_lines(ok("locate", table, "by_email", *keys, "--json"))
    assert located == json_lines(ok("lookup", table, "by_email", *keys, "--locate", "--json"))
    for r in located:  # the data file really holds the key at that position (pyarrow's read)
        assert pq.read_table(r["_file"].removeprefix("file://"))["email"][r["_row"]].as_py() == r["email"]
    assert sorted(r["id"] for r in located) == [i for i, _, _ in _rows(table, email=keys)]
    scanned = json_lines(ok("scan", table, "--where", "country = 'DE'", "--json"))
    assert sorted((r["id"], r["email"], r["country"]) for r in scanned) == _rows(table, country="DE")

    [plan] = json_lines(ok("explain", table, "--where", "email = 'u1@x'", "--json"))
    adds = pa.table(DeltaTable(table).get_add_actions(flatten=True)).to_pydict()
    assert (plan["table_files"], plan["table_bytes"]) == (len(adds["path"]), sum(adds["size_bytes"]))
    for c in plan["candidates"]:
        assert c["cost"] == c["scan_bytes"] + c["index_bytes"] + c["repair_cost"] + c["fetch_bytes"]
    [chosen] = [c for c in plan["candidates"] if c["decision"] == "chosen"]
    assert chosen["label"] == plan["chosen"] and chosen["index"] == "by_email"

    [synced] = json_lines(ok("sync", table, "--json"))
    assert [(r["name"], r["lag"]) for r in synced["indexes"]] == [("by_email", 0)]
    [verified] = json_lines(ok("verify", table, "by_email", "--sample", "20", "--json"))
    assert verified["ok"] and verified["mismatches"] == [] and verified["keys"] == 20
    [event] = json_lines(ok("watch", table, "--once", "--json"))
    assert (event["index"], event["version"], event["lag"]) == ("by_email", DeltaTable(table).version(), 0)

    version = DeltaTable(table).version()
    [dry] = json_lines(ok("erase", table, "by_email", "u1@x", "--dry-run", "--json"))
    assert (
        dry["rowsErased"] == len(_rows(table, email="u1@x")) == 1 and DeltaTable(table).version() == version
    )
    [erased] = json_lines(ok("erase", table, "by_email", "u1@x", "--json"))
    assert erased["rowsErased"] == 1 and _rows(table, email="u1@x") == []
    [record] = json_lines(ok("audit", table, "--json"))
    assert record["rowsErased"] == 1 and record["versionsCreated"] == [DeltaTable(table).version()]

    assert json_lines(ok("delete", table, "by_email", "--json"))[0]["state"] == "DELETED"
    assert json_lines(ok("restore", table, "by_email", "--json"))[0]["state"] == "ACTIVE"
    [vacuumed] = json_lines(ok("vacuum", table, "by_email", "--retention-hours", "0", "--json"))
    assert vacuumed["state"] == "ACTIVE"

    ok("create", table, "by_k", "--key", "email", "--quiet")
    _stuck_delete(table)
    [cancelled] = json_lines(ok("cancel", table, "by_k", "--json"))
    assert (cancelled["name"], cancelled["state"]) == ("by_k", "ACTIVE")


def test_demo_prints_its_report_as_json(tmp_path: Path) -> None:
    [report] = json_lines(
        ok("demo", "--path", str(tmp_path), "--rows", "3000", "--files", "3", "--no-spark", "--json")
    )
    dt = DeltaTable(str(tmp_path / "customers"))
    rows = dt.to_pyarrow_table()
    assert (report["rows"], report["files"]) == (rows.num_rows, len(dt.file_uris())) == (3000, 3)
    present = sorted(set(report["keys"]) & set(rows["email"].to_pylist()))
    assert len(present) == len(report["keys"]) - 1  # the demo asks for one missing key
    assert report["version"] == dt.version()
    assert {m["method"]: m["rows"] for m in report["measures"]} == {
        "index lookup (full rows, pyarrow)": len(present),
        "index locate (file, row)": len(present),
        "plain scan (pyarrow)": len(present),
        "plain scan (DuckDB)": len(present),
    }
    assert {m["method"]: m["files"] for m in report["measures"]} == {
        "index lookup (full rows, pyarrow)": len(report["files_touched"]),
        "index locate (file, row)": 0,
        "plain scan (pyarrow)": len(dt.file_uris()),
        "plain scan (DuckDB)": len(dt.file_uris()),
    }
    assert list(report["skipped"]) == ["plain scan (Spark)"]
    assert set(report["files_touched"]) <= {u.rsplit("/", 1)[-1] for u in dt.file_uris()}
    assert report["index"]["entries"] == 3000
    quiet = ok("demo", "--path", str(tmp_path), "--rows", "300", "--files", "2", "--no-spark", "--quiet")
    assert quiet.stdout == ""


# ---------------------------------------------------------------------------------------- list, explain


def test_list_shows_lag_and_pending_quick_refresh_files(table: str) -> None:
    ok("create", table, "by_email", "--key", "email", "--auto-refresh", "off")
    indexed = DeltaTable(table).version()
    for first in (300, 400):
        write_deltalake(table, _batch(first, 10), mode="append")
    ok("refresh", table, "by_email", "--mode", "quick")
    pending_at = DeltaTable(table).version()
    write_deltalake(table, _batch(500, 10), mode="append")
    latest = DeltaTable(table).version()
    appended = set(DeltaTable(table, version=pending_at).file_uris()) - set(
        DeltaTable(table, version=indexed).file_uris()
    )

    [row] = json_lines(ok("list", table, "--json"))
    assert (row["indexed_version"], row["table_version"], row["lag"]) == (indexed, latest, latest - indexed)
    assert (row["pending_version"], row["pending_files"]) == (pending_at, len(appended)) == (4, 2)
    assert row["rows"] == DeltaTable(table, version=indexed).to_pyarrow_table().num_rows
    index_files = list(Path(table, "_lakehouse_index", "by_email", "data").rglob("*.parquet"))
    assert (row["files"], row["size_bytes"]) == (len(index_files), sum(f.stat().st_size for f in index_files))

    text = ok("list", table).stdout
    for header in ("name", "kind", "state", "indexed", "table", "lag", "pending", "rows", "files", "size"):
        assert header in text
    [line] = [ln for ln in text.splitlines() if "by_email" in ln]
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells[:7] == ["by_email", "secondary", "ACTIVE", str(indexed), str(latest), "3", "2 file(s) to v4"]
    assert cells[7] == f"{row['rows']:,}"


def test_explain_prints_the_cost_table(table: str) -> None:
    ok("create", table, "by_email", "--key", "email", "--record-key", "id")
    write_deltalake(table, _batch(300, 10), mode="append")  # not indexed: the hybrid scan repairs it
    for args in (("by_email", "u1@x"), ("--where", "email = 'u1@x'")):
        [plan] = json_lines(ok("explain", table, *args, "--json"))
        text = ok("explain", table, *args).stdout
        assert text.splitlines()[0].startswith(
            f"{plan['query']} at table version {DeltaTable(table).version()}"
        )
        assert all(
            h in text for h in ("candidate", "cost (bytes)", "scan", "index", "repair", "fetch", "decision")
        )
        for c in plan["candidates"]:
            [line] = [ln for ln in text.splitlines() if f"│ {c['label']} " in ln]
            cells = [x.strip() for x in line.strip("│ ").split("│")]
            costs = [c["cost"], c["scan_bytes"], c["index_bytes"], c["repair_cost"], c["fetch_bytes"]]
            assert cells[1:] == [f"{v:,}" for v in costs] + [c["decision"]]
        assert f"→ {plan['summary']}" in text
        usable = [c["cost"] for c in plan["candidates"] if c["decision"] in ("chosen", "more expensive")]
        assert next(c["cost"] for c in plan["candidates"] if c["decision"] == "chosen") == min(usable)


# ---------------------------------------------------------------------------------------- tables


def test_tables_open_through_an_iceberg_catalog(tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    (tmp_path / "wh").mkdir()
    uri, warehouse = f"sqlite:///{tmp_path}/c.db", f"file://{tmp_path}/wh"
    catalog = SqlCatalog("cli", uri=uri, warehouse=warehouse)
    catalog.create_namespace("db")
    catalog.create_table("db.t", _batch(0, 1).schema, properties={"format-version": "2"})
    for i in range(3):
        catalog.load_table("db.t").append(_batch(100 * i, 100))
    env = {"PYICEBERG_CATALOG__CLI__URI": uri, "PYICEBERG_CATALOG__CLI__WAREHOUSE": warehouse}
    ice = ("--catalog", "cli")

    def snapshot_id() -> int:
        snap = catalog.load_table("db.t").current_snapshot()
        assert snap is not None
        return snap.snapshot_id

    [info] = json_lines(
        ok("create", "db.t", "by_email", "--key", "email", "--record-key", "id", *ice, "--json", **env)
    )
    assert (info["indexed_version"], info["rows"]) == (snapshot_id(), 300)
    keys = ["u5@x", "u250@x"]
    found = json_lines(ok("lookup", "db.t", "by_email", *keys, *ice, "--json", **env))
    want = catalog.load_table("db.t").scan().to_arrow().to_pylist()
    assert sorted(r["id"] for r in found) == sorted(r["id"] for r in want if r["email"] in keys) == [5, 250]
    catalog.load_table("db.t").append(_batch(300, 5))
    [row] = json_lines(ok("list", "db.t", *ice, "--json", **env))
    assert (row["table_version"], row["lag"]) == (snapshot_id(), 1)
    missing = run("list", "db.t", "--json", **env)  # without --catalog "db.t" is a path
    assert missing.returncode == 1 and missing.stdout == ""


@pytest.fixture
def s3() -> Iterator[dict[str, str]]:
    with moto_s3("cli-bucket") as options:
        yield options


def test_storage_options_open_a_table_on_an_object_store(s3: dict[str, str]) -> None:
    uri = "s3://cli-bucket/t"
    writer = {**s3, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    for i in range(2):
        write_deltalake(uri, _batch(100 * i, 100), mode="append", storage_options=writer)
    options = [a for k, v in s3.items() for a in ("--storage-option", f"{k}={v}")]
    ok("create", uri, "by_email", "--key", "email", "--record-key", "id", *options)
    found = json_lines(ok("lookup", uri, "by_email", "u7@x", "u150@x", *options, "--json"))
    rows = DeltaTable(uri, storage_options=writer).to_pyarrow_table().to_pylist()
    assert sorted(r["id"] for r in found) == sorted(r["id"] for r in rows if r["email"] in ("u7@x", "u150@x"))
    [row] = json_lines(ok("list", uri, *options, "--json"))
    assert (row["name"], row["lag"], row["table_version"]) == (
        "by_email",
        0,
        DeltaTable(uri, storage_options=writer).version(),
    )


# ------------------------------------------------------------------ progress, errors, colour


def test_progress_shows_on_standard_error_and_quiet_silences_it(table: str) -> None:
    ok("create", table, "by_email", "--key", "email", "--record-key", "id", "--json", "--quiet")
    write_deltalake(table, _batch(300, 10), mode="append")
    for args, shown in [
        (("refresh", table, "by_email", "--json"), "refreshing by_email"),
        (("optimize", table, "by_email", "--mode", "full", "--json"), "optimizing by_email"),
        (("lookup", table, "by_email", "u1@x", "--json"), "looking up 1 key(s)"),
        (("scan", table, "--where", "id = 1", "--json"), "scanning"),
        (("verify", table, "by_email", "--sample", "5", "--json"), "verifying by_email"),
        (("sync", table, "--json"), "syncing indexes"),
    ]:
        terminal = ok(*args, FORCE_COLOR="1")  # Rich treats FORCE_COLOR as a terminal
        assert shown in terminal.stderr, args
        json_lines(terminal)  # standard output stays machine-readable
        assert ok(*args, "--quiet", FORCE_COLOR="1").stderr == "", args
    assert ok("scan", table, "--json").stderr == ""  # redirected, not a terminal: nothing drawn


def test_build_progress_is_a_spinner_in_process(table: str) -> None:
    out = ok("create", table, "by_email", "--key", "email", FORCE_COLOR="1")
    assert "building by_email" in out.stderr and "by_email" in out.stdout
    assert ok("create", table, "other", "--key", "id", "-q", FORCE_COLOR="1").stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nosuchcommand",), "No such command 'nosuchcommand'. (see 'lakehouse-index --help')"),
        (("list",), "Missing argument 'table'. (see 'lakehouse-index list --help')"),
        (
            ("list", "{table}", "--storage-option", "a"),
            "'a' is not KEY=VALUE (see 'lakehouse-index list --help')",
        ),
        (
            ("lookup", "{table}", "i", "a", "--json", "--format", "csv"),
            "--json and --format csv exclude each other",
        ),
        (("refresh", "{table}", "i", "--mode", "sometimes"), "'sometimes' is not one of"),
        (
            ("create", "{table}", "x", "--key", "k", "--covering", "--skipping"),
            "--covering and --skipping exclude",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(table: str, args: tuple[str, ...], message: str) -> None:
    before = sorted(Path(table).rglob("*"))
    out = run(*(a.format(table=table) for a in args))
    assert out.returncode == 2 and out.stdout == ""
    [line] = out.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert sorted(Path(table).rglob("*")) == before


def test_operation_errors_exit_1_with_one_line_and_debug_adds_the_traceback(
    table: str, tmp_path: Path
) -> None:
    cases = [
        (("lookup", table, "nope", "a"), "error: no index 'nope'"),
        (
            ("erase", table, "nope", "--keys-file", str(tmp_path / "missing.txt")),
            "error: FileNotFoundError: ",
        ),
        (("list", str(tmp_path / "nothing")), "error: "),
    ]
    for args, start in cases:
        out = run(*args)
        assert out.returncode == 1 and out.stdout == "", args
        [line] = out.stderr.splitlines()
        assert line.startswith(start), (args, line)
        for debug in (run("--debug", *args), run(*args, LAKEHOUSE_INDEX_DEBUG="1")):
            assert debug.returncode == 1
            assert debug.stderr.startswith("Traceback (most recent call last):")
            assert debug.stderr.splitlines()[-1] == line


def test_no_color_is_respected(table: str, tmp_path: Path) -> None:
    error = ("list", str(tmp_path / "nothing"))
    coloured = run(*error, FORCE_COLOR="1")  # Rich treats FORCE_COLOR as a terminal
    assert coloured.returncode == 1 and colours(coloured.stderr), coloured.stderr  # a red "error:"
    uncoloured = run(*error, FORCE_COLOR="1", NO_COLOR="1")
    assert uncoloured.returncode == 1 and not colours(uncoloured.stderr)
    assert plain(uncoloured.stderr).startswith("error: '")  # bold is no colour
    progress = ("create", table, "by_email", "--key", "email", "--json")
    assert colours(ok(*progress, FORCE_COLOR="1").stderr)  # the spinner and the time are coloured
    ok("delete", table, "by_email")
    ok("vacuum", table, "by_email")
    drawn = ok(*progress, FORCE_COLOR="1", NO_COLOR="1").stderr
    assert "building by_email" in drawn and not colours(drawn)


def test_rows_go_to_a_file_in_every_format(table: str, tmp_path: Path) -> None:
    import pyarrow.csv as pa_csv

    ok("create", table, "by_email", "--key", "email", "--record-key", "id")
    want = [(i, e) for i, e, _ in _rows(table, email="u1@x")]
    for fmt in ("json", "csv", "parquet"):
        target = tmp_path / f"rows.{fmt}"
        out = ok("locate", table, "by_email", "u1@x", "--format", fmt, "-o", str(target))
        assert out.stdout == ""
        if fmt == "parquet":
            got = pq.read_table(target)
        elif fmt == "csv":
            got = pa_csv.read_csv(target)
        else:
            got = pa.Table.from_pylist([json.loads(x) for x in target.read_text().splitlines()])
        assert set(got.column_names) == {"email", "id", "_file", "_row"}
        assert [(r["id"], r["email"]) for r in got.to_pylist()] == want


def test_queries_travel_in_time_by_version_and_timestamp(table: str) -> None:
    ok("create", table, "by_email", "--key", "email", "--record-key", "id")
    old = DeltaTable(table).version()
    write_deltalake(table, _batch(300, 10), mode="append")
    ok("refresh", table, "by_email")
    # The version's timestamp as the protocol defines it without in-commit timestamps (not
    # deltalake's commitInfo time, which a loaded machine leaves a few ms before the file's).
    stamp = _commit_times(table)[old]
    iso = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.timezone.utc).isoformat()
    keys = ["u305@x", "u5@x"]

    def then(version: int) -> list[int]:
        rows = DeltaTable(table, version=version).to_pyarrow_table().to_pylist()
        return sorted(r["id"] for r in rows if r["email"] in keys)

    assert then(old) == [5] and then(DeltaTable(table).version()) == [5, 305]
    version, ms, text = (
        ("--version-as-of", str(old)),
        ("--timestamp-as-of", str(stamp)),
        ("--timestamp-as-of", iso),
    )
    for command, as_of in [("lookup", version), ("locate", version), ("lookup", ms), ("locate", text)]:
        found = json_lines(ok(command, table, "by_email", *keys, *as_of, "--json"))
        assert sorted(r["id"] for r in found) == then(old), (command, as_of)
    for as_of in (version, text):
        scanned = json_lines(ok("scan", table, "--where", "email IN ('u305@x', 'u5@x')", *as_of, "--json"))
        assert sorted(r["id"] for r in scanned) == then(old), as_of
    [plan] = json_lines(ok("explain", table, "by_email", *keys, *ms, "--json"))
    assert plan["table_version"] == old
    latest = json_lines(ok("lookup", table, "by_email", *keys, "--json"))
    assert sorted(r["id"] for r in latest) == then(DeltaTable(table).version())
    for bad in (("--version-as-of", "1", "--timestamp-as-of", "5"), ("--timestamp-as-of", "yesterday")):
        out = run("lookup", table, "by_email", "u5@x", *bad)
        assert out.returncode == 2 and out.stderr.startswith("error: ") and len(out.stderr.splitlines()) == 1


@pytest.mark.spark
def test_spark_builds_show_a_bar_of_spark_tasks(table: str) -> None:
    spark = {"FORCE_COLOR": "1", MASTER_ENV: "local[1]"}
    built = ok(
        "create",
        table,
        "by_email",
        "--key",
        "email",
        "--record-key",
        "id",
        "--local-max-rows",
        "0",
        "--json",
        **spark,
    )
    assert "starting Spark" in built.stderr and "building by_email" in built.stderr
    assert re.search(r"\d+/\d+ tasks", plain(built.stderr)), built.stderr  # the bar: done/total tasks
    [info] = json_lines(built)
    assert info["rows"] == len(_rows(table))
    write_deltalake(table, _batch(300, 10), mode="append")
    ok("refresh", table, "by_email", "--quiet")
    optimized = ok(
        "optimize", table, "by_email", "--mode", "full", "--local-max-rows", "0", "--json", **spark
    )
    assert "optimizing by_email" in optimized.stderr and re.search(r"\d+/\d+ tasks", plain(optimized.stderr))
    assert json_lines(optimized)[0]["rows"] == len(_rows(table))
    found = json_lines(ok("lookup", table, "by_email", "u305@x", "u7@x", "--json"))
    assert sorted((r["id"], r["email"], r["country"]) for r in found) == _rows(
        table, email=["u305@x", "u7@x"]
    )
