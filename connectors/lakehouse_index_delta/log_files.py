"""The files of a ``_delta_log`` directory, classified by name.

``_delta_log`` is listed non-recursively (``_sidecars/`` is never listed: Spark's
sidecar names look like multi-part checkpoint names). Recognised names:

* ``<v:20>.json``: commit of version v;
* ``<v:20>.checkpoint.parquet``: classic (or V2 with a classic name) checkpoint;
* ``<v:20>.checkpoint.<part:10>.<parts:10>.parquet``: one part of a multi-part checkpoint;
* ``<v:20>.checkpoint.<uuid>.json|parquet``: V2 checkpoint;
* ``<x:20>.<y:20>.compacted.json``: log compaction of commits x..y;
* ``_last_checkpoint`` is not needed: the listing already shows every checkpoint, and
  trusting it would make a stale or corrupt hint matter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from lakehouse_index.source import FileIO, FileStatus

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTI = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(
    r"^(\d{20})\.checkpoint\.([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"\.(json|parquet)$"
)
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint of one version: its file(s) in part order."""

    version: int
    kind: str  # "classic", "multi", "v2"
    files: tuple[FileStatus, ...]


@dataclass(frozen=True)
class Compaction:
    """A log compaction file covering commits ``start..end`` (inclusive)."""

    start: int
    end: int
    file: FileStatus


@dataclass(frozen=True)
class LogListing:
    """One listing of ``_delta_log``."""

    log_uri: str
    commits: dict[int, FileStatus] = field(default_factory=dict)
    checkpoints: tuple[Checkpoint, ...] = ()  # complete ones only, oldest first
    incomplete_checkpoints: tuple[int, ...] = ()
    compactions: tuple[Compaction, ...] = ()

    @property
    def latest_version(self) -> int | None:
        """The newest version with a commit or a complete checkpoint."""
        candidates = list(self.commits)
        candidates += [c.version for c in self.checkpoints]
        return max(candidates) if candidates else None

    def checkpoint_at_or_below(
        self, version: int, *, excluding: frozenset[Checkpoint] = frozenset()
    ) -> Checkpoint | None:
        """The newest complete checkpoint with version <= ``version`` (never a newer one)."""
        best = None
        for c in self.checkpoints:
            if c.version <= version and c not in excluding and (best is None or c.version >= best.version):
                best = _prefer(best, c) if best is not None and best.version == c.version else c
        return best

    def compaction_from(self, start: int, upto: int) -> Compaction | None:
        """The compaction file starting at ``start`` that reaches furthest without passing ``upto``."""
        best = None
        for c in self.compactions:
            if c.start == start and c.end <= upto and (best is None or c.end > best.end):
                best = c
        return best

    @cached_property
    def readable(self) -> list[int]:
        """Versions that can be rebuilt, oldest first (computed once per listing).

        Delta's earliest recreatable version (delta-spark's rule, so every reader agrees on
        the oldest version): the commits from some version on run unbroken to the latest; the
        history starts at version 0 when that run does, else at the oldest complete
        checkpoint from which the run continues (at most one version below its start). A
        checkpoint further back, or one left before a gap by a log cleanup, rebuilds nothing
        the log can carry forward, and neither do commits below the start.
        """
        latest = self.latest_version
        if latest is None:
            return []
        run_start = latest + 1
        while run_start - 1 in self.commits:
            run_start -= 1
        if run_start == 0:
            return list(range(latest + 1))
        start = min((c.version for c in self.checkpoints if c.version >= run_start - 1), default=None)
        return [] if start is None else list(range(start, latest + 1))


def _prefer(a: Checkpoint, b: Checkpoint) -> Checkpoint:
    # Several checkpoints of one version are equivalent; a V2 one is a single small file.
    order = {"v2": 0, "classic": 1, "multi": 2}
    return a if order[a.kind] <= order[b.kind] else b


def list_log(io: FileIO, log_uri: str) -> LogListing:
    """List and classify ``_delta_log``; incomplete multi-part checkpoints are set aside."""
    commits: dict[int, FileStatus] = {}
    checkpoints: list[Checkpoint] = []
    multi: dict[tuple[int, int], dict[int, FileStatus]] = {}
    compactions: list[Compaction] = []
    for st in io.list_dir(log_uri):
        name = st.path.rsplit("/", 1)[-1]
        if m := _COMMIT.match(name):
            commits[int(m.group(1))] = st
        elif m := _CLASSIC.match(name):
            checkpoints.append(Checkpoint(int(m.group(1)), "classic", (st,)))
        elif m := _MULTI.match(name):
            part, parts = int(m.group(2)), int(m.group(3))
            multi.setdefault((int(m.group(1)), parts), {})[part] = st
        elif m := _V2.match(name):
            checkpoints.append(Checkpoint(int(m.group(1)), "v2", (st,)))
        elif m := _COMPACTED.match(name):
            start, end = int(m.group(1)), int(m.group(2))
            if start <= end:
                compactions.append(Compaction(start, end, st))
    incomplete = []
    for (version, parts), found in multi.items():
        if set(found) == set(range(1, parts + 1)):
            checkpoints.append(Checkpoint(version, "multi", tuple(found[i] for i in range(1, parts + 1))))
        else:
            incomplete.append(version)
    checkpoints.sort(key=lambda c: c.version)
    compactions.sort(key=lambda c: (c.start, c.end))
    return LogListing(log_uri, commits, tuple(checkpoints), tuple(sorted(incomplete)), tuple(compactions))
