"""Finding the connector for a table: entry points, then ``detect``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lakehouse_index.errors import NotATableError
from lakehouse_index.io import Storage, canonical_uri
from lakehouse_index.source import TableSource, connector_entry_points, load_connector

_log = logging.getLogger(__name__)


def open_source(
    uri: str,
    *,
    catalog: Any = None,
    storage_options: Mapping[str, str] | None = None,
    format: str | None = None,
) -> TableSource:
    """Open ``uri`` with the first registered connector that recognises it.

    ``format`` forces a connector by its entry-point name (``"delta"``, ``"iceberg"``).
    With ``catalog``, ``uri`` is a table identifier resolved by that catalog; otherwise it is
    canonicalized (:func:`~lakehouse_index.io.uri.canonical_uri`, decoded once) and the
    connectors receive the canonical URI.
    """
    connectors = connector_entry_points()
    if format is not None and format not in connectors:
        raise NotATableError(f"no connector named {format!r}; installed: {sorted(connectors)}")
    location = uri if catalog is not None else canonical_uri(uri)
    io = Storage.for_uri(location if catalog is None else "file:///", storage_options)
    options: dict[str, Any] = {"storage_options": dict(storage_options or {})}
    if catalog is not None:
        options["catalog"] = catalog
    candidates = {format: connectors[format]} if format else connectors
    for name, ep in candidates.items():
        # Loaded one at a time: a Delta table never imports pyiceberg (1.6 s) through its connector.
        cls = load_connector(ep)
        if cls.detect(location, io, **options):
            _log.debug("opening %s as %s", location, name)
            return cls.open(location, io, **options)
    raise NotATableError(
        f"{uri!r} is not a table any installed connector recognises "
        f"(tried {', '.join(sorted(candidates)) or 'none'}): no _delta_log/ or Iceberg metadata/ found"
    )
