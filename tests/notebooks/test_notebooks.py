"""The notebooks under ``notebooks/`` run top to bottom, use only the public API, and are stored clean.

Each notebook is executed by nbclient in a real IPython kernel running this checkout's code
(``code_env``), with the notebooks folder as its working directory (as Jupyter runs it) and a
private ``TMPDIR``. The notebooks check their own answers against deltalake / pyiceberg, so
a wrong answer fails the cell and the test. The benchmarks notebook is pointed at the tiny
committed sample (``notebooks/data/bench``), never at a real benchmark run.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import lakehouse_index as li
from tests.support.paths import REPO_ROOT, code_env

NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def _iceberg_spark_jars() -> str:
    """The Spark part of the Iceberg notebook runs on the test suite's Iceberg runtime jar."""
    from tests.support.spark_iceberg import runtime_jar

    return f"SPARK_JARS = {str(runtime_jar())!r}"


#: Code run right after a notebook's ``parameters`` cell in CI, per notebook.
CI_PARAMETERS: dict[str, Callable[[], str]] = {
    "04-benchmarks": lambda: 'RESULTS = Path("data/bench")',
    "02-iceberg": _iceberg_spark_jars,
}
#: Notebooks that start Spark with the Iceberg runtime jar.
ICEBERG_SPARK = {"02-iceberg"}
#: Besides ``lakehouse_index``, the one import a notebook may make from this repository: the benchmark
#: suite's plotting module, which the benchmarks notebook shares with ``run_all``.
SHARED_CODE = {"04-benchmarks": ("integration.bench", "plots")}
#: Prefix of the temporary directory each notebook writes into (and removes at its end).
WORKDIR_PREFIX = "lakehouse-index-"


def _code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code"]


def _repo_state() -> str:
    """Tracked changes and untracked files of the checkout (ignored files such as caches aside)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def test_the_notebooks_exist() -> None:
    assert {p.stem for p in NOTEBOOKS} >= {
        "01-quickstart-delta",
        "02-iceberg",
        "03-gdpr-erasure",
        "04-benchmarks",
    }
    assert set(CI_PARAMETERS) <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(_code_cells(nb)):
        assert cell.outputs == [], f"{path.name}: code cell {i} has outputs (clear them before committing)"
        assert cell.execution_count is None, f"{path.name}: code cell {i} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_only_the_public_api(path: Path) -> None:
    """``import lakehouse_index as li`` only, and only names ``li`` exports; no test or benchmark code."""
    public = set(li.__all__)
    for cell in _code_cells(nbformat.read(path, as_version=4)):
        tree = ast.parse(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in ("lakehouse_index", "tests", "integration"):
                        assert (alias.name, alias.asname) == ("lakehouse_index", "li"), ast.unparse(node)
            elif isinstance(node, ast.ImportFrom):
                top = (node.module or "").split(".")[0]
                shared = (node.module, *(a.name for a in node.names)) == SHARED_CODE.get(path.stem)
                assert shared or top not in ("lakehouse_index", "tests", "integration"), ast.unparse(node)
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) == "li":
                assert node.attr in public, f"{path.name}: li.{node.attr} is not exported by lakehouse_index"


def _run_marks(path: Path) -> list[pytest.MarkDecorator]:
    return [pytest.mark.spark, pytest.mark.iceberg_spark] if path.stem in ICEBERG_SPARK else []


@pytest.mark.parametrize("path", [pytest.param(p, marks=_run_marks(p), id=p.stem) for p in NOTEBOOKS])
def test_runs_top_to_bottom(path: Path, tmp_path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    override = CI_PARAMETERS.get(path.stem)
    if override is not None:
        cells = nb.cells
        at = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", ()))
        cells.insert(at + 1, nbformat.v4.new_code_cell(override(), id="ci-parameters"))
    before = _repo_state()
    client = NotebookClient(
        nb,
        kernel_name="python3",
        startup_timeout=600,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute(env=code_env(TMPDIR=str(tmp_path)))

    errors = [o for c in _code_cells(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    assert all(c.execution_count is not None for c in _code_cells(nb))
    assert _repo_state() == before, "the notebook wrote into the repository"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(WORKDIR_PREFIX)]
    assert not leftovers, f"the notebook left its work directory behind: {leftovers}"
    if path.stem in ICEBERG_SPARK:
        printed = "".join(o.get("text", "") for c in _code_cells(nb) for o in c.outputs)
        assert "position delete file(s)" in printed and "skipped" not in printed, "the Spark part did not run"
    if path.stem == "04-benchmarks":
        images = [o for c in _code_cells(nb) for o in c.outputs if "image/png" in o.get("data", {})]
        assert len(images) == 2, "the benchmarks notebook draws the latency bars and the refresh plot"
