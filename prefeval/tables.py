"""Reading back the tables prefeval writes: per-query preference tables
(``compare -q``) and per-query metric tables (``metrics``), in tsv, csv or jsonl."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import InputError
from .readers import read_bytes

PREF_COLUMNS = ["measure", "run_a", "run_b", "query_id", "value"]
METRIC_COLUMNS = ["measure", "run", "query_id", "value"]


def read_table(path: str, required: list[str]) -> pd.DataFrame:
    """A tsv/csv/jsonl table (format sniffed from its first line); text columns as str."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson

    data = read_bytes(path)
    head = data.lstrip()[:1]
    text_types = {c: pa.string() for c in required if c != "value"}
    try:
        if head == b"{":
            schema = pa.schema(
                [(c, pa.string() if c != "value" else pa.float64()) for c in required]
            )
            table = pajson.read_json(
                pa.py_buffer(data),
                parse_options=pajson.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
        else:
            first = data.split(b"\n", 1)[0]
            delimiter = "\t" if b"\t" in first else ","
            table = pacsv.read_csv(
                pa.py_buffer(data),
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                convert_options=pacsv.ConvertOptions(
                    column_types={**text_types, "value": pa.float64()}
                ),
            )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise InputError(path, None, f"cannot parse table: {error}") from None
    missing = [c for c in required if c not in table.column_names]
    if missing:
        raise InputError(path, 1, f"missing columns {missing} (need {', '.join(required)})")
    frame = table.select(required).to_pandas()
    if frame[required].isna().any().any():
        row = int(np.flatnonzero(frame[required].isna().any(axis=1).to_numpy())[0])
        raise InputError(path, None, f"row {row + 1}: missing value")
    return frame


def cube_from_table(frame: pd.DataFrame, path: str = "<table>", measures=None):
    """Rebuild a PreferenceCube from per-query rows (summary rows are ignored)."""
    from .engine import SUMMARY_QUERY, PreferenceCube

    frame = frame[frame["query_id"] != SUMMARY_QUERY]
    if frame.empty:
        raise InputError(path, None, "no per-query rows (write the table with compare -q)")
    if measures:
        wanted = [str(m) for m in measures]
        unknown = [m for m in wanted if m not in set(frame["measure"])]
        if unknown:
            raise InputError(path, None, f"no rows for measure(s) {unknown}")
        frame = frame[frame["measure"].isin(wanted)]
    measure_names = list(dict.fromkeys(frame["measure"]))
    runs = list(dict.fromkeys(np.ravel(frame[["run_a", "run_b"]].to_numpy())))
    from .qrels import query_sort_key

    query_ids = sorted(set(frame["query_id"]), key=query_sort_key)
    n = len(runs)
    ia, ja = np.triu_indices(n, 1)
    pair_index = np.full((n, n), -1, dtype=np.int64)
    pair_index[ia, ja] = np.arange(len(ia))
    pair_index[ja, ia] = np.arange(len(ia))
    r_index = {r: i for i, r in enumerate(runs)}
    a = frame["run_a"].map(r_index).to_numpy()
    b = frame["run_b"].map(r_index).to_numpy()
    if np.any(a == b):
        raise InputError(path, None, "a row compares a run with itself")
    m = pd.Categorical(frame["measure"], categories=measure_names).codes
    q = pd.Categorical(frame["query_id"], categories=query_ids).codes
    p = pair_index[a, b]
    value = np.where(a < b, 1.0, -1.0) * frame["value"].to_numpy(dtype=float)
    values = np.full((len(measure_names), len(ia), len(query_ids)), np.nan)
    flat = (m.astype(np.int64) * len(ia) + p) * len(query_ids) + q
    if len(np.unique(flat)) != len(flat):
        raise InputError(path, None, "a measure, run pair and query appear more than once")
    values.reshape(-1)[flat] = value
    missing = np.isnan(values).all(axis=2)
    if missing.any():
        k, pp = np.argwhere(missing)[0]
        raise InputError(
            path,
            None,
            f"measure {measure_names[k]} has no rows for runs {runs[ia[pp]]} and {runs[ja[pp]]}",
        )
    return PreferenceCube(measure_names, runs, query_ids, np.stack([ia, ja], 1), values)


def metrics_from_table(
    frame: pd.DataFrame, runs: list[str], query_ids: list[str], path: str = "<table>", measures=None
) -> dict[str, np.ndarray]:
    """measure -> (queries x runs) matrix aligned on ``runs`` and ``query_ids``."""
    frame = frame[frame["query_id"] != "all"]
    names = list(dict.fromkeys(frame["measure"]))
    if measures:
        unknown = [m for m in measures if m not in names]
        if unknown:
            raise InputError(path, None, f"no rows for metric(s) {unknown}")
        names = [n for n in names if n in set(measures)]
    out = {}
    for name in names:
        part = frame[frame["measure"] == name]
        table = part.pivot_table(index="query_id", columns="run", values="value", aggfunc="first")
        missing_runs = [r for r in runs if r not in table.columns]
        missing_q = [q for q in query_ids if q not in table.index]
        if missing_runs or missing_q:
            what = f"runs {missing_runs}" if missing_runs else f"queries {missing_q[:5]}"
            raise InputError(path, None, f"metric {name} has no values for {what}")
        matrix = table.loc[query_ids, runs].to_numpy(dtype=float)
        if np.isnan(matrix).any():
            raise InputError(path, None, f"metric {name} has missing (run, query) values")
        out[name] = matrix
    return out


def metrics_table_to_matrices(frame: pd.DataFrame, runs, query_ids) -> dict[str, np.ndarray]:
    """Same as :func:`metrics_from_table` for a table computed in memory."""
    return metrics_from_table(frame, runs, query_ids, path="<metrics>")
