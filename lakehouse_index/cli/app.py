"""The command group and the entry point: the commands in the order of the help, errors as exit
statuses (1 for an operation error, 2 for a usage error) and one line on standard error."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer
from rich.text import Text
from typer.core import TyperGroup

import lakehouse_index as li
from lakehouse_index.cli import demo, erasure, indexes, query, sync
from lakehouse_index.cli.options import expand_groups
from lakehouse_index.cli.output import errors

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


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="LAKEHOUSE_INDEX_DEBUG", help="print the traceback of an error"),
    ] = False,
) -> None:
    """Global options (before the command: ``lakehouse-index --debug list TABLE``)."""


#: Every command by name, in the order ``--help`` lists them.
COMMANDS: tuple[tuple[str, Callable[..., None]], ...] = (
    ("create", indexes.create),
    ("refresh", indexes.refresh),
    ("optimize", indexes.optimize),
    ("list", indexes.list_),
    ("lookup", query.lookup),
    ("locate", query.locate),
    ("scan", query.scan),
    ("explain", query.explain),
    ("sync", sync.sync),
    ("delete", indexes.delete),
    ("restore", indexes.restore),
    ("vacuum", indexes.vacuum),
    ("cancel", indexes.cancel),
    ("demo", demo.demo),
    ("watch", sync.watch),
    ("verify", indexes.verify),
    ("erase", erasure.erase),
    ("audit", erasure.audit),
)
for _name, _command in COMMANDS:
    app.command(_name)(expand_groups(_command))


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
