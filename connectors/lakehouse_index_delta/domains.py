"""Domain metadata (``domainMetadata`` actions) of a Delta version, read on demand.

Replay keeps no domains: only writers need them (the ``delta.rowTracking`` domain holds
the row-id high-water mark a commit that adds files must advance). A domain's state at a
version is its newest action in the commits since the checkpoint, else the checkpoint's
row; ``removed`` means absent.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from lakehouse_index.source import FileIO, TableFormatError
from lakehouse_index_delta.log_files import LogListing

_ABSENT = object()


def _from_actions(objects: list[dict[str, object]], domain: str) -> object:
    """The configuration of ``domain`` set by the last matching action, None if removed, else _ABSENT."""
    found: object = _ABSENT
    for obj in objects:
        d = obj.get("domainMetadata")
        if isinstance(d, dict) and d.get("domain") == domain:
            found = None if d.get("removed") else str(d.get("configuration"))
    return found


def domain_configuration(io: FileIO, listing: LogListing, version: int, domain: str) -> str | None:
    """The configuration string of ``domain`` at ``version`` (None when the table has no such domain)."""
    cp = listing.checkpoint_at_or_below(version)
    first = cp.version + 1 if cp is not None else 0
    for v in range(version, first - 1, -1):
        st = listing.commits.get(v)
        if st is None:
            continue
        data = io.read_bytes(st.path)
        if b'"domainMetadata"' not in data:
            continue
        objects = [json.loads(line) for line in data.splitlines() if b'"domainMetadata"' in line]
        found = _from_actions(objects, domain)
        if found is not _ABSENT:
            return found  # type: ignore[return-value]
    if cp is None:
        return None
    found = _ABSENT
    for st in cp.files:
        if st.path.endswith(".json"):
            objects = [json.loads(line) for line in io.read_bytes(st.path).splitlines() if line.strip()]
        else:
            fs, path = io.arrow(st.path)
            try:
                pf = pq.ParquetFile(path, filesystem=fs)
                if "domainMetadata" not in pf.schema_arrow.names:
                    continue
                rows = pf.read(columns=["domainMetadata"], use_threads=False).column(0).to_pylist()
            except OSError as e:
                raise TableFormatError(f"checkpoint file {st.path} is not readable Parquet: {e}") from e
            objects = [{"domainMetadata": r} for r in rows if r is not None]
        here = _from_actions(objects, domain)
        if here is not _ABSENT:
            found = here
    return None if found is _ABSENT else found  # type: ignore[return-value]
