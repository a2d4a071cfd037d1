"""Residue scan: does any file under a table (or its index) still hold one of some values?

Step 5 of the GDPR erase ("Verify"): :func:`find_residue` decodes and searches **every**
file below the given roots, recursively, for the erased keys, and names every place it
finds one. A hit is an error for the erase. The report names each value only by its
position in ``values``, never the value itself, and paths and locations that would spell a
value are redacted to ``<value #n>``, so the report can go into an audit record.

What is decoded (by content, magic bytes first, not by extension):

* **Parquet** (data files, deletion-vector-masked rows included since the file is read
  whole, CDF ``_change_data`` files, Delta checkpoints, Iceberg delete files, index files):
  every column of every row group, nested ones leaf by leaf, as typed values; footer
  min/max statistics of every column chunk; key-value metadata (JSON parsed; the Arrow
  schema decoded from base64); and, when a value has a text or bytes form, the raw file
  bytes (footer, page headers, page indexes) and every column chunk's pages decompressed
  (dictionary pages included).
* **JSON** and **NDJSON** (Delta commits, ``_last_checkpoint``, checksums, Iceberg
  ``metadata.json``, the index log): every leaf and every member name; strings that hold
  JSON (Delta's ``stats``) are parsed and walked too.
* **Avro** object containers (Iceberg manifests and manifest lists; codecs null, deflate,
  snappy, zstandard, bzip2, xz): every field of every record, logical types decoded; bytes
  fields are also compared with each value's Iceberg single-value serialization, including
  Iceberg's 16-character truncated string bounds (the location says so).
* **ORC** (data files the connectors refuse, still files of the table): every column of
  every stripe as typed values, and the user metadata; its compressed streams are not
  searched raw.
* **Puffin** (deletion vectors, statistics): the footer (lz4-compressed or not) and every
  blob, decompressed (lz4, zstd).
* gzip, zstd, lz4-frame, bzip2, xz and framed-snappy wrappers around any of these.
* Anything else: UTF-8 text as free text; other bytes raw.
* The **name** of every file and directory (relative to the root): free text at token
  boundaries (``user=alice/``), and a Hive ``col=value`` component's value as a number (or a
  string spelled as one).

Matching policy:

* Decoded typed values match by **equality**: ``12`` matches ``12`` (and ``12.0``,
  ``Decimal("12")``), never ``123``; booleans only booleans; dates, times, timestamps (naive
  ones as UTC wall clock), UUIDs, bytes, strings by value. The string columns (and their
  statistics) of data and index files are typed: a string there matches when it is a
  value's text form (the string, an ISO date, a number spelled out); text *inside* such
  strings is found by the raw search of their decompressed pages.
* Free text (JSON strings, predicate text, Avro strings, strings of metadata files, file
  names, raw bytes) matches a string, date, time, timestamp or UUID value only at **token
  boundaries**: the characters before and after are not letters or digits, so
  ``subject-1`` is not found in ``subject-10``. JSON- and SQL-escaped spellings are
  searched too. A string spelled as a number (``"12"``, a string id) is matched as a number
  is (next bullet), in free text and raw bytes alike.
* Numbers in free text match as whole numeric tokens: ``12`` is not in ``123``, ``3.12``,
  ``12.5``, ``subject-12`` or ``2024-01-12`` (a ``-`` or ``_`` joining digits to a letter
  or digit makes a word), and is in ``id=12``, ``(12, 13)`` and ``-12`` (signs are not
  told apart). A float or Decimal is looked for in its ``repr``/``str`` and normalized
  forms.
* Raw bytes: the UTF-8 forms of text values of 4 bytes or more at ASCII token boundaries,
  and bytes values of 4 bytes or more anywhere. Numbers are **not** searched in raw bytes
  (their binary forms are everywhere); typed decoding covers them.
* Bookkeeping numbers of the formats' own metadata (sizes, counts, ids, versions,
  timestamps, row positions, bucket folders) are not matched: see
  :mod:`lakehouse_index.workflows.erasure.verify.decoders`.

Not covered: bloom filters and sketches (hashes: they can only say a value *may* be
present), encrypted Parquet files (reported as unreadable), compression other than the
listed codecs, text forms of values other than those above (e.g. a timestamp spelled as
epoch milliseconds in free text, base64 of a string), string values shorter than 4 bytes
in raw bytes, and numbers in raw bytes. A file whose magic promises a format that then
does not decode is scanned raw and listed in :attr:`ResidueReport.unreadable`, which makes
the report not :attr:`~ResidueReport.ok`.
"""

from __future__ import annotations

import decimal
import re
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from lakehouse_index.io import Storage, canonical_uri
from lakehouse_index.io.parallel import CORES
from lakehouse_index.io.uri import uri_scheme
from lakehouse_index.workflows.erasure.audit import ERASURE_DIR
from lakehouse_index.workflows.erasure.verify.decoders import (
    DATA,
    DECODE_ERRORS,
    ERASURE_RECORDS,
    METADATA,
    SIDECAR,
    Findings,
    decode,
)
from lakehouse_index.workflows.erasure.verify.needles import Needles

__all__ = ["PATH_DECODER", "ResidueHit", "ResidueReport", "find_residue"]

#: The decoder named by hits in file and directory names.
PATH_DECODER = "path"
#: Folders whose files are table metadata (see the decoders' bookkeeping rule).
_METADATA_FOLDERS = frozenset({"_delta_log", "metadata"})
_SIDECAR_FOLDER = "_lakehouse_index"
#: The folders of a covering index's hash buckets: ``bucket=<n>``.
_SIDECAR_BUCKET = "bucket"
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
#: Threads decoding files at once (bounded by the cores; each holds one file's bytes).
SCAN_THREADS = min(4, CORES)


@dataclass(frozen=True)
class ResidueHit:
    """One place where one of the values was found.

    ``path`` is the file's (or directory's) URI, ``decoder`` what read it (``parquet``,
    ``json``, ``ndjson``, ``avro``, ``puffin``, ``text``, ``raw``, ``gzip/json`` …, or
    ``path`` for a name), ``location`` where inside (``row group 0 column k``,
    ``line 3: $.commitInfo.operationParameters.predicate``, ``record 2:
    $.data_file.lower_bounds[0].value``, ``… at byte 1234``, ``name``), ``value_number`` the
    position of the value in the ``values`` searched for. A path or location that would
    spell a value has it replaced by ``<value #n>``.
    """

    path: str
    decoder: str
    location: str
    value_number: int

    def to_json(self) -> dict[str, Any]:
        """The hit as a JSON-able dict."""
        return {
            "path": self.path,
            "decoder": self.decoder,
            "location": self.location,
            "valueNumber": self.value_number,
        }


@dataclass(frozen=True)
class ResidueReport:
    """What a residue scan checked and found. ``ok`` when nothing was found and every file
    decoded as what its content said it was."""

    files_checked: int
    bytes_checked: int
    #: Files per decoder name (a file counts once, under the decoder that read it).
    files_by_decoder: Mapping[str, int] = field(hash=False)
    hits: tuple[ResidueHit, ...]
    seconds: float
    #: Files whose magic bytes promised a format that did not decode (scanned raw instead).
    unreadable: tuple[str, ...] = ()
    #: Files whose contents were not decoded (``skip``: checked by the caller).
    files_skipped: int = 0

    @property
    def ok(self) -> bool:
        """No hit, and no file that could not be decoded."""
        return not self.hits and not self.unreadable

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-able dict (values appear only as their numbers)."""
        return {
            "ok": self.ok,
            "filesChecked": self.files_checked,
            "filesSkipped": self.files_skipped,
            "bytesChecked": self.bytes_checked,
            "filesByDecoder": dict(sorted(self.files_by_decoder.items())),
            "hits": [h.to_json() for h in self.hits],
            "unreadable": list(self.unreadable),
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class _Entry:
    uri: str
    #: Folder names from the root's own name down to the entry's.
    parts: tuple[str, ...]
    is_file: bool

    @property
    def role(self) -> str:
        folders = self.parts[:-1] if self.is_file else self.parts
        if ERASURE_DIR in folders:
            return ERASURE_RECORDS
        if _SIDECAR_FOLDER in folders:
            return SIDECAR
        return METADATA if _METADATA_FOLDERS & set(folders) else DATA


def _list(storage: Storage, root: str) -> list[_Entry]:
    """The root and every file and directory below it."""
    fs, base = storage.arrow(root)
    top = fs.get_file_info(base)
    name = root.rstrip("/").rsplit("/", 1)[-1]
    if top.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"residue scan root {root} does not exist")
    if top.type == pafs.FileType.File:
        return [_Entry(root, (name,), True)]
    base = base.rstrip("/")
    out = []
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        rel = info.path[len(base) :].strip("/")
        out.append(_Entry(f"{root}/{rel}", (name, *rel.split("/")), info.type == pafs.FileType.File))
    return out


def _check_names(needles: Needles, entries: Sequence[_Entry]) -> list[ResidueHit]:
    """Hits in the names of files and directories (below their roots)."""
    f = Findings(needles)
    for e in entries:
        f.begin(e.uri, e.role)
        name = e.parts[-1]
        decoded = urllib.parse.unquote(name)
        f.text("name", name, numbers=False)
        if decoded != name:
            f.text("name", decoded, numbers=False)
        column, eq, value = decoded.partition("=")
        if e.role == SIDECAR and column == _SIDECAR_BUCKET:
            continue  # a covering index's hash bucket number, not a value
        if eq and column and _NUMBER.fullmatch(value):
            # The value as a number, and as a string spelled as one (a string column's "12"),
            # which the free text of names, matched without numbers, leaves out.
            for number in (*needles.numbers_of(decimal.Decimal(value)), *needles.numbers_of(value)):
                f.add("name", number)
    f.flush()
    return [ResidueHit(needles.redact(uri), PATH_DECODER, loc, n) for uri, loc, n in f.hits]


def find_residue(
    roots: Sequence[str],
    values: Sequence[object],
    *,
    storage: Storage | None = None,
    progress: Callable[[int, int], None] | None = None,
    skip: Container[str] = frozenset(),
) -> ResidueReport:
    """Decode and search every file under ``roots`` for ``values``; see the module docstring.

    ``roots`` are URIs or local paths (a table's root, an index root, or single files);
    every file below each is read once, but for the files whose URIs (canonical) are in
    ``skip``: their names are searched, their contents not (the caller checks them its own
    way, and :attr:`ResidueReport.files_skipped` counts them). ``values`` are typed values
    (str, int, float, Decimal, bool, bytes, date, datetime, time, UUID); None or NaN raise
    ValueError, other types TypeError, an empty list ValueError. ``storage`` serves the roots
    of its scheme (others get a ``Storage`` for their URI). ``progress(files_done,
    files_total)`` is called after each file. A root that does not exist raises
    FileNotFoundError.
    """
    started = time.perf_counter()
    needles = Needles(values)
    entries: dict[str, tuple[Storage, _Entry]] = {}
    for root in roots:
        uri = canonical_uri(root)
        st = storage if storage is not None and storage.scheme == uri_scheme(uri) else Storage.for_uri(uri)
        for e in _list(st, uri):
            entries.setdefault(e.uri, (st, e))
    # Names below the roots (a root's own name is the caller's choice of where to look).
    hits = _check_names(needles, [e for _, e in entries.values() if len(e.parts) > 1])
    every = [(e.uri, st, e) for st, e in entries.values() if e.is_file]
    files = sorted(f for f in every if f[0] not in skip)
    decoders: dict[str, str] = {}
    unreadable: list[str] = []
    done = [0, 0]  # files, bytes
    lock = threading.Lock()

    def scan(group: Sequence[tuple[str, Storage, _Entry]]) -> set[tuple[str, str, int]]:
        """Decode and search the files of one group (in a worker thread); its hits."""
        f = Findings(needles)
        for uri, st, e in group:
            data = st.read_bytes(uri)
            f.begin(uri, e.role)
            failed = False
            try:
                decoder = decode(f, data)
            except DECODE_ERRORS:
                f.blob("bytes", data)
                decoder, failed = "raw", True
            with lock:
                decoders[uri] = decoder
                if failed:
                    unreadable.append(needles.redact(uri))
                done[0] += 1
                done[1] += len(data)
                if progress is not None:
                    progress(done[0], len(files))
        f.flush()
        return f.hits

    # Files are decoded in parallel (pyarrow and the batched matching release the GIL),
    # in interleaved groups of the sorted list; each group keeps its own findings.
    workers = max(1, min(SCAN_THREADS, len(files)))
    groups = [files[i::workers] for i in range(workers)]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="residue") as pool:
        found = [h for hits in pool.map(scan, groups) for h in hits]
    size = done[1]
    by_decoder = Counter(decoders.values())
    hits += [ResidueHit(needles.redact(u), decoders[u], needles.redact(loc), n) for u, loc, n in found]
    return ResidueReport(
        files_checked=len(files),
        bytes_checked=size,
        files_by_decoder=dict(by_decoder),
        hits=tuple(sorted(set(hits), key=lambda h: (h.path, h.decoder, h.location, h.value_number))),
        seconds=time.perf_counter() - started,
        unreadable=tuple(sorted(unreadable)),
        files_skipped=len(every) - len(files),
    )
