"""Child-process bodies for the race and crash tests (imported by spawned interpreters)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from typing import Any

from logtest_helpers import append_body, create_body, source, spec, write_token

from lakehouse_index.errors import ConcurrentIndexUpdate, IndexExistsError
from lakehouse_index.io import Storage
from lakehouse_index.log.entry import Content, Operation
from lakehouse_index.log.lifecycle import IndexBusyError, OpContext, OpResult, run_operation
from lakehouse_index.log.store import IndexLog


def _log(index_dir: str, options: dict[str, str]) -> IndexLog:
    return IndexLog(Storage.for_uri(index_dir, options), index_dir)


def merge_body(token: str):
    """An optimize-like body: merge every file's tokens plus ``token`` into one new file."""

    def body(ctx: OpContext) -> OpResult:
        assert ctx.stable is not None
        tokens = []
        for f in ctx.stable.content.files:
            tokens += ctx.storage.read_bytes(ctx.log.uri(f.path)).decode().split("\n")
        time.sleep(0.01)  # widen the window in which others race for the next slot
        merged = write_token(ctx, "\n".join([*tokens, token]), "merged.bin")
        return OpResult(ctx.stable.source, Content((merged,)))

    return body


def slow(body):
    def wrapped(ctx: OpContext) -> OpResult:
        time.sleep(0.01)
        return body(ctx)

    return wrapped


def race_worker(
    index_dir: str, options: dict[str, str], wid: int, n_ops: int, barrier: Any, queue: Any
) -> None:
    """Race the others to create the index, then run ``n_ops`` refresh/optimize operations on
    it, retrying whenever a race is lost."""
    log = _log(index_dir, options)
    writer = f"w{wid}"
    barrier.wait()
    try:
        entry = run_operation(
            log, Operation.CREATE, slow(create_body(f"c{wid}")), spec=spec(), source=source(0), writer=writer
        )
        created = f"created {entry.id}"
    except IndexBusyError:
        created = "busy"
    except ConcurrentIndexUpdate:
        created = "lost"
    except IndexExistsError:
        created = "exists"
    queue.put(("created", wid, created))
    barrier.wait()  # everyone knows the create outcome; now race the operations

    done: list[tuple[str, int]] = []
    lost_slot = busy = 0
    for k in range(n_ops):
        token = f"w{wid}-{k}"
        op = Operation.OPTIMIZE_QUICK if k == 1 else Operation.REFRESH_INCREMENTAL
        body = merge_body(token) if op is Operation.OPTIMIZE_QUICK else slow(append_body(token))
        while True:
            try:
                entry = run_operation(log, op, body, writer=writer)
                break
            except IndexBusyError:
                busy += 1
            except ConcurrentIndexUpdate:
                lost_slot += 1
            time.sleep(random.uniform(0.02, 0.1))  # fewer polls of a busy index
        done.append((op.value, entry.id))
    queue.put(("ops", wid, {"done": done, "lost_slot": lost_slot, "busy": busy}))


def crash_worker(index_dir: str, options: dict[str, str], step: str, how: str, info_path: str) -> None:
    """Run a refresh and die (kill -9 or ``os._exit``) at ``step``."""

    def die() -> None:
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(9)

    def precheck(stable) -> bool:
        if step == "precheck":
            die()
        return True

    def body(ctx: OpContext) -> OpResult:
        assert ctx.stable is not None
        with open(info_path, "w") as f:
            json.dump({"data_uri": ctx.data_uri, "transient": ctx.transient.id}, f)
        if step == "before-data":
            die()
        a = write_token(ctx, "crash-a", "a.bin")
        if step == "mid-data":
            die()
        b = write_token(ctx, "crash-b", "b.bin")
        if step == "after-data":
            die()
        return OpResult(source(ctx.stable.source.version + 1), Content((*ctx.stable.content.files, a, b)))

    run_operation(_log(index_dir, options), Operation.REFRESH_INCREMENTAL, body, precheck=precheck)
    if step == "after-final":
        die()
