"""Step 5 of the erase: the proof that no trace of the subjects is left after the purge.

Two depths:

* **deep** decodes every file under the table and its index root (:func:`~.verify.residue.find_residue`):
  every column of every data and index file, every log and metadata file, raw bytes. Its cost
  is the whole table's size.
* **scoped** (the default) costs what the erase touched. Every file that is not a live data
  file of the latest version nor a live index data file (logs, checkpoints, metadata,
  manifests, deletion vectors, anything left over) is decoded as the deep check does; the live
  Parquet files are checked on the subjects' key columns, typed, where a subject's row could be:

  - live data files the erase wrote (its rewrites) and live data files with row-level deletes
    (a deleted row is still in the file): their key columns, every physical row, deletes not
    applied;
  - other live data files: none of their live rows holds a subject, which the index has just
    proved (the erase located every subject again after its refresh, the hybrid scan included,
    and found none), and without deletes their rows are their live rows;
  - live index data files holding every key column: the row groups whose statistics may hold
    a subject; an index file without the key columns is decoded whole.

  So a value of a subject in a column other than its key, in a file the erase did not touch,
  is left to the deep check.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.context import IndexContext
from lakehouse_index.io import canonical_uri, join_uri
from lakehouse_index.io.parallel import each_file
from lakehouse_index.read.scan import scan_snapshot
from lakehouse_index.source import FileEntry, Snapshot
from lakehouse_index.workflows.erasure.subjects import (
    POSITION,
    SUBJECT,
    key_values,
    matches,
    physical_matches,
    subject_rows,
)
from lakehouse_index.workflows.erasure.verify.needles import Needles
from lakehouse_index.workflows.erasure.verify.residue import find_residue

#: The decoder named by hits of the key-column check.
KEY_CHECK = "key columns"


@dataclass(frozen=True)
class _KeyHit:
    path: str
    location: str
    subject: int


def verify(
    ctx: IndexContext,
    key_columns: Sequence[str],
    keys: Sequence[Any],
    touched: Collection[str],
    say: Callable[[str], None],
    *,
    deep: bool = False,
) -> dict[str, Any]:
    """The residue check after a purge, as JSON (``ok``, ``hits``, ``depth``, counts).

    ``touched``: URIs of the data files the erase wrote. A composite key is a combination: its
    parts alone are often other people's data (the country of ``(country, id)``). So the rows
    of the latest version are checked for the combinations themselves (``liveCombinations``),
    and a part that a remaining row holds in the same column is not searched for in decoded
    files (``sharedParts``, positions among the keys' values, a composite key's values one by
    one). ``searched`` lists the positions searched for; a hit's ``valueNumber`` indexes that
    list. The key-column check looks for the combinations: its hits carry ``subjectNumber``,
    the position of the subject among ``keys``, instead.
    """
    values = key_values(keys)
    width = len(key_columns)
    searched = list(range(len(values)))
    composite: dict[str, Any] = {}
    snap = ctx.latest_snapshot()
    subjects = subject_rows(key_columns, keys, snap)
    if width > 1:
        say("verifying: looking for the subjects' key combinations in the latest version")
        live = scan_snapshot(ctx.source, snap, columns=list(key_columns))
        combinations = live.join(subjects, keys=list(key_columns), join_type="inner").num_rows
        shared = {
            n * width + i
            for i, c in enumerate(key_columns)
            for n, held in enumerate(pc.is_in(subjects[c], value_set=pc.unique(live[c])).to_pylist())
            if held
        }
        searched = [n for n in searched if n not in shared]
        composite = {"liveCombinations": combinations, "sharedParts": sorted(shared), "searched": searched}
    depth = {"depth": "deep" if deep else "scoped"}
    if not searched and deep:
        say("verifying: every part of the keys is held by remaining rows; no file is searched")
        return {"ok": composite["liveCombinations"] == 0, "hits": [], "filesChecked": 0, **composite, **depth}
    data = {} if deep else _checked_data_files(snap, touched)
    index = {} if deep else _checked_index_files(ctx, subjects)
    skip = {canonical_uri(e.path) for e in snap.files.values()} | set(index)
    out: dict[str, Any] = {"ok": True, "hits": [], "filesChecked": 0}
    if searched:
        say(
            "verifying: decoding every file of the table and its indexes"
            if deep
            else "verifying: decoding the table's and the indexes' metadata and every file not live"
        )

        def progress(done: int, total: int) -> None:
            if done == total or done % 100 == 0:
                say(f"verified {done}/{total} files")

        report = find_residue(
            [ctx.uri, ctx.index_root],
            [values[n] for n in searched],
            storage=ctx.storage,
            progress=progress,
            skip=frozenset() if deep else skip,
        )
        out = dict(report.to_json())
    if not deep:
        say(f"verifying: the key columns of {len(data)} data file(s) and {len(index)} index file(s)")
        needles = Needles(values)
        found = each_file(lambda e: _data_hits(ctx, snap, e, subjects), list(data.values()))
        found += each_file(lambda item: _index_hits(ctx, item[0], item[1], subjects), list(index.items()))
        hits = [
            {
                "path": needles.redact(h.path),
                "decoder": KEY_CHECK,
                "location": h.location,
                "subjectNumber": h.subject,
            }
            for group in found
            for h in group
        ]
        out = {
            **out,
            "ok": out["ok"] and not hits,
            "hits": [*out["hits"], *hits],
            "dataFilesKeyChecked": len(data),
            "indexFilesKeyChecked": len(index),
        }
    if composite:
        out = {**out, **composite, "ok": out["ok"] and composite["liveCombinations"] == 0}
    return {**out, **depth}


def _checked_data_files(snap: Snapshot, touched: Collection[str]) -> dict[str, FileEntry]:
    """The live data files whose physical rows are checked: written by the erase, or with deletes."""
    written = {canonical_uri(p) for p in touched}
    return {
        uri: e
        for e in snap.files.values()
        if (uri := canonical_uri(e.path)) in written or e.deletes is not None or e.equality_deletes
    }


def _checked_index_files(ctx: IndexContext, subjects: pa.Table) -> dict[str, list[int]]:
    """Live index data files holding every key column, each with the row groups whose
    statistics may hold a subject's first key value; files without the key columns are left
    to the decoding."""
    key_columns = subjects.column_names
    uris = []
    for info in ctx.indexes():
        stable = ctx.log(info.name).latest_stable()
        if stable is not None:
            uris += [join_uri(ctx.index_dir(info.name), f.path) for f in stable.content.files]

    first = sorted(v for v in subjects[key_columns[0]].to_pylist() if v is not None)

    def groups(uri: str) -> tuple[str, list[int]] | None:
        fs, path = ctx.storage.arrow(uri)
        meta = pq.ParquetFile(path, filesystem=fs).metadata
        names = [meta.schema.column(i).path for i in range(meta.num_columns)]
        if not all(c in names for c in key_columns):
            return None
        column = names.index(key_columns[0])
        return canonical_uri(uri), [
            g
            for g in range(meta.num_row_groups)
            if _may_hold(meta.row_group(g).column(column).statistics, first)
        ]

    return dict(g for g in each_file(groups, uris) if g is not None)


def _may_hold(stats: Any, values: Sequence[Any]) -> bool:
    """Whether a column chunk whose statistics are ``stats`` may hold one of the sorted
    ``values`` (yes when there are no statistics or they do not compare with the values)."""
    if stats is None or not stats.has_min_max:
        return True
    try:
        at = bisect.bisect_left(values, stats.min)
        return at < len(values) and values[at] <= stats.max
    except TypeError:
        return True


def _hits(found: pa.Table, path: str, where: str) -> list[_KeyHit]:
    """One hit per subject found (:func:`~.subjects.matches` rows), naming up to five rows."""
    by_subject: dict[int, list[int]] = {}
    for subject, pos in zip(found[SUBJECT].to_pylist(), found[POSITION].to_pylist(), strict=True):
        by_subject.setdefault(subject, []).append(pos)
    return [_KeyHit(path, f"{where} {sorted(at)[:5]}", subject) for subject, at in sorted(by_subject.items())]


def _data_hits(ctx: IndexContext, snap: Snapshot, entry: FileEntry, subjects: pa.Table) -> list[_KeyHit]:
    found = physical_matches(ctx.source, snap, entry, subjects)
    return _hits(found, entry.path, "rows (deletes not applied)")


def _index_hits(ctx: IndexContext, uri: str, row_groups: list[int], subjects: pa.Table) -> list[_KeyHit]:
    if not row_groups:
        return []
    fs, path = ctx.storage.arrow(uri)
    file = pq.ParquetFile(path, filesystem=fs)
    rows = file.read_row_groups(row_groups, columns=list(subjects.column_names))
    rows = rows.cast(pa.schema([subjects.schema.field(c) for c in rows.column_names]))
    rows = rows.append_column(POSITION, pa.array(range(rows.num_rows), pa.int64()))
    return _hits(matches(rows, subjects), uri, "index entries")
