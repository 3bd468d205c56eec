"""Arrow array helpers that the judgments (:mod:`.qrels`) and the readers share."""

from __future__ import annotations

from typing import Any

import numpy as np


def small_strings(array):
    """A large_string array as ``pa.string()`` when it fits (2 GiB of characters)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == pa.large_string():
        size = int(np.frombuffer(array.buffers()[1], np.int64)[array.offset + len(array)])
        if size < (1 << 31) - 1:
            return array.cast(pa.string())
    return array


# pyarrow's own conversions between numpy and Arrow (``pa.array``, ``pa.scalar``,
# ``Array.to_numpy``, ``np.asarray`` of an array, a Python value given to a compute
# function) first ask pandas whether the object is one of its own, importing pandas: a
# quarter of a second on every command that reads a text run.  These go through the
# arrays' buffers instead: the same values, pandas not imported.


def to_numpy(array) -> np.ndarray:
    """A numpy view (or copy) of an Arrow numeric or boolean array (or chunked array)
    without nulls."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.null_count:
        raise ValueError("an Arrow array with nulls has no plain numpy equivalent")
    if pa.types.is_boolean(array.type):
        bits = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        unpacked = np.unpackbits(bits, bitorder="little")
        return unpacked[array.offset : array.offset + len(array)].view(bool)
    kind = array.type
    if pa.types.is_floating(kind):
        dtype = np.dtype(f"f{kind.bit_width // 8}")
    elif pa.types.is_signed_integer(kind):
        dtype = np.dtype(f"i{kind.bit_width // 8}")
    elif pa.types.is_unsigned_integer(kind):
        dtype = np.dtype(f"u{kind.bit_width // 8}")
    else:
        raise TypeError(f"no numpy view of an Arrow array of {kind}")
    if len(array) == 0:
        return np.empty(0, dtype=dtype)
    data = array.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def from_numpy(values) -> Any:
    """An Arrow array of a one-dimensional numeric or boolean numpy array (its buffer, not
    copied where it is contiguous)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype == bool:
        packed = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(packed)])
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def strings(texts) -> Any:
    """An Arrow string array of Python strings (UTF-8; a lone surrogate as Python's
    ``surrogatepass`` writes it)."""
    import pyarrow as pa

    encoded = [text.encode("utf-8", "surrogatepass") for text in texts]
    ends = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=ends[1:])
    data = b"".join(encoded)
    if len(data) < (1 << 31):
        return pa.StringArray.from_buffers(
            len(encoded), pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(data)
        )
    return pa.LargeStringArray.from_buffers(len(encoded), pa.py_buffer(ends), pa.py_buffer(data))


def found_codes(found) -> np.ndarray:
    """The int64 codes of ``pyarrow.compute.index_in``'s answer ``found``, -1 where it
    found nothing."""
    return to_numpy(found.fill_null(scalar(-1).cast(found.type))).astype(np.int64)


def scalar(value) -> Any:
    """An Arrow scalar of a Python str, int, float or bool (for the compute functions)."""
    if isinstance(value, str):
        return strings([value])[0]
    return from_numpy(np.array([value]))[0]
