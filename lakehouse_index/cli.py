"""The ``lakehouse-index`` command line: the Table API, one sub-command per operation."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import typer
from rich.console import Console
from rich.table import Table as RichTable

import lakehouse_index as li
from lakehouse_index.api import OptimizeMode, RefreshMode
from lakehouse_index.errors import LakehouseIndexError
from lakehouse_index.progress import spark_progress
from lakehouse_index.spark import get_spark
from lakehouse_index.spec import AutoRefresh

app = typer.Typer(help="Side-car indexes for Delta Lake and Iceberg tables.", no_args_is_help=True)
console = Console()

TableArg = Annotated[str, typer.Argument(help="table path/URI (or identifier with --catalog)")]
NameArg = Annotated[str, typer.Argument(help="index name")]
CatalogOpt = Annotated[str | None, typer.Option(help="pyiceberg catalog name")]
IndexRootOpt = Annotated[str | None, typer.Option(help="where the side-car indexes live")]
VersionOpt = Annotated[int | None, typer.Option("--version-as-of", help="table version / snapshot id")]


def _open(table: str, catalog: str | None, index_root: str | None) -> li.Table:
    return li.open_table(table, catalog=catalog, index_root=index_root)


def _print_infos(infos: list[li.IndexInfo]) -> None:
    out = RichTable()
    for col in ("name", "kind", "state", "version", "rows", "files", "size", "columns"):
        out.add_column(col)
    for i in infos:
        out.add_row(
            i.name,
            i.kind,
            i.state.value,
            str(i.indexed_version),
            f"{i.rows:,}",
            str(i.files),
            f"{i.size_bytes / 1e6:.2f} MB",
            ", ".join(i.spec.columns),
        )
    console.print(out)


def _with_spark(what: str, run: Callable[[Any], li.IndexInfo]) -> li.IndexInfo:
    """Run a Spark-backed operation with a progress bar fed by Spark's status tracker."""
    spark = get_spark()
    with spark_progress(spark, what):
        return run(spark)


def _small(t: li.Table) -> bool:
    """Whether the latest version is small enough to be indexed in this process (no JVM)."""
    policy = t.config.executor
    return policy.runs_locally(policy.estimate_rows(t.snapshot().files.values()))


class Format(str, Enum):
    """How rows are printed."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    PARQUET = "parquet"


FormatOpt = Annotated[Format, typer.Option("--format", help="table, or json / csv / parquet")]
OutputOpt = Annotated[str | None, typer.Option("--output", "-o", help="write to this file (default stdout)")]


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


def _parse_keys(keys: list[str]) -> list[Any]:
    """Keys as JSON values where they parse (numbers, arrays for composite keys), else strings."""
    out = []
    for k in keys:
        try:
            v = json.loads(k)
        except ValueError:
            v = k
        out.append(tuple(v) if isinstance(v, list) else v)
    return out


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
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Create an index and build it (in process when small, else on Spark with a progress bar)."""
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
    t = _open(table, catalog, index_root)
    if _small(t):
        _print_infos([t.create_index(spec)])
        return
    _print_infos([_with_spark(f"building {name}", lambda spark: t.create_index(spec, spark=spark))])


@app.command()
def refresh(
    table: TableArg,
    name: NameArg,
    mode: Annotated[RefreshMode, typer.Option(help="refresh mode")] = RefreshMode.INCREMENTAL,
    remap: Annotated[
        bool, typer.Option(help="incremental: remap rows of rewritten files instead of re-indexing them")
    ] = True,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Bring an index up to the latest table version."""
    t = _open(table, catalog, index_root)
    if mode is not RefreshMode.FULL or _small(
        t
    ):  # small builds, quick and most incremental refreshes need no JVM
        _print_infos([t.refresh_index(name, mode=mode.value, remap=remap)])
        return
    _print_infos(
        [_with_spark(f"rebuilding {name}", lambda spark: t.refresh_index(name, mode.value, spark=spark))]
    )


@app.command()
def optimize(
    table: TableArg,
    name: NameArg,
    mode: Annotated[OptimizeMode, typer.Option(help="optimize mode")] = OptimizeMode.QUICK,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Compact an index."""
    t = _open(table, catalog, index_root)
    rows = next((i.rows for i in t.indexes() if i.name == name), 0)
    if t.config.executor.runs_locally(rows):  # a small index is compacted in process (no JVM)
        _print_infos([t.optimize_index(name, mode.value)])
        return
    _print_infos(
        [_with_spark(f"optimizing {name}", lambda spark: t.optimize_index(name, mode.value, spark=spark))]
    )


@app.command("list")
def list_(
    table: TableArg,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per index")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """List the table's indexes (name, kind, state, indexed version, size).

    Example: lakehouse-index list /data/customers --json
    """
    infos = _open(table, catalog, index_root).indexes()
    if as_json:
        for i in infos:
            typer.echo(json.dumps({**dataclasses.asdict(i), "spec": i.spec.to_json()}, default=str))
        return
    _print_infos(infos)


@app.command()
def lookup(
    table: TableArg,
    name: NameArg,
    keys: Annotated[list[str], typer.Argument(help="keys (JSON arrays for composite keys)")],
    version_as_of: VersionOpt = None,
    locate: Annotated[bool, typer.Option(help="print file and row position instead of rows")] = False,
    fmt: FormatOpt = Format.TABLE,
    output: OutputOpt = None,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Look up keys through an index.

    Example: lakehouse-index lookup /data/customers by_email ada@example.com --format json
    """
    t = _open(table, catalog, index_root)
    parsed = _parse_keys(keys)
    rows = (
        t.locate(name, parsed, version_as_of=version_as_of)
        if locate
        else t.lookup(name, parsed, version_as_of=version_as_of)
    )
    _emit(rows, fmt, output)


@app.command()
def scan(
    table: TableArg,
    where: Annotated[str | None, typer.Option("--where", help="SQL predicate")] = None,
    columns: Annotated[list[str] | None, typer.Option("--column", help="column to read (repeatable)")] = None,
    version_as_of: VersionOpt = None,
    use_indexes: Annotated[bool, typer.Option(help="let the planner narrow the files read")] = True,
    fmt: FormatOpt = Format.TABLE,
    output: OutputOpt = None,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Read the rows of a table version matching --where (deletes applied; the cheapest index narrows it).

    Example: lakehouse-index scan /data/customers --where "country = 'DE'" --format csv -o de.csv
    """
    t = _open(table, catalog, index_root)
    rows = t.scan(version_as_of=version_as_of, where=where, columns=columns, use_indexes=use_indexes)
    _emit(rows, fmt, output)


@app.command()
def sync(
    table: TableArg,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Apply every index's auto-refresh policy to the commits it has not seen (exit 1 if one failed).

    Example: lakehouse-index sync /data/customers --json
    """
    result = _open(table, catalog, index_root).sync_indexes()
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(result), default=str, sort_keys=True))
    else:
        for r in result.indexes:
            console.print(
                f"{r.name} ({r.policy.value}): {r.action.value}, indexed {r.indexed_version}, lag {r.lag}"
                + (f"\n  {r.error}\n  {r.recovery}" if r.error else ""),
                markup=False,
            )
    if not result.ok:
        raise typer.Exit(1)


@app.command()
def explain(
    table: TableArg,
    name: Annotated[str | None, typer.Argument(help="index name (a lookup); omit with --where")] = None,
    keys: Annotated[list[str] | None, typer.Argument()] = None,
    where: Annotated[
        str | None, typer.Option("--where", help="SQL predicate: plan a read over every index")
    ] = None,
    version_as_of: VersionOpt = None,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Show how a lookup (index name and keys) or a read (--where) would be answered."""
    t = _open(table, catalog, index_root)
    plan = t.explain(name, _parse_keys(keys or []) or None, where=where, version_as_of=version_as_of)
    typer.echo(str(plan))


def _simple(op: str) -> Any:
    def command(
        table: TableArg, name: NameArg, catalog: CatalogOpt = None, index_root: IndexRootOpt = None
    ) -> None:
        t = _open(table, catalog, index_root)
        _print_infos([getattr(t, f"{op}_index")(name)])

    command.__doc__ = {
        "delete": "Soft-delete an index (restore brings it back).",
        "restore": "Restore a soft-deleted index.",
        "vacuum": "Remove a deleted index's data, or unneeded data of an active one.",
        "cancel": "Recover an index stuck by a crashed operation.",
    }[op]
    return command


for _op in ("delete", "restore", "vacuum", "cancel"):
    app.command(_op)(_simple(_op))


@app.command()
def demo(
    path: Annotated[
        str | None, typer.Option(help="work directory (default: a temp dir, removed after)")
    ] = None,
    rows: Annotated[int, typer.Option(help="rows in the sample table")] = 300_000,
    files: Annotated[int, typer.Option(help="Delta commits / data files")] = 50,
) -> None:
    """Write a sample Delta table, index it, look up keys next to plain scans."""
    from lakehouse_index.demo import run_demo

    run_demo(path, rows=rows, files=files)


@app.command("watch")
def watch_command(
    tables: Annotated[list[str], typer.Argument(help="table paths/URIs (or identifiers with --catalog)")],
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 5.0,
    once: Annotated[bool, typer.Option(help="one pass, then exit")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON line per action")] = False,
) -> None:
    """Sync indexes whenever a table gets new commits (by any engine); Ctrl-C stops cleanly.

    In a terminal a live table shows each index's lag (versions and seconds), last action
    and last error; otherwise one line per action (one JSON object per line with --json).
    """
    from lakehouse_index.workflows.watch import WatchEvent, watch

    opened = [_open(t, catalog, index_root) for t in tables]
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

    watch(opened, interval=interval, once=once, on_event=show)


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
        watch(opened, interval=interval, on_event=on_event)


@app.command("verify")
def verify_command(
    table: TableArg,
    name: NameArg,
    sample: Annotated[int, typer.Option(help="keys to sample")] = 100,
    version: Annotated[
        list[str] | None, typer.Option("--version-as-of", help="a version to check (repeatable)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the key sample")] = None,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Compare sampled index answers with a plain scan; exit code 1 on any mismatch.

    Example: lakehouse-index verify /data/customers by_email --sample 500
    """
    versions = [int(v) if v.lstrip("-").isdigit() else v for v in version] if version else None
    report = _open(table, catalog, index_root).verify_index(name, sample=sample, versions=versions, seed=seed)
    console.print(str(report), markup=False)
    if not report.ok:
        raise typer.Exit(1)


def _typed_keys(t: li.Table, index: str, raw: list[str]) -> list[Any]:
    """Keys from text: as is for a string key column, JSON values (numbers, arrays) otherwise."""
    infos = {i.name: i for i in t.indexes()}
    if index not in infos:
        raise li.errors.IndexNotFoundError(f"no index {index!r} on {t.uri} (indexes: {sorted(infos)})")
    key = list(infos[index].spec.key)
    schema = t.snapshot().schema
    if len(key) == 1 and pa.types.is_string(schema.field(key[0]).type):
        return list(raw)
    return _parse_keys(raw)


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
    as_json: Annotated[bool, typer.Option("--json", help="print the result as one JSON object")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress messages")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """Erase data subjects (GDPR): targeted delete, index refresh, optional purge, verification, audit.

    Example: lakehouse-index erase /data/customers by_email alice@example.com --purge
    """
    raw = list(keys or [])
    if keys_file is not None:
        with open(keys_file, encoding="utf-8") as f:
            raw += [line.rstrip("\r\n") for line in f if line.strip()]
    t = _open(table, catalog, index_root)
    say = None if quiet or as_json else (lambda msg: console.print(f"[dim]{msg}[/]", markup=True))
    result = t.erase(name, _typed_keys(t, name, raw), purge=purge, dry_run=dry_run, force=force, progress=say)
    if as_json:
        typer.echo(json.dumps(result.to_json(), sort_keys=True, default=str))
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
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
    catalog: CatalogOpt = None,
    index_root: IndexRootOpt = None,
) -> None:
    """List the table's erasure audit records (subjects as salted hashes)."""
    records = _open(table, catalog, index_root).erasures()
    if as_json:
        for r in records:
            typer.echo(json.dumps(r.to_json(), sort_keys=True, default=str))
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


def main() -> None:
    """Entry point: clear one-line errors for the library's own errors."""
    try:
        app()
    except LakehouseIndexError as e:  # an operation error (usage errors exit 2, from typer)
        console.print(f"[red]error:[/] {e}")
        raise SystemExit(1) from e


if __name__ == "__main__":
    main()
