"""The parameters commands share, each declared once.

An :class:`OptionGroup` is a frozen dataclass whose fields are command-line parameters (typer
annotations). A command takes a group as one keyword-only parameter; :func:`expand_groups` gives
typer the command with the group's fields in its place (so its help lists them there) and builds
the group from their values when the command runs. The groups: :class:`TableOptions` (how a table
opens: every command but ``demo``), :class:`AsOf` (the version a query reads), and next to their
commands ``query.RowsOutput`` (how rows print) and ``indexes.Maintenance`` (builds and rewrites).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import inspect
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, get_type_hints

import pyarrow as pa
import typer

import lakehouse_index as li


@dataclasses.dataclass(frozen=True)
class OptionGroup:
    """Base of the frozen dataclasses whose fields several commands take (see the module doc)."""


def expand_groups(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` as typer reads it: each :class:`OptionGroup` parameter replaced, in place, by
    the group's fields; the group is built from their values when the command runs."""
    # Every parameter becomes keyword-only: typer passes values by name, and a group's fields
    # (all with defaults) may stand before a parameter without one.
    hints = get_type_hints(command, include_extras=True)
    groups: dict[str, type[OptionGroup]] = {}
    params: list[inspect.Parameter] = []
    for p in inspect.signature(command).parameters.values():
        hint = hints[p.name]
        if not (isinstance(hint, type) and issubclass(hint, OptionGroup)):
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hint))
            continue
        groups[p.name] = hint
        types = get_type_hints(hint, include_extras=True)
        params += [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=types[f.name]
            )
            for f in dataclasses.fields(hint)
        ]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        for name, group in groups.items():
            values[name] = group(**{f.name: values.pop(f.name) for f in dataclasses.fields(group)})
        command(**values)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run


# ---------------------------------------------------------------------------------------- tables

_TABLE = "Table options"


def _check_storage_options(values: list[str] | None) -> list[str] | None:
    for v in values or []:
        if "=" not in v or v.startswith("="):
            raise typer.BadParameter(f"{v!r} is not KEY=VALUE")
    return values


TableArg = Annotated[str, typer.Argument(help="table path/URI (or identifier with --catalog)")]
NameArg = Annotated[str, typer.Argument(help="index name")]


@dataclasses.dataclass(frozen=True)
class TableOptions(OptionGroup):
    """How a command opens its tables (the "Table options" of its help)."""

    catalog: Annotated[
        str | None,
        typer.Option(help="pyiceberg catalog name: TABLE is then an identifier", rich_help_panel=_TABLE),
    ] = None
    storage_option: Annotated[
        list[str] | None,
        typer.Option(
            "--storage-option",
            metavar="KEY=VALUE",
            help="object-store option of the table and index storage, e.g. AWS_REGION=eu-west-1 (repeatable)",
            callback=_check_storage_options,
            rich_help_panel=_TABLE,
        ),
    ] = None
    index_root: Annotated[
        str | None, typer.Option(help="where the side-car indexes live", rich_help_panel=_TABLE)
    ] = None

    def open(self, table: str) -> li.Table:
        """The table ``table`` (a path or URI; an identifier with a catalog)."""
        options = dict(v.split("=", 1) for v in self.storage_option or [])
        return li.open_table(
            table, catalog=self.catalog, index_root=self.index_root, storage_options=options or None
        )


QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")]


# ---------------------------------------------------------------------------------------- versions


def version_ref(text: str) -> int | str:
    """A version reference: a number (version, snapshot id), else a branch or tag name."""
    return int(text) if text.lstrip("-").isdigit() else text


@dataclasses.dataclass(frozen=True)
class AsOf(OptionGroup):
    """The table version a command reads (default: the latest)."""

    version_as_of: Annotated[
        str | None,
        typer.Option("--version-as-of", help="table version / snapshot id, or an Iceberg branch or tag"),
    ] = None
    timestamp_as_of: Annotated[
        str | None,
        typer.Option(
            "--timestamp-as-of",
            help="the version current at this time: ISO 8601 (UTC unless given) or epoch ms",
        ),
    ] = None

    def arguments(self) -> dict[str, Any]:
        """The ``version_as_of`` / ``timestamp_as_of`` arguments of a query."""
        version, timestamp = self.version_as_of, self.timestamp_as_of
        if version is not None and timestamp is not None:
            raise typer.BadParameter("--version-as-of and --timestamp-as-of exclude each other")
        when: dt.datetime | int | None = None
        if timestamp is not None:
            try:
                when = int(timestamp) if timestamp.isdigit() else dt.datetime.fromisoformat(timestamp)
            except ValueError:
                raise typer.BadParameter(
                    f"--timestamp-as-of {timestamp!r} is not ISO 8601 or epoch ms"
                ) from None
        return {"version_as_of": None if version is None else version_ref(version), "timestamp_as_of": when}


# ---------------------------------------------------------------------------------------- keys

KeysArg = Annotated[list[str], typer.Argument(help="keys (JSON arrays for composite keys)")]


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


def typed_keys(t: li.Table, index: str, raw: Sequence[str]) -> list[Any]:
    """Keys from text: as is for a string key column, JSON values (numbers, arrays) otherwise."""
    infos = {i.name: i for i in t.indexes()}
    if index not in infos:
        raise li.IndexNotFoundError(f"no index {index!r} on {t.uri} (indexes: {sorted(infos)})")
    key = list(infos[index].spec.key)
    schema = t.snapshot().schema
    if len(key) == 1 and pa.types.is_string(schema.field(key[0]).type):
        return list(raw)
    return _parse_keys(raw)
