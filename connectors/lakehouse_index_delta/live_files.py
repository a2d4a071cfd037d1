"""The live logical files of a Delta version, held as Arrow columns.

A checkpoint holds 10^5..10^6 ``add`` rows. They are kept as the Arrow columns read from
its Parquet file(s) (:class:`AddColumns`, immutable and shared by every state built on
the checkpoint) and :class:`AddFile` objects are made only for the rows a caller asks
for. The commits replayed on top of a checkpoint are few: their adds are kept as
objects, and the checkpoint rows they replace or remove are marked dropped
(:class:`LiveFiles`). Snapshots expose the result as a lazy mapping
(:class:`SnapshotFiles`) that builds a :class:`FileEntry` only when one is read.

Logical files are keyed by (path, deletion-vector unique id), as the protocol's action
reconciliation requires: a newer ``add`` or ``remove`` of a key replaces the older one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, ItemsView, Iterator, Sequence, ValuesView
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.source import FileEntry, FileMap, TableFormatError
from lakehouse_index_delta.actions import Actions, AddFile
from lakehouse_index_delta.arrays import (
    bool_scalar,
    int_array,
    int_scalar,
    int_values,
    string_array,
    string_scalar,
)
from lakehouse_index_delta.deletion_vectors import DeletionVectorDescriptor
from lakehouse_index_delta.paths import resolve_path

Key = tuple[str, str | None]
PartitionRaw = tuple[tuple[str, str | None], ...]

#: Rows converted to objects at a time when a whole snapshot is iterated.
_CHUNK = 8192
_NUM_RECORDS = r'"numRecords"\s*:\s*(?P<n>\d+)'


@dataclass(frozen=True)
class AddColumns:
    """``add`` rows of a checkpoint as columns: one row per logical file.

    ``paths`` are canonical absolute URIs and ``dv_ids`` the deletion vectors' unique
    ids (null without one). ``part_codes`` index ``part_values``, the distinct raw
    partition values (tuples sorted by column; null code: none). ``num_records`` is
    ``stats_parsed.numRecords``, else the ``numRecords`` of the JSON ``stats``, which
    are not kept (they are most of an ``add``). ``dvs`` are the descriptors of the rows
    that have one.
    """

    paths: pa.StringArray
    dv_ids: pa.StringArray
    sizes: pa.Int64Array
    mtimes: pa.Int64Array
    data_change: pa.BooleanArray
    num_records: pa.Int64Array
    base_row_ids: pa.Int64Array
    default_row_commit_versions: pa.Int64Array
    part_codes: pa.Int32Array
    part_values: tuple[PartitionRaw, ...]
    dvs: dict[int, DeletionVectorDescriptor]
    lookup: _PathLookup = field(default_factory=lambda: _PathLookup(), compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.paths)

    @staticmethod
    def concat(pieces: list[AddColumns]) -> AddColumns:
        """The rows of several batches or checkpoint parts, in order; empties ``pieces``.

        Column by column, each column's pieces released once joined: the peak is the
        pieces plus one joined column, not twice the whole.
        """
        if len(pieces) == 1:
            return pieces.pop()
        dvs: dict[int, DeletionVectorDescriptor] = {}
        codes: list[pa.Array] = []
        offset = 0
        part_values: list[PartitionRaw] = []
        for piece in pieces:
            dvs.update({offset + i: d for i, d in piece.dvs.items()})
            codes.append(pc.add(piece.part_codes, int_scalar(len(part_values), np.int32)))
            offset += len(piece)
            part_values += piece.part_values
        chunks = {n: [getattr(piece, n) for piece in pieces] for n in _ROW_COLUMNS}
        del piece
        pieces.clear()
        joined = {n: pa.concat_arrays(chunks.pop(n)) for n in _ROW_COLUMNS}
        return AddColumns(
            **joined, part_codes=pa.concat_arrays(codes), part_values=tuple(part_values), dvs=dvs
        )

    def files(self, rows: Sequence[int]) -> list[AddFile]:
        """The rows ``rows`` as :class:`AddFile` objects."""
        idx = int_array(rows)
        cols = [
            c.take(idx).to_pylist()
            for c in (
                self.paths,
                self.sizes,
                self.mtimes,
                self.data_change,
                self.base_row_ids,
                self.default_row_commit_versions,
                self.part_codes,
                self.num_records,
            )
        ]
        paths, sizes, mtimes, changes, row_ids, versions, codes, records = cols
        return [
            AddFile(
                paths[j],
                sizes[j],
                mtimes[j],
                changes[j],
                self.part_values[codes[j]] if codes[j] is not None else (),
                n,
                self.dvs.get(i),
                row_ids[j],
                versions[j],
            )
            for j, (i, n) in enumerate(zip(rows, records, strict=True))
        ]

    def find(
        self, paths: Collection[str], among: pa.Array | None = None, *, tailing: bool = False
    ) -> dict[Key, int]:
        """Key → row of the rows whose path is in ``paths`` (only rows in ``among``, ascending, when given).

        ``tailing``: the caller looks up at every commit (see :class:`_PathLookup`).
        """
        if not paths or len(self) == 0:
            return {}
        rows = self.lookup.rows(self.paths, paths, tailing=tailing)
        if among is not None and len(rows):
            # A binary search of the few rows found: hashing ``among`` (10^5 rows) costs megabytes.
            found = int_values(rows).astype(np.int64)
            live = int_values(among)
            at = np.searchsorted(live, found)
            hit = at < len(live)
            hit[hit] = live[at[hit]] == found[hit]
            rows = int_array(found[hit])
        found = rows.to_pylist()
        keys = zip(self.paths.take(rows).to_pylist(), self.dv_ids.take(rows).to_pylist(), strict=True)
        return dict(zip(keys, found, strict=True))


#: The fields of :class:`AddColumns` holding one value per row, other than the partition codes.
_ROW_COLUMNS = (
    "paths",
    "dv_ids",
    "sizes",
    "mtimes",
    "data_change",
    "num_records",
    "base_row_ids",
    "default_row_commit_versions",
)


class _PathLookup:
    """Finds the rows of given paths: a vectorised scan of the column, or a dict for tailers.

    A cold load looks up a few times (the commits after the checkpoint in one batch, the
    snapshot's check for paths live twice); a tailer looks up at every commit, where a
    scan of 10^5 paths costs milliseconds each time, so its first lookup builds a
    path → rows dict (about 30 MB per 10^5 paths, which a cold load does not pay).
    """

    def __init__(self) -> None:
        self._index: dict[str, list[int]] | None = None

    def rows(self, column: pa.StringArray, paths: Collection[str], *, tailing: bool) -> pa.Array:
        """Rows of ``column`` holding one of ``paths``, ascending."""
        if self._index is None and not tailing:
            return pc.indices_nonzero(pc.is_in(column, value_set=string_array(list(paths))))
        if self._index is None:
            self._index = {}
            for i, p in enumerate(column.to_pylist()):
                self._index.setdefault(p, []).append(i)
        return int_array(sorted(i for p in paths for i in self._index.get(p, ())))


def add_columns(arr: pa.StructArray, table_root: str, source: str) -> AddColumns:
    """Columns of the non-null ``add`` structs of a checkpoint file."""
    valid = arr.is_valid()
    n = len(arr) - arr.null_count
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    if n and not {"path", "size"} <= names:
        raise TableFormatError(f"{source}: add column lacks path or size")
    rows = pc.indices_nonzero(valid)
    # The adds of a checkpoint are usually one run of rows: a slice then copies nothing.
    run = rows[0].as_py() if n and rows[n - 1].as_py() - rows[0].as_py() == n - 1 else None

    def child(name: str) -> pa.Array:
        """Field ``name`` of the non-null rows (filtering only the fields used, not the whole struct)."""
        col = arr.field(name)
        if n == len(arr):
            return col
        return col.slice(run, n) if run is not None else col.take(rows)

    def column(name: str, dtype: pa.DataType, default: pa.Scalar | None = None) -> pa.Array:
        col = child(name).cast(dtype) if name in names else pa.nulls(n, dtype)
        if default is not None and col.null_count:
            col = pc.coalesce(col, default)
        return col

    raw_paths = column("path", pa.string())
    if raw_paths.null_count:
        raise TableFormatError(f"{source}: an add action has no path")
    sizes = column("size", pa.int64())
    if sizes.null_count:
        raise TableFormatError(f"{source}: an add action has no size")
    try:
        paths = _resolve_paths(raw_paths, table_root)
    except ValueError as e:
        raise TableFormatError(f"{source}: {e}") from e
    num_records = pa.nulls(n, pa.int64())
    if "stats_parsed" in names and "numRecords" in {f.name for f in arr.type.field("stats_parsed").type}:
        num_records = child("stats_parsed").field("numRecords").cast(pa.int64())
    if "stats" in names and num_records.null_count:
        from_json = pc.struct_field(pc.extract_regex(child("stats").cast(pa.string()), _NUM_RECORDS), "n")
        num_records = pc.coalesce(num_records, from_json.cast(pa.int64()))
    part_codes: pa.Array = pa.nulls(n, pa.int32())
    part_values: tuple[PartitionRaw, ...] = ()
    if "partitionValues" in names:
        part_codes, part_values = _partition_codes(child("partitionValues"))
    dvs: dict[int, DeletionVectorDescriptor] = {}
    if "deletionVector" in names:
        dv_col = child("deletionVector")
        if dv_col.null_count < n:
            present = pc.indices_nonzero(dv_col.is_valid()).to_pylist()
            for i, dv in zip(present, dv_col.take(present).to_pylist(), strict=True):
                if dv.get("storageType") is None:
                    continue
                try:
                    dvs[i] = DeletionVectorDescriptor.from_json(dv, table_root)
                except (KeyError, TypeError, ValueError) as e:
                    raise TableFormatError(f"{source}: malformed deletionVector {dv!r}: {e!r}") from e
    dv_ids: list[str | None] = [None] * n
    for i, d in dvs.items():
        dv_ids[i] = d.id
    return AddColumns(
        paths,
        string_array(dv_ids) if dvs else pa.nulls(n, pa.string()),
        sizes,
        column("modificationTime", pa.int64(), int_scalar(0)),
        column("dataChange", pa.bool_(), bool_scalar(True)),
        num_records,
        column("baseRowId", pa.int64()),
        column("defaultRowCommitVersion", pa.int64()),
        part_codes,
        part_values,
        dvs,
    )


def _partition_codes(maps: pa.MapArray) -> tuple[pa.Int32Array, tuple[PartitionRaw, ...]]:
    """Each row's code among the distinct partition value maps, and those maps as sorted tuples.

    Rows are grouped by an unambiguous string (every key and value prefixed with its
    length, a null value marked ``-``); only one row per group is converted to Python.
    """
    maps = pa.concat_arrays([maps])  # drop any slice offset: keys/items below are the whole children
    uniform = _uniform_partition_codes(maps)
    if uniform is not None:
        return uniform
    keys = maps.keys.cast(pa.string())
    items = maps.items.cast(pa.string())
    entries = pc.binary_join_element_wise(
        pc.utf8_length(keys).cast(pa.string()),
        keys,
        pc.coalesce(pc.utf8_length(items).cast(pa.string()), string_scalar("-")),
        pc.coalesce(items, string_scalar("")),
        string_scalar(":"),
    )
    offsets = pc.subtract(maps.offsets, maps.offsets[0])
    rows = pc.binary_join(pa.ListArray.from_arrays(offsets, entries, mask=maps.is_null()), string_scalar(";"))
    encoded = rows.dictionary_encode()
    firsts = pc.index_in(encoded.dictionary, value_set=rows)  # the first row of each distinct string
    values = tuple(tuple(sorted(m or ())) for m in maps.take(firsts).to_pylist())
    return encoded.indices.cast(pa.int32()), values


def _uniform_partition_codes(maps: pa.MapArray) -> tuple[pa.Int32Array, tuple[PartitionRaw, ...]] | None:
    """:func:`_partition_codes` when every row maps the same keys in the same order (as writers do).

    Each partition column's values are dictionary-encoded on their own and the codes
    combined, with no string built per row. None when the rows differ in their keys (or
    the combined code could overflow): the caller then groups rows by strings.
    """
    offsets = int_values(maps.offsets).astype(np.int64) - maps.offsets[0].as_py()
    n = len(maps)
    width = int(offsets[1]) if n else 0
    if maps.null_count or not np.array_equal(offsets, np.arange(n + 1, dtype=np.int64) * width):
        return None
    combined = np.zeros(n, np.int64)
    distinct = 1
    for j in range(width):
        at = int_array(np.arange(j, n * width, width, dtype=np.int64))
        key = maps.keys.take(at)
        if not pc.all(pc.equal(key, key[0])).as_py():
            return None
        codes = maps.items.take(at).dictionary_encode(null_encoding="encode")
        distinct *= len(codes.dictionary)
        if distinct >= 2**62:
            return None
        combined = combined * len(codes.dictionary) + int_values(codes.indices)
    _, firsts, inverse = np.unique(combined, return_index=True, return_inverse=True)
    values = tuple(tuple(sorted(m)) for m in maps.take(int_array(firsts)).to_pylist())
    return int_array(inverse.astype(np.int32)), values


def _resolve_paths(raw: pa.StringArray, table_root: str) -> pa.StringArray:
    """Canonical absolute URIs: relative paths without escapes by one vectorised join
    (the others, and any holding ``..``, by :func:`resolve_path`)."""
    special = pc.match_substring_regex(raw, r"[%:]|\.\.")
    joined = pc.binary_join_element_wise(string_scalar(table_root), raw, string_scalar("/"))
    if not pc.any(special).as_py():
        return joined
    rows = pc.indices_nonzero(special).to_pylist()
    fixed = [resolve_path(table_root, p) for p in raw.take(rows).to_pylist()]
    out = joined.to_pylist()
    for i, p in zip(rows, fixed, strict=True):
        out[i] = p
    return string_array(out)


_EMPTY_ROWS = int_array([])


@dataclass
class LiveFiles:
    """The live logical files of a version: checkpoint rows not dropped, plus later adds.

    ``base`` is shared between copies and never changed; ``dropped`` are its rows that a
    later action removed or replaced; ``extra`` the adds of the commits since, by key.
    """

    base: AddColumns | None = None
    dropped: set[int] = field(default_factory=set)
    extra: dict[Key, AddFile] = field(default_factory=dict)

    def copy(self) -> LiveFiles:
        """A copy that can be advanced without changing this one."""
        return LiveFiles(self.base, set(self.dropped), dict(self.extra))

    def __len__(self) -> int:
        return (len(self.base) if self.base is not None else 0) - len(self.dropped) + len(self.extra)

    def base_rows(self) -> pa.Int64Array:
        """Rows of ``base`` that are live, in order."""
        if self.base is None:
            return _EMPTY_ROWS
        live = np.ones(len(self.base), dtype=bool)
        live[list(self.dropped)] = False
        return int_array(np.flatnonzero(live).astype(np.int64))

    def _find_live(self, paths: Collection[str], *, tailing: bool = False) -> dict[Key, int]:
        if self.base is None:
            return {}
        found = self.base.find(paths, tailing=tailing)
        return {k: row for k, row in found.items() if row not in self.dropped}

    def apply(self, commits: Sequence[Actions], *, report: bool) -> tuple[list[AddFile], list[AddFile]]:
        """Apply the file actions of ``commits`` in order (removes before adds within one).

        With ``report``: the files that stopped being live (as they were) and the adds of
        keys that were not live, for a single commit; two empty lists otherwise. ``changes``
        applies commits one at a time with ``report``: lookups then use the tailer's index.
        """
        touched = {r.path for c in commits for r in c.removes} | {a.path for c in commits for a in c.adds}
        in_base = self._find_live(touched, tailing=report)
        gone: list[AddFile | int] = []
        added: list[AddFile] = []
        for c in commits:
            for r in c.removes:
                key = r.key
                previous = self.extra.pop(key, None)
                if previous is not None:
                    gone.append(previous)
                    continue
                row = in_base.pop(key, None)
                if row is not None:
                    self.dropped.add(row)
                    gone.append(row)
            for a in c.adds:
                key = a.key
                row = in_base.pop(key, None)
                if row is not None:
                    self.dropped.add(row)
                elif key not in self.extra:
                    added.append(a)
                self.extra[key] = a
        if not report:
            return [], []
        return self._materialise(gone), added

    def live_adds(self, paths: Collection[str]) -> list[AddFile]:
        """The live files whose path is in ``paths``, as :class:`AddFile` objects."""
        rows = sorted(self._find_live(paths).values())
        extra = [a for a in self.extra.values() if a.path in paths]
        return self._materialise([*rows, *extra])

    def discard(self, keys: Collection[Key]) -> None:
        """Make the files with these keys not live (keys that are not live are ignored)."""
        in_base = self._find_live({path for path, _ in keys})
        for key in keys:
            if self.extra.pop(key, None) is None and key in in_base:
                self.dropped.add(in_base[key])

    def distinct_partitions(self) -> dict[PartitionRaw, str]:
        """Each distinct raw partition value of the live files, with the path of one file having it."""
        out: dict[PartitionRaw, str] = {}
        if self.base is not None:
            rows = self.base_rows()
            # Sorting the codes (numpy) finds each one's first row without a hash table of 10^5 codes.
            codes = int_values(pc.fill_null(self.base.part_codes.take(rows), int_scalar(-1, np.int32)))
            present, firsts = np.unique(codes, return_index=True)
            paths = self.base.paths.take(rows.take(int_array(firsts))).to_pylist()
            for code, path in zip(present.tolist(), paths, strict=True):
                out.setdefault(self.base.part_values[code] if code >= 0 else (), path)
        for a in self.extra.values():
            out.setdefault(a.partition_values, a.path)
        return out

    def _materialise(self, items: list[AddFile | int]) -> list[AddFile]:
        rows = [x for x in items if isinstance(x, int)]
        if not rows:
            return [x for x in items if not isinstance(x, int)]
        assert self.base is not None
        made = iter(self.base.files(rows))
        return [next(made) if isinstance(x, int) else x for x in items]

    def key_strings(self) -> tuple[pa.Array, pa.Int64Array]:
        """One string per live key (path and DV id joined) and the base row of each (-1: extra).

        Extra adds follow the base rows, in ``extra`` order.
        """
        rows = self.base_rows()
        extra = list(self.extra.values())
        if self.base is not None:
            base_keys = pc.binary_join_element_wise(
                self.base.paths.take(rows),
                pc.coalesce(self.base.dv_ids.take(rows), string_scalar("")),
                string_scalar("\n"),
            )
        else:
            base_keys = string_array([])
        extra_keys = string_array([_key_string(a) for a in extra])
        all_rows = pa.concat_arrays([rows, int_array([-1] * len(extra))])
        return pa.concat_arrays([base_keys.cast(pa.string()), extra_keys]), all_rows

    def files_at(self, positions: Sequence[int], rows: pa.Int64Array) -> list[AddFile]:
        """The files at ``positions`` of :meth:`key_strings` (``rows`` as it returned)."""
        extra = list(self.extra.values())
        base_count = len(rows) - len(extra)
        items: list[AddFile | int] = [
            extra[p - base_count] if p >= base_count else rows[p].as_py() for p in positions
        ]
        return self._materialise(items)


def _key_string(a: AddFile) -> str:
    return a.path + "\n" + (a.deletion_vector.id if a.deletion_vector else "")


class SnapshotFiles(FileMap):
    """``Snapshot.files`` of a Delta version: path → FileEntry, each entry built when read.

    Length, iteration over paths and the total size need no entry at all.
    """

    def __init__(
        self,
        live: LiveFiles,
        entry: Callable[[AddFile], FileEntry],
    ) -> None:
        self._base = live.base
        self._rows = live.base_rows()
        self._extra = list(live.extra.values())
        self._entry = entry
        self._index: dict[str, int] | None = None

    def _paths(self) -> list[str]:
        """Every live path, base rows first (converted a chunk at a time: no copy of the column)."""
        out: list[str] = []
        if self._base is not None:
            for start in range(0, len(self._rows), _CHUNK):
                out += self._base.paths.take(self._rows[start : start + _CHUNK]).to_pylist()
        return out + [a.path for a in self._extra]

    def _position(self, path: str) -> int | None:
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self._paths())}
        return self._index.get(path)

    def _add_files(self, positions: Sequence[int]) -> list[AddFile]:
        base_count = len(self._rows)
        rows = [self._rows[p].as_py() for p in positions if p < base_count]
        made = iter(self._base.files(rows)) if rows and self._base is not None else iter(())
        return [next(made) if p < base_count else self._extra[p - base_count] for p in positions]

    def __getitem__(self, path: str) -> FileEntry:
        pos = self._position(path)
        if pos is None:
            raise KeyError(path)
        return self._entry(self._add_files([pos])[0])

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self._position(path) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths())

    def __len__(self) -> int:
        return len(self._rows) + len(self._extra)

    def entries(self) -> Iterator[FileEntry]:
        base_count = len(self._rows)
        if self._base is not None:
            for start in range(0, base_count, _CHUNK):
                rows = self._rows[start : start + _CHUNK].to_pylist()
                for a in self._base.files(rows):
                    yield self._entry(a)
        for a in self._extra:
            yield self._entry(a)

    def values(self) -> ValuesView[FileEntry]:
        """Every entry, built a chunk of rows at a time."""
        return _Values(self)

    def items(self) -> ItemsView[str, FileEntry]:
        """(path, entry) pairs, built a chunk of rows at a time."""
        return _Items(self)

    def total_bytes(self) -> int:
        """Sum of the live files' sizes, without building entries."""
        base = 0
        if self._base is not None and len(self._rows):
            base = pc.sum(self._base.sizes.take(self._rows)).as_py() or 0
        return int(base) + sum(a.size for a in self._extra)

    def duplicate_path(self) -> str | None:
        """A path live under two keys (with two DVs), or None.

        Only a path with a DV, or added after the checkpoint, can be live twice: the
        checkpoint's rows are unique by (path, DV id).
        """
        candidates = {a.path for a in self._extra}
        if self._base is not None and self._base.dvs:
            with_dv = pc.filter(self._rows, pc.is_valid(self._base.dv_ids.take(self._rows)))
            candidates.update(self._base.paths.take(with_dv).to_pylist())
        if not candidates:
            return None
        seen: set[str] = set()
        live_base = self._base.find(candidates, among=self._rows) if self._base is not None else {}
        for path, _ in [*live_base, *((a.path, None) for a in self._extra)]:
            if path in seen:
                return path
            seen.add(path)
        return None


class _Values(ValuesView[FileEntry]):
    """The entries of a :class:`SnapshotFiles`, built in chunks rather than one lookup per path."""

    _mapping: SnapshotFiles

    def __iter__(self) -> Iterator[FileEntry]:
        return self._mapping.entries()


class _Items(ItemsView[str, FileEntry]):
    """The (path, entry) pairs of a :class:`SnapshotFiles`, built in chunks."""

    _mapping: SnapshotFiles

    def __iter__(self) -> Iterator[tuple[str, FileEntry]]:
        return ((e.path, e) for e in self._mapping.entries())
