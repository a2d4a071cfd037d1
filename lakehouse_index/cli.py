"""The ``lakehouse-index`` command line: the Table API, one sub-command per operation.

Exit status 0 on success, 1 for an operation error (one line on standard error; the
traceback with ``--debug``), 2 for a usage error. Progress goes to standard error
(``--quiet`` silences it), results to standard output (``--json``: machine-readable).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text
from typer.core import TyperGroup

import lakehouse_index as li
from lakehouse_index.api import IndexStatus, OptimizeMode, RefreshMode
from lakehouse_index.progress import activity, spark_progress
from lakehouse_index.spark import get_spark
from lakehouse_index.spec import AutoRefresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROG = "lakehouse-index"


class OperationError(typer.TyperException):
    """An error of the operation a command ran (exit status 1)."""

    exit_code = 1


class _Commands(TyperGroup):
    """The command group: an error raised by a command becomes an :class:`OperationError`."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.TyperException, typer.Exit, typer.Abort, BrokenPipeError):
            raise
        except Exception as e:
            if ctx.params.get("debug"):
                traceback.print_exc()
            library = isinstance(e, li.LakehouseIndexError)
            raise OperationError(str(e) if library else f"{type(e).__name__}: {e}") from e


app = typer.Typer(
    name=PROG,
    cls=_Commands,
    help=(
        "Side-car indexes for Delta Lake and Iceberg tables.\n\n"
        "Every command takes --help (with an example) and --json (machine-readable output on "
        "standard output). Progress shows on standard error; --quiet silences it. Exit status: 0 "
        "ok, 1 operation error (one line; --debug for the traceback), 2 usage error. NO_COLOR "
        "turns colours off."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
errors = Console(stderr=True, soft_wrap=True)


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="LAKEHOUSE_INDEX_DEBUG", help="print the traceback of an error"),
    ] = False,
) -> None:
    """Global options (before the command: ``lakehouse-index --debug list TABLE``)."""


# ---------------------------------------------------------------------------------------- options

_TABLE = "Table options"


def _check_storage_options(values: list[str] | None) -> list[str] | None:
    for v in values or []:
        if "=" not in v or v.startswith("="):
            raise typer.BadParameter(f"{v!r} is not KEY=VALUE")
    return values


TableArg = Annotated[str, typer.Argument(help="table path/URI (or identifier with --catalog)")]
NameArg = Annotated[str, typer.Argument(help="index name")]
CatalogOpt = Annotated[
    str | None,
    typer.Option(help="pyiceberg catalog name: TABLE is then an identifier", rich_help_panel=_TABLE),
]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        metavar="KEY=VALUE",
        help="object-store option of the table and index storage, e.g. AWS_REGION=eu-west-1 (repeatable)",
        callback=_check_storage_options,
        rich_help_panel=_TABLE,
    ),
]
IndexRootOpt = Annotated[
    str | None, typer.Option(help="where the side-car indexes live", rich_help_panel=_TABLE)
]
VersionOpt = Annotated[
    str | None,
    typer.Option("--version-as-of", help="table version / snapshot id, or an Iceberg branch or tag"),
]
TimestampOpt = Annotated[
    str | None,
    typer.Option(
        "--timestamp-as-of", help="the version current at this time: ISO 8601 (UTC unless given) or epoch ms"
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")]

#: The JSON object of one index (``--json`` of create, refresh, optimize, delete, restore, vacuum, cancel).
INFO_SHAPE = "{name, kind, state, indexed_version, rows, files, size_bytes, log_entry, spec}"
InfoJsonOpt = Annotated[bool, typer.Option("--json", help=f"print one JSON object {INFO_SHAPE}")]
RowsJsonOpt = Annotated[
    bool, typer.Option("--json", help="one JSON object per row and line (same as --format json)")
]


def _ref(text: str) -> int | str:
    """A version reference: a number (version, snapshot id), else a branch or tag name."""
    return int(text) if text.lstrip("-").isdigit() else text


def _as_of(version: str | None, timestamp: str | None) -> dict[str, Any]:
    """The ``version_as_of`` / ``timestamp_as_of`` arguments of a query."""
    if version is not None and timestamp is not None:
        raise typer.BadParameter("--version-as-of and --timestamp-as-of exclude each other")
    when: dt.datetime | int | None = None
    if timestamp is not None:
        try:
            when = int(timestamp) if timestamp.isdigit() else dt.datetime.fromisoformat(timestamp)
        except ValueError:
            raise typer.BadParameter(f"--timestamp-as-of {timestamp!r} is not ISO 8601 or epoch ms") from None
    return {"version_as_of": None if version is None else _ref(version), "timestamp_as_of": when}


def _open(table: str, catalog: str | None, index_root: str | None, storage: list[str] | None) -> li.Table:
    options = dict(v.split("=", 1) for v in storage or [])
    return li.open_table(table, catalog=catalog, index_root=index_root, storage_options=options or None)


def _progress(quiet: bool) -> Console:
    """Where progress displays go: standard error, nowhere with ``--quiet``."""
    return Console(stderr=True, quiet=quiet)


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, default=str, sort_keys=True))


# ---------------------------------------------------------------------------------------- index info


def _info_json(i: li.IndexInfo) -> dict[str, Any]:
    return {
        "name": i.name,
        "kind": i.kind,
        "state": i.state.value,
        "indexed_version": i.indexed_version,
        "rows": i.rows,
        "files": i.files,
        "size_bytes": i.size_bytes,
        "log_entry": i.log_entry,
        "spec": i.spec.to_json(),
    }


def _show_info(info: li.IndexInfo, as_json: bool) -> None:
    if as_json:
        _echo_json(_info_json(info))
        return
    out = RichTable()
    for col in ("name", "kind", "state", "indexed version", "rows", "files", "size", "columns"):
        out.add_column(col)
    out.add_row(
        info.name,
        info.kind,
        info.state.value,
        str(info.indexed_version),
        f"{info.rows:,}",
        str(info.files),
        f"{info.size_bytes / 1e6:.2f} MB",
        ", ".join(info.spec.columns),
    )
    console.print(out)


def _show_status(statuses: list[IndexStatus], as_json: bool) -> None:
    if as_json:
        for s in statuses:
            _echo_json(
                {
                    **_info_json(s.info),
                    "table_version": s.table_version,
                    "lag": s.lag,
                    "pending_version": s.pending_version,
                    "pending_files": s.pending_files,
                }
            )
        return
    out = RichTable()
    for col in ("name", "kind", "state", "indexed", "table", "lag", "pending", "rows", "files", "size"):
        out.add_column(col, justify="left" if col in ("name", "kind", "state", "pending") else "right")
    for s in statuses:
        i = s.info
        out.add_row(
            i.name,
            i.kind,
            i.state.value,
            str(i.indexed_version),
            str(s.table_version),
            "-" if s.lag is None else str(s.lag),
            f"{s.pending_files} file(s) to v{s.pending_version}" if s.pending_version is not None else "-",
            f"{i.rows:,}",
            str(i.files),
            f"{i.size_bytes / 1e6:.2f} MB",
        )
    console.print(out)


def _maintain(
    quiet: bool, description: str, in_process: bool, run: Callable[[SparkSession | None], li.IndexInfo]
) -> li.IndexInfo:
    """Run an index build, refresh or optimize with a progress display.

    In process (small work, no JVM): a spinner; on Spark: a bar of Spark's tasks.
    """
    shown = _progress(quiet)
    if in_process:
        with activity(shown, description):
            return run(None)
    with activity(shown, "starting Spark"):
        spark = get_spark()
    with spark_progress(spark, description, console=shown):
        return run(spark)


def _runs_locally(
    t: li.Table, rows: int | None, local_max_rows: int | None, *, compaction: bool = False
) -> bool:
    """Whether work of ``rows`` rows (None: the latest version's; index entries when
    ``compaction``) runs in this process (no JVM)."""
    policy = t.config.executor
    if rows is None:
        rows = policy.estimate_rows(t.snapshot().files.values())
    if local_max_rows is not None:
        return rows <= local_max_rows
    return policy.runs_locally(rows, compaction=compaction)


LocalMaxRowsOpt = Annotated[
    int | None,
    typer.Option(help="work of at most this many rows runs in process, larger on Spark (default: config)"),
]


# ---------------------------------------------------------------------------------------- rows


class Format(str, Enum):
    """How rows are printed."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"


FormatOpt = Annotated[
    Format, typer.Option("--format", help="table, or json (one object per line) / csv / parquet")
]
OutputOpt = Annotated[str | None, typer.Option("--output", "-o", help="write to this file (default stdout)")]


def _format(fmt: Format, as_json: bool) -> Format:
    if as_json and fmt not in (Format.TABLE, Format.JSON):
        raise typer.BadParameter(f"--json and --format {fmt.value} exclude each other")
    return Format.JSON if as_json else fmt


def _emit(rows: pa.Table, fmt: Format, output: str | None) -> None:
    """Print ``rows`` as a table, or write them as JSON lines, CSV or Parquet (to ``output`` or stdout)."""
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
    if output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        with open(output, "wb") as f:
            f.write(data)


def _parse_keys(keys: Sequence[str]) -> list[Any]:
    """Keys as JSON values where they parse (numbers, arrays for composite keys), else strings."""
    out = []
    for k in keys:
        try:
            v = json.loads(k)
        except ValueError:
            v = k
        out.append(tuple(v) if isinstance(v, list) else v)
    return out


def _typed_keys(t: li.Table, index: str, raw: Sequence[str]) -> list[Any]:
    """Keys from text: as is for a string key column, JSON values (numbers, arrays) otherwise."""
    infos = {i.name: i for i in t.indexes()}
    if index not in infos:
        raise li.IndexNotFoundError(f"no index {index!r} on {t.uri} (indexes: {sorted(infos)})")
    key = list(infos[index].spec.key)
    schema = t.snapshot().schema
    if len(key) == 1 and pa.types.is_string(schema.field(key[0]).type):
        return list(raw)
    return _parse_keys(raw)


KeysArg = Annotated[list[str], typer.Argument(help="keys (JSON arrays for composite keys)")]
ColumnsOpt = Annotated[list[str] | None, typer.Option("--column", help="column to return (repeatable)")]


# ---------------------------------------------------------------------------------------- commands


@app.command()
def create(
    table: TableArg,
    name: NameArg,
    key: Annotated[list[str], typer.Option(help="key column (repeat for composite)")],
    record_key: Annotated[list[str] | None, typer.Option(help="record key column (repeatable)")] = None,
    covering: Annotated[bool, typer.Option(help="create a covering index (key = indexed)")] = False,
    include: Annotated[list[str] | None, typer.Option(help="included column (covering)")] = None,
    buckets: Annotated[int, typer.Option(help="buckets (covering)")] = 8,
    skipping: Annotated[bool, typer.Option(help="create a skipping index (key = its columns)")] = False,
    auto_refresh: Annotated[
        AutoRefresh, typer.Option(help="what auto-maintenance does")
    ] = AutoRefresh.INCREMENTAL,
    as_json: InfoJsonOpt = False,
    quiet: QuietOpt = False,
    local_max_rows: LocalMaxRowsOpt = None,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Create an index and build it (in process when small, else on Spark), with a progress display.

    Example: lakehouse-index create /data/customers by_email --key email --record-key id
    """
    spec: li.SecondaryIndex | li.CoveringIndex | li.SkippingIndex
    if covering and skipping:
        raise typer.BadParameter("--covering and --skipping exclude each other")
    if covering:
        spec = li.CoveringIndex(
            name, indexed=key, included=include or [], num_buckets=buckets, auto_refresh=auto_refresh
        )
    elif skipping:
        spec = li.SkippingIndex(name, columns=key, auto_refresh=auto_refresh)
    else:
        spec = li.SecondaryIndex(name, key=key, record_key=record_key or None, auto_refresh=auto_refresh)
    t = _open(table, catalog, index_root, storage_option)
    info = _maintain(
        quiet,
        f"building {name}",
        _runs_locally(t, None, local_max_rows),
        lambda spark: t.create_index(spec, spark=spark, local_max_rows=local_max_rows),
    )
    _show_info(info, as_json)


@app.command()
def refresh(
    table: TableArg,
    name: NameArg,
    mode: Annotated[RefreshMode, typer.Option(help="refresh mode")] = RefreshMode.INCREMENTAL,
    remap: Annotated[
        bool, typer.Option(help="incremental: remap rows of rewritten files instead of re-indexing them")
    ] = True,
    as_json: InfoJsonOpt = False,
    quiet: QuietOpt = False,
    local_max_rows: LocalMaxRowsOpt = None,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Bring an index up to the latest table version, with a progress display.

    Example: lakehouse-index refresh /data/customers by_email --mode incremental
    """
    t = _open(table, catalog, index_root, storage_option)
    # Quick and most incremental refreshes need no JVM; a full one is a build.
    in_process = mode is not RefreshMode.FULL or _runs_locally(t, None, local_max_rows)
    info = _maintain(
        quiet,
        f"refreshing {name} ({mode.value})",
        in_process,
        lambda spark: t.refresh_index(
            name, mode.value, spark=spark, remap=remap, local_max_rows=local_max_rows
        ),
    )
    _show_info(info, as_json)


@app.command()
def optimize(
    table: TableArg,
    name: NameArg,
    mode: Annotated[OptimizeMode, typer.Option(help="optimize mode")] = OptimizeMode.QUICK,
    as_json: InfoJsonOpt = False,
    quiet: QuietOpt = False,
    local_max_rows: LocalMaxRowsOpt = None,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Compact an index (quick: merge delta files; full: a new base without tombstones).

    Example: lakehouse-index optimize /data/customers by_email --mode full
    """
    t = _open(table, catalog, index_root, storage_option)
    rows = next((i.rows for i in t.indexes() if i.name == name), 0)
    info = _maintain(
        quiet,
        f"optimizing {name} ({mode.value})",
        _runs_locally(t, rows, local_max_rows, compaction=True),  # compacted in process (no JVM)
        lambda spark: t.optimize_index(name, mode.value, spark=spark, local_max_rows=local_max_rows),
    )
    _show_info(info, as_json)


@app.command("list")
def list_(
    table: TableArg,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help=f"one JSON object per index and line: {INFO_SHAPE[:-1]}, table_version, lag, "
            "pending_version, pending_files}",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """List the table's indexes with their lag behind the table.

    Shows name, kind, state, indexed version against the table's latest version (lag, in
    commits), files recorded by quick refreshes and not yet indexed (pending), rows, files, size.

    Example: lakehouse-index list /data/customers --json
    """
    _show_status(_open(table, catalog, index_root, storage_option).index_status(), as_json)


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
    parsed = _typed_keys(t, name, keys)
    with activity(_progress(quiet), f"{'locating' if located else 'looking up'} {len(parsed)} key(s)"):
        if located:
            return t.locate(name, parsed, **as_of)
        return t.lookup(name, parsed, columns=columns, **as_of)


@app.command()
def lookup(
    table: TableArg,
    name: NameArg,
    keys: KeysArg,
    version_as_of: VersionOpt = None,
    timestamp_as_of: TimestampOpt = None,
    columns: ColumnsOpt = None,
    locate: Annotated[bool, typer.Option(help="print file and row position instead of rows")] = False,
    fmt: FormatOpt = Format.TABLE,
    output: OutputOpt = None,
    as_json: RowsJsonOpt = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Rows of the table version whose index key is one of KEYS (deletes applied).

    Example: lakehouse-index lookup /data/customers by_email ada@example.com --format json
    """
    f = _format(fmt, as_json)
    as_of = _as_of(version_as_of, timestamp_as_of)
    t = _open(table, catalog, index_root, storage_option)
    _emit(_answer(t, name, keys, as_of, locate, columns, quiet), f, output)


@app.command("locate")
def locate_command(
    table: TableArg,
    name: NameArg,
    keys: KeysArg,
    version_as_of: VersionOpt = None,
    timestamp_as_of: TimestampOpt = None,
    fmt: FormatOpt = Format.TABLE,
    output: OutputOpt = None,
    as_json: RowsJsonOpt = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Where the rows with KEYS live: key and record key columns, _file (data file URI), _row (position).

    Example: lakehouse-index locate /data/customers by_email ada@example.com --json
    """
    f = _format(fmt, as_json)
    as_of = _as_of(version_as_of, timestamp_as_of)
    t = _open(table, catalog, index_root, storage_option)
    _emit(_answer(t, name, keys, as_of, True, None, quiet), f, output)


@app.command()
def scan(
    table: TableArg,
    where: Annotated[str | None, typer.Option("--where", help="SQL predicate")] = None,
    columns: ColumnsOpt = None,
    version_as_of: VersionOpt = None,
    timestamp_as_of: TimestampOpt = None,
    use_indexes: Annotated[bool, typer.Option(help="let the planner narrow the files read")] = True,
    fmt: FormatOpt = Format.TABLE,
    output: OutputOpt = None,
    as_json: RowsJsonOpt = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Read the rows of a table version matching --where (deletes applied; the cheapest index narrows it).

    Example: lakehouse-index scan /data/customers --where "country = 'DE'" --format csv -o de.csv
    """
    f = _format(fmt, as_json)
    as_of = _as_of(version_as_of, timestamp_as_of)
    t = _open(table, catalog, index_root, storage_option)
    with activity(_progress(quiet), "scanning"):
        rows = t.scan(where=where, columns=columns, use_indexes=use_indexes, **as_of)
    _emit(rows, f, output)


@app.command()
def explain(
    table: TableArg,
    name: Annotated[str | None, typer.Argument(help="index name (a lookup); omit with --where")] = None,
    keys: Annotated[list[str] | None, typer.Argument(help="keys of the lookup")] = None,
    where: Annotated[
        str | None, typer.Option("--where", help="SQL predicate: plan a read over every index")
    ] = None,
    version_as_of: VersionOpt = None,
    timestamp_as_of: TimestampOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object {query, table_version, table_files, table_bytes, keys, candidates: "
            "[{label, index, snapshot, cost, scan_bytes, index_bytes, repair_cost, fetch_bytes, decision}], "
            "chosen, summary, notes}",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Print the cost table of a lookup (index name and keys) or of a read (--where).

    Every candidate (index snapshots, other indexes, the plain scan) with its estimated bytes
    (scan, index, repair, fetch), the choice, and why the others lost.

    Example: lakehouse-index explain /data/customers --where "email = 'ada@example.com'"
    """
    as_of = _as_of(version_as_of, timestamp_as_of)
    t = _open(table, catalog, index_root, storage_option)
    parsed = _typed_keys(t, name, keys) if name is not None and keys else None
    plan = t.explain(name, parsed, where=where, **as_of)
    if as_json:
        _echo_json(plan.to_json())
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


@app.command()
def sync(
    table: TableArg,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object {table_uri, table_version, seconds, indexes: [{name, policy, action, "
            "table_version, indexed_version, seen_version, lag, lag_seconds, ..., error, recovery}]}",
        ),
    ] = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Apply every index's auto-refresh policy to the commits it has not seen (exit 1 if one failed).

    Example: lakehouse-index sync /data/customers --json
    """
    import dataclasses

    t = _open(table, catalog, index_root, storage_option)
    with activity(_progress(quiet), "syncing indexes"):
        result = t.sync_indexes(raise_on_error=False)
    if as_json:
        _echo_json(dataclasses.asdict(result))
    else:
        for r in result.indexes:
            console.print(
                f"{r.name} ({r.policy.value}): {r.action.value}, indexed {r.indexed_version}, lag {r.lag}"
                + (f"\n  {r.error}\n  {r.recovery}" if r.error else ""),
                markup=False,
            )
    if not result.ok:
        raise typer.Exit(1)


def _lifecycle(op: str, doc: str) -> Callable[..., None]:
    """The command of a metadata-only lifecycle operation (``Table.<op>_index``)."""

    def command(
        table: TableArg,
        name: NameArg,
        as_json: InfoJsonOpt = False,
        catalog: CatalogOpt = None,
        storage_option: StorageOpt = None,
        index_root: IndexRootOpt = None,
    ) -> None:
        t = _open(table, catalog, index_root, storage_option)
        _show_info(getattr(t, f"{op}_index")(name), as_json)

    command.__doc__ = f"{doc}\n\nExample: lakehouse-index {op} /data/customers by_email"
    return command


app.command("delete")(
    _lifecycle("delete", "Soft-delete an index: queries stop using it (restore brings it back).")
)
app.command("restore")(_lifecycle("restore", "Restore a soft-deleted index."))


@app.command()
def vacuum(
    table: TableArg,
    name: NameArg,
    retention_hours: Annotated[
        float | None, typer.Option(help="active index: keep snapshots this young (default: config)")
    ] = None,
    as_json: InfoJsonOpt = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Remove a deleted index's data, or the snapshots and files an active one no longer needs.

    Example: lakehouse-index vacuum /data/customers by_email --retention-hours 24
    """
    t = _open(table, catalog, index_root, storage_option)
    with activity(_progress(quiet), f"vacuuming {name}"):
        info = t.vacuum_index(name, retention_hours=retention_hours)
    _show_info(info, as_json)


app.command("cancel")(
    _lifecycle("cancel", "Recover an index stuck by a crashed operation (back to its last stable state).")
)


@app.command()
def demo(
    path: Annotated[
        str | None, typer.Option(help="work directory (default: a temp dir, removed after)")
    ] = None,
    rows: Annotated[int, typer.Option(help="rows in the sample table")] = 300_000,
    files: Annotated[int, typer.Option(help="Delta commits / data files")] = 50,
    spark: Annotated[bool, typer.Option(help="also time a plain scan on Spark")] = True,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="only one JSON object {table, rows, files, index: {entries, files, bytes}, keys, "
            "files_touched, measures: [{method, rows, ms}]}",
        ),
    ] = False,
    quiet: QuietOpt = False,
) -> None:
    """Write a sample Delta table, index it, look up keys next to plain scans.

    Example: lakehouse-index demo --rows 100000 --files 20 --no-spark
    """
    from lakehouse_index.demo import run_demo

    report = run_demo(path, rows=rows, files=files, spark=spark, console=Console(quiet=quiet or as_json))
    if as_json:
        _echo_json(report.to_json())


@app.command("watch")
def watch_command(
    tables: Annotated[list[str], typer.Argument(help="table paths/URIs (or identifiers with --catalog)")],
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 5.0,
    once: Annotated[bool, typer.Option(help="one pass, then exit")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object per action and line {table, version, index, policy, action, "
            "indexed_version, seen_version, lag, lag_seconds, entries_written, files_tombstoned, seconds, "
            "error, recovery}",
        ),
    ] = False,
    storage_option: StorageOpt = None,
) -> None:
    """Sync indexes whenever a table gets new commits (by any engine); Ctrl-C stops cleanly.

    In a terminal a live table shows each index's lag (versions and seconds), last action
    and last error; otherwise one line per action (one JSON object per line with --json).

    Example: lakehouse-index watch /data/customers /data/orders --interval 10
    """
    from lakehouse_index.workflows.watch import WatchEvent, watch

    opened = [_open(t, catalog, index_root, storage_option) for t in tables]
    if not as_json and not once and console.is_terminal:
        _watch_live(opened, interval)
        return

    def show(event: WatchEvent) -> None:
        if as_json:
            typer.echo(json.dumps(event.to_json(), sort_keys=True))
            return
        r = event.report
        if r is None:
            console.print(f"[red]{event.table}[/]: {event.error}")
            return
        colour = "red" if not r.ok else "green" if r.lag == 0 else "yellow"
        console.print(
            f"{event.table} [bold]{r.name}[/] {r.action.value}: version {r.table_version}, indexed "
            f"{r.indexed_version}, [{colour}]lag {r.lag} ({r.lag_seconds:.1f} s)[/] in {r.seconds:.2f} s"
            + (f"\n  [red]{r.error}[/]\n  {r.recovery}" if r.error else "")
        )

    watch([t.context for t in opened], interval=interval, once=once, on_event=show)


def _watch_live(opened: list[li.Table], interval: float) -> None:
    """The watcher with the live lag table (:mod:`lakehouse_index.lag_display`) redrawn in place."""
    from rich.live import Live

    from lakehouse_index.lag_display import LagState, record, render
    from lakehouse_index.workflows.watch import WatchEvent, watch

    state = LagState()
    title = f"lakehouse-index watch: {len(opened)} table(s), polled every {interval:g} s (Ctrl-C stops)"

    def on_event(event: WatchEvent) -> None:
        nonlocal state
        state = record(state, event, time.time())

    with Live(
        console=console, refresh_per_second=2, get_renderable=lambda: render(state, time.time(), title=title)
    ):
        watch([t.context for t in opened], interval=interval, on_event=on_event)


@app.command("verify")
def verify_command(
    table: TableArg,
    name: NameArg,
    sample: Annotated[int, typer.Option(help="keys to sample")] = 100,
    version: Annotated[
        list[str] | None, typer.Option("--version-as-of", help="a version to check (repeatable)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the key sample")] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object {index, ok, versions, snapshots, keys, checks, mismatches: "
            "[{version, snapshot, check, key, expected, got}]}",
        ),
    ] = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Compare sampled index answers with a plain scan; exit code 1 on any mismatch.

    Example: lakehouse-index verify /data/customers by_email --sample 500
    """
    versions = [_ref(v) for v in version] if version else None
    t = _open(table, catalog, index_root, storage_option)
    with activity(_progress(quiet), f"verifying {name} ({sample} keys)"):
        report = t.verify_index(name, sample=sample, versions=versions, seed=seed)
    if as_json:
        _echo_json(report.to_json())
    else:
        console.print(str(report), markup=False)
    if not report.ok:
        raise typer.Exit(1)


@contextmanager
def _steps(quiet: bool, first: str) -> Iterator[Callable[[str], None]]:
    """A spinner whose text follows an operation's progress messages (each also printed above it)."""
    shown = _progress(quiet)
    with activity(shown, first):

        def say(message: str) -> None:
            shown.print(message, style="dim", markup=False)

        yield say


@app.command()
def erase(
    table: TableArg,
    name: NameArg,
    keys: Annotated[list[str] | None, typer.Argument(help="subject keys (or --keys-file)")] = None,
    keys_file: Annotated[str | None, typer.Option("--keys-file", help="file with one key per line")] = None,
    purge: Annotated[bool, typer.Option(help="also remove every older version and index trace")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="report what would change; change nothing")
    ] = False,
    force: Annotated[bool, typer.Option(help="purge even where retention settings forbid it")] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object {table, index, subjects, dryRun, rowsErased, files: [{path, rowsBefore, "
            "rowsErased, size, replacedBy}], version, purge, verification, audit, ...}",
        ),
    ] = False,
    quiet: QuietOpt = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Erase data subjects (GDPR): targeted delete, index refresh, optional purge, verification, audit.

    Example: lakehouse-index erase /data/customers by_email alice@example.com --purge
    """
    raw = list(keys or [])
    if keys_file is not None:
        with open(keys_file, encoding="utf-8") as f:
            raw += [line.rstrip("\r\n") for line in f if line.strip()]
    t = _open(table, catalog, index_root, storage_option)
    subjects = _typed_keys(t, name, raw)
    with _steps(quiet, f"erasing {len(subjects)} subject(s)") as say:
        result = t.erase(name, subjects, purge=purge, dry_run=dry_run, force=force, progress=say)
    if as_json:
        _echo_json(result.to_json())
        return
    what = "would erase" if dry_run else "erased"
    console.print(
        f"{what} {result.rows_erased} row(s) of {result.subjects} subject(s) from {len(result.files)} "
        f"file(s) ({result.bytes_rewritten / 1e6:.2f} MB rewritten)"
        + (f"; table version {result.version}" if result.version is not None else ""),
        markup=False,
    )
    if result.verification is not None:
        console.print(
            f"verified: {result.verification.get('filesChecked')} file(s) checked, no trace", markup=False
        )
    if result.audit_uri:
        console.print(f"audit record: {result.audit_uri}", markup=False)


@app.command()
def audit(
    table: TableArg,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="one JSON object per erasure and line {when, who, index, subjects (salted hashes), "
            "rowsErased, versionsCreated, purge, verification, ...}",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    storage_option: StorageOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """List the table's erasure audit records (subjects as salted hashes).

    Example: lakehouse-index audit /data/customers --json
    """
    records = _open(table, catalog, index_root, storage_option).erasures()
    if as_json:
        for r in records:
            _echo_json(r.to_json())
        return
    out = RichTable(title=f"{len(records)} erasure(s)")
    for col in ("when", "who", "index", "subjects", "rows", "versions", "purge", "verified"):
        out.add_column(col)
    for r in records:
        verified = "-" if r.verification is None else ("ok" if r.verification.get("ok") else "HIT")
        out.add_row(
            r.when,
            r.who,
            r.index,
            str(len(r.subjects)),
            str(r.rows_erased),
            ", ".join(map(str, r.versions_created)),
            str(r.purge),
            verified,
        )
    console.print(out)


# ---------------------------------------------------------------------------------------- entry point


def _fail(message: str, code: int) -> None:
    errors.print(Text.assemble(("error:", "bold red"), " ", " ".join(message.split())))
    raise SystemExit(code)


def main(args: Sequence[str] | None = None) -> None:
    """Entry point of ``lakehouse-index``: exit 0; 1 for an operation error; 2 for a usage error."""
    try:
        code = app(args=args, prog_name=PROG, standalone_mode=False)
    except typer.TyperException as e:  # usage errors (2, naming their command) and OperationError (1)
        if not e.format_message():  # no arguments at all: the help was shown
            raise SystemExit(e.exit_code) from None
        ctx = getattr(e, "ctx", None)
        _fail(
            e.format_message() + (f" (see '{ctx.command_path} --help')" if ctx is not None else ""),
            e.exit_code,
        )
    except typer.Abort:
        _fail("aborted", 1)
    raise SystemExit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
