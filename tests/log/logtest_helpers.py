"""Synthetic index specs, sources and operation bodies for the log tests (also used by the
child processes of the race and crash tests, which import this module after a spawn)."""

from __future__ import annotations

from lakehouse_index.log.entry import Content, IndexFile, LogEntry, SourceFile, SourceState
from lakehouse_index.log.lifecycle import OpContext, OpResult
from lakehouse_index.spec import SecondaryIndex


def spec(name: str = "idx") -> SecondaryIndex:
    return SecondaryIndex(name, key="email", record_key="id")


def source(version: int = 0) -> SourceState:
    return SourceState(
        format="delta",
        table_uri="file:///t",
        version=version,
        ordinal=version,
        timestamp_ms=1000 + version,
        files=(SourceFile(id=0, path="part-0.parquet", size=10),),
        next_file_id=1,
    )


def write_token(ctx: OpContext, token: str, name: str = "part.bin") -> IndexFile:
    """Write a tiny index file holding ``token`` under the fresh data dir."""
    rel = ctx.data_path(name)
    data = token.encode()
    ctx.storage.write_bytes(ctx.log.uri(rel), data)
    return IndexFile(path=rel, rows=1, size=len(data))


def append_body(token: str):
    """A refresh-like body: add one file holding ``token``, advance the source version."""

    def body(ctx: OpContext) -> OpResult:
        assert ctx.stable is not None
        f = write_token(ctx, token)
        return OpResult(
            source=source(ctx.stable.source.version + 1),
            content=Content((*ctx.stable.content.files, f)),
        )

    return body


def create_body(token: str = "create"):
    def body(ctx: OpContext) -> OpResult:
        return OpResult(source=source(0), content=Content((write_token(ctx, token),)))

    return body


def tokens_of(log, entry: LogEntry) -> list[str]:
    """Every token held by the files of an entry (files may hold several, '\\n'-joined)."""
    out: list[str] = []
    for f in entry.content.files:
        out += log.storage.read_bytes(log.uri(f.path)).decode().split("\n")
    return out
