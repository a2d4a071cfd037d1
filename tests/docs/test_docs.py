"""Every code block of README.md and docs/guide/*.md runs, so the docs cannot rot.

Each page runs top to bottom in a fresh temporary working directory (the convention is in
:mod:`tests.docs.blocks` and, for users, docs/guide/README.md). Python blocks check their own
answers with ``assert`` against an independent reader (deltalake, pyiceberg, pyarrow) where the
page shows a result. Blocks that do not run are marked ``text`` and counted here: adding one
means changing :data:`TEXT_BLOCKS`, deliberately.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakehouse_index.cli import main as cli_main
from tests.docs.blocks import (
    BUCKET,
    CLI,
    KNOWN,
    NEEDS,
    PYTHON,
    RUNTIME_NEEDS,
    SPARK_NEEDS,
    TAGS,
    TEXT,
    Block,
    blocks,
    commands,
    needs,
)
from tests.support.paths import REPO_ROOT

GUIDE = REPO_ROOT / "docs" / "guide"
PAGES = [REPO_ROOT / "README.md", *sorted(GUIDE.glob("*.md"))]
#: Blocks marked ``text`` (not run), per page: output samples and shell set-up.
TEXT_BLOCKS = {  # by path under the repository
    "README.md": 3,  # make demo/test; the benchmark commands (tests/bench runs the tiny scale); make lint
    "docs/guide/writes-and-watcher.md": 1,  # a sample of the watcher's live table
    "docs/guide/time-travel.md": 1,  # the printed answers
    "docs/guide/hybrid-scan.md": 1,  # the shape of explain output
    "docs/guide/object-stores-and-catalogs.md": 1,  # a pyiceberg config file and the CLI line using it
    "docs/guide/spark.md": 3,  # spark-submit with the formats' runtimes; the data source's log; a cluster job
}
#: The guide pages the issue asks for (README links each).
REQUIRED_PAGES = {
    "time-travel.md",
    "hybrid-scan.md",
    "writes-and-watcher.md",
    "erasure.md",
    "erasure-verify.md",
    "spark.md",
    "object-stores-and-catalogs.md",
}


def _name(page: Path) -> str:
    """The page's path under the repository (README.md, docs/guide/spark.md)."""
    return page.relative_to(REPO_ROOT).as_posix()


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    wanted = needs(page)
    marks = [pytest.mark.spark] if wanted & SPARK_NEEDS else []
    marks += [getattr(pytest.mark, need) for need in sorted(wanted & RUNTIME_NEEDS)]
    return marks


def _spark4() -> bool:
    """pyspark >= 4.1 is installed (the data source's blocks run)."""
    try:
        import pyspark
    except ImportError:
        return False
    major, minor = (int(x) for x in re.findall(r"\d+", pyspark.__version__)[:2])
    return (major, minor) >= (4, 1)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_block_is_runnable_or_marked_text(page: Path) -> None:
    found = blocks(page)
    for b in found:
        assert b.lang in KNOWN, (
            f"{b.where}: fence language {b.lang!r} (use one of {sorted(KNOWN)}; `text` if it cannot run)"
        )
        assert set(b.tags) <= TAGS, f"{b.where}: unknown tags {b.tags}"
        if b.lang in CLI:
            assert commands(b), f"{b.where}: a console block without a command"
    assert needs(page) <= NEEDS, f"{page.name}: unknown needs {needs(page) - NEEDS}"
    assert sum(b.lang == TEXT for b in found) == TEXT_BLOCKS.get(_name(page), 0), (
        f"{_name(page)}: the number of `text` blocks changed; update TEXT_BLOCKS if that is meant"
    )


def test_the_guide_pages_exist_and_readme_links_them() -> None:
    assert {p.name for p in GUIDE.glob("*.md")} >= REQUIRED_PAGES | {"README.md"}
    readme = (REPO_ROOT / "README.md").read_text()
    for name in sorted(REQUIRED_PAGES | {"README.md"}):
        assert f"(docs/guide/{name})" in readme, f"README does not link docs/guide/{name}"


@contextlib.contextmanager
def _s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from tests.support.moto import moto_s3

    with moto_s3(BUCKET) as options:
        for key, value in options.items():
            monkeypatch.setenv(key, value)
        yield


def _run_cli(block: Block) -> None:
    for argv in commands(block):
        try:
            cli_main(argv)
            code: Any = 0
        except SystemExit as e:
            code = e.code
        assert code in (0, None), f"{block.where}: `lakehouse-index {' '.join(argv)}` exited with {code}"


def _run(block: Block, namespace: dict[str, Any]) -> None:
    if block.lang == PYTHON:
        exec(compile(block.code, block.where, "exec"), namespace)
    elif block.lang in CLI:
        _run_cli(block)


@pytest.mark.parametrize("page", [pytest.param(p, marks=_marks(p), id=_name(p)) for p in PAGES])
def test_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    wanted = needs(page)
    if wanted & SPARK_NEEDS:
        request.getfixturevalue("spark")  # the shared session: the page's getOrCreate() returns it
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    namespace: dict[str, Any] = {"__name__": f"docs:{_name(page)}"}
    runnable = [b for b in blocks(page) if b.lang != TEXT]
    later = [b for b in runnable if "spark4" in b.tags and not _spark4()]
    with _s3(monkeypatch) if "s3" in wanted else contextlib.nullcontext():
        for block in runnable:
            if block not in later:
                _run(block, namespace)
    # Blocks for pyspark >= 4.1 run in `make test-spark4` (this test is marked spark); here they are
    # the only ones left out, and only the data source's.
    for block in later:
        assert "lakehouse_index" in block.code, (
            f"{block.where}: only the data source's blocks need pyspark 4.1"
        )
    assert os.getcwd() == str(tmp_path), "a block changed the working directory"


_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of the page (outside code blocks) names a file or folder of the repository."""
    text = page.read_text()
    for b in blocks(page):
        text = text.replace(b.code, "")
    for m in _LINK.finditer(text):
        target = m["target"].split("#", 1)[0]
        if not target or "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{_name(page)}: broken link {m['target']}"
