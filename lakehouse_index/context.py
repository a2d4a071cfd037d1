"""A table and its side-car indexes, as every action, query and workflow is given them.

:class:`IndexContext` holds what the layers below the facade need to reach one table's
indexes: the table's source (connector), the storage and root of its indexes, the
tuning :class:`~lakehouse_index.config.Config`, and this process's view of each index log
(cached, so a warm lookup reads one log slot). ``lakehouse_index.api.Table`` wraps one;
nothing below the facade calls back into ``Table``.

Example::

    from lakehouse_index.context import IndexContext

    ctx = IndexContext.open(source, storage, "file:///data/t/_lakehouse_index", Config())
    [i.name for i in ctx.indexes()]          # every index that exists
    ctx.log("by_email").latest_stable()      # the entry readers use
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakehouse_index.config import Config
from lakehouse_index.errors import ReadOnlyTableError
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.log.entry import IndexState, LogEntry
from lakehouse_index.log.store import INDEX_DIR_NAME, IndexCatalog, IndexLog
from lakehouse_index.source import Snapshot, TableSource
from lakehouse_index.spec import IndexSpec, validate_index_name


@dataclass(frozen=True)
class IndexInfo:
    """What ``Table.indexes()`` reports about one index."""

    name: str
    #: The kind's name (``"secondary"``, ``"covering"``, ``"skipping"``, or a plug-in's).
    kind: str
    state: IndexState
    indexed_version: int | None
    size_bytes: int
    rows: int
    files: int
    spec: IndexSpec
    log_entry: int


@dataclass(frozen=True)
class IndexStatus:
    """One index against the table's latest version: what ``Table.index_status()`` reports."""

    info: IndexInfo
    #: The table's latest version.
    table_version: int
    #: Table commits after the indexed version (None while a first build has no data yet).
    lag: int | None
    #: The table version quick refreshes recorded changes up to, not yet applied to the index
    #: data (None: nothing pending).
    pending_version: int | None
    #: Data files those quick refreshes recorded: appended (scanned at query time), removed,
    #: or with new row-level deletes.
    pending_files: int


@dataclass(frozen=True)
class IndexContext:
    """One table's indexes: its source, where the indexes live, the config, the cached logs.

    ``with_config`` gives a context with other tuning knobs that shares the cached logs.
    """

    source: TableSource
    storage: Storage
    index_root: str
    config: Config
    catalog: IndexCatalog
    _logs: dict[str, IndexLog] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def open(cls, source: TableSource, storage: Storage, index_root: str, config: Config) -> IndexContext:
        """The context of ``source``'s indexes under ``index_root``."""
        return cls(
            source, storage, index_root, config, IndexCatalog(storage, index_root, source.uri, config.log)
        )

    def with_config(self, config: Config) -> IndexContext:
        """This context with ``config`` (the same logs and their cached entries)."""
        return IndexContext(self.source, self.storage, self.index_root, config, self.catalog, self._logs)

    # ------------------------------------------------------------------ the table

    @property
    def uri(self) -> str:
        """The table root URI."""
        return self.source.uri

    @property
    def format(self) -> str:
        """The table format's name (the connector's)."""
        return self.source.format_name

    def latest_snapshot(self) -> Snapshot:
        """The table's latest version (re-reads the table's log)."""
        return self.source.snapshot(self.source.latest_version())

    def check_writable(self) -> None:
        """ReadOnlyTableError when the table was opened with its indexes outside the table.

        A separate ``index_root`` is how a table is opened read-only: its indexes live
        elsewhere because this process may not write the table's location, so writes are
        refused (``sync_indexes`` and ``watch`` still maintain the indexes).
        """
        if self.index_root.rstrip("/") != join_uri(self.uri, INDEX_DIR_NAME):
            raise ReadOnlyTableError(
                f"{self.uri} is opened read-only (its indexes live under a separate index_root "
                f"{self.index_root}); writes are refused. Open it without index_root to write"
            )

    # ------------------------------------------------------------------ the indexes

    def log(self, name: str) -> IndexLog:
        """The log of index ``name`` (which may not exist yet); one object per name."""
        validate_index_name(name)
        log = self._logs.get(name)
        if log is None:
            log = self._logs[name] = self.catalog.log(name)
        return log

    def logs(self) -> list[IndexLog]:
        """The logs this context has opened so far."""
        return list(self._logs.values())

    def index_dir(self, name: str) -> str:
        """The folder of index ``name`` (its ``_log/`` and ``data/``)."""
        return join_uri(self.index_root, name)

    def latest_entries(self) -> list[LogEntry]:
        """The latest log entry of every index that exists."""
        out = []
        for name in self.catalog.names():
            latest = self.log(name).latest()
            if latest is not None and latest.state is not IndexState.DOES_NOT_EXIST:
                out.append(latest)
        return out

    def stable(self, entry: LogEntry) -> LogEntry:
        """``entry`` if stable, else the stable entry its index's operation in progress started from."""
        return entry if entry.state.is_stable else self.log(entry.name).latest_stable() or entry

    def info(self, entry: LogEntry) -> IndexInfo:
        """What ``entry``'s index reports (its data as of the stable entry)."""
        stable = self.stable(entry)
        return IndexInfo(
            name=entry.name,
            kind=entry.spec.kind,
            state=entry.state,
            indexed_version=stable.source.version if stable.state is not IndexState.DOES_NOT_EXIST else None,
            size_bytes=stable.content.size,
            rows=stable.content.rows,
            files=len(stable.content.files),
            spec=entry.spec,
            log_entry=entry.id,
        )

    def indexes(self) -> list[IndexInfo]:
        """Every index on the table that exists (vacuumed ones are not listed)."""
        return [self.info(e) for e in self.latest_entries()]

    def index_status(self) -> list[IndexStatus]:
        """Every index against the latest table version: lag and quick-refresh backlog.

        Reads the table's latest version once (``indexes()`` reads only the index logs).
        """
        entries = self.latest_entries()
        if not entries:
            return []
        version = self.source.latest_version()
        ordinal = self.source.version_info(version).ordinal
        out = []
        for entry in entries:
            stable = self.stable(entry)
            built = stable.state is not IndexState.DOES_NOT_EXIST
            pending = stable.pending
            out.append(
                IndexStatus(
                    info=self.info(entry),
                    table_version=version,
                    lag=max(0, ordinal - stable.source.ordinal) if built else None,
                    pending_version=pending.version if pending else None,
                    pending_files=(
                        len(pending.appended) + len(pending.removed) + len(pending.delete_changed)
                        if pending
                        else 0
                    ),
                )
            )
        return out
