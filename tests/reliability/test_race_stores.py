"""The race harness (:func:`tests.reliability.race.run_race`) on each emulated object store:
table and index on S3 (moto) and on Azure Blob Storage (Azurite), every process talking to
the emulator over loopback. The GCS emulator is left out: it has no conditional creates, so
the index log refuses it (``tests/io/test_object_store_conditional_create.py``)."""

from __future__ import annotations

import os
import uuid

from tests.reliability.race import RaceStore, run_race
from tests.support.stores import StoreUnderTest

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"


def test_race_on_an_object_store(store: StoreUnderTest) -> None:
    # One set of options for deltalake (the writers) and lakehouse-index alike. 15 s, not local
    # disk's 6: every request crosses HTTP.
    report = run_race(
        RaceStore(f"{store.root}/race-{uuid.uuid4().hex}", store.delta_options),
        seconds=60.0 if LONG else 15.0,
    )
    print(store.name, report)  # shown with -s: how much racing happened
    done = set(report.operations)
    assert {"refresh-incremental", "refresh-full", "refresh-quick", "delete", "restore", "vacuum"} <= done
    # The API writer appends (and deletes rows every third write when it gets that far: over
    # HTTP in 15 s it often does not, which is not a failure of any invariant).
    assert "append" in done and report.table_versions > 6
