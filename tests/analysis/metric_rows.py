"""``calibration_table``'s long metric rows, written by hand for the report's tests."""

from __future__ import annotations

import pandas as pd

COLUMNS = ["estimator", "metric", "estimate", "low", "high", "questions"]


def metric_rows(values: dict[str, dict[str, tuple[float, float, float, int]]]) -> pd.DataFrame:
    """The rows of ``{metric: {estimator: (estimate, low, high, questions)}}``, one per (metric, estimator),
    in the order given."""
    return pd.DataFrame(
        [
            {"estimator": name, "metric": metric, "estimate": e, "low": lo, "high": hi, "questions": q}
            for metric, by_name in values.items()
            for name, (e, lo, hi, q) in by_name.items()
        ],
        columns=COLUMNS,
    )
