"""What rows of its base a write's outcome depends on (:class:`ReadSet`), and which files hold them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.matching import match_keys
from lakehouse_index.read.scan import scan_files
from lakehouse_index.source import FileEntry, Snapshot, TableSource

#: The lineage column :func:`scan_files` adds (the FileEntry path of each row).
FILE_PATH = "_file_path"


@dataclass(frozen=True)
class ReadSet:
    """The rows of its base a write's outcome depends on.

    One of: nothing (an append); every row (``everything``: an overwrite or update without
    predicate); the rows where ``predicate`` is TRUE (delete, update, overwrite with a
    predicate); the rows whose ``key_columns`` equal those of a row of ``key_rows`` (an
    upsert's keys, the erase's subjects), matched as lookups match them
    (:func:`~lakehouse_index.expressions.matching.match_keys`; only a lost race asks, so the
    key set is built then). Build with the class methods.
    """

    everything: bool = False
    predicate: Predicate | None = None
    key_columns: tuple[str, ...] = ()
    key_rows: pa.Table | None = None

    @classmethod
    def nothing(cls) -> ReadSet:
        """An append's: it reads no row."""
        return cls()

    @classmethod
    def where(cls, predicate: Predicate | None) -> ReadSet:
        """The rows where ``predicate`` is TRUE; every row for None."""
        return cls(predicate=predicate) if predicate is not None else cls(everything=True)

    @classmethod
    def matching(cls, rows: pa.Table, on: tuple[str, ...]) -> ReadSet:
        """The rows whose ``on`` columns equal those of a row of ``rows``."""
        return cls(key_columns=on, key_rows=rows.select(list(on)))

    @cached_property
    def keys(self) -> frozenset[tuple[Any, ...]]:
        """The keys of ``key_rows``, as lookups match them (empty without)."""
        if self.key_rows is None:
            return frozenset()
        return frozenset(match_keys(self.key_rows, self.key_columns))

    @property
    def reads_rows(self) -> bool:
        """False for an append's read set."""
        return self.everything or self.predicate is not None or bool(self.key_columns)

    def describe(self) -> str:
        """A row of this set, for messages (never the keys' values)."""
        if self.everything:
            return "a row (the write reads every row)"
        if self.predicate is not None:
            return f"a row where {self.predicate.text or 'its predicate holds'}"
        return f"a row with one of the write's {len(self.keys)} key(s) on {list(self.key_columns)}"

    def first_holder(self, source: TableSource, snapshot: Snapshot, files: Iterable[FileEntry]) -> str | None:
        """The path of the first of ``files`` (files of ``snapshot``) that holds a live row of this
        set, None when none does; reads only the columns the set names."""
        todo = list(files)
        if not todo or not self.reads_rows:
            return None
        if self.everything:
            return next((f.path for f in todo if f.num_records != 0), None)
        if self.predicate is not None:
            where = Predicate.of(self.predicate, snapshot.schema)
            assert where is not None
            hits = scan_files(source, snapshot, todo, sorted(where.columns), where, with_lineage=True)
            return str(hits[FILE_PATH][0]) if hits.num_rows else None
        rows = scan_files(source, snapshot, todo, list(self.key_columns), with_lineage=True)
        for path, key in zip(rows[FILE_PATH].to_pylist(), match_keys(rows, self.key_columns), strict=True):
            if key in self.keys:
                return str(path)
        return None
