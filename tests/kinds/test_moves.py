"""``MoveMap.translate`` (vectorised over every moved file) against a row-by-row walk of the moves.

Random chains of copy-on-write rewrites: each removed file's live rows are split into runs
that land in later files (possibly rewritten again). Every entry is followed along its
chain one move at a time, in plain Python; the vectorised translation must give the same
addresses and drop the same entries. The uniqueness check of the LSM merge is compared
with a set of addresses the same way.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index import row_filter
from lakehouse_index.kinds import entries as entry_format
from lakehouse_index.kinds.moves import MoveMap
from lakehouse_index.log.entry import Move, SourceFile


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[SourceFile], pa.Table]:
    """Files 0..n-1, some removed with moves into higher-numbered files; entries on any file."""
    n = draw(st.integers(2, 7))
    sizes = [draw(st.integers(0, 40)) for _ in range(n)]
    files = []
    for fid in range(n):
        moves: list[Move] = []
        later = list(range(fid + 1, n))
        if later and draw(st.booleans()):
            row = 0
            while row < sizes[fid]:
                count = draw(st.integers(1, 8))
                if draw(st.booleans()):  # these rows live on; the others were deleted
                    moves.append(
                        Move(
                            row,
                            min(count, sizes[fid] - row),
                            draw(st.sampled_from(later)),
                            draw(st.integers(0, 60)),
                        )
                    )
                row += count
        removed = 1 if moves or (later and draw(st.booleans())) else None
        files.append(SourceFile(fid, f"f{fid}", 1, removed_ordinal=removed, moves=tuple(moves)))
    rows = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 45)), max_size=80))
    entries = pa.table(
        {
            "k": pa.array([f"k{i}" for i in range(len(rows))]),
            entry_format.FILE_ID: pa.array([f for f, _ in rows], pa.int64()),
            entry_format.ROW: pa.array([r for _, r in rows], pa.int64()),
        }
    )
    return files, entries


def _walk(files: list[SourceFile], fid: int, row: int) -> tuple[int, int] | None:
    by_id = {f.id: f for f in files}
    while by_id[fid].moves:  # a file removed without moves keeps its entries (the merge drops them)
        f = by_id[fid]
        for m in f.moves:
            if m.start <= row < m.start + m.count:
                fid, row = m.file_id, m.to + row - m.start
                break
        else:
            return None
    return fid, row


@settings(max_examples=300, deadline=None)
@given(histories())
def test_translate_follows_every_chain_like_a_row_by_row_walk(h: tuple[list[SourceFile], pa.Table]) -> None:
    files, entries = h
    got = MoveMap.of(files, cap=1).translate(entries)
    want = []
    cols = (
        entries["k"].to_pylist(),
        entries[entry_format.FILE_ID].to_pylist(),
        entries[entry_format.ROW].to_pylist(),
    )
    for k, f, r in zip(*cols, strict=True):
        to = _walk(files, f, r)
        if to is not None:
            want.append((k, *to))
    out = (got["k"].to_pylist(), got[entry_format.FILE_ID].to_pylist(), got[entry_format.ROW].to_pylist())
    assert list(zip(*out, strict=True)) == want


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9)), max_size=40),
        # sparse addresses (rows far apart): the sorted comparison instead of the dense count
        st.lists(st.tuples(st.integers(0, 2**20), st.integers(0, 2**40)), max_size=40),
        st.lists(st.tuples(st.just(3), st.sampled_from([0, 1, 2**30])), max_size=8),
    )
)
def test_unique_addresses_is_no_repeated_pair(pairs: list[tuple[int, int]]) -> None:
    entries = pa.table(
        {
            entry_format.FILE_ID: pa.array([f for f, _ in pairs], pa.int64()),
            entry_format.ROW: pa.array([r for _, r in pairs], pa.int64()),
        }
    )
    assert entry_format._unique_addresses(entries) == (len(set(pairs)) == len(pairs))


@settings(max_examples=200, deadline=None)
@given(
    keep=st.lists(st.booleans(), max_size=300),
    runs=st.lists(st.tuples(st.integers(0, 299), st.integers(1, 40)), max_size=4),
    slice_rows=st.sampled_from([1, 10, 10_000]),
    chunks=st.integers(1, 3),
)
def test_filter_rows_equals_filter(
    keep: list[bool], runs: list[tuple[int, int]], slice_rows: int, chunks: int
) -> None:
    """Sliced or copied, the kept rows are exactly ``Table.filter``'s, in order, on any chunking."""
    import numpy as np

    mask = np.array(keep, dtype=bool)
    for start, length in runs:  # long runs of dropped rows, as an optimize after an erase has
        mask[start : start + length] = False
    n = len(mask)
    table = pa.table({"k": pa.array([f"k{i}" for i in range(n)], pa.string()), "r": pa.array(range(n))})
    step = max(1, -(-n // chunks))
    chunked = pa.concat_tables([table.slice(i, step) for i in range(0, n, step)] or [table])
    old = row_filter.FILTER_SLICE_ROWS
    row_filter.FILTER_SLICE_ROWS = slice_rows
    try:
        got = row_filter.filter_rows(chunked, mask)
    finally:
        row_filter.FILTER_SLICE_ROWS = old
    assert got.schema == table.schema
    assert got.to_pydict() == table.filter(pa.array(mask, pa.bool_())).to_pydict()
