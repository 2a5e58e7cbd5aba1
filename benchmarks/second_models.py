"""Candidate second models for the demo, on the demo's own questions: accuracy, verbalized confidence, time.

For each model (capcal's prepared models: ``capcal_models.prepare``), on graded arithmetic at the demo's size
(``capcal_arithmetic``, ``--per-level`` questions per level, 5 levels), through ``capcal-hf`` with the model's
chat template when it has one (else the base-model prompt ``capcal_arithmetic_qa``, zero-shot, as the demo
runs a base model):

- **mean expected accuracy**: the mean over questions of mu_hat (the share of its ``--k`` samples judged
  correct), and by level;
- **verbalized-confidence parse rate**: ``capcal_arithmetic_verbalized`` (one response per question to the
  paper's verbalized-confidence prompt), the share whose ``\\boxed{P}`` parsed, at each
  ``--verbalized-tokens`` budget (the demo uses 48);
- the wall and CPU seconds of each run.

Writes a JSON file with the numbers and the machine; prints one table. Run with one thread per process:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/second_models.py \\
        --models smollm2,gemma3-270m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _timed(function, *args, **kwargs):
    wall, cpu = time.monotonic(), time.process_time()
    result = function(*args, **kwargs)
    return result, round(time.monotonic() - wall, 1), round(time.process_time() - cpu, 1)


def measure(name: str, args: argparse.Namespace, scratch: Path) -> dict:
    """One model's figures (see the module docstring)."""
    from analysis.evaluation import evaluate
    from capcal_models.prepare import prepare_model

    model = prepare_model(name)
    chat = bool(model.manifest.get("has_chat_template"))
    task = "capcal_arithmetic" if chat else "capcal_arithmetic_qa"
    common = {
        "model_args": {"pretrained": str(model.path), "sample_cache": False},
        "metadata": {"arithmetic_per_level": args.per_level},
        "data_dir": "bundled",
        "batch_size": args.batch_size,
        "apply_chat_template": chat,
        "log_samples": True,
        "random_seed": args.seed,
        "numpy_random_seed": args.seed,
        "torch_random_seed": args.seed,
        "fewshot_random_seed": args.seed,
    }
    output = scratch / name / "sample"
    results, wall, cpu = _timed(
        evaluate, "capcal-hf", [task], repeats=args.k, output_path=output,
        gen_kwargs={"max_gen_toks": args.max_gen_toks}, **common,
    )  # fmt: skip
    samples = Path(results["capcal_files"]["samples"][task]).read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in samples]
    mu = np.array([record["expected_accuracy"] for record in records], dtype=float)
    by_level: dict[str, list[float]] = {}
    for record in records:
        by_level.setdefault(str(record["doc"]["level"]), []).append(record["expected_accuracy"])
    levels = {level: round(float(np.mean(values)), 4) for level, values in sorted(by_level.items())}
    row = {
        "model": name,
        "parameters": model.manifest.get("parameters"),
        "chat_template": chat,
        "task": task,
        "questions": len(records),
        "k": args.k,
        "mean_expected_accuracy": round(float(mu.mean()), 4),
        "expected_accuracy_by_level": levels,
        "questions_never_solved": int((mu == 0).sum()),
        "questions_always_solved": int((mu == 1).sum()),
        "sample_wall_s": wall,
        "sample_cpu_s": cpu,
        "verbalized": {},
    }
    for tokens in args.verbalized_tokens:
        output = scratch / name / f"verbalized-{tokens}"
        results, wall, cpu = _timed(
            evaluate, "capcal-hf", ["capcal_arithmetic_verbalized"], output_path=output,
            gen_kwargs={"max_gen_toks": tokens}, **common,
        )  # fmt: skip
        metrics = results["results"]["capcal_arithmetic_verbalized"]
        row["verbalized"][str(tokens)] = {
            "parse_rate": round(float(metrics["parse_success,none"]), 4),
            "mean_parsed_confidence": metrics.get("verbalized_confidence,none"),
            "wall_s": wall,
            "cpu_s": cpu,
        }
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="smollm2,gemma3-270m,qwen2.5-coder-0.5b,qwen2.5-coder-1.5b")
    parser.add_argument("--per-level", type=int, default=8, help="questions per level (the demo: 8)")
    parser.add_argument("--k", type=int, default=8, help="samples per question (the demo's second model: 8)")
    parser.add_argument("--max-gen-toks", type=int, default=16, help="the demo's 16")
    parser.add_argument("--verbalized-tokens", default="48", help="comma-separated budgets (the demo: 48)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--output", help="JSON file (default benchmarks/results/second_models-<time>.json)")
    args = parser.parse_args()
    args.verbalized_tokens = [int(value) for value in args.verbalized_tokens.split(",")]
    started = datetime.now(timezone.utc)
    rows = []
    with tempfile.TemporaryDirectory(prefix="capcal-second-models-") as scratch:
        for name in args.models.split(","):
            rows.append(measure(name, args, Path(scratch)))
    from machine_info import load_average, machine  # benchmarks/machine_info.py

    host = {**machine(("torch", "transformers", "lm_eval")), "uptime": load_average()}
    record = {"started": started.isoformat(timespec="seconds"), "machine": host,
              "settings": {key: value for key, value in vars(args).items() if key != "output"},
              "models": rows}  # fmt: skip
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    output = Path(args.output or REPO / "benchmarks" / "results" / f"second_models-{stamp}.json")
    output.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("\n| model | parameters | chat | mean expected accuracy | by level | sample s | verbalized parse |")
    print("|---|---:|---|---:|---|---:|---|")
    for row in rows:
        verbalized = ", ".join(f"{v['parse_rate']:.2f} at {t} tok" for t, v in row["verbalized"].items())
        levels = " / ".join(f"{value:.2f}" for value in row["expected_accuracy_by_level"].values())
        print(f"| {row['model']} | {row['parameters']:,} | {row['chat_template']} | "
              f"{row['mean_expected_accuracy']:.3f} | {levels} | {row['sample_wall_s']} | "
              f"{verbalized} |")  # fmt: skip
    print(f"\n{output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
