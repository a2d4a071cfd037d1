"""When each Delta version was committed, and the version current at a given time.

With in-commit timestamps enabled (``delta.enableInCommitTimestamps``), versions from
``delta.inCommitTimestampEnablementVersion`` on (all versions when the table was created
with it) use ``commitInfo.inCommitTimestamp``; other versions use the commit file's
modification time, made monotonic as Delta's reference implementation does (Spark's
``DeltaHistoryManager``): a version's time is the later of its file's modification time
and one millisecond after the previous version's time, so clock skew between writers (or
a log copied file by file) cannot put a version before an older one.
"""

from __future__ import annotations

from bisect import bisect_right

from lakehouse_index.source import HistoryTruncatedError, TableFormatError, VersionNotFoundError
from lakehouse_index_delta.actions import Actions, Metadata
from lakehouse_index_delta.log import DeltaLog
from lakehouse_index_delta.log_files import LogListing


def ict_start(metadata: Metadata | None) -> int | None:
    """First version whose timestamp is its in-commit timestamp, or None."""
    if metadata is None:
        return None
    config = metadata.config
    if config.get("delta.enableInCommitTimestamps", "false").lower() != "true":
        return None
    return int(config.get("delta.inCommitTimestampEnablementVersion", "0"))


class VersionTimes:
    """Timestamps of the versions of one log (file times computed once per listing)."""

    def __init__(self, log: DeltaLog) -> None:
        self._log = log
        self._listing: LogListing | None = None  # the listing ``_file_times`` were computed from
        self._file_times: dict[int, int] = {}

    def timestamp(self, version: int, actions: Actions | None, metadata: Metadata | None) -> int:
        """The timestamp of ``version`` under the latest ``metadata`` (``actions``: its commit, if read)."""
        ict_from = ict_start(metadata)
        if ict_from is not None and version >= ict_from:
            if actions is None:
                actions = self._log.read_commit(version)
            if actions is not None and actions.in_commit_timestamp is not None:
                return actions.in_commit_timestamp
            raise TableFormatError(
                f"{self._log.commit_uri(version)}: in-commit timestamps are enabled but commitInfo has none"
            )
        return self.file_time(version)

    def file_time(self, version: int) -> int:
        """The version's timestamp from file modification times, made monotonic.

        The later of the commit file's modification time and one millisecond after the
        previous version's timestamp, from the oldest version the latest listing can
        rebuild on (Spark's ``DeltaHistoryManager.monotonizeCommitTimestamps``; deltalake
        agrees where its binary search over raw times happens to). Versions the listing
        covers cost nothing; a newer one found by probing costs a ``stat`` per version. When
        the walk from the listing's newest version meets a commit a log cleanup removed since
        the listing was taken, the chain starts again from a fresh listing's oldest version.
        """
        try:
            return self._file_time(version, self._log.listing())
        except HistoryTruncatedError:
            return self._file_time(version, self._log.relist())

    def _file_time(self, version: int, listing: LogListing) -> int:
        if self._listing is not listing:
            self._file_times = _monotonic_times(listing)
            self._listing = listing
        times = self._file_times
        found = times.get(version)
        if found is not None:
            return found
        last = next(reversed(times), None)
        end = listing.latest_version
        if last is None or end is None or version <= end or last < end:
            # Not on a chain of readable versions (below the oldest, or after a gap).
            return self._log.raw_mtime(version)
        previous = times[last]
        for v in range(last + 1, version + 1):
            previous = max(self._log.raw_mtime(v), previous + 1)
            times[v] = previous
        return previous

    def version_at(
        self, timestamp_ms: int, listing: LogListing, readable: list[int], metadata: Metadata | None
    ) -> int:
        """The latest of the ``readable`` versions of ``listing`` committed at or before ``timestamp_ms``.

        Timestamps are those of :meth:`timestamp` (monotonic), so this is a binary search
        over one listing: file times cost nothing, and with in-commit timestamps only
        O(log n) commit files are read. With in-commit timestamps enabled after the table was
        created, a time at or after ``delta.inCommitTimestampEnablementTimestamp`` is looked
        for among the versions from ``delta.inCommitTimestampEnablementVersion`` on, an older
        one among the versions before it (the Delta protocol's rule).
        """
        ict_from = ict_start(metadata)
        by_file = [v for v in readable if ict_from is None or v < ict_from]
        # An in-commit timestamp is in the commit file: a version left only as a checkpoint has none.
        by_ict = [v for v in readable if ict_from is not None and v >= ict_from and v in listing.commits]
        if by_ict and (not by_file or timestamp_ms >= self._ict_enabled_at(metadata, by_ict[0])):
            candidates = by_ict
            i = bisect_right(by_ict, timestamp_ms, key=lambda v: self.timestamp(v, None, metadata))
        else:
            candidates = by_file
            i = bisect_right(by_file, timestamp_ms, key=self.file_time)
        if i == 0:
            raise VersionNotFoundError(f"no version was committed at or before {timestamp_ms} ms")
        return candidates[i - 1]

    def _ict_enabled_at(self, metadata: Metadata | None, first_ict_version: int) -> int:
        """When in-commit timestamps were enabled: the table property, else the first one's ICT."""
        raw = metadata.config.get("delta.inCommitTimestampEnablementTimestamp") if metadata else None
        try:
            return int(raw) if raw is not None else self.timestamp(first_ict_version, None, metadata)
        except ValueError:
            return self.timestamp(first_ict_version, None, metadata)


def _monotonic_times(listing: LogListing) -> dict[int, int]:
    """Monotonic file times of the versions ``listing`` can rebuild (see :meth:`VersionTimes.file_time`)."""
    times: dict[int, int] = {}
    previous: int | None = None
    checkpoint_times = {c.version: c.files[0].mtime_ms for c in listing.checkpoints}
    for v in listing.readable:
        st = listing.commits.get(v)
        raw = st.mtime_ms if st is not None else checkpoint_times[v]
        previous = raw if previous is None else max(raw, previous + 1)
        times[v] = previous
    return times
