"""Child process of the erase crash test: runs ``erase`` and SIGKILLs itself at one point.

``python -m tests.workflows.erasure.erase_crash_worker URI POINT KEY...`` wraps the real
function named by POINT so the process dies right there, with no chance to clean up.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import lakehouse_index as li
from lakehouse_index.maintenance import refresh
from lakehouse_index.sink import rewrite
from lakehouse_index.workflows.erasure import erase as erase_mod


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def after(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*a: Any, **k: Any) -> Any:
        out = fn(*a, **k)
        die()
        return out

    return wrapped


def before(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*a: Any, **k: Any) -> Any:
        die()
        return fn(*a, **k)

    return wrapped


#: Where the child dies: after locating, after the first rewritten file is written (before
#: the commit), right after the table commit, inside the index refresh (its transient
#: entry written), and before the audit record.
POINTS = {
    "located": lambda: setattr(erase_mod, "plan_rewrite", after(erase_mod.plan_rewrite)),
    "file_written": lambda: setattr(rewrite.pq, "write_table", after(rewrite.pq.write_table)),
    "committed": lambda: setattr(erase_mod, "_refresh_all", before(erase_mod._refresh_all)),
    "refreshing": lambda: setattr(refresh, "incremental", before(refresh.incremental)),
    "audit": lambda: setattr(erase_mod, "_write_audit", before(erase_mod._write_audit)),
}


def main() -> None:
    uri, point, *keys = sys.argv[1:]
    POINTS[point]()
    li.open_table(uri).erase("by_email", keys)
    sys.exit(3)  # not killed: the point was never reached


if __name__ == "__main__":
    main()
