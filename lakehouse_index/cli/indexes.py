"""The commands of an index's life: create, refresh, optimize, list, delete, restore, vacuum,
cancel, verify."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table as RichTable

import lakehouse_index as li
from lakehouse_index.api import IndexStatus, OptimizeMode, RefreshMode
from lakehouse_index.cli.options import (
    NameArg,
    OptionGroup,
    QuietOpt,
    TableArg,
    TableOptions,
    version_ref,
)
from lakehouse_index.cli.output import console, echo_json, progress
from lakehouse_index.progress import activity, spark_progress
from lakehouse_index.spark import get_spark
from lakehouse_index.spec import AutoRefresh

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The ``--json`` help of the commands: what each prints. The object of one index is that of create,
#: refresh, optimize, delete, restore, vacuum and cancel.
INFO_SHAPE = "{name, kind, state, indexed_version, rows, files, size_bytes, log_entry, spec}"
InfoJsonOpt = Annotated[bool, typer.Option("--json", help=f"print one JSON object {INFO_SHAPE}")]
_LIST_JSON = (
    f"one JSON object per index and line: {INFO_SHAPE[:-1]}, table_version, lag, pending_version, "
    "pending_files}"
)
_VERIFY_JSON = (
    "one JSON object {index, ok, versions, snapshots, keys, checks, mismatches: "
    "[{version, snapshot, check, key, expected, got}]}"
)
LocalMaxRowsOpt = Annotated[
    int | None,
    typer.Option(help="work of at most this many rows runs in process, larger on Spark (default: config)"),
]


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
        echo_json(_info_json(info))
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
            echo_json(
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


@dataclasses.dataclass(frozen=True)
class Maintenance(OptionGroup):
    """The options of a command that builds or rewrites an index: where the work runs, its
    progress display, the index's info printed after."""

    as_json: InfoJsonOpt = False
    quiet: QuietOpt = False
    local_max_rows: LocalMaxRowsOpt = None

    def runs_locally(self, t: li.Table, rows: int | None, *, compaction: bool = False) -> bool:
        """Whether work of ``rows`` rows (None: the latest version's; index entries when
        ``compaction``) runs in this process (no JVM)."""
        from lakehouse_index.executors.sizing import cluster_configured, runs_locally

        policy = t.config.executor
        if rows is None:
            rows = policy.estimate_rows(t.snapshot().files.values())
        if self.local_max_rows is not None:
            return rows <= self.local_max_rows
        return runs_locally(policy, rows, cluster=cluster_configured(), compaction=compaction)

    def run(
        self, description: str, in_process: bool, work: Callable[[SparkSession | None], li.IndexInfo]
    ) -> None:
        """Run an index build, refresh or optimize with a progress display, then print the index.

        In process (small work, no JVM): a spinner; on Spark: a bar of Spark's tasks.
        """
        shown = progress(self.quiet)
        if in_process:
            with activity(shown, description):
                info = work(None)
        else:
            with activity(shown, "starting Spark"):
                spark = get_spark()
            with spark_progress(spark, description, console=shown):
                info = work(spark)
        _show_info(info, self.as_json)


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
    *,
    maintenance: Maintenance,
    table_options: TableOptions,
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
    t = table_options.open(table)
    maintenance.run(
        f"building {name}",
        maintenance.runs_locally(t, None),
        lambda spark: t.create_index(spec, spark=spark, local_max_rows=maintenance.local_max_rows),
    )


def refresh(
    table: TableArg,
    name: NameArg,
    mode: Annotated[RefreshMode, typer.Option(help="refresh mode")] = RefreshMode.INCREMENTAL,
    remap: Annotated[
        bool, typer.Option(help="incremental: remap rows of rewritten files instead of re-indexing them")
    ] = True,
    *,
    maintenance: Maintenance,
    table_options: TableOptions,
) -> None:
    """Bring an index up to the latest table version, with a progress display.

    Example: lakehouse-index refresh /data/customers by_email --mode incremental
    """
    t = table_options.open(table)
    maintenance.run(
        f"refreshing {name} ({mode.value})",
        # Quick and most incremental refreshes need no JVM; a full one is a build.
        mode is not RefreshMode.FULL or maintenance.runs_locally(t, None),
        lambda spark: t.refresh_index(
            name, mode.value, spark=spark, remap=remap, local_max_rows=maintenance.local_max_rows
        ),
    )


def optimize(
    table: TableArg,
    name: NameArg,
    mode: Annotated[OptimizeMode, typer.Option(help="optimize mode")] = OptimizeMode.QUICK,
    *,
    maintenance: Maintenance,
    table_options: TableOptions,
) -> None:
    """Compact an index (quick: merge delta files; full: a new base without tombstones).

    Example: lakehouse-index optimize /data/customers by_email --mode full
    """
    t = table_options.open(table)
    rows = next((i.rows for i in t.indexes() if i.name == name), 0)
    maintenance.run(
        f"optimizing {name} ({mode.value})",
        maintenance.runs_locally(t, rows, compaction=True),  # compacted in process (no JVM)
        lambda spark: t.optimize_index(
            name, mode.value, spark=spark, local_max_rows=maintenance.local_max_rows
        ),
    )


def list_(
    table: TableArg,
    as_json: Annotated[bool, typer.Option("--json", help=_LIST_JSON)] = False,
    *,
    table_options: TableOptions,
) -> None:
    """List the table's indexes with their lag behind the table.

    Shows name, kind, state, indexed version against the table's latest version (lag, in
    commits), files recorded by quick refreshes and not yet indexed (pending), rows, files, size.

    Example: lakehouse-index list /data/customers --json
    """
    _show_status(table_options.open(table).index_status(), as_json)


def _lifecycle(op: str, doc: str) -> Callable[..., None]:
    """The command of a metadata-only lifecycle operation (``Table.<op>_index``)."""

    def command(
        table: TableArg, name: NameArg, as_json: InfoJsonOpt = False, *, table_options: TableOptions
    ) -> None:
        _show_info(getattr(table_options.open(table), f"{op}_index")(name), as_json)

    command.__doc__ = f"{doc}\n\nExample: lakehouse-index {op} /data/customers by_email"
    return command


delete = _lifecycle("delete", "Soft-delete an index: queries stop using it (restore brings it back).")
restore = _lifecycle("restore", "Restore a soft-deleted index.")
cancel = _lifecycle(
    "cancel", "Recover an index stuck by a crashed operation (back to its last stable state)."
)


def vacuum(
    table: TableArg,
    name: NameArg,
    retention_hours: Annotated[
        float | None, typer.Option(help="active index: keep snapshots this young (default: config)")
    ] = None,
    as_json: InfoJsonOpt = False,
    quiet: QuietOpt = False,
    *,
    table_options: TableOptions,
) -> None:
    """Remove a deleted index's data, or the snapshots and files an active one no longer needs.

    Example: lakehouse-index vacuum /data/customers by_email --retention-hours 24
    """
    t = table_options.open(table)
    with activity(progress(quiet), f"vacuuming {name}"):
        info = t.vacuum_index(name, retention_hours=retention_hours)
    _show_info(info, as_json)


def verify(
    table: TableArg,
    name: NameArg,
    sample: Annotated[int, typer.Option(help="keys to sample")] = 100,
    version: Annotated[
        list[str] | None, typer.Option("--version-as-of", help="a version to check (repeatable)")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="seed of the key sample")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=_VERIFY_JSON)] = False,
    quiet: QuietOpt = False,
    *,
    table_options: TableOptions,
) -> None:
    """Compare sampled index answers with a plain scan; exit code 1 on any mismatch.

    Example: lakehouse-index verify /data/customers by_email --sample 500
    """
    versions = [version_ref(v) for v in version] if version else None
    t = table_options.open(table)
    with activity(progress(quiet), f"verifying {name} ({sample} keys)"):
        report = t.verify_index(name, sample=sample, versions=versions, seed=seed)
    if as_json:
        echo_json(report.to_json())
    else:
        console.print(str(report), markup=False)
    if not report.ok:
        raise typer.Exit(1)
