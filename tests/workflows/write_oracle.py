"""When a Delta write through deltalake must be refused, decided from the data in hand."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import pyarrow as pa


def deltalake_would_overwrite_nans(files: Sequence[pa.Table], columns: Collection[str]) -> bool:
    """Whether some file holds, in a float column the ``where`` reads, NaN beside exactly one
    other value, a finite one: deltalake 1.6 then rewrites the NaNs as that value (its
    statistics leave NaN out and say the column is constant), so the library refuses the
    write. An infinite value gets null statistics (JSON has no infinity): no constant, no
    rewrite of the NaNs (checked with deltalake: ``[nan, inf]`` survives ``f > 0.0``)."""
    for batch in files:
        for c in columns:
            if not pa.types.is_floating(batch.schema.field(c).type):
                continue
            values = [v for v in batch[c].to_pylist() if v is not None]
            others = {v for v in values if not math.isnan(v)}  # -0.0 and 0.0 are one value here
            if len(others) == 1 and math.isfinite(*others) and any(math.isnan(v) for v in values):
                return True
    return False
