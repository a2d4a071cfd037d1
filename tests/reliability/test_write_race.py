"""Issue 38's race (:func:`tests.reliability.write_race.run_write_race`): API appends, deletes,
upserts and overwrites while the format library appends, a watcher follows and the index is optimized, on
both formats. None of the API writes conflicts with the appends, so none may be refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.reliability.write_race import run_write_race

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_writes_racing_appends_are_never_refused(tmp_path: Path, fmt: str) -> None:
    # The index oracle at every version with LAKEHOUSE_INDEX_LONG=1, else at 24 spread over the history
    # (each API write's own version is always checked against the format library's read).
    report = run_write_race(tmp_path, fmt, seconds=60.0 if LONG else 20.0, most_versions=None if LONG else 24)
    print(report, f"{report.writes_per_second:.1f} writes/s, {report.retries_per_write:.2f} retries/write")
    assert report.refused == 0, report
    # The race happened: every kind of API write committed while the appender committed too.
    assert {"append", "delete", "upsert", "overwrite"} <= set(report.api_writes) and report.native_appends > 5
