"""Child process of the crash harness: ``python -m tests.reliability.crash_worker FMT TABLE OP``.

Opens the table (Delta by path; Iceberg ``db.t`` through the ``watched`` catalog of the
environment), prints ``ready`` once imports and opening are done (the parent's random kills
count from there), runs the operation ``OP`` of :data:`tests.reliability.crash_ops.OPS` and
prints ``done <seconds>``. ``LAKEHOUSE_INDEX_CRASH_AT`` in the environment picks the named
crash point it dies at.
"""

from __future__ import annotations

import sys
import time

import lakehouse_index as li
from tests.reliability.crash_ops import OPS
from tests.workflows.watched import CATALOG


def main() -> None:
    fmt, table, op = sys.argv[1:]
    t = li.open_table(table, catalog=CATALOG) if fmt == "iceberg" else li.open_table(table)
    print("ready", flush=True)
    start = time.perf_counter()
    OPS[op].run(t)
    print(f"done {time.perf_counter() - start:.3f}", flush=True)


if __name__ == "__main__":
    main()
