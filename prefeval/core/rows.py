"""Tidy rows held by columns, without pandas: a categorical column as integer codes into
its categories, a float column as its values.  The writers write them as they write a
DataFrame; :meth:`Rows.to_frame` is the same rows as a pandas DataFrame (categorical
columns as pandas Categoricals), for the library's callers."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Coded:
    """A categorical column: ``codes`` (integers, -1 for none) into ``categories``."""

    codes: np.ndarray
    categories: list[str]


@dataclass(frozen=True)
class Rows:
    """Columns by name, in order: each :class:`Coded` or a float64 array, all as long."""

    columns: dict[str, Coded | np.ndarray]

    def __len__(self) -> int:
        first = next(iter(self.columns.values()), None)
        if first is None:
            return 0
        return len(first.codes if isinstance(first, Coded) else first)

    def part(self, lo: int, hi: int) -> Rows:
        """Rows ``lo:hi`` (the categories kept whole)."""
        return Rows(
            {
                name: Coded(column.codes[lo:hi], column.categories)
                if isinstance(column, Coded)
                else column[lo:hi]
                for name, column in self.columns.items()
            }
        )

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (a :class:`Coded` column as a pandas Categorical)."""
        import pandas as pd

        return pd.DataFrame(
            {
                name: pd.Categorical.from_codes(column.codes, column.categories)
                if isinstance(column, Coded)
                else column
                for name, column in self.columns.items()
            }
        )


def as_frame(table) -> pd.DataFrame:
    """A DataFrame of ``table``: :class:`Rows` converted, a DataFrame as it is."""
    return table.to_frame() if isinstance(table, Rows) else table


def is_pandas(obj, *kinds: str) -> bool:
    """Whether ``obj`` is one of pandas' ``kinds`` (``"DataFrame"``, ``"Series"``), asked
    without importing pandas: before pandas is imported no object can be one."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(obj, tuple(getattr(pandas, k) for k in kinds))
