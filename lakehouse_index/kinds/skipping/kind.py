"""The skipping index plug-in: one statistics row per data file, pruning files for any predicate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_index.kinds.base import Access, BuildContext, IndexKind, IndexLocation, IndexWork, relative_to
from lakehouse_index.kinds.skipping.files import build_files, load, write_skipping_file
from lakehouse_index.kinds.skipping.prune import prune
from lakehouse_index.kinds.skipping.schema import validate_spec
from lakehouse_index.log.entry import Content, IndexFile, Level, LogEntry, SourceState
from lakehouse_index.source import FileEntry, Snapshot
from lakehouse_index.spec import IndexSpec, SkippingIndex

if TYPE_CHECKING:
    from lakehouse_index.expressions import Predicate

FILE_NAME = "skipping.parquet"


class SkippingKind(IndexKind):
    """Per-file statistics (always computed in process: one row per data file).

    Row-level deletes need no entries (statistics of a superset of the live rows are
    conservative) and removed files none either (lineage drops them).
    """

    name = "skipping"
    spec_type = SkippingIndex
    #: Each skipping file records its columns' identity (``schema.column_identity``).
    tracks_column_identity = False

    def validate(self, spec: IndexSpec, snapshot: Snapshot) -> None:
        assert isinstance(spec, SkippingIndex)
        validate_spec(spec, snapshot)

    def index_files(self, ctx: BuildContext, work: IndexWork) -> tuple[IndexFile, ...]:
        assert isinstance(work.spec, SkippingIndex) and work.rows is None
        rel = relative_to(ctx.index_dir, ctx.data_path(FILE_NAME))
        pairs = [(j.entry, j.file_id) for j in work.jobs]
        snap, level, group = work.snapshot, work.level, ctx.config.skipping_row_group_rows
        return build_files(ctx.source, snap, work.spec, pairs, ctx.storage, ctx.index_dir, rel, level, group)

    def needs_optimize(self, stable: LogEntry, mode: str) -> bool:
        removed = any(f.removed_ordinal is not None for f in stable.source.files)
        return len(stable.content.files) > 1 or removed

    def optimize(self, ctx: BuildContext, stable: LogEntry, mode: str) -> tuple[SourceState, Content]:
        """Both modes: one file with the rows of the live files."""
        state = stable.source.without_removed()
        live = [f.id for f in state.files]
        data = load(ctx.storage, ctx.index_dir, stable.content.files, live)
        rel = relative_to(ctx.index_dir, ctx.data_path(FILE_NAME))
        group = ctx.config.skipping_row_group_rows
        files = (
            (write_skipping_file(data.rows, ctx.storage, ctx.index_dir, rel, Level.BASE, group),)
            if live
            else ()
        )
        return state, Content(files, stable.source.ordinal)

    def access(self, spec: IndexSpec, predicate: Predicate) -> Access:
        return Access(prunes=predicate.node is not None and bool(set(spec.columns) & predicate.columns))

    def prune(
        self, at: IndexLocation, entry: LogEntry, predicate: Predicate, covered: dict[int, FileEntry]
    ) -> frozenset[int]:
        data = load(at.storage, at.index_dir, entry.content.files, list(covered), at.target)
        return frozenset(prune(data, predicate, covered))
