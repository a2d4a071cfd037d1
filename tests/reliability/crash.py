"""The crash harness: run one mutating operation in a subprocess, SIGKILL it, prove recovery.

:func:`run_trial` builds a fresh table (:func:`tests.workflows.watched.watched_table`, Delta or
Iceberg, three indexes), gives the operation its work, runs it in a child
(``tests.reliability.crash_worker``, this checkout's code through ``code_env``) and kills it
at a named crash point (``LAKEHOUSE_INDEX_CRASH_AT``) or after a random delay. Then, in
this order:

1. the table holds exactly the commits that succeeded: no commit, or the operation's one
   commit whose rows equal the pyarrow oracle of :class:`~tests.reliability.crash_ops.CrashOp`
   (at a named point, which of the two is known);
2. every index answers like the format library's reader at every table version (its last
   stable entry serves; hybrid scan for the rest);
3. ``cancel`` returns every index stuck in a transient state to exactly the stable entry its
   operation started from (and is refused where nothing is stuck);
4. a rerun of the operation completes; the table then holds its commit exactly once;
5. answers are checked again at every version;
6. ``vacuum`` with zero retention leaves no orphan, keeps every file a retained entry names
   (a vacuumed deleted index keeps no data at all), and answers are checked a third time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakehouse_index as li
from lakehouse_index.errors import IllegalIndexStateError
from lakehouse_index.faults import CRASH_ENV
from lakehouse_index.log.entry import DATA_DIR, IndexState
from lakehouse_index.log.garbage import orphans, referenced_paths
from lakehouse_index.log.store import IndexCatalog
from tests.reliability.crash_ops import FIRST, OPS, CrashOp
from tests.support.paths import REPO_ROOT
from tests.workflows.helpers import SCHEMA, multiset
from tests.workflows.watched import Watched, watched_table

#: The rows of a plain scan with a predicate, checked at every version.
WHERE = "k = 'a' OR k2 = 1"


@dataclass(frozen=True)
class Trial:
    """One kill: a format, an operation, and a named point or a delay after ``ready`` (s)."""

    fmt: str
    op: str
    point: str | None = None
    delay_s: float | None = None

    @property
    def label(self) -> str:
        """``fmt-op-point`` or ``fmt-op-at-<ms>ms``."""
        where = self.point if self.point is not None else f"at-{(self.delay_s or 0) * 1000:.0f}ms"
        return f"{self.fmt}-{self.op}-{where}"


@dataclass(frozen=True)
class Outcome:
    """What a trial saw: killed or completed, whether the table commit happened, stuck indexes."""

    trial: Trial
    killed: bool
    committed: bool
    cancelled: tuple[str, ...]
    #: Seconds the operation took in the child when it was not killed.
    op_seconds: float | None


def run_trial(tmp_path: Path, trial: Trial) -> Outcome:
    """Run ``trial`` on a fresh table under ``tmp_path`` and check every recovery invariant."""
    op = OPS[trial.op]
    w = watched_table(tmp_path, trial.fmt, FIRST)
    op.prepare(w)
    before = w.versions()
    rows_before = w.read(before[-1])
    killed, seconds = _run_child(w, trial)
    if trial.point is not None:
        assert killed, f"{trial.label}: the child finished; the crash point was never reached"

    committed = _check_commits(w, op, before, rows_before)
    if trial.point is not None:
        assert committed == (trial.point in op.commit_points), (trial.label, committed)
    check_answers(w, _versions(w, op, committed))

    cancelled = recover(w.t)
    (op.rerun or (lambda t, _c: op.run(t)))(w.t, committed)
    assert _check_commits(w, op, before, rows_before) == (op.expected is not None), trial.label
    check_answers(w, _versions(w, op, op.expected is not None))

    vacuum_all(w.t)
    check_answers(w, _versions(w, op, op.expected is not None))
    return Outcome(trial, killed, committed, cancelled, seconds)


def _run_child(w: Watched, trial: Trial) -> tuple[bool, float | None]:
    """(killed, seconds the operation took when it finished)."""
    table = str(w.cli_args[0])
    env = {**w.env, CRASH_ENV: trial.point} if trial.point is not None else w.env
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.crash_worker", trial.fmt, table, trial.op],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO_ROOT),
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready.strip() == "ready" and trial.delay_s is not None:
            time.sleep(trial.delay_s)
            if proc.poll() is None:
                proc.kill()
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == -9:
        return True, None
    assert proc.returncode == 0 and ready.strip() == "ready", (trial.label, proc.returncode, err[-3000:])
    return False, float(out.split()[-1])


def _check_commits(w: Watched, op: CrashOp, before: list[Any], rows_before: pa.Table) -> bool:
    """Whether the operation's commit is in the table; fail unless the table holds exactly it or nothing."""
    versions = w.versions()
    if op.expected is None:
        assert versions == before, "an index operation changed the table"
        return False
    committed = versions[-1] != before[-1]
    if not op.purges:  # history stays: the versions before, then the commit's (pyiceberg's
        # overwrite with a filter commits a delete and an append snapshot in one transaction)
        assert versions[: len(before)] == before, versions
    want = op.expected(rows_before) if committed else rows_before
    got = w.read(versions[-1])
    assert multiset(got, SCHEMA.names) == multiset(want, SCHEMA.names), "the table's rows"
    return committed


def _versions(w: Watched, op: CrashOp, committed: bool) -> list[Any]:
    """The versions to check: all, or only the latest after a purge (older ones are gone)."""
    versions = w.versions()
    return versions[-1:] if op.purges and committed else versions


def _stable_indexes(t: li.Table) -> dict[str, Any]:
    """Each index whose last stable entry is ACTIVE: its spec."""
    catalog = IndexCatalog(t.storage, t.index_root)
    out = {}
    for name in catalog.names():
        stable = catalog.log(name).latest_stable()
        if stable is not None and stable.state is IndexState.ACTIVE:
            out[name] = stable.spec
    return out


def check_answers(w: Watched, versions: list[Any]) -> None:
    """Every usable index answers lookups of every key like the format's reader, at each version;
    a planned scan with a predicate too."""
    specs = _stable_indexes(w.t)
    for v in versions:
        oracle = w.read(v).select(SCHEMA.names)
        for name, spec in specs.items():
            key = list(spec.key)
            found = sorted(set(zip(*(oracle[c].to_pylist() for c in key), strict=True)))
            missing = tuple("zz" if pa.types.is_string(SCHEMA.field(c).type) else -1 for c in key)
            probe = [k[0] if len(key) == 1 else k for k in [*found, missing]]
            columns = list(dict.fromkeys([*key, *spec.columns])) if spec.kind == "covering" else SCHEMA.names
            got = w.t.lookup(name, probe, version_as_of=v, columns=columns)
            assert multiset(got, columns) == multiset(oracle, columns), (v, name)
        scanned = w.t.scan(version_as_of=v, where=WHERE)
        want = oracle.filter(pc.or_kleene(pc.equal(oracle["k"], "a"), pc.equal(oracle["k2"], 1)))
        assert multiset(scanned, SCHEMA.names) == multiset(want, SCHEMA.names), (v, "scan")


def recover(t: li.Table) -> tuple[str, ...]:
    """Cancel every index stuck in a transient state; prove each returns to its operation's base.

    Returns the names cancelled. An index in a stable state refuses cancel.
    """
    catalog = IndexCatalog(t.storage, t.index_root)
    cancelled = []
    for name in catalog.names():
        log = catalog.log(name)
        latest = log.latest()
        assert latest is not None
        if latest.state.is_stable:
            try:
                t.cancel_index(name)
            except IllegalIndexStateError:
                continue
            raise AssertionError(f"cancel of the stable index {name!r} was accepted")
        base = log.read(latest.base_id) if latest.base_id is not None else None
        t.cancel_index(name)
        restored = log.latest()
        assert restored is not None and restored.state.is_stable
        if base is None or base.state is IndexState.DOES_NOT_EXIST:
            assert restored.state is IndexState.DOES_NOT_EXIST, name
        else:
            fields = ("state", "spec", "source", "content", "pending")
            assert {f: getattr(restored, f) for f in fields} == {f: getattr(base, f) for f in fields}, name
        cancelled.append(name)
    return tuple(cancelled)


def vacuum_all(t: li.Table) -> None:
    """Vacuum every index with zero retention; no orphan stays, every named file does."""
    catalog = IndexCatalog(t.storage, t.index_root)
    for name in catalog.names():
        log = catalog.log(name)
        latest = log.latest()
        assert latest is not None and latest.state.is_stable, (name, latest and latest.state)
        if latest.state is IndexState.DOES_NOT_EXIST:
            continue
        t.vacuum_index(name, retention_hours=0)
        if latest.state is IndexState.DELETED:  # all its data goes
            assert _files(t, log.uri(DATA_DIR)) == [], name
            continue
        assert orphans(log) == [], name
        for rel in referenced_paths(log):
            assert t.storage.exists(log.uri(rel)), (name, rel)


def _files(t: li.Table, uri: str) -> list[str]:
    return [s.path for s in t.storage.list_tree(uri)] if t.storage.exists(uri) else []


def tally(outcomes: list[Outcome]) -> Counter[str]:
    """Counts for the report: trials, kills, commits, cancels."""
    out: Counter[str] = Counter()
    for o in outcomes:
        out["trials"] += 1
        out["killed"] += o.killed
        out["committed"] += o.committed
        out["cancelled"] += bool(o.cancelled)
    return out
