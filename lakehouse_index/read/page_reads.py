"""Point reads of a Parquet row group that fetch and decode only the pages holding the rows.

pyarrow 26 decodes whole column chunks: one row of a 50,000-row group costs decoding all
50,000. With the file's page locations (:mod:`lakehouse_index.read.page_index`: its offset
indexes, or its page headers) :func:`read_group_rows` fetches only the data pages holding the
wanted rows (plus the dictionary page when those pages are dictionary encoded,
:mod:`lakehouse_index.read.dictionaries`) and leaves the other pages alone; the pages pyarrow
decodes are handed to it as a one-column file (:mod:`lakehouse_index.read.page_decode`).

Served: the columns the page index holds (top-level primitive columns that are not repeated
and not INT96, in files with a plaintext footer and no encrypted columns, whose Arrow type is
not a dictionary). Data page v1 and v2, every encoding and codec pyarrow reads. A column the
page path cannot serve is left out of :func:`read_group_rows`' answer, and the caller reads
that column of the row group as usual; the other columns still go page by page. Pages that
do not decode raise :class:`~lakehouse_index.read.page_index.PageIndexError`, never anything
else: the caller then reads the row group the ordinary way.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_index.read.byte_ranges import fetch_ranges
from lakehouse_index.read.dictionaries import (
    Dictionary,
    DictionaryCache,
    decode_dictionary,
    dictionary_page,
    dictionary_pages,
    load_dictionary,
    read_by_dictionary,
)
from lakehouse_index.read.page_decode import (
    Page,
    decode_column,
    decode_pool,
    one_column_file,
    parse_page,
    plain_type,
)
from lakehouse_index.read.page_index import ColumnPages, PageIndex, PagePlan, decoding, plan_pages
from lakehouse_index.read.thrift import (
    DATA_PAGE,
    DATA_PAGE_V2,
    DICTIONARY_ENCODINGS,
    PH_DATA_V1,
    PH_DATA_V2,
    PH_TYPE,
    field,
)

__all__ = ["PageRead", "read_group_rows"]


@dataclass(frozen=True)
class PageRead:
    """Rows read page by page, and how many bytes of pages were fetched for them.

    ``table`` holds the columns the page path served, in the order asked; a column it
    could not serve is absent (the caller reads it with the row group).
    """

    table: pa.Table
    bytes_read: int


def read_group_rows(
    handle: pa.NativeFile,
    index: PageIndex,
    schema: pa.Schema,
    group: int,
    local: np.ndarray,
    columns: list[str],
    dictionaries: DictionaryCache | None = None,
    file_key: Hashable = None,
    concurrent: bool = True,
) -> PageRead:
    """Rows ``local`` (sorted, distinct positions in row group ``group``) of ``columns``.

    ``handle`` is the open file, ``index`` its
    :func:`~lakehouse_index.read.page_index.load_page_index`, ``schema`` its Arrow schema.
    For each column the page path serves (see the module docstring), the table holds what
    ``pf.read_row_group(group, [column])`` holds at those rows (values, types, field
    metadata), with string/binary views as large string/binary
    (:func:`~lakehouse_index.read.page_decode.plain_type`); the other columns are left out.
    The page path never reads more than the whole chunk would (the same dictionary page, a
    subset of the data pages).

    With ``dictionaries`` (a cache; ``file_key`` names the file's current bytes in it),
    the pages' dictionary indexes at the wanted rows of a column whose selected pages are
    all dictionary encoded are decoded here, and looked up in its dictionary, decoded whole
    on first need and kept there: a warm read fetches and decompresses only the data pages
    (:mod:`lakehouse_index.read.dictionaries`). ``concurrent``: the merged ranges are
    fetched in parallel (for an object store; on a local disk a read from the page cache
    costs less than handing it to a thread). :class:`~lakehouse_index.read.page_index.PageIndexError`
    when the index or a fetched page does not decode as expected.
    """
    with decoding(f"pages of row group {group}"):
        plans = [
            plan_pages(c, local)
            for c in (index.chunks.get((group, name)) for name in columns)
            if c is not None
        ]
        if not plans or len(local) == 0:
            return PageRead(pa.table({}), 0)
        # The dictionaries that will be needed (the chunk's encoding statistics count the
        # selected pages among its dictionary-encoded ones) and are not cached yet: on an
        # object store their pages come with the data pages (one round trip). With a cache,
        # they are decoded while the data pages are fetched and their indexes decoded (a
        # cold read), on a local disk read by the decoder thread too.
        unknown = sorted(
            (
                p.chunk
                for p in plans
                if int(p.pages.max()) < p.chunk.dictionary_encoded_pages
                and (dictionaries is None or (file_key, group, p.chunk.name) not in dictionaries)
            ),
            key=lambda c: -c.dictionary[1],  # the largest first: the decoder threads end together
        )
        pending: dict[str, Future[Dictionary]] = {}
        if dictionaries is not None and not concurrent:
            pending = {
                c.name: decode_pool().submit(load_dictionary, handle, index, c, schema.field(c.name).type)
                for c in unknown
            }
        pages, early = _data_pages(handle, plans, concurrent, unknown if concurrent else [])
        if dictionaries is not None:  # the early pages are all of unknown chunks: decode them now
            by_name = {c.name: c for c in unknown}
            pending.update(
                (
                    name,
                    decode_pool().submit(
                        decode_dictionary, index, by_name[name], page, schema.field(name).type
                    ),
                )
                for name, page in early.items()
            )
            early = {}
        decoded: dict[str, pa.Array | pa.ChunkedArray | None] = {}
        read = 0
        if dictionaries is not None:
            by_index, read = read_by_dictionary(
                handle, index, schema, group, plans, pages, dictionaries, file_key, concurrent, pending
            )
            decoded.update(by_index)
        rest = [
            (plan, mine) for plan, mine in zip(plans, pages, strict=True) if plan.chunk.name not in decoded
        ]
        # The dictionary page is needed only when a selected page is dictionary encoded
        # (writers fall back to plain pages when the dictionary grows too large).
        needs = [mine is not None and any(e in DICTIONARY_ENCODINGS for e, _ in mine) for _, mine in rest]
        fetched = iter(
            dictionary_pages(
                handle,
                [p.chunk for (p, _), need in zip(rest, needs, strict=True) if need],
                concurrent,
                {**early, **{name: done.result().page for name, done in pending.items()}},
            )
        )
        work = []  # (plan, one-column file) of every column whose pages were fetched as indexed
        for (plan, mine), need in zip(rest, needs, strict=True):
            dictionary = next(fetched) if need else None
            if mine is None or (need and dictionary is None):
                continue
            file = one_column_file(index, plan.chunk, int(plan.rows.sum()), dictionary, [p for _, p in mine])
            work.append((plan, file))
            read += plan.data_bytes
            if dictionary is not None and plan.chunk.name not in pending:  # else counted already
                read += len(dictionary.data)
        types = [schema.field(plan.chunk.name).type for plan, _ in work]
        # pyarrow decodes without the GIL: columns in parallel, as a whole row-group read does.
        args = ([data for _, data in work], types, [plan.positions for plan, _ in work])
        decoded.update(
            zip(
                [plan.chunk.name for plan, _ in work],
                decode_pool().map(decode_column, *args) if len(work) > 1 else map(decode_column, *args),
                strict=True,
            )
        )
        served = [c for c in columns if decoded.get(c) is not None]
        fields = [schema.field(c) for c in served]
        out = pa.schema([f.with_type(plain_type(f.type)) for f in fields], schema.metadata)
        return PageRead(pa.Table.from_arrays([decoded[c] for c in served], schema=out), read)


def _data_pages(
    handle: pa.NativeFile, plans: list[PagePlan], concurrent: bool, dictionaries: Sequence[ColumnPages] = ()
) -> tuple[list[list[tuple[int, Page]] | None], dict[str, Page | None]]:
    """The selected data pages of each plan with their encodings (None: not as indexed), and
    the dictionary pages of ``dictionaries`` by column, fetched with them (one round trip)."""
    ranges = [(int(p.chunk.page_offsets[i]), int(p.chunk.page_sizes[i])) for p in plans for i in p.pages]
    present = [c for c in dictionaries if c.dictionary[1] > 0]
    blobs = fetch_ranges(handle, ranges + [c.dictionary for c in present], concurrent)
    early = {c.name: dictionary_page(raw) for c, raw in zip(present, blobs[len(ranges) :], strict=True)}
    fetched = iter(blobs[: len(ranges)])
    out: list[list[tuple[int, Page]] | None] = []
    for plan in plans:
        mine: list[tuple[int, Page]] | None = []
        for rows in plan.rows:
            page = parse_page(next(fetched))
            encoding = _data_encoding(page, int(rows))
            if mine is not None and page is not None and encoding is not None:
                mine.append((encoding, page))
            else:
                mine = None
        out.append(mine)
    return out, early


def _data_encoding(page: Page | None, rows: int) -> int | None:
    """Encoding of a data page holding ``rows`` rows (None when it is not such a page)."""
    if page is None:
        return None
    kind = field(page.header, PH_TYPE)
    # A flat column has one value (or null) per row.
    if kind == DATA_PAGE and PH_DATA_V1 in page.header:
        v1 = field(page.header, PH_DATA_V1)
        return field(v1, 2) if field(v1, 1) == rows else None
    if kind == DATA_PAGE_V2 and PH_DATA_V2 in page.header:
        v2 = field(page.header, PH_DATA_V2)
        return field(v2, 4) if field(v2, 1) == rows and field(v2, 3) == rows else None
    return None
