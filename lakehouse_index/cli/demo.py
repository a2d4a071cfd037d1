"""The ``demo`` command: a sample Delta table, an index, lookups next to plain scans."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from lakehouse_index.cli.options import QuietOpt
from lakehouse_index.cli.output import echo_json

_DEMO_JSON = (
    "only one JSON object {table, rows, files, version, index: {entries, files, bytes}, keys, "
    "files_touched, measures: [{method, rows, files, ms}], skipped: {method: reason}}"
)


def demo(
    path: Annotated[
        str | None, typer.Option(help="work directory (default: a temp dir, removed after)")
    ] = None,
    rows: Annotated[int, typer.Option(help="rows in the sample table")] = 300_000,
    files: Annotated[int, typer.Option(help="Delta commits / data files")] = 50,
    spark: Annotated[bool, typer.Option(help="also time a plain scan on Spark")] = True,
    as_json: Annotated[bool, typer.Option("--json", help=_DEMO_JSON)] = False,
    quiet: QuietOpt = False,
) -> None:
    """Write a sample Delta table, index it, look up keys next to plain scans.

    Example: lakehouse-index demo --rows 100000 --files 20 --no-spark
    """
    from lakehouse_index.demo import run_demo

    report = run_demo(path, rows=rows, files=files, spark=spark, console=Console(quiet=quiet or as_json))
    if as_json:
        echo_json(report.to_json())
