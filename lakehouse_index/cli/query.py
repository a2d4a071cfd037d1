"""The commands that read a table version: lookup, locate, scan, explain."""

from __future__ import annotations

import dataclasses
import json
import sys
from enum import Enum
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import typer
from rich.table import Table as RichTable

import lakehouse_index as li
from lakehouse_index.cli.options import (
    AsOf,
    KeysArg,
    NameArg,
    OptionGroup,
    QuietOpt,
    TableArg,
    TableOptions,
    typed_keys,
)
from lakehouse_index.cli.output import console, echo_json, progress
from lakehouse_index.progress import activity

#: The ``--json`` help of explain: what it prints.
_EXPLAIN_JSON = (
    "one JSON object {query, table_version, table_files, table_bytes, keys, candidates: "
    "[{label, index, snapshot, cost, scan_bytes, index_bytes, repair_cost, fetch_bytes, decision}], "
    "chosen, summary, notes}"
)

ColumnsOpt = Annotated[list[str] | None, typer.Option("--column", help="column to return (repeatable)")]


class Format(str, Enum):
    """How rows are printed."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"


@dataclasses.dataclass(frozen=True)
class RowsOutput(OptionGroup):
    """How and where a command prints rows: a table, JSON lines, CSV or Parquet."""

    fmt: Annotated[
        Format, typer.Option("--format", help="table, or json (one object per line) / csv / parquet")
    ] = Format.TABLE
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="write to this file (default stdout)")
    ] = None
    as_json: Annotated[
        bool, typer.Option("--json", help="one JSON object per row and line (same as --format json)")
    ] = False

    def __post_init__(self) -> None:
        # A usage error before the command opens its table.
        if self.as_json and self.fmt not in (Format.TABLE, Format.JSON):
            raise typer.BadParameter(f"--json and --format {self.fmt.value} exclude each other")

    def emit(self, rows: pa.Table) -> None:
        """Print ``rows`` as a table, or write them as JSON lines, CSV or Parquet (to the output
        file or stdout)."""
        fmt = Format.JSON if self.as_json else self.fmt
        if fmt is Format.TABLE:
            out = RichTable(title=f"{rows.num_rows} row(s)")
            for col in rows.column_names:
                out.add_column(col)
            for rec in rows.to_pylist():
                out.add_row(*(str(v) for v in rec.values()))
            console.print(out)
            return
        sink = pa.BufferOutputStream()
        if fmt is Format.JSON:
            text = "".join(json.dumps(r, default=str, sort_keys=True) + "\n" for r in rows.to_pylist())
            sink.write(text.encode())
        elif fmt is Format.CSV:
            pa_csv.write_csv(rows, sink)
        else:
            pq.write_table(rows, sink)
        data = sink.getvalue().to_pybytes()
        if self.output is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            with open(self.output, "wb") as f:
                f.write(data)


def _answer(
    t: li.Table,
    name: str,
    keys: list[str],
    as_of: dict[str, Any],
    located: bool,
    columns: list[str] | None,
    quiet: bool,
) -> pa.Table:
    """The rows of ``lookup``, or with ``located`` the addresses of ``locate``."""
    parsed = typed_keys(t, name, keys)
    with activity(progress(quiet), f"{'locating' if located else 'looking up'} {len(parsed)} key(s)"):
        if located:
            return t.locate(name, parsed, **as_of)
        return t.lookup(name, parsed, columns=columns, **as_of)


def lookup(
    table: TableArg,
    name: NameArg,
    keys: KeysArg,
    *,
    version: AsOf,
    columns: ColumnsOpt = None,
    locate: Annotated[bool, typer.Option(help="print file and row position instead of rows")] = False,
    rows: RowsOutput,
    quiet: QuietOpt = False,
    table_options: TableOptions,
) -> None:
    """Rows of the table version whose index key is one of KEYS (deletes applied).

    Example: lakehouse-index lookup /data/customers by_email ada@example.com --format json
    """
    as_of = version.arguments()
    rows.emit(_answer(table_options.open(table), name, keys, as_of, locate, columns, quiet))


def locate(
    table: TableArg,
    name: NameArg,
    keys: KeysArg,
    *,
    version: AsOf,
    rows: RowsOutput,
    quiet: QuietOpt = False,
    table_options: TableOptions,
) -> None:
    """Where the rows with KEYS live: key and record key columns, _file (data file URI), _row (position).

    Example: lakehouse-index locate /data/customers by_email ada@example.com --json
    """
    as_of = version.arguments()
    rows.emit(_answer(table_options.open(table), name, keys, as_of, True, None, quiet))


def scan(
    table: TableArg,
    where: Annotated[str | None, typer.Option("--where", help="SQL predicate")] = None,
    columns: ColumnsOpt = None,
    *,
    version: AsOf,
    use_indexes: Annotated[bool, typer.Option(help="let the planner narrow the files read")] = True,
    rows: RowsOutput,
    quiet: QuietOpt = False,
    table_options: TableOptions,
) -> None:
    """Read the rows of a table version matching --where (deletes applied; the cheapest index narrows it).

    Example: lakehouse-index scan /data/customers --where "country = 'DE'" --format csv -o de.csv
    """
    as_of = version.arguments()
    t = table_options.open(table)
    with activity(progress(quiet), "scanning"):
        found = t.scan(where=where, columns=columns, use_indexes=use_indexes, **as_of)
    rows.emit(found)


def explain(
    table: TableArg,
    name: Annotated[str | None, typer.Argument(help="index name (a lookup); omit with --where")] = None,
    keys: Annotated[list[str] | None, typer.Argument(help="keys of the lookup")] = None,
    where: Annotated[
        str | None, typer.Option("--where", help="SQL predicate: plan a read over every index")
    ] = None,
    *,
    version: AsOf,
    as_json: Annotated[bool, typer.Option("--json", help=_EXPLAIN_JSON)] = False,
    table_options: TableOptions,
) -> None:
    """Print the cost table of a lookup (index name and keys) or of a read (--where).

    Every candidate (index snapshots, other indexes, the plain scan) with its estimated bytes
    (scan, index, repair, fetch), the choice, and why the others lost.

    Example: lakehouse-index explain /data/customers --where "email = 'ada@example.com'"
    """
    as_of = version.arguments()
    t = table_options.open(table)
    parsed = typed_keys(t, name, keys) if name is not None and keys else None
    plan = t.explain(name, parsed, where=where, **as_of)
    if as_json:
        echo_json(plan.to_json())
        return
    target = plan.target
    console.print(
        f"{plan.query} at table version {target.version} ({len(target.files)} files, "
        f"{target.total_bytes:,} bytes), {plan.keys} key(s)",
        markup=False,
        soft_wrap=True,
    )
    out = RichTable()
    out.add_column("candidate")
    for col in ("cost (bytes)", "scan", "index", "repair", "fetch"):
        out.add_column(col, justify="right")
    out.add_column("decision")
    for c in plan.candidates:
        out.add_row(
            c.label,
            f"{c.cost:,}",
            f"{c.scan_bytes:,}",
            f"{c.index_bytes:,}",
            f"{c.repair_cost:,}",
            f"{c.fetch_bytes:,}",
            c.reason.value,
            style="bold" if c is plan.chosen else None,
        )
    console.print(out)
    console.print(f"→ {plan.summary}", markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(f"  note: {note}", markup=False, soft_wrap=True)
