"""Analysis-suite benchmark: metrics with bootstrap CIs, response consistency and budget allocation on a
synthetic 100,000 questions x 100 samples.

Synthetic data (seeded): mu ~ Beta(0.5, 0.7) per question; 100 responses with correctness z ~ Bernoulli(mu);
a correct response answers class 0, a wrong one one of 5 wrong classes (Dirichlet(1) weights per question) or
is unparseable (probability 0.05); the confidence is clip(mu + N(0, 0.15^2), 0, 1); response labels are
the correctness of the first response.

Parts (each timed on its own, wall clock):
  metrics      capability ECE / MCE / ACE, Brier and corrected Brier, soft AUROC, Pearson, Spearman, AURC,
               PRR (confidence vs mu_hat) and response AUROC / AUPRC (vs z_1), each with a percentile
               bootstrap CI; the 12 metrics share ``--resamples`` resamples over questions, drawn once
               (capcal_metrics.bootstrap_cis)
  consistency  encode the answer classes, then k = 5, 10, 20 in the paper's form and leakage-free (a common
               draw pool of 20 responses, target from the other 80)
  budget       greedy (confidence), uniform and oracle allocation for B = 1, 2, 4, 8, 16, 32 with the exact
               accuracy mean_i pass@b_i

Peak memory is the process's peak resident set size (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), which
includes the interpreter and the synthetic data. Run:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/analysis_suite.py --resamples 1000
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine_info import machine  # noqa: E402  (benchmarks/machine_info.py)

from analysis.applications import budget_allocation_curves  # noqa: E402
from analysis.estimators import encode_answer_classes, leakage_free_consistency, response_consistency  # noqa: E402
from capcal_metrics import (  # noqa: E402
    adaptive_calibration_error,
    area_under_risk_coverage_curve,
    auroc,
    average_precision,
    bootstrap_cis,
    brier_score,
    corrected_capability_brier_score,
    expected_calibration_error,
    maximum_calibration_error,
    pearson_correlation,
    prediction_rejection_ratio,
    soft_label_auroc,
    spearman_correlation,
)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def synthetic(n_questions: int, n_samples: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.beta(0.5, 0.7, n_questions)
    correct = rng.random((n_questions, n_samples), dtype=np.float32) < mu[:, None].astype(np.float32)
    wrong_weights = rng.dirichlet(np.ones(5), n_questions)
    cumulative = np.cumsum(wrong_weights, axis=1)
    draws = rng.random((n_questions, n_samples), dtype=np.float32)
    wrong_class = 1 + (draws[:, :, None] > cumulative[:, None, :4].astype(np.float32)).sum(axis=2)
    labels = np.where(correct, 0, wrong_class).astype(np.int64)
    labels[(~correct) & (rng.random((n_questions, n_samples), dtype=np.float32) < 0.05)] = -1
    n = np.full(n_questions, n_samples)
    n_correct = correct.sum(axis=1)
    return {
        "labels": labels,
        "correct": correct,
        "n": n,
        "n_correct": n_correct,
        "mu_hat": n_correct / n,
        "confidence": np.clip(mu + rng.normal(0.0, 0.15, n_questions), 0.0, 1.0),
        "z1": correct[:, 0].astype(np.float64),
    }


def run_metrics(data: dict[str, np.ndarray], resamples: int) -> dict[str, tuple[float, float, float]]:
    c, mu_hat, z1 = data["confidence"], data["mu_hat"], data["z1"]
    capability = {
        "ece": expected_calibration_error,
        "mce": maximum_calibration_error,
        "ace": adaptive_calibration_error,
        "brier": brier_score,
        "soft_auroc": soft_label_auroc,
        "pearson": pearson_correlation,
        "spearman": spearman_correlation,
        "aurc": area_under_risk_coverage_curve,
        "prr": prediction_rejection_ratio,
    }
    metrics = {name: (metric, (c, mu_hat)) for name, metric in capability.items()}
    metrics["corrected_brier"] = (corrected_capability_brier_score, (c, mu_hat, data["n"]))
    metrics["response_auroc"] = (auroc, (c, z1))
    metrics["response_auprc"] = (average_precision, (c, z1))
    cis = bootstrap_cis(metrics, n_resamples=resamples, seed=1)
    return {name: tuple(ci) for name, ci in cis.items()}


def run_consistency(data: dict[str, np.ndarray]) -> dict[str, float]:
    answers = encode_answer_classes(data["labels"])
    out = {}
    for k in (5, 10, 20):
        out[f"paper_k{k}"] = float(response_consistency(answers, k, seed=0).mean())
        free = leakage_free_consistency(answers, data["correct"], k, pool_size=20, seed=0)
        out[f"leakage_free_k{k}"] = float(free.confidence.mean())
    out["leakage_free_target_mean"] = float(free.mu_hat.mean())
    return out


def run_budget(data: dict[str, np.ndarray]) -> list[dict]:
    curves = budget_allocation_curves({"confidence": data["confidence"]}, data["n"], data["n_correct"])
    return curves[["method", "budget", "accuracy"]].to_dict("records")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument(
        "--resamples", type=int, default=1000, help="bootstrap resamples (shared by all metrics)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)

    info = machine()
    print(f"machine: {info}")
    timings = {}
    start = time.perf_counter()
    data = synthetic(args.questions, args.samples, args.seed)
    timings["data"] = time.perf_counter() - start
    print(
        f"data        {timings['data']:6.2f} s  ({args.questions} x {args.samples}; "
        f"peak RSS {peak_rss_mib():.0f} MiB)"
    )

    parts = {
        "metrics": lambda: run_metrics(data, args.resamples),
        "consistency": lambda: run_consistency(data),
        "budget": lambda: run_budget(data),
    }
    results = {}
    for name, part in parts.items():
        start = time.perf_counter()
        results[name] = part()
        timings[name] = time.perf_counter() - start
        print(f"{name:<11} {timings[name]:6.2f} s  (peak RSS so far {peak_rss_mib():.0f} MiB)")
    analysis_seconds = timings["metrics"] + timings["consistency"] + timings["budget"]
    peak = peak_rss_mib()
    print(
        f"total       {analysis_seconds:6.2f} s  without data generation, "
        f"{sum(timings.values()):.2f} s with it"
    )
    print(f"peak RSS    {peak:6.0f} MiB (ru_maxrss, whole process)")
    print(f"bootstrap resamples (shared): {args.resamples}; metrics: {len(results['metrics'])}")
    for name, (estimate, low, high) in results["metrics"].items():
        print(f"  {name:<16} {estimate:8.4f}  [{low:.4f}, {high:.4f}]")
    for name, value in results["consistency"].items():
        print(f"  consistency {name:<24} {value:.4f}")
    for row in results["budget"]:
        print(f"  budget {row['method']:<11} B={row['budget']:<3} accuracy {row['accuracy']:.4f}")
    target_met = analysis_seconds <= 30.0 and peak <= 4096.0
    print(f"targets (<= 30 s, <= 4 GiB): {'met' if target_met else 'NOT met'}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": info,
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "seconds": timings,
                    "analysis_seconds": analysis_seconds,
                    "peak_rss_mib": peak,
                    "results": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
