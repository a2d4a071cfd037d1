"""Path canonicalisation for Delta log entries.

Paths in ``add``/``remove`` actions are URI references, percent-encoded: either
relative to the table root or absolute (``s3://...``, ``file:/...``, ``file:///...``).
They are decoded exactly once (``%2520`` becomes ``%20``, ``+`` stays ``+``) and made
absolute, so the same data file always gets the same key whatever form the writer used.
Absolute ones follow the core's rules (:func:`lakehouse_index.source.canonical_uri`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from lakehouse_index.source import canonical_uri

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def canonical_root(uri: str) -> str:
    """The canonical URI of a table root the core handed over (already decoded: not decoded again)."""
    return canonical_uri(uri, decoded=True)


def resolve_path(table_root: str, raw: str) -> str:
    """The canonical absolute URI of a path written in the log (decoded exactly once)."""
    if _SCHEME.match(raw):
        return canonical_uri(raw)
    return table_root + "/" + unquote(raw)
