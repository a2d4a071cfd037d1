"""Where commands print: results on standard output, progress and errors on standard error."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console

#: Results (tables, lines) on standard output.
console = Console()
#: Error lines on standard error.
errors = Console(stderr=True, soft_wrap=True)


def progress(quiet: bool) -> Console:
    """Where progress displays go: standard error, nowhere with ``--quiet``."""
    return Console(stderr=True, quiet=quiet)


def echo_json(value: Any) -> None:
    """Print ``value`` as one line of JSON (keys sorted)."""
    typer.echo(json.dumps(value, default=str, sort_keys=True))
