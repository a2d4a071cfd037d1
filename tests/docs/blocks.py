"""Fenced code blocks of the user docs (README.md, docs/guide/*.md) and how each one runs.

The convention (written for users in docs/guide/README.md):

* a page runs top to bottom in a fresh empty working directory; its first block creates whatever
  table the page needs there (relative paths such as ``customers``);
* ```` ```python ```` blocks share one namespace per page, in order;
* ```` ```console ```` / ```` ```bash ```` blocks hold ``lakehouse-index`` commands only, one per line
  (``#`` comments, ``\\`` continuations and ``$VARIABLES`` allowed), each run through the CLI and
  expected to exit 0;
* ```` ```text ```` marks a block that is not run (output, shell set-up); the tests count them;
* a tag after the language, ```` ```python spark4 ````, marks a block that needs pyspark >= 4.1;
* an HTML comment ``<!-- docs-test: spark s3 iceberg_spark -->``, on a line of its own, names what the page
  needs: Spark (the test's local session is active, so the page's ``SparkSession.builder.getOrCreate()``
  returns it), the moto S3 server (the ``AWS_*`` variables point at it and the bucket
  ``lakehouse-docs`` exists), Iceberg's Spark runtime or delta-spark in that session.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

#: Languages that run, and the one that marks a block that does not.
PYTHON, CLI, TEXT = "python", ("console", "bash"), "text"
KNOWN = {PYTHON, TEXT, *CLI}
#: The tags a block may carry after its language.
TAGS = {"spark4"}
#: What a page may ask for in its ``docs-test`` comment.
NEEDS = {"spark", "s3", "iceberg_spark", "delta_spark"}
#: The needs that are a format's Spark runtime (a test marker each), and those that start Spark.
RUNTIME_NEEDS = {"iceberg_spark", "delta_spark"}
SPARK_NEEDS = {"spark", *RUNTIME_NEEDS}
#: The bucket the moto server holds for pages that need ``s3``.
BUCKET = "lakehouse-docs"
PROGRAM = "lakehouse-index"

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
_NEEDS = re.compile(r"^<!--\s*docs-test:(?P<needs>[^>]*)-->$", re.MULTILINE)  # a line of its own


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str  # "" when the fence names none
    tags: tuple[str, ...]
    code: str

    @property
    def where(self) -> str:
        """``page:line``, for messages and tracebacks."""
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order (indented fences included, dedented)."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        info = m["info"].split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if j == len(lines):
            raise ValueError(f"{page.name}:{i + 1}: unclosed code fence")
        lang = info[0] if info else ""
        found.append(Block(page, i + 1, lang, tuple(info[1:]), "\n".join(body) + "\n"))
        i = j + 1
    return found


def needs(page: Path) -> set[str]:
    """What the page's ``<!-- docs-test: ... -->`` comment asks for."""
    m = _NEEDS.search(page.read_text())
    return set(m["needs"].split()) if m else set()


def commands(block: Block) -> list[list[str]]:
    """The ``lakehouse-index`` commands of a console block, each as its arguments (program excluded)."""
    out: list[list[str]] = []
    pending = ""
    for raw in block.code.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        argv = shlex.split(os.path.expandvars(line), comments=True)
        if not argv:
            continue
        if argv[0] != PROGRAM:
            raise ValueError(f"{block.where}: {line!r} is not a {PROGRAM} command (mark the block `text`)")
        out.append(argv[1:])
    return out
