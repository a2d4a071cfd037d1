"""Write one benchmark's results table into docs/BENCHMARKS.md.

Each benchmark owns a section delimited by HTML comments, so benchmarks can be rerun
independently without clobbering each other's results.

The target file is docs/BENCHMARKS.md unless ``path`` is given or the environment
variable ``LAKEHOUSE_INDEX_BENCHMARKS_MD`` names another file (the smoke tests use it so
that tiny runs never overwrite the published numbers).
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"
#: Environment variable that redirects every ``write_section`` call (tests, dry runs).
BENCHMARKS_ENV = "LAKEHOUSE_INDEX_BENCHMARKS_MD"
_HEADER = "# Benchmarks\n\nEach section is written by the script named in it; rerun it to refresh.\n"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def benchmarks_path(path: str | Path | None = None) -> Path:
    """Where results go: ``path``, else ``$LAKEHOUSE_INDEX_BENCHMARKS_MD``, else docs/BENCHMARKS.md."""
    if path is not None:
        return Path(path)
    env = os.environ.get(BENCHMARKS_ENV)
    return Path(env) if env else BENCHMARKS_MD


def write_section(name: str, title: str, script: str, body: str, *, path: str | Path | None = None) -> Path:
    """Replace (or append) the section ``name`` of the benchmarks file; returns the file written.

    The file is docs/BENCHMARKS.md unless redirected (see :func:`benchmarks_path`).
    """
    target = benchmarks_path(path)
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.machine()}, {_cpus()} cores, Python {platform.python_version()}"
    section = f"{start}\n## {title}\n\n`{script}` — run {stamp} on {machine}.\n\n{body.strip()}\n{end}"
    text = target.read_text() if target.exists() else _HEADER
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def _cpus() -> int:
    return os.cpu_count() or 1
