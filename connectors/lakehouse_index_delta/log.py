"""The ``_delta_log`` of one table as a source reads it: listings, commit files, new versions.

The latest listing is authoritative (:mod:`lakehouse_index_delta.log_files` classifies it).
The log is trusted to grow only by new commits: a listing in which a commit file seen
before has another size or modification time, or which ends before the newest commit
seen, means the log was replaced (the table deleted and created again at the same
location), and the owner is told to drop what it read. Versions below the oldest one the
latest listing can still rebuild (the log was cleaned up) are refused, as a fresh source
does.

Commit files are read by name and their parsed actions cached (bounded LRU), so a tailer
polling with the last version it saw reads only the new commits; the log is listed only
to tell "no new commit" from "cleaned up" or a gap. A replay reads the commits it needs
together (:meth:`DeltaLog.prefetch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from lakehouse_index.source import (
    FileIO,
    HistoryTruncatedError,
    NotATableError,
    SizedCache,
    TableFormatError,
    VersionNotFoundError,
)
from lakehouse_index_delta.actions import Actions, parse_json_lines
from lakehouse_index_delta.log_files import LogListing, list_log

#: Commit files a replay reads together (``FileIO.read_many``; concurrently on an object store).
PREFETCH = 64


class DeltaLog:
    """Listings and parsed commit files of one table's ``_delta_log`` (cached)."""

    def __init__(self, io: FileIO, table_root: str, on_replaced: Callable[[], None]) -> None:
        """``on_replaced`` is called when a listing shows another log than the previous one
        did: the caller then drops what it built from the old log (this object's reads are
        dropped already)."""
        self.io = io
        self.table_root = table_root
        self.uri = table_root + "/_delta_log"
        self._on_replaced = on_replaced
        self.forget()

    def forget(self) -> None:
        """Drop every listing and commit read."""
        self._listing: LogListing | None = None
        self._listed_at = 0.0
        self._probed_latest = -1  # newest commit seen by probing since the last listing
        # Parsed commits (bounded: CacheConfig.delta_commit_entries).
        self._commits: SizedCache[int, Actions] = SizedCache("delta_commit_entries")
        self._commit_mtime: dict[int, int] = {}

    # ------------------------------------------------------------------ listings

    def relist(self) -> LogListing:
        """List ``_delta_log`` again (and drop everything read when the log was replaced)."""
        listing = list_log(self.io, self.uri)
        if self._replaced(listing):
            self.forget()
            self._on_replaced()
        self._listing = listing
        self._listed_at = time.monotonic()
        self._probed_latest = -1
        for v, st in listing.commits.items():
            self._commit_mtime[v] = st.mtime_ms
        return listing

    def listing(self) -> LogListing:
        """The latest listing (listing the log when there is none yet)."""
        return self._listing if self._listing is not None else self.relist()

    def _replaced(self, listing: LogListing) -> bool:
        """Whether ``listing`` shows another log than the previous listing did.

        Commit files are never rewritten or removed newest first, so a commit file listed
        before with another size or modification time, or a log ending before the newest
        commit seen, means the table was deleted and created again at the same location.
        Compares two listings: no request of its own.
        """
        before = self._listing
        if before is None:
            return False
        seen = max(before.latest_version if before.latest_version is not None else -1, self._probed_latest)
        if listing.latest_version is None or listing.latest_version < seen:
            return True
        for v, st in listing.commits.items():
            old = before.commits.get(v)
            if old is not None and (old.size != st.size or old.mtime_ms != st.mtime_ms):
                return True
        return False

    def readable(self) -> list[int]:
        """The versions the latest listing can rebuild, oldest first."""
        return self.listing().readable

    def check_not_cleaned_up(self, version: int) -> None:
        """HistoryTruncatedError when the latest listing shows ``version`` was cleaned up.

        What was cached of it is not served: a freshly opened source could not read it.
        Uses the listing at hand (no request).
        """
        if self._listing is None:
            return
        readable = self.readable()
        if readable and version < readable[0]:
            raise HistoryTruncatedError(
                f"version {version} was cleaned up from {self.uri}; resync from version {readable[0]}, "
                "the oldest readable one"
            )

    # ------------------------------------------------------------------ commits

    def commit_uri(self, version: int) -> str:
        """The URI of commit file ``version``."""
        return f"{self.uri}/{version:020d}.json"

    def cached(self, version: int) -> bool:
        """Whether commit ``version`` is parsed already (reading it costs nothing)."""
        return version in self._commits

    def read_commit(self, version: int) -> Actions | None:
        """Parsed commit ``version`` (cached), or None when its file does not exist."""
        cached = self._commits.get(version)
        if cached is not None:
            return cached
        uri = self.commit_uri(version)
        try:
            data = self.io.read_bytes(uri)
        except FileNotFoundError:
            return None
        actions = parse_json_lines(data, self.table_root, uri)
        self._commits[version] = actions
        return actions

    def prefetch(self, listing: LogListing, start: int, upto: int) -> None:
        """Read the listed commits from ``start`` (up to ``PREFETCH`` of them, not past ``upto``
        nor a compaction file's start) in one ``read_many``, into the commit cache: on an
        object store a replay then waits one round trip per batch, not one per commit."""
        compacted = {c.start for c in listing.compactions}
        wanted: list[int] = []
        v = start
        while v <= upto and len(wanted) < PREFETCH and v in listing.commits and v not in self._commits:
            if v in compacted and v != start:
                break
            wanted.append(v)
            v += 1
        if len(wanted) < 2:
            return
        uris = [self.commit_uri(w) for w in wanted]
        for w, uri, data in zip(wanted, uris, self.io.read_many(uris), strict=True):
            if data is not None:
                self._commits[w] = parse_json_lines(data, self.table_root, uri)

    def missing_commit(self, version: int) -> Exception:
        """The error for a commit file that is not there, decided from a fresh listing."""
        listing = self.relist()
        latest = listing.latest_version
        if latest is None or version > latest:
            return VersionNotFoundError(f"version {version} does not exist (latest is {latest})")
        later_cp = [c.version for c in listing.checkpoints if c.version >= version]
        earliest_commit = min(listing.commits) if listing.commits else None
        if earliest_commit is None or version < earliest_commit:
            return HistoryTruncatedError(
                f"commit {self.commit_uri(version)} was cleaned up"
                + (f"; resync from the checkpoint at version {later_cp[0]}" if later_cp else "")
            )
        return TableFormatError(
            f"gap in the Delta log: {self.commit_uri(version)} is missing but later commits exist"
        )

    def raw_mtime(self, version: int) -> int:
        """The commit file's modification time (a checkpoint's when only that is left)."""
        mtime = self._commit_mtime.get(version)
        if mtime is None:
            mtime = self._stat_mtime(self.commit_uri(version))
            if mtime is None:
                cps = [c for c in self.listing().checkpoints if c.version == version]
                if not cps:
                    raise self.missing_commit(version)
                mtime = cps[0].files[0].mtime_ms
            self._commit_mtime[version] = mtime
        return mtime

    def _stat_mtime(self, uri: str) -> int | None:
        try:
            return self.io.stat(uri).mtime_ms
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ new versions

    def latest_version(self, max_age_s: float) -> int:
        """The newest version: sees commits by other engines.

        With a listing younger than ``max_age_s``, only the next commits are probed (one
        read of an absent object when nothing is new: lookups call this every time);
        otherwise ``_delta_log`` is listed again.
        """
        listing = self._listing
        if (
            listing is None
            or listing.latest_version is None
            or (time.monotonic() - self._listed_at > max_age_s)
        ):
            listing = self.relist()
        latest = listing.latest_version
        if latest is None:
            raise NotATableError(f"{self.uri} holds no Delta commit or checkpoint")
        probed = max(latest, self._probed_latest)
        # The probe reads the next commit (kept: the new version's replay needs it): one
        # request when it is absent, where an existence check on an object store costs two
        # (a HEAD, then a listing to tell a missing object from a directory).
        while self.read_commit(probed + 1) is not None:
            probed += 1
        self._probed_latest = probed
        return probed

    def may_exist_later(self, v: int, start: int, max_age_s: float) -> bool:
        """Whether a missing commit ``v`` might be a gap or cleaned up rather than not yet written.

        Answered without listing the log when possible, so an idle poll costs one probe:
        a listing that already shows a newer version means a gap or cleanup; a listing
        older than ``max_age_s`` is refreshed (bounding how long a gap can go unnoticed);
        otherwise commit v-1 being present (just read, or checked) means v is simply not
        written yet, since cleanup deletes commits oldest first.
        """
        listing = self._listing
        if listing is None or time.monotonic() - self._listed_at > max_age_s:
            return True
        if listing.latest_version is not None and listing.latest_version >= v:
            return True
        if v - 1 > start:
            return False
        return v == 0 or not self.io.exists(self.commit_uri(v - 1))
