"""Adaptive sampling against fixed k on real runs: samples drawn, wall time, every headline metric of both
with its interval (issue 37, deliverable 4; the table of docs/benchmarks.md, "Adaptive sampling: samples
saved on real runs").

For each case (model, task, questions) three real lm-eval runs, each in a fresh process so that each wall time
includes loading the model:

1. ``capcal eval`` at fixed k = k_max (``--repeats K``), its own sample cache;
2. ``capcal eval --adaptive --looks L`` with the same seed and k_max, a cache of its own (nothing reused from
   run 1), the unanimity rule;
3. P(True) on the same questions (``<task>_ptrue``, one log-likelihood request per question), the confidence
   that both runs' metrics are computed with, next to the leakage-free consistency each run computes from its
   own samples (the adaptive run's from each question's first l_1 samples).

Then, per case: samples drawn (fixed, adaptive, saved), the questions stopped at each look, the share
unanimous at the first look, wall times and their ratio, whether every question's adaptive samples are the
first n of the fixed run's (the prefix property: same seeds, samples numbered in request order), and every
headline metric of ``capcal table`` (``analysis.report.paper_table``) for both runs: the adaptive estimate,
the fixed-k estimate and interval, and whether the adaptive estimate lies inside it (headline: the metrics
the report ranks by and that stay unbiased after stopping, ``ADAPTIVE_CAPABILITY_METRICS``, of the estimators
it ranks, i.e. not the leaky paper-form consistency; the plug-in Brier, ECE and Spearman are listed too); and
lm-eval's own
aggregates (mean expected accuracy, pass@k for k up to the first look) against the fixed run's estimate +-
1.96 standard errors. ``also_looks``: the
samples another plan would have drawn, replayed exactly on the fixed run's samples in request order.

    python benchmarks/adaptive_savings.py run --root /tmp/adaptive  # the five CASES, about 100 min on 2 cores
    python benchmarks/adaptive_savings.py summarize --root /tmp/adaptive \
        --output benchmarks/results/adaptive_savings.json

``run`` needs capcal's vLLM environment (``CAPCAL_VLLM_VENV``, ``VLLM_CPU_KVCACHE_SPACE`` on CPU) and the
prepared models (``capcal models prepare smollm2 qwen2.5-coder-0.5b``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import capcal_metrics as cm  # noqa: E402
from analysis.estimators.adaptive import ADAPTIVE_CAPABILITY_METRICS, stopped_counts  # noqa: E402
from analysis.evaluation.adaptive import DEFAULT_LOOKS  # noqa: E402
from analysis.report.paper_table import paper_table  # noqa: E402
from analysis.report.registry import LEAKY  # noqa: E402
from analysis.runs.files import read_results  # noqa: E402
from analysis.runs.tables import load_runs  # noqa: E402
from benchmarks.machine_info import load_average, machine  # noqa: E402
from capcal_models.prepare import model_path  # noqa: E402

K_MAX = 64
LOOKS = (8, 16, 32)
SEED = 1234
# other plans replayed on the fixed run's samples: capcal's former default (16, 32, 64 below k_max) and its
# default now (8, 16, 32, 64 below k_max)
ALSO_LOOKS = ((16, 32, 64), DEFAULT_LOOKS)
# lm-eval's aggregates of both runs (the fixed run's interval: estimate +- 1.96 lm-eval's standard error)
LM_EVAL_METRICS = ("expected_accuracy", "pass_at_1", "pass_at_2", "pass_at_4", "pass_at_8")


@dataclass(frozen=True)
class Case:
    """One comparison: ``model`` (a prepared model's name), ``task``, ``limit`` (None: the whole split) and
    ``max_gen_toks`` (None: the task's own), ``k_max`` (the fixed run's k) and ``looks`` (below k_max)."""

    model: str
    task: str
    limit: int | None
    max_gen_toks: int | None = None
    k_max: int = K_MAX
    looks: tuple[int, ...] = LOOKS

    @property
    def name(self) -> str:
        suffix = "" if self.k_max == K_MAX else f"-k{self.k_max}"
        return f"{self.model}-{self.task}{suffix}"


# GSM8K within the 2-core machine's time: fewer questions and a shorter response limit than the task's 1024
# tokens (SmolLM2's responses run to the limit: at 1024 tokens its fixed-k run had finished none of its 1,024
# samples after 9 minutes; Qwen2.5-Coder-0.5B's responses average about 275 tokens)
CASES = (
    Case("qwen2.5-coder-0.5b", "capcal_arithmetic", None),
    Case("smollm2", "capcal_arithmetic", None),
    Case("smollm2", "capcal_gsm8k", 16, 256),
    Case("qwen2.5-coder-0.5b", "capcal_gsm8k", 8, 512),
    # half of these 8 questions are unanimous at l_1 = 8: under unanimity the saving is exactly
    # (share unanimous at l_1) (1 - l_1 / k_max), at most 43.75% at k_max = 64; k_max = 128 allows 46.9%
    Case("qwen2.5-coder-0.5b", "capcal_gsm8k", 8, 512, k_max=128, looks=(8, 16, 32, 64)),
)


def run_commands(case: Case, root: Path, vllm_python: str, hf_python: str) -> dict[str, list[str]]:
    """The three ``capcal eval`` command lines of a case: mode ("fixed", "adaptive", "ptrue") -> argv; the
    sampling runs in capcal's vLLM environment (``vllm_python``), P(True) with ``capcal-hf``."""
    folder = root / case.name
    pretrained = model_path(case.model)
    limit = [] if case.limit is None else ["--limit", str(case.limit)]
    tokens = [] if case.max_gen_toks is None else ["--gen_kwargs", f"max_gen_toks={case.max_gen_toks}"]
    commands = {}
    for mode in ("fixed", "adaptive"):
        model_args = (
            f"pretrained={pretrained},seed={SEED},enforce_eager=True,max_model_len=2048,"
            f"cache_path={folder / f'{mode}-cache.sqlite'}"
        )
        adaptive = ["--adaptive", "--looks", ",".join(map(str, case.looks))] if mode == "adaptive" else []
        commands[mode] = [
            vllm_python, "-m", "analysis.cli", "eval", "--model", "capcal-vllm", "--model_args", model_args,
            "--tasks", case.task, "--data_dir", "bundled", *limit, *tokens, "--repeats", str(case.k_max),
            "--apply_chat_template", "--log_samples", "--output_path", str(folder / mode), *adaptive,
        ]  # fmt: skip
    commands["ptrue"] = [
        hf_python, "-m", "analysis.cli", "eval", "--model", "capcal-hf", "--model_args",
        f"pretrained={pretrained}", "--tasks", f"{case.task}_ptrue", "--data_dir", "bundled", *limit,
        "--apply_chat_template", "--log_samples", "--output_path", str(folder / "ptrue"), "--device", "cpu",
    ]  # fmt: skip
    return commands


def run_case(case: Case, root: Path, vllm_python: str, hf_python: str) -> dict[str, float]:
    """Run the case's three commands one after another; wall seconds per mode, saved in ``timing.json``."""
    folder = root / case.name
    folder.mkdir(parents=True, exist_ok=True)
    timing = {}
    for mode, argv in run_commands(case, root, vllm_python, hf_python).items():
        timing[f"{mode}_load_before"] = load_average()
        with open(folder / f"{mode}.log", "w") as log:
            start = time.perf_counter()
            subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=True)
            timing[mode] = time.perf_counter() - start
        (folder / "timing.json").write_text(json.dumps(timing, indent=1))
    return timing


def _vectors(folder: Path, task: str) -> pd.Series:
    """question_id -> correctness vector (request order) of the one run under ``folder``."""
    questions = load_runs([folder]).questions
    questions = questions[questions["task"] == task]
    return pd.Series([list(v) for v in questions["correctness"]], index=questions["question_id"])


def replayed_samples(fixed: pd.Series, looks: Sequence[int]) -> int:
    """Samples the unanimity plan ``looks`` + (k,) would draw on the fixed run's samples, in request order."""
    k = len(fixed.iloc[0])
    plan = cm.unanimity_rule((*looks, k))
    vectors = np.array(list(fixed), dtype=int)
    successes = np.cumsum(vectors, axis=1)[:, np.array(plan.looks) - 1]
    n, _ = stopped_counts(successes, plan)
    return int(n.sum())


def summarize_case(case: Case, root: Path) -> dict:
    """Samples, times, the prefix check and the metric comparison of one case's three runs."""
    folder = root / case.name
    adaptive_results, _ = read_results(next((folder / "adaptive").rglob("results_*.json")))
    plan = adaptive_results["capcal_adaptive"]
    counts = plan["tasks"][case.task]
    fixed, adaptive = _vectors(folder / "fixed", case.task), _vectors(folder / "adaptive", case.task)
    prefix = sum(fixed[q][: len(v)] == v for q, v in adaptive.items())
    timing = json.loads((folder / "timing.json").read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)
        confidence = [folder / "ptrue"] if (folder / "ptrue").is_dir() else []  # without it: consistency
        rows = {
            mode: paper_table([folder / mode, *confidence]).set_index(["estimator", "metric"])
            for mode in ("fixed", "adaptive")
        }
    adaptive_rows = rows["adaptive"][["estimate", "low", "high", "sampling"]].add_suffix("_adaptive")
    fixed_rows = rows["fixed"][["estimate", "low", "high"]].add_suffix("_fixed")
    joined = adaptive_rows.join(fixed_rows, how="inner").rename(columns={"sampling_adaptive": "sampling"})
    joined = joined.drop(index="random (expected)", level="estimator", errors="ignore")
    joined["inside_fixed_interval"] = (joined["estimate_adaptive"] >= joined["low_fixed"]) & (
        joined["estimate_adaptive"] <= joined["high_fixed"]
    )
    fixed_results, _ = read_results(next((folder / "fixed").rglob("results_*.json")))
    for name in LM_EVAL_METRICS:
        fixed_value = fixed_results["results"][case.task][f"{name},all_responses"]
        half = 1.96 * fixed_results["results"][case.task][f"{name}_stderr,all_responses"]
        value = adaptive_results["results"][case.task].get(f"{name},all_responses")
        if value is None:  # pass@k beyond the first look: not estimated
            continue
        joined.loc[("lm-eval results", name), :] = {
            "estimate_adaptive": value,
            "low_adaptive": np.nan,
            "high_adaptive": np.nan,
            "sampling": "adaptive",
            "estimate_fixed": fixed_value,
            "low_fixed": fixed_value - half,
            "high_fixed": fixed_value + half,
            "inside_fixed_interval": fixed_value - half <= value <= fixed_value + half,
            "fixed_inside_adaptive_interval": False,  # lm-eval gives the adaptive run no interval
            "undefined_in_both": False,
        }
    joined["fixed_inside_adaptive_interval"] = (joined["estimate_fixed"] >= joined["low_adaptive"]) & (
        joined["estimate_fixed"] <= joined["high_adaptive"]
    )
    # undefined in both runs (every question unsolved: no skill, no AUROC) is agreement, not a miss
    joined["undefined_in_both"] = joined["estimate_adaptive"].isna() & joined["estimate_fixed"].isna()
    estimators, metrics = joined.index.get_level_values(0), joined.index.get_level_values(1)
    joined["headline"] = (estimators == "lm-eval results") | (
        metrics.isin(ADAPTIVE_CAPABILITY_METRICS) & ~estimators.str.fullmatch(LEAKY.pattern)
    )
    first = str(plan["looks"][0])
    return {
        "case": case.name,
        "model": case.model,
        "task": case.task,
        "questions": counts["questions"],
        "k_max": plan["k_max"],
        "looks": plan["looks"],
        "rule": plan["rule"],
        "samples_fixed": counts["fixed_k_samples"],
        "samples_adaptive": counts["samples_drawn"],
        "saved_fraction": counts["saved_fraction"],
        "stopped_at": counts["stopped_at"],
        "unanimous_at_first_look": counts["stopped_at"][first] / counts["questions"],
        "also_looks": {
            "-".join(map(str, (*looks, plan["k_max"]))): 1
            - replayed_samples(fixed, looks) / counts["fixed_k_samples"]
            for looks in (tuple(look for look in also if look < plan["k_max"]) for also in ALSO_LOOKS)
        },
        "prefix_identical": f"{prefix} of {len(adaptive)}",
        "wall_s": timing,
        "metrics": joined.reset_index().to_dict(orient="records"),
    }


def _verdict(metric: dict) -> str:
    if metric["undefined_in_both"]:
        return "undefined in both"
    if metric["inside_fixed_interval"]:
        return "yes"
    if metric["fixed_inside_adaptive_interval"]:
        low, high = metric["low_adaptive"], metric["high_adaptive"]
        return f"**no**; the fixed-k estimate is inside the adaptive run's [{low:.4f}, {high:.4f}]"
    return "**no**"


def _markdown(summaries: list[dict]) -> str:
    """The savings table and, per case, the metric table."""
    lines = [
        "| model | task | questions | k_max | unanimous at l_1 | samples fixed | samples adaptive | saved "
        "| wall s fixed | wall s adaptive | time saved | headline metrics inside fixed-k interval "
        "| prefix identical | saved, looks 16-32-64-k_max (the former default, replayed) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        headline = [m for m in s["metrics"] if m["headline"] and not m["undefined_in_both"]]
        inside = sum(m["inside_fixed_interval"] for m in headline)
        undefined = sum(m["headline"] and m["undefined_in_both"] for m in s["metrics"])
        fixed_s, adaptive_s = s["wall_s"]["fixed"], s["wall_s"]["adaptive"]
        lines.append(
            f"| {s['model']} | {s['task']} | {s['questions']} | {s['k_max']} "
            f"| {s['unanimous_at_first_look']:.0%} "
            f"| {s['samples_fixed']:,} | {s['samples_adaptive']:,} | {s['saved_fraction']:.1%} "
            f"| {fixed_s:.0f} | {adaptive_s:.0f} | {1 - adaptive_s / fixed_s:.0%} "
            f"| {inside} of {len(headline)}{f' ({undefined} undefined in both)' if undefined else ''} "
            f"| {s['prefix_identical']} | {next(iter(s['also_looks'].values())):.1%} |"
        )
    for s in summaries:
        lines += [
            "",
            f"{s['model']} · {s['task']} ({s['questions']} questions, looks {s['looks']}):",
            "",
            "| estimator | metric | headline | adaptive | fixed k [95% interval] | inside |",
            "|---|---|:---:|---:|---:|:---:|",
        ]
        for m in s["metrics"]:
            lines.append(
                f"| {m['estimator']} | {m['metric']} | {'yes' if m['headline'] else ''} "
                f"| {m['estimate_adaptive']:.4f} "
                f"| {m['estimate_fixed']:.4f} [{m['low_fixed']:.4f}, {m['high_fixed']:.4f}] "
                f"| {_verdict(m)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["run", "summarize"])
    parser.add_argument("--root", required=True, type=Path, help="folder of the cases' runs")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--output", type=Path, help="JSON file for the summaries (summarize)")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.cases is None or c.name in args.cases.split(",")]
    if args.step == "run":
        venv = os.environ.get("CAPCAL_VLLM_VENV")
        if not venv:
            print("run: set CAPCAL_VLLM_VENV (capcal's vLLM environment)", file=sys.stderr)
            return 2
        for case in cases:
            print(case.name, run_case(case, args.root, f"{venv}/bin/python", sys.executable), flush=True)
        return 0
    summaries = [summarize_case(case, args.root) for case in cases if (args.root / case.name).is_dir()]
    if args.output:
        record = {"machine": machine(["lm_eval", "torch"]), "cases": summaries}
        args.output.write_text(json.dumps(record, indent=1, default=float) + "\n")
    print(_markdown(summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
