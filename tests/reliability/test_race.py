"""Race harness on local disk: eight index racers, an API writer, two watchers and the format's
own writer on one Delta table and index (:func:`tests.reliability.race.run_race`; the object
store runs pass their store to the same function)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.race import RACERS, RaceStore, run_race

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"


def test_eight_racers_writers_and_watchers_on_local_disk(tmp_path: Path) -> None:
    report = run_race(
        RaceStore(str(tmp_path / "t")), seconds=60.0 if LONG else 6.0, parent_writes=30 if LONG else 6
    )
    print(report)  # shown with -s: how much racing happened
    # Every kind of operation ran at least once, and the table moved under them.
    done = {op for op in report.operations}
    assert {"refresh-incremental", "refresh-full", "refresh-quick", "delete", "restore", "vacuum"} <= done
    assert {"append", "delete-rows"} <= done and report.table_versions > 6
    assert len(RACERS) == 8
