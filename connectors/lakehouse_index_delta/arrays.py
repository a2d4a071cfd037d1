"""Arrow arrays and scalars built from Python values without ``pyarrow.array``, and back.

pyarrow imports pandas the first time it converts Python objects (``pa.array``,
``pa.scalar``, a Python value passed to a compute function) or an array to numpy
(``Array.to_numpy``): about 40 MB and 0.3 s, more than the whole cold load of a
100,000-file snapshot. The connector builds the few arrays it needs from buffers, and
views integer arrays' buffers as numpy arrays, instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def int_array(values: np.ndarray | Sequence[int]) -> pa.Array:
    """A non-null integer array (int64 unless ``values`` is a typed numpy array)."""
    arr = np.ascontiguousarray(values if isinstance(values, np.ndarray) else np.array(values, np.int64))
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr), [None, pa.py_buffer(arr)])


def int_values(arr: pa.Array) -> np.ndarray:
    """The values of a non-null integer array as a read-only numpy view of its buffer."""
    if arr.null_count:
        raise ValueError("int_values of an array with nulls")
    dtype = np.dtype(arr.type.to_pandas_dtype())  # a numpy dtype: pandas is not imported
    if len(arr) == 0:
        return np.empty(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype, len(arr), arr.offset * dtype.itemsize)


def string_array(values: Sequence[str | None]) -> pa.Array:
    """A string array; None gives null."""
    encoded = [v.encode("utf-8") if v is not None else b"" for v in values]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("more than 2 GiB of strings")
    valid = np.fromiter((v is not None for v in values), np.bool_, len(values))
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.string(),
        len(values),
        [bitmap, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))],
        null_count=int(len(values) - valid.sum()),
    )


def string_scalar(value: str) -> pa.Scalar:
    """A string scalar."""
    return string_array([value])[0]


def int_scalar(value: int, dtype: type[np.integer] = np.int64) -> pa.Scalar:
    """An integer scalar (int64 unless ``dtype`` says otherwise)."""
    return int_array(np.array([value], dtype))[0]


def bool_scalar(value: bool) -> pa.Scalar:
    """A boolean scalar."""
    bits = pa.py_buffer(np.packbits(np.array([value]), bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), 1, [None, bits])[0]
