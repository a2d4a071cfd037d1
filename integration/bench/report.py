"""Write one benchmark's results table into docs/BENCHMARKS.md.

Each benchmark owns a section delimited by HTML comments, so benchmarks can be rerun
independently without clobbering each other's results.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"
_HEADER = "# Benchmarks\n\nEach section is written by the script named in it; rerun it to refresh.\n"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(name: str, title: str, script: str, body: str) -> None:
    """Replace (or append) the section ``name`` of docs/BENCHMARKS.md."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"{platform.machine()}, {_cpus()} cores, Python {platform.python_version()}"
    section = f"{start}\n## {title}\n\n`{script}` — run {stamp} on {machine}.\n\n{body.strip()}\n{end}"
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else _HEADER
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    BENCHMARKS_MD.parent.mkdir(parents=True, exist_ok=True)
    BENCHMARKS_MD.write_text(text)


def _cpus() -> int:
    import os

    return os.cpu_count() or 1
