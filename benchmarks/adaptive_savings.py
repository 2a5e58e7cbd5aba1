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
the fixed-k estimate and interval, and whether the adaptive estimate lies inside it. ``also_looks``: the
samples another plan would have drawn, replayed exactly on the fixed run's samples in request order.

    python benchmarks/adaptive_savings.py run --root /tmp/adaptive  # the four CASES, about 90 min on 2 cores
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

import capcal_metrics as cm
from analysis.estimators.adaptive import stopped_counts
from analysis.report.paper_table import paper_table
from analysis.runs.files import read_results
from analysis.runs.tables import load_runs
from capcal_models.prepare import model_path

K_MAX = 64
LOOKS = (8, 16, 32)
SEED = 1234
ALSO_LOOKS = ((16, 32), (8, 16, 32))


@dataclass(frozen=True)
class Case:
    """One comparison: ``model`` (a prepared model's name), ``task``, ``limit`` (None: the whole split)."""

    model: str
    task: str
    limit: int | None

    @property
    def name(self) -> str:
        return f"{self.model}-{self.task}"


CASES = (
    Case("qwen2.5-coder-0.5b", "capcal_arithmetic", None),
    Case("smollm2", "capcal_arithmetic", None),
    Case("smollm2", "capcal_gsm8k", 16),
    Case("qwen2.5-coder-0.5b", "capcal_gsm8k", 10),
)


def run_commands(case: Case, root: Path, vllm_python: str, hf_python: str) -> dict[str, list[str]]:
    """The three ``capcal eval`` command lines of a case: mode ("fixed", "adaptive", "ptrue") -> argv; the
    sampling runs in capcal's vLLM environment (``vllm_python``), P(True) with ``capcal-hf``."""
    folder = root / case.name
    pretrained = model_path(case.model)
    limit = [] if case.limit is None else ["--limit", str(case.limit)]
    commands = {}
    for mode in ("fixed", "adaptive"):
        model_args = (
            f"pretrained={pretrained},seed={SEED},enforce_eager=True,max_model_len=2048,"
            f"cache_path={folder / f'{mode}-cache.sqlite'}"
        )
        adaptive = ["--adaptive", "--looks", ",".join(map(str, LOOKS))] if mode == "adaptive" else []
        commands[mode] = [
            vllm_python, "-m", "analysis.cli", "eval", "--model", "capcal-vllm", "--model_args", model_args,
            "--tasks", case.task, "--data_dir", "bundled", *limit, "--repeats", str(K_MAX),
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
        rows = {
            mode: paper_table([folder / mode, folder / "ptrue"]).set_index(["estimator", "metric"])
            for mode in ("fixed", "adaptive")
        }
    joined = rows["adaptive"][["estimate", "low", "high", "sampling"]].join(
        rows["fixed"][["estimate", "low", "high"]], lsuffix="_adaptive", rsuffix="_fixed", how="inner"
    )
    joined["inside_fixed_interval"] = (joined["estimate_adaptive"] >= joined["low_fixed"]) & (
        joined["estimate_adaptive"] <= joined["high_fixed"]
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
            for looks in ALSO_LOOKS
        },
        "prefix_identical": f"{prefix} of {len(adaptive)}",
        "wall_s": timing,
        "metrics": joined.reset_index().to_dict(orient="records"),
    }


def _markdown(summaries: list[dict]) -> str:
    """The savings table and, per case, the metric table."""
    lines = [
        "| model | task | questions | unanimous at l_1 | samples fixed | samples adaptive | saved "
        "| wall s fixed | wall s adaptive | time saved | metrics inside fixed-k interval "
        "| prefix identical |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        inside = sum(m["inside_fixed_interval"] for m in s["metrics"])
        fixed_s, adaptive_s = s["wall_s"]["fixed"], s["wall_s"]["adaptive"]
        lines.append(
            f"| {s['model']} | {s['task']} | {s['questions']} | {s['unanimous_at_first_look']:.0%} "
            f"| {s['samples_fixed']:,} | {s['samples_adaptive']:,} | {s['saved_fraction']:.1%} "
            f"| {fixed_s:.0f} | {adaptive_s:.0f} | {1 - adaptive_s / fixed_s:.0%} "
            f"| {inside} of {len(s['metrics'])} | {s['prefix_identical']} |"
        )
    for s in summaries:
        lines += [
            "",
            f"{s['model']} · {s['task']} ({s['questions']} questions, looks {s['looks']}):",
            "",
            "| estimator | metric | adaptive | fixed k [95% interval] | inside |",
            "|---|---|---:|---:|:---:|",
        ]
        for m in s["metrics"]:
            lines.append(
                f"| {m['estimator']} | {m['metric']} | {m['estimate_adaptive']:.4f} "
                f"| {m['estimate_fixed']:.4f} [{m['low_fixed']:.4f}, {m['high_fixed']:.4f}] "
                f"| {'yes' if m['inside_fixed_interval'] else '**no**'} |"
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
        args.output.write_text(json.dumps(summaries, indent=1, default=float) + "\n")
    print(_markdown(summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
