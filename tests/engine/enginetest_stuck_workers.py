"""Child-process body of the stuck-operation tests (imported after a ``spawn``).

The child runs one lifecycle operation through the public API and SIGKILLs itself right
after its transient log entry is written (the hook wraps the real ``IndexLog.write``), so
the index is left exactly as a process that died mid-operation leaves it.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import lakehouse_index as li
from lakehouse_index.spark import MASTER_ENV

#: The operations a child can be killed in, and how each is called.
OPERATIONS = ("create", "refresh-quick", "optimize-full", "delete", "restore", "vacuum")


def operate_and_die(path: str, operation: str) -> None:
    os.environ[MASTER_ENV] = "local[1]"
    from lakehouse_index.log import store

    real_write = store.IndexLog.write

    def write(self: store.IndexLog, entry: Any) -> None:
        real_write(self, entry)
        if not entry.state.is_stable:
            os.kill(os.getpid(), signal.SIGKILL)

    store.IndexLog.write = write  # type: ignore[method-assign]
    t = li.open_table(path)
    calls = {
        "create": lambda: t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id")),
        "refresh-quick": lambda: t.refresh_index("by_k", "quick"),
        "optimize-full": lambda: t.optimize_index("by_k", "full"),
        "delete": lambda: t.delete_index("by_k"),
        "restore": lambda: t.restore_index("by_k"),
        "vacuum": lambda: t.vacuum_index("by_k", retention_hours=0),
    }
    calls[operation]()
    raise AssertionError(f"{operation} finished: the kill hook never ran")
