"""Path canonicalisation for Delta log entries.

Paths in ``add``/``remove`` actions are URI references, percent-encoded: either
relative to the table root or absolute (``s3://...``, ``file:/...``, ``file:///...``).
They are decoded exactly once (``%2520`` becomes ``%20``, ``+`` stays ``+``) and made
absolute, so the same data file always gets the same key whatever form the writer used.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def canonical_root(uri: str) -> str:
    """The canonical URI of a table root: ``file:///abs/path`` for local tables, no trailing ``/``."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return "file://" + os.path.abspath(unquote(parsed.path)).rstrip("/")
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return "file://" + os.path.abspath(os.path.expanduser(uri)).rstrip("/")
    if parsed.scheme == "s3a":
        return "s3://" + uri.split("://", 1)[1].rstrip("/")
    return uri.rstrip("/")


def resolve_path(table_root: str, raw: str) -> str:
    """The canonical absolute URI of a path written in the log (decoded exactly once)."""
    if _SCHEME.match(raw):
        parsed = urlparse(raw)
        if parsed.scheme == "file":
            # file:/a, file:///a and file://localhost/a all name the local path /a.
            return "file://" + unquote(parsed.path)
        if parsed.scheme == "s3a":
            return "s3://" + unquote(raw.split("://", 1)[1])
        return unquote(raw)
    return table_root + "/" + unquote(raw)
