"""Canonical URIs: the one spelling of every location the project stores, compares or opens.

Every path that crosses a module boundary (table roots, data files, index roots, log
entries) is a *canonical URI*, produced by :func:`canonical_uri`. Two spellings of the
same object always canonicalize to the same string, so paths can be compared and used as
dict keys as they are.

Rules
-----
* **Plain paths** (no scheme) are local filesystem paths taken literally (``~`` expanded,
  made absolute against the working directory, ``.``/``..`` and doubled ``/`` folded) and
  become ``file:///abs/path``. A plain path is never percent-decoded: ``/data/a%20b`` names
  a directory called ``a%20b``.
* **``file:`` URIs** in every spelling (``file:/p``, ``file:///p``, ``file://localhost/p``;
  any other authority is dropped, as the platforms' URL parsers do) become
  ``file:///abs/path``, the path **percent-decoded exactly once** (``a%20b`` → ``a b``,
  ``a%2520b`` → ``a%20b``, ``+`` stays ``+``).
* **Object stores**: ``s3a://`` and ``s3n://`` (Hadoop) become ``s3://``; ``gcs://``
  becomes ``gs://``; ``az://``, ``abfs://`` and ``abfss://`` (Azure) are kept as written
  (their authorities differ). The rest of the URI is percent-decoded once as well. Other
  schemes get the same treatment (the scheme lower-cased); whether they can be *opened*
  is up to the storage registry (:func:`lakehouse_index.io.register_backend`).
* **No trailing ``/``** (the local root is ``file:///``). Query strings and fragments are not
  recognised: a canonical URI is a location, everything after the authority is its path.

A canonical URI is *decoded*: it is a name, not an RFC 3986 reference, and it may hold
spaces, ``%``, ``?`` or ``#`` literally. To re-canonicalize a string that is already
decoded (a canonical URI, or an Iceberg location, which the Iceberg spec stores
unencoded), pass ``decoded=True``: the form is normalised and nothing is decoded, so
``canonical_uri(canonical_uri(x), decoded=True) == canonical_uri(x)``.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

__all__ = [
    "LOCAL_SCHEME",
    "SCHEME_ALIASES",
    "canonical_uri",
    "join_uri",
    "local_path",
    "uri_scheme",
]

#: Scheme of local files.
LOCAL_SCHEME = "file"
#: Spellings of a scheme that name the same store as the canonical one.
SCHEME_ALIASES: dict[str, str] = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


def _scheme_and_rest(location: str) -> tuple[str | None, str]:
    """(canonical scheme, text after ``scheme:``), or (None, location) for a plain path."""
    m = _SCHEME.match(location)
    if m is None:
        return None, location
    scheme = m.group(1).lower()
    return SCHEME_ALIASES.get(scheme, scheme), location[m.end() :]


def uri_scheme(location: str) -> str:
    """The canonical scheme of ``location`` (``"file"`` for a plain path)."""
    scheme, _ = _scheme_and_rest(location)
    return scheme or LOCAL_SCHEME


def _local(path: str) -> str:
    absolute = os.path.abspath(os.path.expanduser(path))
    return "file://" + absolute if absolute != "/" else "file:///"


def canonical_uri(location: str, *, decoded: bool = False) -> str:
    """The canonical URI of ``location`` (rules in the module docstring).

    ``decoded=True``: ``location`` is already decoded (a canonical URI, an Iceberg path);
    only its form is normalised.
    """
    scheme, rest = _scheme_and_rest(location)
    if scheme is None:
        return _local(location)
    if scheme == LOCAL_SCHEME:
        path = rest
        if path.startswith("//"):  # an authority: "" or a host name, dropped
            slash = path.find("/", 2)
            path = path[slash:] if slash >= 0 else "/"
        return _local(path if decoded else unquote(path))
    body = (rest if decoded else unquote(rest)).rstrip("/")
    return f"{scheme}:{body}"


def local_path(uri: str) -> str:
    """The filesystem path of a local (decoded) URI or plain path; ValueError for other schemes."""
    scheme, _ = _scheme_and_rest(uri)
    if scheme not in (None, LOCAL_SCHEME):
        raise ValueError(f"{uri!r} is not a local path")
    return canonical_uri(uri, decoded=True)[len("file://") :]


def join_uri(base: str, *parts: str) -> str:
    """``base`` joined with relative ``parts`` by ``/``."""
    out = base.rstrip("/")
    if out.endswith(":"):  # a bare root such as ``file:///``: keep its ``//``
        out = base[: len(out) + 2]
    for p in parts:
        out += "/" + p.strip("/")
    return out
