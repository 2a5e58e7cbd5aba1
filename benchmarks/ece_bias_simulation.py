"""Bias and interval coverage of binned vs debiased capability ECE; Brier skill of reference forecasts.

Simulation (seeded; the tables of docs/methods.md, "The bias of binned ECE" and "Brier skill score"):

* confidence c ~ Beta(2, 2); true capability mu | c ~ Beta(10 g(c), 10 (1 - g(c))), so E[mu | c] = g(c) with
  a question-to-question spread; mu_hat = Binomial(k, mu) / k;
* cases: calibrated g(c) = c; overconfident g(c) = 0.5 + 0.6 (c - 0.5) (confidence too extreme);
  underconfident g(c) = clip(0.5 + 1.5 (c - 0.5), 0.001, 0.999) (confidence too timid);
* population ECE: 10 equal-width bins, sum_b P(c in b) |E[g(c) - c | c in b]| by quadrature (the ECE of c
  against the true mu with infinitely many questions);
* per cell (case, k, N): ``--repetitions`` data sets; binned ECE (``expected_calibration_error``) and debiased
  ECE (``debiased_expected_calibration_error``); bias = mean estimate - population, with its Monte-Carlo
  standard error; coverage of the population value by the 95% percentile bootstrap interval
  (``bootstrap_ci``, ``--resamples`` resamples) and by estimate +- 1.96 jackknife SE (the leaderboard
  columns' standard error, ``capcal_metrics.jackknife_items``).
* Brier skill: per (k, N) the mean and Monte-Carlo SE over repetitions of ``brier_skill_score`` and
  ``corrected_brier_skill_score`` for the constant at the base rate (the in-sample mean mu_hat), the oracle
  c = mu and c ~ U(0, 1), on the overconfident case's mu.

Run (the tables of docs/methods.md; about 25 minutes per k on a loaded 2-core machine):

    for k in 4 16; do
      OMP_NUM_THREADS=1 .venv/bin/python benchmarks/ece_bias_simulation.py --k $k --repetitions 400 \
          --repetitions-large 60 --resamples 500 --skill-repetitions 4000 \
          --output benchmarks/results/ece_bias_simulation_k$k.json
    done
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import integrate, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcal_metrics import (  # noqa: E402
    bootstrap_ci,
    brier_skill_score,
    corrected_brier_skill_score,
    debiased_expected_calibration_error,
    expected_calibration_error,
    jackknife_items,
)

CONCENTRATION = 10.0
N_BINS = 10
CASES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "calibrated": lambda c: c,
    "overconfident": lambda c: 0.5 + 0.6 * (c - 0.5),
    "underconfident": lambda c: np.clip(0.5 + 1.5 * (c - 0.5), 0.001, 0.999),
}
ESTIMATORS = {"binned": expected_calibration_error, "debiased": debiased_expected_calibration_error}


def draw(rng: np.random.Generator, case: str, n_questions: int, k: int) -> tuple[np.ndarray, ...]:
    """(c, mu, mu_hat) of one simulated task."""
    confidence = rng.beta(2.0, 2.0, n_questions)
    mean = np.clip(CASES[case](confidence), 0.001, 0.999)
    mu = rng.beta(CONCENTRATION * mean, CONCENTRATION * (1.0 - mean))
    return confidence, mu, rng.binomial(k, mu) / k


def population_ece(case: str) -> float:
    """sum_b P(c in b) |E[g(c) - c | c in b]| = sum_b |int_b (g(c) - c) pdf(c) dc| for c ~ Beta(2, 2)."""
    total = 0.0
    for b in range(N_BINS):
        gap, _ = integrate.quad(
            lambda c: (float(np.clip(CASES[case](np.array(c)), 0.001, 0.999)) - c) * stats.beta.pdf(c, 2, 2),
            b / N_BINS,
            (b + 1) / N_BINS,
        )
        total += abs(gap)
    return total


def ece_cell(case: str, k: int, n_questions: int, repetitions: int, resamples: int, seed: int) -> dict:
    """Bias, SD and coverage of both ECE estimators in one (case, k, N) cell."""
    rng = np.random.default_rng(seed)
    truth = population_ece(case)
    estimates = {name: np.empty(repetitions) for name in ESTIMATORS}
    bootstrap_cover = {name: np.empty(repetitions, dtype=bool) for name in ESTIMATORS}
    jackknife_cover = {name: np.empty(repetitions, dtype=bool) for name in ESTIMATORS}
    for repetition in range(repetitions):
        confidence, _, mu_hat = draw(rng, case, n_questions, k)
        for name, metric in ESTIMATORS.items():
            interval = bootstrap_ci(metric, confidence, mu_hat, n_resamples=resamples, seed=repetition)
            items = jackknife_items(metric, confidence, mu_hat)
            half_width = 1.96 * items.std(ddof=1) / np.sqrt(n_questions)
            estimates[name][repetition] = interval.estimate
            bootstrap_cover[name][repetition] = interval.low <= truth <= interval.high
            jackknife_cover[name][repetition] = abs(interval.estimate - truth) <= half_width
    row: dict[str, float | int | str] = {"case": case, "k": k, "N": n_questions, "population_ece": truth}
    for name in ESTIMATORS:
        row[f"{name}_bias"] = float(estimates[name].mean() - truth)
        row[f"{name}_bias_se"] = float(estimates[name].std(ddof=1) / np.sqrt(repetitions))
        row[f"{name}_sd"] = float(estimates[name].std(ddof=1))
        row[f"{name}_bootstrap_coverage"] = float(bootstrap_cover[name].mean())
        row[f"{name}_jackknife_coverage"] = float(jackknife_cover[name].mean())
    return row


def skill_cell(k: int, n_questions: int, repetitions: int, seed: int) -> dict:
    """Mean (and MC SE) of both Brier skill scores of the constant at the base rate, the oracle and random."""
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {}
    for _ in range(repetitions):
        _, mu, mu_hat = draw(rng, "overconfident", n_questions, k)
        forecasts = {
            "base_rate": np.full(n_questions, mu_hat.mean()),
            "oracle": mu,
            "uniform_random": rng.random(n_questions),
        }
        for name, confidence in forecasts.items():
            values.setdefault(f"{name}_bss", []).append(brier_skill_score(confidence, mu_hat))
            values.setdefault(f"{name}_corrected_bss", []).append(
                corrected_brier_skill_score(confidence, mu_hat, k)
            )
    row: dict[str, float | int] = {"k": k, "N": n_questions}
    for name, draws in values.items():
        array = np.asarray(draws)
        row[name] = float(np.nanmean(array))
        row[f"{name}_se"] = float(np.nanstd(array, ddof=1) / np.sqrt(np.isfinite(array).sum()))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=400, help="data sets per cell (N <= 400)")
    parser.add_argument("--repetitions-large", type=int, default=200, help="data sets per cell at N = 2000")
    parser.add_argument("--resamples", type=int, default=500, help="bootstrap resamples per interval")
    parser.add_argument("--skill-repetitions", type=int, default=4000, help="data sets per Brier-skill cell")
    parser.add_argument("--k", type=int, nargs="+", default=[4, 16], help="samples per question")
    parser.add_argument("--output", type=Path, help="write the tables as JSON here")
    args = parser.parse_args()
    started = time.time()
    ece_rows, skill_rows = [], []
    for k in args.k:
        for n_questions in (30, 100, 400, 2000):
            skill_rows.append(
                skill_cell(k, n_questions, args.skill_repetitions, seed=k * 10_000 + n_questions)
            )
            for case_index, case in enumerate(CASES):
                repetitions = args.repetitions if n_questions <= 400 else args.repetitions_large
                row = ece_cell(
                    case,
                    k,
                    n_questions,
                    repetitions,
                    args.resamples,
                    seed=case_index * 1000 + k * 7 + n_questions,
                )
                ece_rows.append(row)
                print(
                    f"{case:14s} k={k:2d} N={n_questions:4d} pop={row['population_ece']:.4f} "
                    f"bias binned {row['binned_bias']:+.4f} debiased {row['debiased_bias']:+.4f} "
                    f"(+-{row['debiased_bias_se']:.4f}) | coverage boot "
                    f"{row['binned_bootstrap_coverage']:.2f}/{row['debiased_bootstrap_coverage']:.2f} jack "
                    f"{row['binned_jackknife_coverage']:.2f}/{row['debiased_jackknife_coverage']:.2f}",
                    flush=True,
                )
    result = {"ece": ece_rows, "skill": skill_rows, "arguments": vars(args) | {"output": str(args.output)}}
    result["seconds"] = time.time() - started
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
    for row in skill_rows:
        print(
            f"k={row['k']:2d} N={row['N']:4d} "
            + " ".join(f"{name} {row[name]:+.3f}" for name in row if name.endswith("bss")),
            flush=True,
        )


if __name__ == "__main__":
    main()
