"""The benchmark plots: drawn from the JSON results (the notebook's tiny sample), written as PNGs.

The values drawn are checked against the JSON documents read here with ``json``; the PNGs are
decoded by matplotlib. The run_all header is checked on a redirected BENCHMARKS file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import pytest

from integration.bench import plots, run_all
from integration.bench.report import BENCHMARKS_ENV, BENCHMARKS_MD, versions, write_results
from tests.support.paths import REPO_ROOT

SAMPLE = REPO_ROOT / "notebooks" / "data" / "bench"


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A results folder holding the sample's JSON, next to a redirected BENCHMARKS file."""
    monkeypatch.setenv(BENCHMARKS_ENV, str(tmp_path / "BENCHMARKS.md"))
    folder = tmp_path / "bench"
    shutil.copytree(SAMPLE, folder)
    return folder


def _doc(name: str) -> dict:
    return json.loads((SAMPLE / f"{name}.json").read_text())


def test_latency_bars_draw_each_measured_method_fastest_first() -> None:
    w1 = _doc("lookup")["results"]["w1"]
    want = sorted((m["warm"]["median_s"] * 1000, m["label"]) for m in w1 if m["warm"]["median_s"] is not None)
    fig, ax = plt.subplots()
    drawn = plots.latency_bars(ax, w1, "W1")
    assert [(label, ms) for ms, label in want] == drawn
    assert ax.get_xscale() == "log"
    bars = [p.get_width() for p in ax.patches]
    assert bars == [ms for _, ms in drawn]
    plt.close(fig)


def test_refresh_points_are_the_incremental_steps() -> None:
    steps = _doc("build")["results"]["steps"]
    fig, ax = plt.subplots()
    points = plots.refresh_points(ax, _doc("build")["results"])
    want = [(s["appended_files"], s["seconds"] * 1000) for s in steps if s["appended_files"] and s["seconds"]]
    assert points == want and points
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    plt.close(fig)


def test_table_size_curve_keeps_change_sizes_seen_on_several_tables() -> None:
    steps = _doc("build")["results"]["steps"]
    curve = plots.table_size_curve({"steps": steps})
    assert curve is not None
    twice = {
        n
        for n in {s["appended_files"] for s in steps if s["appended_files"]}
        if len({s["table_files"] for s in steps if s["appended_files"] == n}) > 1
    }
    assert set(curve["series"]) == {f"{n} file(s) appended" for n in twice} and twice
    for n in twice:
        want = [[s["table_files"], s["seconds"] * 1000] for s in steps if s["appended_files"] == n]
        assert curve["series"][f"{n} file(s) appended"] == want
    one_table = [s for s in steps if "to a" not in s["label"]]
    assert plots.table_size_curve({"steps": one_table}) is None


def test_curves_are_log_log_and_skip_points_a_log_axis_cannot_show(results: Path) -> None:
    curve = {
        "title": "lookup latency against table size",
        "x_label": "rows",
        "y_label": "ms",
        "series": {
            "index lookup": [[10_000_000, 4.0], [1_000_000, 3.0], [0, 1.0]],
            "scan": [[1_000_000, None]],
        },
    }
    write_results("scaling-sample", {"scale": "tiny", "curves": [curve]})
    fig, ax = plt.subplots()
    assert plots.curve_axes(ax, curve) == 2
    [line] = ax.get_lines()  # "scan" has no drawable point
    assert list(line.get_xdata()) == [1_000_000, 10_000_000] and list(line.get_ydata()) == [3.0, 4.0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    plt.close(fig)
    written = plots.write_all(results)
    assert results / "scaling-sample-scaling.png" in written


def test_write_all_writes_pngs_from_the_json(results: Path) -> None:
    written = plots.write_all(results)
    assert {p.name for p in written} == {"lookup-latency.png", "refresh-cost.png"}
    for path in written:
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_a_document_of_another_schema_is_refused(results: Path) -> None:
    doc = json.loads((results / "lookup.json").read_text())
    (results / "lookup.json").write_text(json.dumps({**doc, "schema": 99}))
    with pytest.raises(ValueError, match="schema"):
        plots.write_all(results)


def test_run_all_writes_the_header_and_the_plots(results: Path) -> None:
    before = BENCHMARKS_MD.read_bytes()
    assert run_all.main(["--only", "no_such_benchmark"]) == 0  # no benchmark: header and plots only
    text = (results.parent / "BENCHMARKS.md").read_text()
    header = text.split("<!-- bench-header -->", 1)[1].split("<!-- /bench-header -->", 1)[0]
    assert "`python -m integration.bench.run_all --only no_such_benchmark`" in header
    for name, version in versions().items():
        assert f"{name} {version}" in header
    assert "[lookup-latency](bench/lookup-latency.png)" in header and (results / "refresh-cost.png").exists()
    assert text.count("<!-- bench-header -->") == 1
    assert BENCHMARKS_MD.read_bytes() == before
