"""Live states of Delta versions: rebuilt from a checkpoint or a cached state, then commits.

How a version is read
---------------------
The state at ``v`` starts from the best *base* at or below ``v`` (a state already in
memory, the tailer's state, or the newest complete checkpoint with version <= v, never a
newer one) and replays the commits after it, using a log compaction file when one covers
a run of commits that is not cached. Replay follows the protocol's action
reconciliation: logical files are keyed by (path, deletion-vector unique id) and the
newest reference wins. A state at an older version can also be had by undoing the
commits after it (:meth:`Replay.undo`), when that reads less.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakehouse_index.source import SizedCache, TableFormatError, VersionNotFoundError
from lakehouse_index_delta.actions import Actions, AddFile, Metadata, Protocol, parse_json_lines
from lakehouse_index_delta.checkpoints import read_checkpoint
from lakehouse_index_delta.features import check_protocol
from lakehouse_index_delta.live_files import Key, LiveFiles
from lakehouse_index_delta.log import DeltaLog
from lakehouse_index_delta.log_files import Checkpoint, LogListing


@dataclass
class State:
    """The live state after ``version`` (mutable while being built; frozen once cached)."""

    version: int
    protocol: Protocol | None
    metadata: Metadata | None
    files: LiveFiles = field(default_factory=LiveFiles)

    def copy(self) -> State:
        """A copy that can be advanced without changing this one."""
        return State(self.version, self.protocol, self.metadata, self.files.copy())


def check_file_actions(actions: Actions, source: str) -> None:
    """Reject commits the protocol calls invalid because their outcome depends on action order.

    Actions in a commit are unordered, so a path may appear at most once among the adds
    and once among the removes, and an add and a remove of one path must name different
    deletion vectors.
    """
    for kind, files in (("add", actions.adds), ("remove", actions.removes)):
        paths = [f.path for f in files]
        if len(paths) != len(set(paths)):
            dup = next(p for p in paths if paths.count(p) > 1)
            raise TableFormatError(f"{source}: invalid commit, {dup} appears in two {kind} actions")
    if actions.adds and actions.removes:
        both = {a.key for a in actions.adds} & {r.key for r in actions.removes}
        if both:
            path, dv = next(iter(both))
            raise TableFormatError(
                f"{source}: invalid commit, {path} is added and removed with the same deletion vector ({dv})"
            )


def advance_metadata(state: State, version: int, actions: Actions, source: str, *, commit: bool) -> None:
    """Check one commit (or, not ``commit``, a compaction file) and take its protocol and metadata.

    ``source`` names the file in errors. The file actions are applied by the caller
    (:meth:`LiveFiles.apply`).
    """
    if actions.protocol is not None:
        check_protocol(actions.protocol, source)
    if commit:  # compaction files legitimately hold several tombstones of one path
        check_file_actions(actions, source)
    if actions.protocol is not None:
        state.protocol = actions.protocol
    if actions.metadata is not None:
        state.metadata = actions.metadata
    state.version = version
    if state.protocol is None or state.metadata is None:
        raise TableFormatError(f"{source}: no protocol or metaData action at or before this commit")


class Replay:
    """The live states of one log's versions (bounded cache: CacheConfig.delta_state_entries)."""

    def __init__(self, log: DeltaLog) -> None:
        self._log = log
        self.forget()

    def forget(self) -> None:
        """Drop every state."""
        self._states: SizedCache[int, State] = SizedCache("delta_state_entries")
        #: The state a tailer reached (``changes`` advances it in place, one commit at a time).
        self.tail: State | None = None

    def _cache(self, state: State) -> None:
        self._states[state.version] = state

    def state_at(self, version: int) -> State:
        """The live state at ``version`` (cached; callers must copy before mutating)."""
        self._log.check_not_cleaned_up(version)
        cached = self._states.get(version)
        if cached is not None:
            return cached
        if self.tail is not None and self.tail.version == version:
            state = self.tail.copy()
            self._cache(state)
            return state
        listing = self._log.listing()
        if listing.latest_version is None or version > listing.latest_version:
            listing = self._log.relist()
        if version < 0 or listing.latest_version is None or version > listing.latest_version:
            raise VersionNotFoundError(
                f"version {version} does not exist (latest is {listing.latest_version})"
            )
        base: State | None = None
        for s in [*self._states.values(), self.tail]:
            if s is not None and s.version <= version and (base is None or s.version > base.version):
                base = s
        failed: set[Checkpoint] = set()
        while True:
            cp = listing.checkpoint_at_or_below(version, excluding=frozenset(failed))
            start_from_cp = cp is not None and (base is None or cp.version > base.version)
            if start_from_cp:
                assert cp is not None
                try:
                    state = self._load_checkpoint(cp)
                except TableFormatError:
                    # A corrupt checkpoint: an older one (or the commits) may still rebuild the version.
                    if _can_replay(listing, version, exclude=failed | {cp}, base=base):
                        failed.add(cp)
                        continue
                    raise
            elif base is not None:
                state = base.copy()
            else:
                state = State(-1, None, None)
            break
        self._replay(state, version, listing)
        if state.protocol is None:
            raise TableFormatError(f"{self._log.uri}: version {version} has no protocol action")
        check_protocol(state.protocol, f"{self._log.uri} at version {version}")
        self._cache(state)
        return state

    def start_state(self, start: int) -> State:
        """A state at ``start`` that a tailer may advance: the tail itself when it is there."""
        if self.tail is not None and self.tail.version == start:
            return self.tail
        if start == -1:
            return State(-1, None, None)
        if start in self._states:
            return self._states[start].copy()
        return self.state_at(start).copy()

    def advance(self, state: State, version: int, actions: Actions) -> tuple[list[AddFile], list[AddFile]]:
        """Advance ``state`` by commit ``version``: the files that stopped being live, the adds
        of keys that were not live (:meth:`LiveFiles.apply` with ``report``)."""
        advance_metadata(state, version, actions, self._log.commit_uri(version), commit=True)
        return state.files.apply([actions], report=True)

    def latest_metadata(self) -> Metadata | None:
        """The ``metaData`` of the latest listed version (None for a log without versions)."""
        latest = self._log.listing().latest_version
        if latest is None:
            return None
        if self.tail is not None and self.tail.version == latest:
            return self.tail.metadata
        return self.state_at(latest).metadata

    def _load_checkpoint(self, cp: Checkpoint) -> State:
        protocol, metadata, files = read_checkpoint(self._log.io, cp, self._log.uri, self._log.table_root)
        check_protocol(protocol, cp.files[0].path)
        return State(cp.version, protocol, metadata, files)

    def _replay(self, state: State, version: int, listing: LogListing) -> None:
        """Advance ``state`` to ``version``: metadata commit by commit, file actions in one batch."""
        batch: list[Actions] = []
        self._replay_into(state, version, listing, batch)
        state.files.apply(batch, report=False)

    def _replay_into(self, state: State, version: int, listing: LogListing, batch: list[Actions]) -> None:
        log = self._log
        v = state.version + 1
        while v <= version:
            if not log.cached(v):
                comp = listing.compaction_from(v, version)
                if comp is not None:
                    path = comp.file.path
                    actions = parse_json_lines(log.io.read_bytes(path), log.table_root, path)
                    advance_metadata(state, comp.end, actions, path, commit=False)
                    batch.append(actions)
                    v = comp.end + 1
                    continue
            if not log.cached(v):
                log.prefetch(listing, v, version)
            actions_or_none = log.read_commit(v)
            if actions_or_none is None:
                if state.version < 0 and v == 0:
                    incomplete = [i for i in listing.incomplete_checkpoints if i <= version]
                    hint = (
                        f" (incomplete multi-part checkpoints at versions {incomplete})" if incomplete else ""
                    )
                    raise VersionNotFoundError(
                        f"version {version} cannot be reconstructed: no complete checkpoint at or below it "
                        f"and {log.commit_uri(0)} is missing{hint}"
                    )
                raise log.missing_commit(v)
            advance_metadata(state, v, actions_or_none, log.commit_uri(v), commit=True)
            batch.append(actions_or_none)
            v += 1

    # ------------------------------------------------------------------ backwards

    def undo_reads_less(self, a: int, b: int) -> bool:
        """Whether undoing the commits (b, a] reads fewer bytes than rebuilding ``b`` forward.

        Forward: from the newest checkpoint or cached state at or below ``b``. Cached
        commits cost nothing; sizes come from the listing.
        """
        if b in self._states:
            return False
        listing = self._log.listing()

        def commits(first: int, last: int) -> int:
            return sum(
                listing.commits[v].size
                for v in range(first, last + 1)
                if not self._log.cached(v) and v in listing.commits
            )

        forward = [commits(0, b)]
        cp = listing.checkpoint_at_or_below(b)
        if cp is not None:
            forward.append(sum(f.size for f in cp.files) + commits(cp.version + 1, b))
        forward += [commits(st.version + 1, b) for st in self._states.values() if st.version <= b]
        return commits(b + 1, a) < min(forward)

    def undo(self, newer: State, b: int) -> State | None:
        """The state at ``b`` from the newer state, by taking back the adds of the commits after ``b``.

        None (rebuild forward instead) when the commits cannot be undone exactly: one is
        missing or changes the protocol or metadata; a file live at ``b`` was removed (a
        ``remove`` lacks the add's modification time and statistics); or a
        ``dataChange=false`` add may have replaced a live file (whose add is not at hand).
        Every other add of a logical file not seen before in (b, newer] is a data-changing
        add, which makes a file live that was not.
        """
        first_is_add: dict[Key, bool] = {}
        for v in range(b + 1, newer.version + 1):
            actions = self._log.read_commit(v)
            if actions is None or actions.metadata is not None or actions.protocol is not None:
                return None
            for r in actions.removes:
                first_is_add.setdefault(r.key, False)
            for add in actions.adds:
                if add.key not in first_is_add:
                    if not add.data_change:
                        return None
                    first_is_add[add.key] = True
        if not all(first_is_add.values()):
            return None
        state = State(b, newer.protocol, newer.metadata, newer.files.copy())
        state.files.discard(first_is_add)
        self._cache(state)
        return state


def _can_replay(listing: LogListing, version: int, exclude: set[Checkpoint], base: State | None) -> bool:
    """Whether ``version`` can be rebuilt without the checkpoints ``exclude`` (from ``base`` or
    an older checkpoint, then the listed commits)."""
    cp = listing.checkpoint_at_or_below(version, excluding=frozenset(exclude))
    start = max(cp.version if cp else -1, base.version if base else -1)
    return all(v in listing.commits for v in range(start + 1, version + 1))
