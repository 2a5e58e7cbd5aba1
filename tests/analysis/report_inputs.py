"""Report inputs written by hand for the report's tests: ``calibration_table``'s long metric rows, an adaptive
run's question table."""

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


def adaptive_table(looks: list[int], *estimators: str) -> pd.DataFrame:
    """An adaptive run's table of 4 questions (2 stopped at the first look ``looks[0]``, 2 at k_max
    ``looks[-1]``) with the given estimators."""
    first, last = looks[0], looks[-1]
    correctness = [[1] * first, [0] * first, [1, 0] * (last // 2), [0, 1] * (last // 2)]
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [1.0, 0.0, 0.5, 0.5],
            "mu_squared_hat": [1.0, 0.0, 0.2, 0.2],
            "sampling": f"adaptive (looks {', '.join(map(str, looks))}, rule unanimity)",
            "looks": [looks] * 4,
            **{name: [0.9, 0.1, 0.5, 0.5] for name in estimators},
        }
    )
