"""PNG plots of the benchmark suite's JSON results (``docs/bench/<name>.json``), with matplotlib.

The same functions draw in notebooks/04-benchmarks.ipynb (on axes it passes) and write the
PNGs next to the JSON (:func:`write_all`, called by ``run_all`` after the benchmarks):

* ``lookup-latency.png``: point-lookup latency of the index's methods next to the baselines
  (W1 at the latest version, W3 with files appended), warm medians on a log axis, the spread
  (min to max over the repeats) as error bars;
* ``refresh-cost.png``: incremental refresh time against the number of files appended since the
  last refresh (W4), with the full rebuild as reference, and (log-log) against the table's size
  at a fixed number of appended files, where the run refreshed tables of several sizes;
* ``<name>-scaling.png``: scaling curves on log-log axes, for every results document holding
  ``"curves"``: a list of ``{"title", "x_label", "y_label", "series": {label: [[x, y], ...]}}``
  (the contract for scaling benchmarks such as W8: sizes against latency, index size or refresh cost).

Run: ``python -m integration.bench.plots [RESULTS_DIR]`` (default docs/bench) redraws every plot.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from integration.bench.report import BENCHMARKS_MD, RESULTS_SCHEMA

#: Methods of the lookup benchmark that do not use lakehouse-index (drawn gray).
BASELINES = frozenset({"spark", "pyarrow", "duckdb", "lance", "lance_locate", "scan_appended", "oracle"})
RESULTS_DIR = BENCHMARKS_MD.parent / "bench"


def load(results_dir: Path, name: str) -> dict[str, Any] | None:
    """The JSON document of benchmark ``name`` (``{"benchmark", "schema", "run", "results"}``), or None."""
    path = Path(results_dir) / f"{name}.json"
    if not path.exists():
        return None
    doc: dict[str, Any] = json.loads(path.read_text())
    if doc.get("benchmark") != name or doc.get("schema") != RESULTS_SCHEMA:
        raise ValueError(f"{path}: not a schema-{RESULTS_SCHEMA} result of {name!r}")
    return doc


def run_line(doc: Mapping[str, Any]) -> str:
    """When and on what a result was measured, for a plot's caption."""
    run = doc["run"]
    scale = doc["results"].get("scale", "?")
    return f"{scale} scale, {run['utc']}, {run['cores']} cores, load {run['load_average']:.1f}"


def latency_bars(ax: Axes, methods: Sequence[Mapping[str, Any]], title: str) -> list[tuple[str, float]]:
    """Horizontal bars of warm median latency (ms), fastest first, on a log axis; returns (label, ms)."""
    measured = sorted(
        (m for m in methods if m["warm"]["median_s"] is not None), key=lambda m: m["warm"]["median_s"]
    )
    ms = [m["warm"]["median_s"] * 1000 for m in measured]
    lows = [v - min(m["warm"]["samples_s"]) * 1000 for v, m in zip(ms, measured, strict=True)]
    highs = [max(m["warm"]["samples_s"]) * 1000 - v for v, m in zip(ms, measured, strict=True)]
    colours = ["tab:gray" if m["method"] in BASELINES else "tab:blue" for m in measured]
    labels = [m["label"] for m in measured]
    ax.barh(labels, ms, color=colours, xerr=[lows, highs], ecolor="black", capsize=2)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("warm median latency (ms, log scale; bars: min to max)")
    ax.set_title(title)
    for y, value in enumerate(ms):
        ax.annotate(
            f"{value:,.1f}", (value, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8
        )
    return list(zip(labels, ms, strict=True))


def lookup_figure(doc: Mapping[str, Any]) -> Figure:
    """W1 and W3 latency bars of the lookup benchmark, one above the other."""
    res = doc["results"]
    fig, (w1, w3) = plt.subplots(2, 1, figsize=(9, 8), constrained_layout=True)
    latency_bars(w1, res["w1"], f"W1: point lookup, {res['rows']:,} rows in {res['files']} files")
    appended = res["versions"]["latest"] - res["versions"]["indexed"]
    latency_bars(w3, res["w3"], f"W3: {appended} file(s) appended, index not refreshed")
    fig.suptitle(f"Point lookups against the baselines ({run_line(doc)})", fontsize=10)
    return fig


def refresh_points(ax: Axes, build: Mapping[str, Any]) -> list[tuple[int, float]]:
    """Incremental refresh time (ms) against files appended; returns the (files, ms) points drawn."""
    appends = [s for s in build["steps"] if s["appended_files"] and s["seconds"] is not None]
    full = [s["seconds"] for s in build["steps"] if s["label"].startswith("full refresh") and s["seconds"]]
    points = [(s["appended_files"], s["seconds"] * 1000) for s in appends]
    ax.scatter([p[0] for p in points], [p[1] for p in points], label="incremental refresh")
    for s, (x, y) in zip(appends, points, strict=True):
        ax.annotate(
            f"{s['table_files']:,} files", (x, y), xytext=(5, 3), textcoords="offset points", fontsize=8
        )
    if full:
        ax.axhline(full[0] * 1000, linestyle="--", color="tab:gray", label="full rebuild (reference)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("files appended since the last refresh (log)")
    ax.set_ylabel("refresh time (ms, log)")
    ax.legend()
    return points


def table_size_curve(build: Mapping[str, Any]) -> dict[str, Any] | None:
    """Refresh time against table size at a fixed change size, from the build benchmark's steps.

    For each number of appended files refreshed on tables of two or more sizes, one series of
    (table files, ms) points, in the :func:`curve_axes` form; None when no change size was repeated.
    """
    by_change: dict[int, list[list[float]]] = {}
    for s in build["steps"]:
        if s["appended_files"] and s["seconds"] is not None:
            by_change.setdefault(s["appended_files"], []).append([s["table_files"], s["seconds"] * 1000])
    series = {
        f"{n} file(s) appended": points
        for n, points in sorted(by_change.items())
        if len({p[0] for p in points}) > 1
    }
    if not series:
        return None
    return {
        "title": "refresh cost against table size (flat: cost follows the change)",
        "x_label": "table files after the append (log)",
        "y_label": "refresh time (ms, log)",
        "series": series,
    }


def refresh_figure(doc: Mapping[str, Any]) -> Figure:
    """Refresh cost against change size, and against table size where the steps allow it."""
    curve = table_size_curve(doc["results"])
    panels = 2 if curve else 1
    fig, axes = plt.subplots(1, panels, figsize=(7 * panels, 4), constrained_layout=True, squeeze=False)
    refresh_points(axes[0][0], doc["results"])
    axes[0][0].set_title("incremental refresh against appended files", fontsize=10)
    if curve:
        curve_axes(axes[0][1], curve)
    fig.suptitle(f"Index maintenance, W4 ({run_line(doc)})", fontsize=10)
    return fig


def curve_axes(ax: Axes, curve: Mapping[str, Any]) -> int:
    """One scaling curve set on log-log axes; returns the number of series drawn."""
    for label, points in curve["series"].items():
        kept = sorted((x, y) for x, y in points if x and y)  # log axes: no zero or missing values
        if kept:
            ax.plot([p[0] for p in kept], [p[1] for p in kept], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(curve["x_label"])
    ax.set_ylabel(curve["y_label"])
    ax.set_title(curve["title"], fontsize=10)
    ax.legend(fontsize=8)
    return len(curve["series"])


def curves_figure(doc: Mapping[str, Any]) -> Figure:
    """Every curve set of a results document, side by side."""
    curves = doc["results"]["curves"]
    fig, axes = plt.subplots(
        1, len(curves), figsize=(6 * len(curves), 4.5), constrained_layout=True, squeeze=False
    )
    for ax, curve in zip(axes[0], curves, strict=True):
        curve_axes(ax, curve)
    fig.suptitle(f"{doc['benchmark']} ({run_line(doc)})", fontsize=10)
    return fig


def write_all(results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Draw every plot the results in ``results_dir`` allow, as PNGs there; returns the files written."""
    results_dir = Path(results_dir)
    written: list[Path] = []

    def save(fig: Figure, name: str) -> None:
        path = results_dir / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    lookup = load(results_dir, "lookup")
    if lookup is not None:
        save(lookup_figure(lookup), "lookup-latency.png")
    build = load(results_dir, "build")
    if build is not None:
        save(refresh_figure(build), "refresh-cost.png")
    for path in sorted(results_dir.glob("*.json")):
        doc = load(results_dir, path.stem)
        if doc is not None and doc["results"].get("curves"):
            save(curves_figure(doc), f"{path.stem}-scaling.png")
    return written


def main(argv: list[str] | None = None) -> int:
    """Redraw the plots of a results folder (default docs/bench)."""
    args = sys.argv[1:] if argv is None else argv
    for path in write_all(Path(args[0]) if args else RESULTS_DIR):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
