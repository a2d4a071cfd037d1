"""The commands of GDPR erasure: erase data subjects, list the audit records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.table import Table as RichTable

from lakehouse_index.cli.options import NameArg, QuietOpt, TableArg, TableOptions, typed_keys
from lakehouse_index.cli.output import console, echo_json, progress
from lakehouse_index.progress import activity

#: The ``--json`` help of the commands: what each prints.
_ERASE_JSON = (
    "one JSON object {table, index, subjects, dryRun, rowsErased, files: [{path, rowsBefore, "
    "rowsErased, size, replacedBy}], version, purge, verification, audit, ...}"
)
_AUDIT_JSON = (
    "one JSON object per erasure and line {when, who, index, subjects (salted hashes), "
    "rowsErased, versionsCreated, purge, verification, ...}"
)


@contextmanager
def _steps(quiet: bool, first: str) -> Iterator[Callable[[str], None]]:
    """A spinner whose text follows an operation's progress messages (each also printed above it)."""
    shown = progress(quiet)
    with activity(shown, first):

        def say(message: str) -> None:
            shown.print(message, style="dim", markup=False)

        yield say


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
    deep_verify: Annotated[
        bool,
        typer.Option(
            "--deep-verify", help="after a purge, decode every file whole (default: what the erase touched)"
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=_ERASE_JSON)] = False,
    quiet: QuietOpt = False,
    *,
    table_options: TableOptions,
) -> None:
    """Erase data subjects (GDPR): targeted delete, index refresh, optional purge, verification, audit.

    Example: lakehouse-index erase /data/customers by_email alice@example.com --purge
    """
    raw = list(keys or [])
    if keys_file is not None:
        with open(keys_file, encoding="utf-8") as f:
            raw += [line.rstrip("\r\n") for line in f if line.strip()]
    t = table_options.open(table)
    subjects = typed_keys(t, name, raw)
    with _steps(quiet, f"erasing {len(subjects)} subject(s)") as say:
        result = t.erase(
            name, subjects, purge=purge, dry_run=dry_run, force=force, progress=say, deep_verify=deep_verify
        )
    if as_json:
        echo_json(result.to_json())
        return
    what = "would erase" if dry_run else "erased"
    console.print(
        f"{what} {result.rows_erased} row(s) of {result.subjects} subject(s) from {len(result.files)} "
        f"file(s) ({result.bytes_rewritten / 1e6:.2f} MB rewritten)"
        + (f"; table version {result.version}" if result.version is not None else ""),
        markup=False,
    )
    if result.verification is not None:
        v = result.verification
        keyed = v.get("dataFilesKeyChecked", 0) + v.get("indexFilesKeyChecked", 0)
        console.print(
            f"verified ({v.get('depth')}): {v.get('filesChecked')} file(s) decoded"
            + (f", the key columns of {keyed} more" if keyed else "")
            + ", no trace",
            markup=False,
        )
    if result.audit_uri:
        console.print(f"audit record: {result.audit_uri}", markup=False)


def audit(
    table: TableArg,
    as_json: Annotated[bool, typer.Option("--json", help=_AUDIT_JSON)] = False,
    *,
    table_options: TableOptions,
) -> None:
    """List the table's erasure audit records (subjects as salted hashes).

    Example: lakehouse-index audit /data/customers --json
    """
    records = table_options.open(table).erasures()
    if as_json:
        for r in records:
            echo_json(r.to_json())
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
