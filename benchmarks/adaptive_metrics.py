"""Adaptive sampling: replay of stopping plans on real fixed-k logs, and simulation of the capability metrics.

Writes the two tables of docs/methods.md, "Adaptive sampling: the capability metrics after stopping":

* replay (``analysis.estimators.adaptive_replay.replay_stopping``): for every capcal sampling run under
  ``--runs`` with k >= 16 samples per question, each unanimity plan whose k_max fits k is applied to
  ``--orders`` random orders of each question's samples; reported: mean over questions of |mean over orders of
  the unbiased estimate - full-k mean| with its standard error, the signed mean difference, the samples saved;
* simulation (``analysis.estimators.adaptive_simulation.simulate_adaptive_metrics``): for each mu distribution
  and plan, bias of the adaptive and fixed-k metrics against the true-mu metric with Monte-Carlo SEs, the SE
  ratio adaptive / fixed-k and the samples saved. The confidences are the P(True) confidences of the capcal
  runs under ``--runs`` (every P(True) run found; pooled), matched to mu by rank.

    python benchmarks/adaptive_metrics.py --runs /tmp/demo_final/lm_eval [--orders 400] [--replications 400]
"""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np
import pandas as pd

import capcal_metrics as cm
from analysis.estimators.adaptive_replay import replay_stopping
from analysis.estimators.adaptive_simulation import MU_DISTRIBUTIONS, simulate_adaptive_metrics
from analysis.runs.tables import load_runs

REPLAY_PLANS = ((2, 4, 8, 16), (4, 8, 16), (8, 16))
SIMULATION_PLANS = (
    (16, 32, 64, 100),
    (8, 16, 32, 64),
    (8, 16, 32, 64, 128),
    (2, 4),
    (4, 8, 16),
    (4, 8, 16, 32, 64),
)


def _replay(questions: pd.DataFrame, confidences: pd.DataFrame, orders: int) -> pd.DataFrame:
    """One row per (run, plan) with k_max <= the run's k (none without a sampling run)."""
    rows = []
    if questions.empty:
        return pd.DataFrame(rows)
    for (model, task, run_id), run in questions.groupby(["model", "task", "run_id"]):
        k = int(run["n"].min())
        if k < 16 or run["n"].max() != k:
            continue
        correctness = np.array([list(vector) for vector in run["correctness"]], dtype=int)
        joined = run[["question_id"]].merge(
            confidences.loc[confidences["target_task"] == task, ["question_id", "confidence"]],
            on="question_id",
            how="left",
        )
        confidence = joined["confidence"].to_numpy(dtype=float)
        usable = None if np.isnan(confidence).any() else confidence
        for looks in REPLAY_PLANS:
            if looks[-1] > k:
                continue
            result = replay_stopping(correctness, cm.unanimity_rule(looks), orders, confidence=usable, seed=0)
            row = {
                "run": f"{model.rsplit('/', 1)[-1]} {task} {run_id}",
                "questions": len(run),
                "k": k,
                "looks": "-".join(map(str, looks)),
                "mean_abs_difference": result.mean_abs_difference,
                "mean_abs_difference_se": result.mean_abs_difference_se,
                "mean_difference": result.mean_difference,
                "mean_difference_se": result.mean_difference_se,
                "samples_saved_vs_k_max": 1.0 - result.samples_fraction,
                "samples_saved_vs_k": 1.0 - result.samples_fraction * looks[-1] / k,
            }
            for metric in result.metrics.itertuples():
                row[f"{metric.metric} fixed"] = metric.fixed
                row[f"{metric.metric} replay"] = f"{metric.replay_mean:.4f} +- {metric.replay_se:.4f}"
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="folder of capcal lm-eval output (fixed-k runs)")
    parser.add_argument("--orders", type=int, default=400)
    parser.add_argument("--replications", type=int, default=400)
    parser.add_argument("--questions", type=int, default=300)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
    collection = load_runs([args.runs], select="all")
    confidences = collection.confidences.loc[collection.confidences["kind"] == "ptrue"]
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    print("## Replay on real fixed-k logs")
    print(_replay(collection.questions, confidences, args.orders).to_string(index=False))
    pool = confidences["confidence"].dropna().to_numpy(dtype=float)
    if pool.size == 0:
        print("no P(True) run under --runs: the simulation needs real confidences", file=sys.stderr)
        return 2
    print(
        f"\n## Simulation ({args.questions} questions, {args.replications} replications, "
        f"{pool.size} confidences)"
    )
    tables = [
        simulate_adaptive_metrics(
            distribution,
            pool,
            cm.unanimity_rule(looks),
            n_questions=args.questions,
            n_replications=args.replications,
            seed=0,
        )
        for distribution in MU_DISTRIBUTIONS
        for looks in SIMULATION_PLANS
    ]
    table = pd.concat(tables)
    combined = np.hypot(table["bias_adaptive_se"], table["bias_fixed_se"])
    table["gap_in_se"] = (table["bias_adaptive"] - table["bias_fixed"]) / combined
    print(table.round(6).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
