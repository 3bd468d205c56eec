"""Arrow array helpers that the judgments (:mod:`.qrels`) and the readers share."""

from __future__ import annotations

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
