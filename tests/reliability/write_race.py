"""The write race: API writes racing the format library's appends, a watcher and index optimizes.

:func:`run_write_race` on a table of either format (``tests.workflows.watched``) for a bounded
time, four kinds of process at once (``spawn``):

* an **API writer**: appends, ``delete("id = …")`` of the row it appended just before,
  ``upsert(..., on=["id"])`` of the row it appended plus a new one, and ``overwrite(...,
  where="id = …")`` of an older row of its own, every write maintaining the indexes. Its
  keys are its own, so no write it makes conflicts with another process's;
* a **format-library appender**: deltalake's ``write_deltalake(mode="append")`` or pyiceberg's
  ``Table.append`` of rows with keys of its own, every 0.1 s (Iceberg: 1 s);
* an **index optimizer**: ``optimize_index`` (quick, then full) of the incremental index;
* a **watcher**: ``lakehouse-index watch`` keeping every index in step.

Then the oracle: every API write refused (``WriteConflictError``, or an error of the format
library let through) is counted (none of them conflicts, so the count must be 0); the table
at each API write's version holds that write's effect and the latest version holds exactly
the rows the two writers' records say (no write lost); after a last sync, lookups and a
planned scan at *every* version equal the format library's own read of that version.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakehouse_index as li
from lakehouse_index.errors import IndexMaintenanceError, WriteConflictError
from tests.reliability.race_workers import attempt, tolerated
from tests.workflows.helpers import KEYS, SCHEMA, WHERE, multiset, rows
from tests.workflows.watched import CATALOG, Watched, Watcher, watched_table

#: First id of the API writer's rows (upserts insert from UPSERT_BASE on) and of the appender's.
API_BASE, UPSERT_BASE, NATIVE_BASE = 1_000, 500_000, 2_000_000
INDEX = "by_k"
#: Pause between the appender's commits, by format (an Iceberg commit through the SQLite
#: catalog takes several times a Delta commit's time, and each lost race of a write costs it
#: pyiceberg's own retry wait), and between the API writer's writes: both keep committing
#: throughout, and the versions to check stay a few hundred.
NATIVE_PAUSE_S = {"delta": 0.1, "iceberg": 1.0}
API_PAUSE_S = 0.02


@dataclass(frozen=True)
class WriteRaceReport:
    """What the race did: API writes by operation, their refusals and reruns, the appender's
    commits, the table versions checked, and the API writer's rate."""

    fmt: str
    seconds: float
    api_writes: dict[str, int]
    refused: int
    retries: int
    #: The first refusals' messages.
    refusals: tuple[str, ...]
    native_appends: int
    versions: int

    @property
    def writes_per_second(self) -> float:
        """API writes committed per second of racing."""
        return sum(self.api_writes.values()) / self.seconds

    @property
    def retries_per_write(self) -> float:
        """Reruns after a lost race, per committed API write."""
        return self.retries / max(1, sum(self.api_writes.values()))

    @property
    def refusal_rate(self) -> float:
        """Refused API writes among all API writes tried."""
        return self.refused / max(1, self.refused + sum(self.api_writes.values()))


def _open(fmt: str, env: dict[str, str]) -> tuple[li.Table, Any]:
    """The table (and a function committing an append through the format library) in a worker."""
    if fmt == "delta":
        from deltalake import write_deltalake

        path = env["TABLE"]
        return li.open_table(path), lambda data: write_deltalake(path, data, mode="append")
    from pyiceberg.catalog import load_catalog

    prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
    catalog = load_catalog(
        CATALOG, **{k[len(prefix) :].lower(): v for k, v in env.items() if k.startswith(prefix)}
    )
    return li.open_table("db.t", catalog=catalog), lambda data: catalog.load_table("db.t").append(data)


def _record(i: int, ident: int, v: int) -> tuple[int, str, int, int, str]:
    return (ident, KEYS[i % 3], i % 3, v, "xy"[i % 2])


def _api(t: li.Table, stop: Any) -> dict[str, Any]:
    """The API writer: (operation, version, id → v after the write, or None: deleted) per commit."""
    done: list[tuple[str, int, dict[int, int | None]]] = []
    refusals: list[str] = []
    retries = 0

    def write(op: str, call: Any, effect: dict[int, int | None]) -> None:
        nonlocal retries
        try:
            result = call()
        except WriteConflictError as e:
            refusals.append(f"{op}: {e}")
            return
        except Exception as e:  # a format library's own error let through: a refusal too (a defect)
            if not type(e).__module__.startswith(("pyiceberg", "deltalake")):
                raise
            refusals.append(f"{op}: {type(e).__module__}.{type(e).__name__} {e}")
            return
        except IndexMaintenanceError as e:  # the commit stands; an index raced the watcher
            if any(not r.ok and not tolerated(r.error or "") for r in e.result.indexes):  # type: ignore[attr-defined]
                raise
            result = e.result  # type: ignore[attr-defined]
        retries += getattr(result, "retries", 0)
        done.append((op, int(result.table_version), effect))

    i = 0
    while not stop.is_set():
        ident = API_BASE + i
        batch = rows([_record(i, ident, 0)])
        write("append", lambda batch=batch: t.append(batch), {ident: 0})
        if i % 3 == 0 and i:  # the row of step i - 3, which no write has touched since
            old = API_BASE + i - 3
            data = rows([_record(i, old, 2)])
            where = f"id = {old}"
            write("overwrite", lambda data=data, where=where: t.overwrite(data, where=where), {old: 2})
        elif i % 3 == 1:
            write("delete", lambda ident=ident: t.delete(f"id = {ident}"), {ident: None})
        elif i % 3 == 2:
            data = rows([_record(i, ident, 1), _record(i, UPSERT_BASE + i, 1)])
            write("upsert", lambda data=data: t.upsert(data, on=["id"]), {ident: 1, UPSERT_BASE + i: 1})
        i += 1
        time.sleep(API_PAUSE_S)
    return {"done": done, "refusals": refusals, "retries": retries}


def _native(append: Any, pause: float, stop: Any) -> dict[str, Any]:
    """The format library's appends; ids of every row it committed."""
    committed: list[int] = []
    j = 0
    while not stop.is_set():
        ident = NATIVE_BASE + j
        try:
            append(rows([_record(j, ident, 0)]))
        except Exception as e:  # its own lost race (nothing committed): tried again
            if "commit" not in (type(e).__name__ + str(e)).lower():
                raise
            continue
        committed.append(ident)
        j += 1
        time.sleep(pause)
    return {"committed": committed}


def _optimize(t: li.Table, stop: Any) -> dict[str, Any]:
    tally: Counter[str] = Counter()
    n = 0
    while not stop.is_set():
        mode = "quick" if n % 2 == 0 else "full"
        attempt(lambda mode=mode: t.optimize_index(INDEX, mode), tally, time.monotonic() + 300)
        n += 1
        time.sleep(0.05)
    return {"optimizes": n}


def worker(role: str, fmt: str, env: dict[str, str], barrier: Any, stop: Any, results: Any) -> None:
    """One racing process (the ``spawn`` target): reports (role, "ok" | "error", outcome)."""
    try:
        t, native_append = _open(fmt, env)
        barrier.wait(timeout=300)
        if role == "api":
            out = _api(t, stop)
        elif role == "native":
            out = _native(native_append, NATIVE_PAUSE_S[fmt], stop)
        else:
            out = _optimize(t, stop)
        results.put((role, "ok", out))
    except BaseException:
        results.put((role, "error", traceback.format_exc()))


def run_write_race(
    tmp_path: Path, fmt: str, seconds: float, most_versions: int | None = None
) -> WriteRaceReport:
    """Race for ``seconds`` on a new table of format ``fmt`` and check the oracle (module doc) at every
    version, or at ``most_versions`` of them."""
    w = watched_table(tmp_path, fmt, [_record(i, i, 0) for i in range(6)])
    env = dict(w.env, TABLE=str(tmp_path / "t"))
    ctx = mp.get_context("spawn")
    roles = ("api", "native", "optimize")
    barrier, stop, results = ctx.Barrier(len(roles) + 1), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(r, fmt, env, barrier, stop, results), daemon=True) for r in roles
    ]
    watcher = Watcher(w, 0.1)
    for p in procs:
        p.start()
    try:
        assert watcher.first.wait(120), "the watcher made no first poll"
        try:
            barrier.wait(timeout=300)
        except threading.BrokenBarrierError:  # a worker failed before it started: say why
            failed = [results.get(timeout=60) for _ in procs if not results.empty()]
            raise AssertionError(f"a worker did not start: {failed}") from None
        time.sleep(seconds)
        stop.set()
        outcomes = {role: (status, out) for role, status, out in (results.get(timeout=300) for _ in procs)}
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=120)
            if p.is_alive():
                p.kill()
        code, stderr = watcher.stop(signal.SIGTERM)
    errors = {role: out for role, (status, out) in outcomes.items() if status != "ok"}
    assert not errors, "\n".join(f"{role}:\n{tb}" for role, tb in errors.items())
    assert code == 0, stderr
    api, native = outcomes["api"][1], outcomes["native"][1]
    checking = time.monotonic()
    versions = check_oracle(w, api["done"], native["committed"], most_versions)
    print(f"{fmt}: oracle of {versions} versions in {time.monotonic() - checking:.0f} s")
    ops = Counter(op for op, _, _ in api["done"])
    return WriteRaceReport(
        fmt,
        seconds,
        dict(ops),
        len(api["refusals"]),
        api["retries"],
        tuple(api["refusals"][:3]),
        len(native["committed"]),
        versions,
    )


def _by_id(table: pa.Table) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for ident, v in zip(table["id"].to_pylist(), table["v"].to_pylist(), strict=True):
        out.setdefault(ident, []).append(v)
    return out


def reader(w: Watched) -> Any:
    """The format library's rows at a version, through one table object loaded once (Delta:
    moved from version to version, replaying only the commits in between)."""
    if w.fmt == "delta":
        from deltalake import DeltaTable

        dt = DeltaTable(w.cli_args[0], version=0)

        def delta_read(v: int) -> pa.Table:
            if dt.version() != v:
                dt.load_as_version(v)
            return dt.to_pyarrow_table()

        return delta_read
    return w.read


def spread(versions: list[int], most: int | None) -> list[int]:
    """``versions`` if ``most`` is None, else at most ``most`` of them evenly spread, first and last kept."""
    if most is None or len(versions) <= most:
        return versions
    step = (len(versions) - 1) / (most - 1)
    return sorted({versions[round(i * step)] for i in range(most)})


def check_oracle(
    w: Watched,
    done: list[tuple[str, int, dict[int, int | None]]],
    appended: list[int],
    most_versions: int | None = None,
) -> int:
    """No write lost (every API write checked at its version), and the index's answers equal the format
    library's read at every version (or at ``most_versions`` of them, evenly spread); versions checked."""
    read = reader(w)
    want: dict[int, int | None] = {i: 0 for i in range(6)}
    for op, version, effect in done:
        at = _by_id(read(version))
        for ident, v in effect.items():
            assert at.get(ident) == (None if v is None else [v]), (op, version, ident, at.get(ident))
        want.update(effect)
    want.update({ident: 0 for ident in appended})
    versions = w.versions()
    final = _by_id(read(versions[-1]))
    assert final == {i: [v] for i, v in want.items() if v is not None}, "a write was lost or doubled"
    w.t.sync_indexes()
    cols = SCHEMA.names
    versions = spread(versions, most_versions)
    for v in versions:
        oracle = read(v).select(cols)
        got = w.t.lookup(INDEX, KEYS, version_as_of=v)
        assert multiset(got, cols) == multiset(oracle, cols), (v, "lookup")
        scanned = w.t.scan(version_as_of=v, where=WHERE)
        expected = oracle.filter(pc.or_kleene(pc.equal(oracle["k2"], 1), pc.equal(oracle["k"], "a")))
        assert multiset(scanned, cols) == multiset(expected, cols), (v, "scan")
    return len(versions)
