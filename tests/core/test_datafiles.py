"""read_file against rows computed independently from the generated table description."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from core_helpers import CaseSpec, FileSpec, build_case, case_specs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.errors import QueryError, TableFormatError
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.footers import clear_footer_cache, file_layout

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _expected(expected: pa.Table, path: str, *, deletes: bool) -> pa.Table:
    mask = pc.equal(expected["_file_path"], path)
    if deletes:
        mask = pc.and_(mask, pc.invert(expected["_deleted"]))
    return expected.filter(mask)


@SETTINGS
@given(spec=case_specs(), data=st.data())
def test_read_file_matches_spec(spec: CaseSpec, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as root:
        source, expected = build_case(root, spec)
        snap = source.snapshot()
        names = snap.schema.names
        for entry in snap.files.values():
            # every column, deletes applied, in position order
            got = read_file(source, snap, entry, with_positions=True)
            want = _expected(expected, entry.path, deletes=True)
            assert got.schema.names == [*names, "_row"]
            assert got.schema.field("k").type == pa.int64()
            assert got.to_pydict() == want.select([*names, "_row"]).to_pydict()
            # deletes ignored
            raw = read_file(source, snap, entry, apply_deletes=False)
            assert raw.to_pydict() == _expected(expected, entry.path, deletes=False).select(names).to_pydict()
            # a column subset in a chosen order
            cols = data.draw(st.permutations(names)).copy()[: data.draw(st.integers(1, len(names)))]
            sub = read_file(source, snap, entry, cols)
            assert sub.schema.names == cols
            assert sub.to_pydict() == want.select(cols).to_pydict()
            # positions (any order, duplicates allowed) read exactly those rows that are live
            n = entry.num_records or 0
            if n:
                pos = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))
                got_pos = read_file(
                    source, snap, entry, cols, positions=np.array(pos, dtype=np.int64), with_positions=True
                )
                live = [p for p in sorted(set(pos)) if p in set(want["_row"].to_pylist())]
                want_pos = want.filter(pc.is_in(want["_row"], pa.array(live, pa.int64())))
                assert got_pos.to_pydict() == want_pos.select([*cols, "_row"]).to_pydict()


def test_positions_touch_only_needed_row_groups(tmp_path: os.PathLike[str]) -> None:
    """A point read decodes one row group: proven by corrupting every other row group's data."""
    rows = [(i % 5, f"s{i}", float(i)) for i in range(40)]
    spec = CaseSpec("name", False, [FileSpec(rows=rows, row_group_size=10)])
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    entry = next(iter(snap.files.values()))
    path = entry.path[len("file://") :]
    md = pq.ParquetFile(path).metadata
    # overwrite the column chunks of row groups 0, 1 and 3 with garbage (same size, footer intact)
    with open(path, "r+b") as f:
        for rg in (0, 1, 3):
            for c in range(md.num_columns):
                col = md.row_group(rg).column(c)
                start = col.dictionary_page_offset or col.data_page_offset
                f.seek(start)
                f.write(b"\xff" * col.total_compressed_size)
    clear_footer_cache()
    got = read_file(source, snap, entry, ["id", "s"], positions=[21, 25, 29])
    assert got.to_pydict() == {"id": [21, 25, 29], "s": ["s21", "s25", "s29"]}
    with pytest.raises(TableFormatError, match="does not decode"):
        read_file(source, snap, entry, ["id"], positions=[5])


def test_footer_cache_is_keyed_by_path_and_size(tmp_path: os.PathLike[str]) -> None:
    spec = CaseSpec("name", False, [FileSpec(rows=[(1, "a", 1.0)])])
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    entry = next(iter(snap.files.values()))
    clear_footer_cache()
    first = file_layout(source, entry)
    assert file_layout(source, entry) is first
    read_file(source, snap, entry, positions=[0])
    assert file_layout(source, entry) is first


def test_bad_input(tmp_path: os.PathLike[str]) -> None:
    spec = CaseSpec("name", True, [FileSpec(rows=[(1, "a", 1.0), (2, "b", 2.0)], part="a")])
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    entry = next(iter(snap.files.values()))
    with pytest.raises(QueryError, match="nope"):
        read_file(source, snap, entry, ["id", "nope"])
    with pytest.raises(QueryError, match="outside"):
        read_file(source, snap, entry, positions=[2])
    with pytest.raises(QueryError, match="outside"):
        read_file(source, snap, entry, positions=[-1])
    from dataclasses import replace

    no_part = replace(entry, partition_values=())
    with pytest.raises(TableFormatError, match="partition column 'p'"):
        read_file(source, snap, no_part, ["p"])
    gone = replace(entry, path=entry.path + ".missing")
    with pytest.raises(TableFormatError, match="missing"):
        read_file(source, snap, gone)
