"""Path canonicalisation for Delta log entries.

Paths in ``add``/``remove`` actions are URI references, percent-encoded: either
relative to the table root or absolute (``s3://...``, ``file:/...``, ``file:///...``).
They are decoded exactly once (``%2520`` becomes ``%20``, ``+`` stays ``+``) and made
absolute, so the same data file always gets the same key whatever form the writer used.
Absolute ones follow the core's rules (:func:`lakehouse_index.source.canonical_uri`).
A relative path stays inside the table root: one with a ``..`` segment (before or after
decoding) is refused, since no Delta writer produces it and it could name any file.
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
    """The canonical absolute URI of a path written in the log (decoded exactly once).

    ValueError for a relative path that would leave the table root (a ``..`` segment).
    """
    if _SCHEME.match(raw):
        return canonical_uri(raw)
    relative = unquote(raw)
    if ".." in relative.split("/"):
        raise ValueError(f"relative path {raw!r} leaves the table root")
    return table_root + "/" + relative
