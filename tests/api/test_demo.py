"""The demo's baselines and its closing check (issue #37).

The demo's answers (index lookup, locate, plain pyarrow / Spark / DuckDB scans) are checked
against deltalake's own read of the version; these tests run the demo in-process, with a
fault injected into the index's answer where they say so, and read what it printed. The
command line's ``demo --json`` is tested in ``test_cli_surface``.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from rich.console import Console

from lakehouse_index.demo import DemoReport, run_demo
from lakehouse_index.query import lookup as lookup_executor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROWS, FILES = 3000, 3
#: A key the demo looks up (its first): the row the injected fault loses.
VICTIM = "user0000011@example.com"


def _demo(tmp_path: Path, *, spark: bool = False) -> tuple[DemoReport, str]:
    out = io.StringIO()
    console = Console(file=out, width=250, color_system=None)
    report = run_demo(str(tmp_path), rows=ROWS, files=FILES, spark=spark, console=console)
    return report, out.getvalue()


def _live_files(tmp_path: Path) -> int:
    return len(DeltaTable(str(tmp_path / "customers")).file_uris())


def _emails(uri: str) -> list[str]:
    return pq.read_table(uri, columns=["email"])["email"].to_pylist()


def test_demo_check_fails_when_the_index_loses_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = lookup_executor._index_hits

    def losing(*args: Any, **kwargs: Any) -> pa.Table:
        hits = real(*args, **kwargs)
        return hits.filter(pc.not_equal(hits["email"], VICTIM))

    monkeypatch.setattr(lookup_executor, "_index_hits", losing)
    with pytest.raises(SystemExit) as failed:
        _demo(tmp_path)
    message = failed.value.code
    assert isinstance(message, str)  # the interpreter prints it and exits with status 1
    version = DeltaTable(str(tmp_path / "customers")).version()
    assert message.startswith(f"demo failed: answers differ from deltalake's own read of version {version}")
    lines = message.splitlines()[1:]
    assert [line.split(" on ")[0].strip() for line in lines] == [
        "index lookup (full rows, pyarrow)",
        "index locate (file, row)",
    ]
    assert all("1 row(s) missing" in line and VICTIM in line and "0 extra []" in line for line in lines)


def test_demo_baselines_read_every_live_file_and_agree_with_deltalake(tmp_path: Path) -> None:
    report, printed = _demo(tmp_path)
    dt = DeltaTable(str(tmp_path / "customers"))
    uris = dt.file_uris()
    holding = {u.rsplit("/", 1)[-1] for u in uris if set(report.keys) & set(_emails(u))}
    oracle = dt.to_pyarrow_table(filters=[("email", "in", report.keys)])
    assert report.version == dt.version()
    assert f"{len(report.keys)} keys at table version {dt.version()} ({len(uris)} live data files)" in printed
    assert {m.method: (m.rows, m.files) for m in report.measures} == {
        "index lookup (full rows, pyarrow)": (oracle.num_rows, len(holding)),
        "index locate (file, row)": (oracle.num_rows, 0),
        "plain scan (pyarrow)": (oracle.num_rows, len(uris)),
        "plain scan (DuckDB)": (oracle.num_rows, len(uris)),
    }
    assert set(report.files_touched) == holding
    assert f"every answer equals deltalake's own read of version {dt.version()}" in printed
    assert "skipped plain scan (Spark): not asked for" in printed


def test_demo_says_why_the_duckdb_row_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)  # `import duckdb` raises ImportError
    report, printed = _demo(tmp_path)
    assert "plain scan (DuckDB)" not in {m.method for m in report.measures}
    reason = dict(report.skipped)["plain scan (DuckDB)"]
    assert "duckdb is not installed" in reason
    assert f"skipped plain scan (DuckDB): {reason}" in printed


@pytest.mark.spark
def test_demo_times_a_plain_spark_read_of_every_file(tmp_path: Path, spark: SparkSession) -> None:
    report, printed = _demo(tmp_path, spark=True)
    [spark_read] = [m for m in report.measures if m.method == "plain scan (Spark)"]
    oracle = DeltaTable(str(tmp_path / "customers")).to_pyarrow_table(filters=[("email", "in", report.keys)])
    assert (spark_read.rows, spark_read.files) == (oracle.num_rows, _live_files(tmp_path))
    assert "Spark" not in dict(report.skipped)
    assert "every answer equals deltalake's own read" in printed
