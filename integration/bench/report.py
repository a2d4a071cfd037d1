"""Write one benchmark's results: a table section in docs/BENCHMARKS.md and a JSON file.

Each benchmark owns a section delimited by HTML comments, so benchmarks can be rerun
independently without clobbering each other's results. Its machine-readable results go to
``bench/<name>.json`` next to the benchmarks file (docs/bench/ by default), which the
benchmarks notebook (notebooks/04-benchmarks.ipynb) plots.

The target file is docs/BENCHMARKS.md unless ``path`` is given or the environment
variable ``LAKEHOUSE_INDEX_BENCHMARKS_MD`` names another file (the smoke tests use it so
that tiny runs never overwrite the published numbers).
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from integration.bench.common import load_average

BENCHMARKS_MD = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"
#: Version of the JSON results' structure (``{"benchmark", "schema", "run", "results"}``).
RESULTS_SCHEMA = 1
#: Environment variable that redirects every ``write_section`` call (tests, dry runs).
BENCHMARKS_ENV = "LAKEHOUSE_INDEX_BENCHMARKS_MD"
_HEADER = (
    "# Benchmarks\n\nEach section is written by the script named in it; rerun it to refresh. The same "
    "results, machine-readable,\nare in `docs/bench/<section>.json`, plotted by "
    "[notebooks/04-benchmarks.ipynb](../notebooks/04-benchmarks.ipynb).\n"
)


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


#: Packages whose versions the header of the benchmarks file records.
VERSIONED = (
    "lakehouse-index",
    "pyarrow",
    "deltalake",
    "pyiceberg",
    "pyspark",
    "duckdb",
    "pylance",
    "matplotlib",
)


def versions() -> dict[str, str]:
    """Installed versions of :data:`VERSIONED` ("not installed" for a missing one)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str] = {}
    for name in VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def write_header(command: str, plots: Sequence[str] = (), *, path: str | Path | None = None) -> Path:
    """Replace (or insert, after the title) the header of the benchmarks file: machine, versions, commands.

    ``command`` is the command line of the run; ``plots`` the PNG files (relative to the
    benchmarks file) to link. The sections of the benchmarks stay as they are.
    """
    target = benchmarks_path(path)
    start, end = "<!-- bench-header -->", "<!-- /bench-header -->"
    uname = platform.uname()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        start,
        f"Last suite run: {stamp}, `{command}`, on {uname.system} {uname.machine}, {_cpus()} cores, "
        f"Python {platform.python_version()}, 1-minute load average {load_average():.1f} at the start.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "",
        "Commands: `python -m integration.bench.run_all` (`make bench`; `--scale tiny|small|full`, "
        "`--large` for the largest points, `--only lookup,build`) runs every benchmark and redraws the "
        "plots; each section names its own script, which reruns it alone; "
        "`python -m integration.bench.plots docs/bench` redraws the plots from the JSON.",
    ]
    if plots:
        lines += ["", "Plots: " + " · ".join(f"[{Path(p).stem}]({p})" for p in plots) + "."]
    block = "\n".join([*lines, end])
    text = target.read_text() if target.exists() else _HEADER
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        title, _, rest = text.partition("\n\n")
        text = f"{title}\n\n{block}\n\n{rest}"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def results_path(name: str, *, path: str | Path | None = None) -> Path:
    """Where benchmark ``name`` writes its JSON results: ``bench/<name>.json`` next to the benchmarks file."""
    return benchmarks_path(path).parent / "bench" / f"{name}.json"


def write_results(name: str, results: Mapping[str, Any], *, path: str | Path | None = None) -> Path:
    """Write ``results`` (JSON values; NaN and infinities become null) as benchmark ``name``'s JSON file.

    The document is ``{"benchmark": name, "schema": RESULTS_SCHEMA, "run": {...}, "results":
    results}``, where ``run`` records when and on what it ran (UTC time, machine, cores, Python,
    1-minute load average). Keys are sorted, so reruns differ only in their numbers. Returns the
    file written (see :func:`results_path`).
    """
    doc = {
        "benchmark": name,
        "schema": RESULTS_SCHEMA,
        "run": {
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": platform.machine(),
            "cores": _cpus(),
            "python": platform.python_version(),
            "load_average": load_average(),
        },
        "results": _finite(results),
    }
    target = results_path(name, path=path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n")
    return target


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _cpus() -> int:
    return os.cpu_count() or 1
