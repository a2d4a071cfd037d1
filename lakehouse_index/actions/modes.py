"""The modes of ``refresh_index`` and ``optimize_index``, and how their string values are read."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

_M = TypeVar("_M", bound=Enum)


class RefreshMode(str, Enum):
    """How ``refresh_index`` brings an index up to date."""

    FULL = "full"
    INCREMENTAL = "incremental"
    QUICK = "quick"


class OptimizeMode(str, Enum):
    """How ``optimize_index`` compacts an index."""

    QUICK = "quick"
    FULL = "full"


def parse_mode(enum: type[_M], value: _M | str, what: str) -> _M:
    """``value`` as a member of ``enum`` (its string value is accepted); a clear error otherwise."""
    try:
        return enum(value)
    except ValueError:
        choices = tuple(m.value for m in enum)
        raise ValueError(f"{what} mode must be one of {choices}, got {value!r}") from None
