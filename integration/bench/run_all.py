"""Run every benchmark module of this package (``bench_*.py``) and write its docs/BENCHMARKS.md section.

Each module's ``main(argv)`` is called in turn. Modules that accept ``--scale`` get the chosen
scale; the connector benchmarks, which take explicit sizes, get the sizes in
:data:`SIZE_ARGS` (a module may instead define ``scale_args(scale) -> list[str]``).
A failing benchmark is reported and the others still run; the exit status is non-zero if
any failed. A module whose ``unavailable()`` returns a reason (``bench_spark_source`` on
pyspark 3.5) is skipped with that reason.

Before the benchmarks, the header of docs/BENCHMARKS.md (machine, versions, the command) is
rewritten; after them, the PNG plots are redrawn from the JSON results
(:mod:`integration.bench.plots`, ``docs/bench/*.png``).

Run: ``python -m integration.bench.run_all [--scale tiny|small|full] [--large] [--only lookup,build]``.
The default, ``small``, is the suite's everyday size; ``full`` is the issues' sizes; ``--large`` runs
``full``, and ``--scale large`` in modules that set ``HAS_LARGE = True`` (the 100M-row points).
Set ``LAKEHOUSE_INDEX_BENCHMARKS_MD`` (or pass ``--report-path``) to write elsewhere.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from integration.bench.report import BENCHMARKS_ENV, benchmarks_path, results_path, write_header

#: Sizes for benchmarks without a ``--scale`` option, per scale.
SIZE_ARGS: dict[str, dict[str, list[str]]] = {
    "bench_delta_connector": {
        "tiny": ["--versions", "200", "--files-per-commit", "5", "--rounds", "3", "--diff-span", "50"],
        "small": ["--versions", "1000", "--files-per-commit", "10", "--rounds", "10", "--diff-span", "200"],
        "full": [],  # its defaults are the sizes
    },
    "bench_iceberg_connector": {
        "tiny": ["--snapshots", "50", "--tail", "5", "--repeats", "1"],
        "small": ["--snapshots", "200", "--tail", "10", "--repeats", "2"],
        "full": [],
    },
}


def discover() -> list[str]:
    """Names of the benchmark modules next to this file, sorted."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem for p in here.glob("bench_*.py"))


def args_for(module: object, name: str, scale: str) -> list[str]:
    """Command-line arguments that run ``module`` at ``scale`` (``large``: ``full`` where it has none)."""
    if scale == "large" and not getattr(module, "HAS_LARGE", False):
        scale = "full"
    custom = getattr(module, "scale_args", None)
    if callable(custom):
        return list(custom(scale))
    if name in SIZE_ARGS:
        return list(SIZE_ARGS[name][scale])
    source = inspect.getsource(module)  # type: ignore[arg-type]
    return ["--scale", scale] if "--scale" in source else []


def _call_main(run: Callable[..., object], name: str, argv: list[str]) -> None:
    """``main(argv)``, or ``main()`` with ``sys.argv`` set for modules whose main takes no argument."""
    if inspect.signature(run).parameters:
        run(argv)
        return
    saved = sys.argv
    sys.argv = [f"{name}.py", *argv]
    try:
        run()
    finally:
        sys.argv = saved


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the number that failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=["tiny", "small", "full"], default="small")
    ap.add_argument("--large", action="store_true", help="the largest sizes (100M-row points where defined)")
    ap.add_argument("--only", default="", help="comma-separated module names (with or without bench_)")
    ap.add_argument("--report-path", default=None, help="write results here instead of docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    if args.report_path:
        os.environ[BENCHMARKS_ENV] = str(Path(args.report_path).resolve())
    scale = "large" if args.large else args.scale
    wanted = {n if n.startswith("bench_") else f"bench_{n}" for n in args.only.split(",") if n}
    names = [n for n in discover() if not wanted or n in wanted]
    command = " ".join(["python -m integration.bench.run_all", *(sys.argv[1:] if argv is None else argv)])
    write_header(command)
    failed: list[str] = []
    for name in names:
        module = importlib.import_module(f"integration.bench.{name}")
        run = getattr(module, "main", None)
        if not callable(run):
            print(f"== {name}: no main(), skipped", flush=True)
            continue
        why = getattr(module, "unavailable", lambda: None)()
        if why:
            print(f"== {name}: skipped, {why}", flush=True)
            continue
        bench_args = args_for(module, name, scale)
        print(f"== {name} {' '.join(bench_args)}", flush=True)
        t0 = time.perf_counter()
        try:
            _call_main(run, name, bench_args)
        except SystemExit as e:  # argparse errors and explicit exits
            if e.code not in (0, None):
                failed.append(name)
                print(f"== {name} exited with {e.code}", flush=True)
        except Exception:
            failed.append(name)
            traceback.print_exc()
        print(f"== {name} done in {time.perf_counter() - t0:.0f} s", flush=True)
    plots = draw_plots()
    write_header(command, [p.relative_to(benchmarks_path().parent).as_posix() for p in plots])
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)
    return len(failed)


def draw_plots() -> list[Path]:
    """Redraw the PNG plots from the JSON results next to the benchmarks file (none without matplotlib)."""
    try:
        from integration.bench import plots
    except ImportError as e:  # matplotlib is in the dev extra; a results-only install still runs
        print(f"== plots skipped: {e}", flush=True)
        return []
    drawn = plots.write_all(results_path("any").parent)
    for path in drawn:
        print(f"== plot {path}", flush=True)
    return drawn


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
