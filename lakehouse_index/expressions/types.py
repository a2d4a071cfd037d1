"""What the expression layer needs to know about types and patterns, in one place.

* :func:`family`: the one classification of Arrow types by the kind of value they hold.
  The binder compares and coerces by it, skipping indexes derive their hash encoding
  from it, lookups decide whether Parquet statistics order like the keys.
* :class:`LikePattern`: the one reading of a SQL ``LIKE`` pattern (``%`` any run, ``_``
  one character, ``\\`` escapes the next character), as a regex or a literal prefix.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

__all__ = ["Family", "LikePattern", "comparison_class", "family", "orders_alike"]


class Family(enum.Enum):
    """The kind of value an Arrow type holds, whatever its width or layout."""

    BOOLEAN = enum.auto()
    INTEGER = enum.auto()
    FLOAT = enum.auto()
    DECIMAL = enum.auto()
    DATE = enum.auto()
    TIMESTAMP = enum.auto()
    STRING = enum.auto()
    BINARY = enum.auto()
    #: ``fixed_size_binary[n]`` (Iceberg ``fixed``, ``uuid``): bytes of one length.
    FIXED_BINARY = enum.auto()

    @property
    def numeric(self) -> bool:
        """Integers, floats and decimals: compared with each other by value."""
        return self in (Family.INTEGER, Family.FLOAT, Family.DECIMAL)


_TESTS: dict[Family, tuple[Callable[[pa.DataType], bool], ...]] = {
    Family.BOOLEAN: (pa.types.is_boolean,),
    Family.INTEGER: (pa.types.is_integer,),
    Family.FLOAT: (pa.types.is_floating,),
    Family.DECIMAL: (pa.types.is_decimal,),
    Family.DATE: (pa.types.is_date,),
    Family.TIMESTAMP: (pa.types.is_timestamp,),
    Family.STRING: (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view),
    Family.BINARY: (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view),
    Family.FIXED_BINARY: (pa.types.is_fixed_size_binary,),
}


def family(t: pa.DataType) -> Family | None:
    """The family of ``t``; None for every other type (nested, time of day, durations...)."""
    for fam, tests in _TESTS.items():
        if any(test(t) for test in tests):
            return fam
    return None


def comparison_class(t: pa.DataType) -> str:
    """Columns of the same class may be compared with each other and with the same literals.

    All numbers form one class; a type outside the families (or fixed-size binary) is
    only comparable with itself.
    """
    f = family(t)
    if f is None or f is Family.FIXED_BINARY:
        return str(t)
    return "number" if f.numeric else f.name.lower()


def orders_alike(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether values of ``a`` and ``b`` sort alike, so that bounds of one bound the other.

    Equal types do; so do two string types (any layout) and two integer types.
    """
    fa, fb = family(a), family(b)
    return a.equals(b) or (fa is fb and fa in (Family.STRING, Family.INTEGER))


@dataclass(frozen=True)
class LikePattern:
    """A SQL ``LIKE`` pattern read once: literal text, ``%`` and ``_`` wildcards."""

    pattern: str

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def of(pattern: str) -> LikePattern:
        """The (shared, cached) reading of ``pattern``."""
        return LikePattern(pattern)

    @cached_property
    def tokens(self) -> tuple[str | None, ...]:
        """Literal characters as themselves, ``%`` as None, ``_`` as ``""``.

        A backslash makes the next character literal; a trailing backslash is literal.
        """
        out: list[str | None] = []
        text = self.pattern
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            out.append(None if c == "%" else "" if c == "_" else c)
            i += 1
        return tuple(out)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """A regex matching exactly the strings the pattern matches (use ``fullmatch``)."""
        parts = [".*" if tok is None else "." if tok == "" else re.escape(tok) for tok in self.tokens]
        return re.compile("".join(parts), re.DOTALL)

    @cached_property
    def prefix(self) -> str:
        """The literal text before the first wildcard: every match starts with it."""
        out = []
        for tok in self.tokens:
            if not tok:
                break
            out.append(tok)
        return "".join(out)

    def matches(self, value: str) -> bool:
        """Whether ``value`` matches the whole pattern."""
        return self.regex.fullmatch(value) is not None
