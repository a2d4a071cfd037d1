"""The index log store: immutable JSON entries created put-if-absent, read with a cache.

Layout (see docs/FORMAT.md)::

    <index_dir>/_log/00000000000000000000.json   entry 0
    <index_dir>/_log/00000000000000000001.json   entry 1 ...
    <index_dir>/_log/00000000000000000001.expired  expiry mark: every slot below 1 is expired
    <index_dir>/data/<uuid>/...                  index data (named by entries)

Each slot is written once, with :meth:`Storage.put_if_absent` (local: temp file +
``link(2)``; S3: conditional ``PUT`` with ``If-None-Match: *``). Whoever creates slot
``n`` owns it; a second writer gets :class:`~lakehouse_index.errors.ConcurrentIndexUpdate`.
Entries never change, so they are cached forever once read.

Finding the newest entry is cheap: the first call lists ``_log/`` once (and reads the
listed entries concurrently), later calls only try to read the slot after the highest id
seen (one request when nothing changed) and keep going upward while slots exist. Every
``relist_after_s`` seconds the log is listed again, which picks up entries removed by
:meth:`IndexLog.expire` (expiry only removes entries older than ``min_retention_s`` >
``relist_after_s``, so a cached view can never miss a newer entry because of a hole).

Expiry writes an *expiry mark* before it deletes a slot. A process that was cancelled while it
ran still writes its final entry into the slot after its transient one; if that slot was
expired meanwhile, put-if-absent succeeds there. Readers ignore every slot below the highest
mark, and the writer checks for a mark above its slot after each write, so such a late entry is
never read and its operation fails with ``ConcurrentIndexUpdate``, as if the slot had been taken.

Example::

    from lakehouse_index.io import Storage
    from lakehouse_index.log.store import IndexLog, IndexCatalog

    storage = Storage.for_uri("s3://bucket/t", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    log = IndexLog(storage, "s3://bucket/t/_lakehouse_index/by_email")
    snap = log.latest_stable()          # what readers use; None if the index has no entry yet
    IndexCatalog(storage, "s3://bucket/t/_lakehouse_index").names()   # ["by_email", ...]
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable

import pyarrow.fs as pafs

from lakehouse_index.config import LogConfig
from lakehouse_index.errors import ConcurrentIndexUpdate, IndexLogError
from lakehouse_index.io import ObjectExistsError, Storage, join_uri
from lakehouse_index.io.parallel import shared_pool
from lakehouse_index.log.entry import IndexState, LogEntry

#: The folder of side-car indexes under a table root (the default index root).
INDEX_DIR_NAME = "_lakehouse_index"
LOG_DIR = "_log"
_ENTRY_NAME = re.compile(r"^(\d{20})\.json$")
_MARK_NAME = re.compile(r"^(\d{20})\.expired$")
#: Listings a reader makes while the entries it listed keep being expired before it reads them.
_MAX_RELISTS = 100
#: Log entries a cold reader fetches at once (each is a small object: the round trip dominates).
_MAX_CONCURRENT_READS = 16


def entry_file_name(entry_id: int) -> str:
    """The file name of log slot ``entry_id`` (20 zero-padded digits, like Delta's log)."""
    if entry_id < 0 or entry_id >= 10**20:
        raise ValueError(f"log entry id out of range: {entry_id}")
    return f"{entry_id:020d}.json"


def parse_entry_file_name(name: str) -> int | None:
    """The id of a log file name, or ``None`` for anything else (temp files, strays)."""
    m = _ENTRY_NAME.match(name)
    return int(m.group(1)) if m else None


def expiry_mark_name(floor: int) -> str:
    """The file name of the expiry mark saying every slot below ``floor`` is expired."""
    return f"{floor:020d}.expired"


def parse_expiry_mark_name(name: str) -> int | None:
    """The floor an expiry mark's file name gives, or ``None`` for any other name."""
    m = _MARK_NAME.match(name)
    return int(m.group(1)) if m else None


def _floor_and_ids(names: Iterable[str]) -> tuple[int, list[int]]:
    """From the names in ``_log/``: the expiry floor (0 without a mark) and the sorted ids of
    the entries at or above it (entries below it are expired, or late writes into expired slots)."""
    floor, ids = 0, []
    for name in names:
        entry_id = parse_entry_file_name(name)
        if entry_id is not None:
            ids.append(entry_id)
            continue
        mark = parse_expiry_mark_name(name)
        if mark is not None:
            floor = max(floor, mark)
    return floor, sorted(i for i in ids if i >= floor)


class IndexLog:
    """The operation log of one index directory.

    Thread-safe; one instance per index and process is enough (it caches entries).
    ``index_dir``'s last path component is the index name: every entry read must carry
    that name in its spec (an entry copied into the wrong folder is refused).
    With ``table_uri``, entries recorded for the table at another URI (a table moved or
    copied together with its indexes) are read with their data-file paths rebased onto it.
    ``config`` (default ``LogConfig()``) gives ``relist_after_s`` (unless passed here) and
    the default ``min_retention_s`` of :meth:`expire`.
    """

    def __init__(
        self,
        storage: Storage,
        index_dir: str,
        *,
        table_uri: str | None = None,
        relist_after_s: float | None = None,
        config: LogConfig | None = None,
    ) -> None:
        self.config = config or LogConfig()
        self.storage = storage
        self.table_uri = table_uri
        self.index_dir = index_dir.rstrip("/")
        self.name = self.index_dir.rsplit("/", 1)[-1]
        self.log_dir = join_uri(self.index_dir, LOG_DIR)
        self.relist_after_s = self.config.relist_after_s if relist_after_s is None else relist_after_s
        self._lock = threading.RLock()
        self._entries: dict[int, LogEntry] = {}
        self._ids: list[int] = []  # sorted ids known to exist
        self._listed_at: float | None = None  # monotonic time of the last full listing

    def __repr__(self) -> str:
        return f"IndexLog({self.index_dir!r})"

    # ------------------------------------------------------------------ paths

    def entry_path(self, entry_id: int) -> str:
        """Full URI of log slot ``entry_id``."""
        return join_uri(self.log_dir, entry_file_name(entry_id))

    def uri(self, relative: str) -> str:
        """Full URI of a path relative to the index directory (e.g. an ``IndexFile.path``)."""
        return join_uri(self.index_dir, relative)

    # ------------------------------------------------------------------ listing

    def refresh(self, *, full: bool = False) -> None:
        """Bring the view of the log up to date.

        A full listing happens on first use, when ``full`` is set, and when the last one
        is older than ``relist_after_s``; otherwise only the slots above the highest
        known id are probed (one request when nothing changed).
        """
        with self._lock:
            stale = self._listed_at is None or time.monotonic() - self._listed_at > self.relist_after_s
            if full or stale:
                # A listing is as fresh as a probe: probing after it would cost a round trip
                # and find an entry only if one was written in between, which either view may miss.
                self._list_all()
            else:
                self._probe_upward()

    def _names(self) -> list[str]:
        return [status.path.rsplit("/", 1)[-1] for status in self.storage.list_dir(self.log_dir)]

    def _list_all(self) -> None:
        _, ids = _floor_and_ids(self._names())
        self._ids = ids
        # Forget cached entries that were expired by someone else.
        kept = set(ids)
        self._entries = {i: e for i, e in self._entries.items() if i in kept}
        self._listed_at = time.monotonic()

    def _probe_upward(self) -> None:
        # Writers only ever create slot n+1 after n exists, so the newest entries are
        # found by walking up from the highest id known until a slot is missing.
        nxt = self._ids[-1] + 1 if self._ids else 0
        while True:
            entry = self._try_read(nxt)
            if entry is None:
                return
            self._ids.append(nxt)
            nxt += 1

    def list_ids(self) -> list[int]:
        """Ids of every retained entry, ascending."""
        with self._lock:
            self.refresh()
            return list(self._ids)

    # ------------------------------------------------------------------ reading

    def _try_read(self, entry_id: int) -> LogEntry | None:
        cached = self._entries.get(entry_id)
        if cached is not None:
            return cached
        path = self.entry_path(entry_id)
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            return None
        entry = LogEntry.from_json(data, where=path)
        if entry.id != entry_id:
            raise IndexLogError(f"index log entry {path} holds id {entry.id}, not {entry_id}")
        if entry.name != self.name:
            raise IndexLogError(f"index log entry {path} belongs to index {entry.name!r}, not {self.name!r}")
        if self.table_uri is not None:
            entry = entry.rebased(self.table_uri)
        self._entries[entry_id] = entry
        return entry

    def read(self, entry_id: int) -> LogEntry:
        """Entry ``entry_id`` (cached); ``IndexLogError`` if it does not exist or is unreadable."""
        with self._lock:
            entry = self._try_read(entry_id)
        if entry is None:
            path = self.entry_path(entry_id)
            raise IndexLogError(f"index {self.name!r} has no log entry {entry_id} ({path})")
        return entry

    def entries(self) -> list[LogEntry]:
        """Every retained entry, ascending by id."""
        with self._lock:
            ids = self.list_ids()
            for _ in range(_MAX_RELISTS):
                missing = [i for i in ids if i not in self._entries]
                if len(missing) > 1 and self.config.reads_concurrently(self.storage.concurrent_reads):
                    # A cold reader of an object store: fetch them concurrently, one round trip.
                    list(shared_pool("index-log-reads", _MAX_CONCURRENT_READS).map(self._try_read, missing))
                found = [self._try_read(i) for i in ids]
                if all(e is not None for e in found):
                    return [e for e in found if e is not None]
                # An id listed but gone by now was expired concurrently: the view may end below
                # newer entries too (a hole), so list again rather than return a partial log.
                self._relist()
                ids = list(self._ids)
            raise IndexLogError(
                f"index {self.name!r}: entries listed in {self.log_dir} kept vanishing before they "
                f"could be read ({_MAX_RELISTS} listings)"
            )

    def latest(self) -> LogEntry | None:
        """The newest entry (possibly transient), or ``None`` for an empty log."""
        with self._lock:
            self.refresh()
            while self._ids:
                entry = self._try_read(self._ids[-1])
                if entry is not None:
                    return entry
                self._relist()
            return None

    def _relist(self) -> None:
        """An id of this view was expired by another process since the view was listed (a
        zero-retention vacuum, a purge): the newer entries lie beyond a hole, list again."""
        self._list_all()
        self._probe_upward()

    def latest_stable(self) -> LogEntry | None:
        """The newest entry in a stable state: the snapshot readers use.

        ``None`` when no operation ever finished. Check ``state`` (ACTIVE, DELETED or
        DOES_NOT_EXIST) before serving queries from it.
        """
        with self._lock:
            self.refresh()
            while True:
                for entry_id in reversed(self._ids):
                    entry = self._try_read(entry_id)
                    if entry is None:
                        break
                    if entry.state.is_stable:
                        return entry
                else:
                    return None
                self._relist()

    def stable_entries(self) -> list[LogEntry]:
        """Every retained entry in a stable state, ascending by id (all incarnations)."""
        return [e for e in self.entries() if e.state.is_stable]

    def active_snapshots(self) -> list[LogEntry]:
        """ACTIVE entries of the current incarnation: the index snapshots queries may use.

        Entries before the last DOES_NOT_EXIST entry belong to a vacuumed incarnation
        whose data is gone, so they are excluded. Empty when the index is not ACTIVE.
        """
        stable = self.stable_entries()
        if not stable or stable[-1].state is not IndexState.ACTIVE:
            return []
        start = 0
        for i, e in enumerate(stable):
            if e.state is IndexState.DOES_NOT_EXIST:
                start = i + 1
        return [e for e in stable[start:] if e.state is IndexState.ACTIVE]

    # ------------------------------------------------------------------ writing

    def write(self, entry: LogEntry) -> None:
        """Create slot ``entry.id`` put-if-absent.

        Raises ``ConcurrentIndexUpdate`` (retryable: re-read the log, re-check the state,
        redo the operation) when another writer created that slot first.
        """
        if entry.name != self.name:
            raise IndexLogError(f"entry for index {entry.name!r} cannot go into the log of {self.name!r}")
        path = self.entry_path(entry.id)
        try:
            self.storage.put_if_absent(path, entry.to_json())
        except ObjectExistsError as e:
            raise ConcurrentIndexUpdate(
                f"index {self.name!r}: log slot {entry.id} ({path}) was already written by "
                "another writer; re-read the index and retry the operation"
            ) from e
        floor, _ = _floor_and_ids(self._names())
        if floor > entry.id:
            # The slot had been taken and then expired (this operation was cancelled while it
            # ran): the entry is below the expiry mark, no reader sees it. Remove it.
            self.storage.delete(path)
            raise ConcurrentIndexUpdate(
                f"index {self.name!r}: log slot {entry.id} ({path}) was taken by another writer "
                "and has expired since (this operation was cancelled); re-read the index and retry"
            )
        with self._lock:
            self._entries[entry.id] = entry
            if not self._ids or entry.id > self._ids[-1]:
                self._ids.append(entry.id)
            elif entry.id not in self._ids:
                self._ids.append(entry.id)
                self._ids.sort()

    def expire(
        self,
        entry_ids: Iterable[int],
        *,
        min_retention_s: float | None = None,
        now_ms: int | None = None,
    ) -> list[int]:
        """Delete old log entries (e.g. so vacuum can drop the data only they name).

        Removes the oldest retained entries up to the first one that must stay: one not in
        ``entry_ids``, the latest stable entry or anything after it, or an entry whose file is
        younger than ``min_retention_s`` (by storage mtime; default ``config.min_retention_s``),
        so that readers probing from a cached view (see ``relist_after_s``) never step into a
        hole. ``min_retention_s=0`` skips the age check (zero-retention vacuum, erasure). An
        expiry mark for the new floor is written before any entry is deleted (module doc).
        Returns the ids removed.
        """
        with self._lock:
            self.refresh(full=True)
            stable = self.latest_stable()
            if stable is None:
                return []
            if min_retention_s is None:
                min_retention_s = self.config.min_retention_s
            if min_retention_s and min_retention_s < self.relist_after_s:
                raise ValueError("min_retention_s must exceed relist_after_s (or be 0)")
            now = time.time() * 1000 if now_ms is None else now_ms
            statuses = self.storage.list_dir(self.log_dir)
            old_floor, _ = _floor_and_ids(s.path.rsplit("/", 1)[-1] for s in statuses)
            mtimes = {
                entry_id: s.mtime_ms
                for s in statuses
                if (entry_id := parse_entry_file_name(s.path.rsplit("/", 1)[-1])) is not None
            }
            wanted = set(entry_ids)
            # Oldest first, up to the first slot that stays: the expired slots are those below a floor.
            floor = old_floor
            for entry_id in sorted(i for i in mtimes if i >= old_floor):
                too_young = min_retention_s and now - mtimes[entry_id] < min_retention_s * 1000
                if entry_id >= stable.id or entry_id not in wanted or too_young:
                    break
                floor = entry_id + 1
            removed = sorted(i for i in mtimes if old_floor <= i < floor)
            if floor > old_floor:
                # The mark first: from now on no reader uses a slot below it, and a late write
                # into one of them is detected by its writer (module doc).
                self.storage.write_bytes(join_uri(self.log_dir, expiry_mark_name(floor)), b"{}")
            # Entries below the floor go (late writes into expired slots included), then older marks.
            for entry_id in sorted(i for i in mtimes if i < floor):
                self.storage.delete(self.entry_path(entry_id))
            for s in statuses:
                mark = parse_expiry_mark_name(s.path.rsplit("/", 1)[-1])
                if mark is not None and mark < floor:
                    self.storage.delete(s.path)
            self._list_all()
            return removed


class IndexCatalog:
    """The indexes under one index root (``<table>/_lakehouse_index`` by default).

    ``table_uri``: the table the indexes are read for; ``config``: of every log (see
    :class:`IndexLog`).
    """

    def __init__(
        self, storage: Storage, root: str, table_uri: str | None = None, config: LogConfig | None = None
    ) -> None:
        self.storage = storage
        self.root = root.rstrip("/")
        self.table_uri = table_uri
        self.config = config or LogConfig()

    def names(self) -> list[str]:
        """Names of the index folders that hold a ``_log`` with at least one entry, sorted."""
        fs, base = self.storage.arrow(self.root)
        infos = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=False))
        names = []
        for info in infos:
            if info.type != pafs.FileType.Directory:
                continue
            if any(
                parse_entry_file_name(s.path.rsplit("/", 1)[-1]) is not None
                for s in self.storage.list_dir(join_uri(self.root, info.base_name, LOG_DIR))
            ):
                names.append(info.base_name)
        return sorted(names)

    def log(self, name: str) -> IndexLog:
        """The log of index ``name`` (which may not exist yet)."""
        return IndexLog(self.storage, join_uri(self.root, name), table_uri=self.table_uri, config=self.config)
