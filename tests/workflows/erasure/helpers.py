"""Shared pieces of the erase tests."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from lakehouse_index.io.uri import local_path


@contextmanager
def unreadable(uris: Iterable[str]) -> Iterator[None]:
    """Move data files out of the way for the duration: any read of one fails (FileNotFoundError).

    Proves an operation reads no other file (root ignores permissions, so moving is the
    reliable way); the files are put back afterwards, whatever happened.
    """
    moved = []
    try:
        for uri in uris:
            path = local_path(uri)
            os.rename(path, path + ".hidden")
            moved.append(path)
        yield
    finally:
        for path in moved:
            os.rename(path + ".hidden", path)
