"""Row-level deletes: which delete files apply to a data file, and the rows they delete.

Matching rules (Iceberg spec, "Scan Planning"):

* A position-delete file applies to a data file when it names the file's path and
  its data sequence number is >= the data file's.
* A v3 deletion vector (a ``deletion-vector-v1`` blob in a Puffin file) applies to its
  ``referenced_data_file`` under the same sequence-number rule; when a data file has a
  deletion vector, position-delete files for it are ignored (the DV already merged them).
* An equality-delete file applies when its data sequence number is strictly greater
  than the data file's and it is in the same partition (same spec id and values) or
  its spec is unpartitioned (a global delete).
"""

from __future__ import annotations

import hashlib
import zlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lakehouse_index.source import (
    Column,
    EqualityDeletes,
    FileIO,
    RowDeletes,
    TableFormatError,
    UnsupportedFeatureError,
    canonical_uri,
)
from lakehouse_index_iceberg.manifests import ContentFile, FileContent, ManifestEntry

DV_MAGIC = bytes.fromhex("D1D33964")
POS_PATH_COLUMN, POS_POS_COLUMN = "file_path", "pos"


@dataclass(frozen=True)
class DeleteSource:
    """One position-delete file or deletion-vector blob that applies to a data file."""

    path: str
    sequence_number: int
    is_deletion_vector: bool = False
    content_offset: int | None = None
    content_size: int | None = None
    record_count: int = 0

    @property
    def key(self) -> str:
        """Identity of the source (a Puffin file may hold many DVs)."""
        return f"{self.path}#{self.content_offset}" if self.is_deletion_vector else self.path


@dataclass(frozen=True)
class IcebergRowDeletes(RowDeletes):
    """Positions deleted from ``data_file`` (raw manifest path) by ``sources``."""

    data_file: str
    sources: tuple[DeleteSource, ...]

    def files(self) -> tuple[str, ...]:
        """The position-delete and Puffin files of ``sources``."""
        return tuple(sorted({normalize_path(s.path) for s in self.sources}))


def deletes_id(sources: Iterable[DeleteSource]) -> str:
    """Stable identity of a set of delete sources."""
    h = hashlib.sha1(usedforsecurity=False)
    for k in sorted(s.key for s in sources):
        h.update(k.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class _EqDelete:
    entry: ManifestEntry
    is_global: bool


class DeleteReader:
    """Reads position-delete files and deletion vectors; caches what it has read.

    Delete files are immutable, so results are cached by path for the reader's life.
    """

    def __init__(self, io: FileIO) -> None:
        self._io = io
        self._pos_files: dict[str, dict[str, BitMap64]] = {}
        self._dvs: dict[str, BitMap64] = {}

    def position_file(self, path: str) -> dict[str, BitMap64]:
        """Raw data file path → deleted positions, for a Parquet position-delete file."""
        hit = self._pos_files.get(path)
        if hit is not None:
            return hit
        if not path.lower().endswith(".parquet") and not _is_parquet(self._io, path):
            raise UnsupportedFeatureError(
                f"position-delete file {path}: only Parquet delete files are supported"
            )
        fs, p = self._io.arrow(path)
        try:
            tbl = pq.read_table(p, filesystem=fs, columns=[POS_PATH_COLUMN, POS_POS_COLUMN])
        except FileNotFoundError as e:
            raise TableFormatError(f"position-delete file {path} is missing") from e
        except (pa.ArrowInvalid, KeyError) as e:
            raise TableFormatError(f"cannot read position-delete file {path}: {e}") from e
        out: dict[str, BitMap64] = {}
        if tbl.num_rows:
            enc = pc.dictionary_encode(tbl[POS_PATH_COLUMN].combine_chunks())
            codes = enc.indices.to_numpy(zero_copy_only=False)
            positions = tbl[POS_POS_COLUMN].combine_chunks().to_numpy(zero_copy_only=False).astype(np.uint64)
            for i, name in enumerate(enc.dictionary.to_pylist()):
                out[name] = BitMap64(positions[codes == i].tolist())
        self._pos_files[path] = out
        return out

    def deletion_vector(self, src: DeleteSource) -> BitMap64:
        """Positions of one ``deletion-vector-v1`` blob (length, magic, roaring64, CRC-32)."""
        hit = self._dvs.get(src.key)
        if hit is not None:
            return hit
        if src.content_offset is None or src.content_size is None:
            raise TableFormatError(
                f"deletion vector in {src.path} has no content_offset/content_size_in_bytes"
            )
        try:
            blob = self._io.read_range(src.path, src.content_offset, src.content_size)
        except FileNotFoundError as e:
            raise TableFormatError(f"Puffin file {src.path} holding a deletion vector is missing") from e
        bm = decode_deletion_vector(blob, f"{src.path}@{src.content_offset}")
        if len(bm) != src.record_count:
            raise TableFormatError(
                f"deletion vector {src.path}@{src.content_offset} holds {len(bm)} positions, "
                f"manifest says {src.record_count}"
            )
        self._dvs[src.key] = bm
        return bm

    def positions(self, deletes: IcebergRowDeletes) -> BitMap64:
        """Union of the positions every source deletes from ``deletes.data_file``."""
        out = BitMap64()
        for src in deletes.sources:
            if src.is_deletion_vector:
                out |= self.deletion_vector(src)
            else:
                bm = self.position_file(src.path).get(deletes.data_file)
                if bm is not None:
                    out |= bm
        return out


def _is_parquet(io: FileIO, path: str) -> bool:
    try:
        return io.read_range(path, 0, 4) == b"PAR1"
    except (FileNotFoundError, OSError):
        return False


def decode_deletion_vector(blob: bytes, where: str) -> BitMap64:
    """Decode a Puffin ``deletion-vector-v1`` blob; TableFormatError on a bad magic or CRC."""
    if len(blob) < 12:
        raise TableFormatError(f"deletion vector {where} is truncated ({len(blob)} bytes)")
    length = int.from_bytes(blob[0:4], "big")
    if length + 8 != len(blob):
        raise TableFormatError(f"deletion vector {where}: length field {length} does not match blob size")
    body = blob[4 : 4 + length]
    if body[:4] != DV_MAGIC:
        raise TableFormatError(f"deletion vector {where}: bad magic {body[:4].hex()}")
    crc = int.from_bytes(blob[4 + length : 8 + length], "big")
    if zlib.crc32(body) != crc:
        raise TableFormatError(f"deletion vector {where}: CRC-32 mismatch (corrupt blob)")
    try:
        return BitMap64.deserialize(body[4:])
    except Exception as e:  # pyroaring raises ValueError/RuntimeError variously
        raise TableFormatError(f"deletion vector {where}: cannot decode the roaring bitmap: {e}") from e


class DeleteIndex:
    """The live delete files of one snapshot, indexed by the data files they can touch."""

    def __init__(
        self,
        entries: Sequence[ManifestEntry],
        reader: DeleteReader,
        unpartitioned_specs: frozenset[int],
        field_names: dict[int, str],
    ) -> None:
        self.entries = tuple(entries)
        self._reader = reader
        self._field_names = field_names
        self._dvs: dict[str, list[DeleteSource]] = defaultdict(list)
        self._pos: dict[str, list[DeleteSource]] = defaultdict(list)
        self._eq: list[_EqDelete] = []
        for e in self.entries:
            f = e.file
            if f.content == FileContent.EQUALITY_DELETES:
                self._eq.append(_EqDelete(e, f.spec_id in unpartitioned_specs))
            elif f.is_deletion_vector:
                if f.referenced_data_file is None:
                    raise TableFormatError(f"deletion vector in {f.path} has no referenced_data_file")
                self._dvs[f.referenced_data_file].append(
                    DeleteSource(
                        f.path, e.sequence_number, True, f.content_offset, f.content_size, f.record_count
                    )
                )
            elif f.content == FileContent.POSITION_DELETES:
                src = DeleteSource(f.path, e.sequence_number, record_count=f.record_count)
                targets = (
                    [f.referenced_data_file] if f.referenced_data_file else list(reader.position_file(f.path))
                )
                for t in targets:
                    self._pos[t].append(src)

    @property
    def is_empty(self) -> bool:
        """No delete files at all."""
        return not self.entries

    @property
    def position_targets(self) -> frozenset[str]:
        """Raw paths of the data files named by a position-delete file or deletion vector."""
        return frozenset(self._dvs) | frozenset(self._pos)

    @property
    def has_equality_deletes(self) -> bool:
        """Whether any equality-delete file is indexed (its targets are not named by path)."""
        return bool(self._eq)

    def touches(self, data: ManifestEntry) -> bool:
        """Whether any indexed delete file applies to ``data`` (by path, sequence number, partition).

        A file no indexed delete applies to has the same row-level deletes with or without
        these delete files.
        """
        path = data.file.path
        positional = (*self._dvs.get(path, ()), *self._pos.get(path, ()))
        if any(s.sequence_number >= data.sequence_number for s in positional):
            return True
        return any(True for _ in self._applicable_equality(data, data.file.spec_id))

    def row_deletes(self, data: ManifestEntry) -> IcebergRowDeletes | None:
        """Position deletes / DV applying to a data file, or None."""
        path = data.file.path
        sources = [s for s in self._dvs.get(path, ()) if s.sequence_number >= data.sequence_number]
        if not sources:
            sources = [s for s in self._pos.get(path, ()) if s.sequence_number >= data.sequence_number]
        if not sources:
            return None
        if len(sources) == 1 and sources[0].is_deletion_vector:
            card = sources[0].record_count
            rd = IcebergRowDeletes(deletes_id(sources), card, path, tuple(sources))
        else:
            rd = IcebergRowDeletes(deletes_id(sources), 0, path, tuple(sources))
            card = len(self._reader.positions(rd))
            rd = IcebergRowDeletes(rd.id, card, path, rd.sources)
        return rd if card > 0 else None

    def equality_deletes(self, data: ManifestEntry, spec_id: int) -> tuple[EqualityDeletes, ...]:
        """Equality-delete files applying to a data file (strictly newer, same partition or global)."""
        return tuple(
            EqualityDeletes(normalize_path(e.file.path), self.equality_columns(e.file), e.file.record_count)
            for e in self._applicable_equality(data, spec_id)
        )

    def _applicable_equality(self, data: ManifestEntry, spec_id: int) -> Iterator[ManifestEntry]:
        """Equality-delete entries strictly newer than ``data``, in its partition or global."""
        for eq in self._eq:
            e = eq.entry
            if e.sequence_number <= data.sequence_number:
                continue
            if not eq.is_global and (e.file.spec_id != spec_id or e.file.partition != data.file.partition):
                continue
            yield e

    def equality_columns(self, f: ContentFile) -> tuple[str, ...]:
        """Logical names of an equality-delete file's equality field ids."""
        names = []
        for fid in f.equality_ids:
            name = self._field_names.get(fid)
            if name is None:
                raise UnsupportedFeatureError(
                    f"equality-delete file {f.path} uses field id {fid}, which is not a top-level column"
                )
            names.append(name)
        return tuple(names)


def read_equality_delete_rows(
    io: FileIO, path: str, equality_ids: Sequence[int], columns: Sequence[Column]
) -> pa.Table:
    """Rows of an equality-delete Parquet file, columns resolved by field id, logical names."""
    fs, p = io.arrow(path)
    try:
        pf = pq.ParquetFile(p, filesystem=fs)
    except FileNotFoundError as e:
        raise TableFormatError(f"equality-delete file {path} is missing") from e
    arrow_schema = pf.schema_arrow
    by_id: dict[int, str] = {}
    for fld in arrow_schema:
        meta = fld.metadata or {}
        fid = meta.get(b"PARQUET:field_id")
        if fid is not None:
            by_id[int(fid)] = fld.name
    wanted = [c for c in columns if c.field_id in set(equality_ids)]
    if len(wanted) != len(equality_ids):
        raise TableFormatError(f"equality-delete file {path}: columns {list(columns)} do not cover its ids")
    names = []
    for c in wanted:
        stored = by_id.get(c.field_id) if c.field_id is not None else None
        if stored is None:
            raise TableFormatError(f"equality-delete file {path} has no column with field id {c.field_id}")
        names.append(stored)
    tbl = pf.read(columns=names)
    return pa.table(
        [tbl[n].cast(c.type) for n, c in zip(names, wanted, strict=True)], names=[c.name for c in wanted]
    )


def normalize_path(path: str) -> str:
    """The canonical URI of a path as an Iceberg manifest stores it (unencoded: not decoded).

    A path with a ``..`` segment is refused (TableFormatError): Iceberg paths are absolute
    and written whole by their writers, so one that climbs out of a folder is forged.
    """
    if ".." in path.split("/"):
        raise TableFormatError(f"Iceberg metadata names the path {path!r}, which holds a '..' segment")
    return canonical_uri(path, decoded=True)
