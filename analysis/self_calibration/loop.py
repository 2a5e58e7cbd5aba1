"""The whole Self-Calibration loop from one call: ``capcal selfcal run``.

Huang et al. 2025 ("Efficient Test-Time Scaling via Self-Calibration", arXiv 2503.00031), in capcal's
pipeline; every model step is a real lm-eval run (``analysis.evaluation.evaluate``):

1. ``sample train``: N responses per training question (the task's declared calibration split) from the
   base model (``capcal-hf``);
2. ``check train``: the base model's self-check on each of them (``capcal_<dataset>_..._selfcheck``, ``hf``);
3. ``sample eval`` / ``check eval``: the same on the held-out evaluation questions (the "before" side);
4. ``data``: SSC training tuples (``analysis.self_calibration.data``);
5. ``train``: LoRA training and the merged checkpoint (``analysis.self_calibration.train``);
6. ``resample eval`` / ``recheck eval``: the trained model samples and self-checks the held-out questions;
7. ``compare``: before vs after (``analysis.self_calibration.compare``).

Folders under ``output_dir``: ``before/{train_sample,train_selfcheck,eval_sample,eval_selfcheck}``,
``data``, ``train``, ``after/{eval_sample,eval_selfcheck}``, ``compare``, and ``loop.json`` (settings, step
seconds). A step whose output is already there is reused (an interrupted loop goes on where it stopped;
training itself resumes from its last checkpoint).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.self_calibration.compare import DEFAULT_TOLERANCE, Comparison, compare_runs
from analysis.self_calibration.data import DEFAULT_LM_THRESHOLD, build_training_data, read_training_data
from analysis.self_calibration.train import TrainConfig, train_self_calibration

__all__ = ["LoopResult", "LoopSettings", "model_path", "question_ids_of", "run_self_calibration_loop"]


@dataclass
class LoopSettings:
    """The loop's settings besides training (``TrainConfig``)."""

    model: str = "smollm2"  # a capcal model name (capcal_models.prepare) or a checkpoint folder
    task: str = "capcal_arithmetic"  # the evaluation task; its calibration split gives the training questions
    train_repeats: int = 8  # N responses per training question (the paper: 32)
    repeats: int = 8  # responses per held-out question
    per_level: int | None = None  # graded arithmetic only: held-out questions per level
    train_per_level: int | None = None  # graded arithmetic only: training questions per level
    limit: int | None = None  # questions per task (lm-eval --limit), for reduced runs
    train_docs: list[int] | None = None  # doc indices of the training questions to sample (lm-eval samples)
    eval_docs: list[int] | None = None  # doc indices of the held-out questions to sample
    max_gen_toks: int = 16
    batch_size: int = 64
    sampler: str = "capcal-hf"
    checker: str = "hf"
    confidence: str = "p_yes"
    lm_threshold: float = DEFAULT_LM_THRESHOLD
    tolerance: float = DEFAULT_TOLERANCE
    resamples: int = 1000
    seed: int = 1234
    data_dir: str = "bundled"
    sample_cache: bool = True


@dataclass
class LoopResult:
    """Where everything is, the comparison, and each step's seconds (0 when reused)."""

    output_dir: Path
    comparison: Comparison
    step_seconds: dict[str, float] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)


def model_path(model: str | Path) -> Path:
    """A checkpoint folder as given, or the folder of a capcal model name (prepared once)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    from capcal_models.prepare import prepare_model

    return prepare_model(model).path


def _has_chat_template(path: Path) -> bool:
    if (path / "chat_template.jinja").is_file():
        return True
    config = path / "tokenizer_config.json"
    return config.is_file() and bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template"))


def _done(folder: Path) -> bool:
    return any(folder.glob("*/results_*.json"))


def _samples_file(folder: Path, task: str) -> Path:
    files = sorted(folder.glob(f"*/samples_{task}_*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{folder}: no samples file of {task}")
    return files[-1]


def _tasks(task: str) -> tuple[str, str, str]:
    """(training split, its self-check task, the evaluation task's self-check task), as declared."""
    from capcal_tasks.relations import task_relations

    relations = task_relations()
    splits = relations.calibration_tasks(task)
    if len(splits) != 1:
        raise ValueError(f"task {task} declares {len(splits)} calibration splits; the loop needs exactly one")
    train = splits[0]
    checks = [relations.confidence_tasks(name, ["selfcheck"]) for name in (train, task)]
    for name, found in zip((train, task), checks, strict=True):
        if len(found) != 1:
            raise ValueError(f"task {name} has {len(found)} declared selfcheck tasks; the loop needs one")
    return train, checks[0][0], checks[1][0]


def run_self_calibration_loop(
    output_dir: str | Path,
    settings: LoopSettings | None = None,
    train_config: TrainConfig | None = None,
    *,
    on_step: Callable[[str, float], None] | None = None,
) -> LoopResult:
    """Run (or finish) the loop of the module docstring; returns the comparison and the step times."""
    from analysis.evaluation import evaluate

    settings = settings or LoopSettings()
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    base = model_path(settings.model)
    train_task, train_check, eval_check = _tasks(settings.task)
    metadata: dict[str, Any] = {}
    if settings.per_level is not None:
        metadata["arithmetic_per_level"] = settings.per_level
    if settings.train_per_level is not None:
        metadata["arithmetic_train_per_level"] = settings.train_per_level
    seconds: dict[str, float] = {}
    reused: list[str] = []
    seeds = {key: settings.seed for key in ("random_seed", "numpy_random_seed", "torch_random_seed")}

    def step(name: str, folder: Path, action: Callable[[], Any]) -> None:
        started = time.monotonic()
        if _done(folder) or (name == "train" and (folder / "merged" / "model.safetensors").is_file()):
            reused.append(name)
        else:
            action()
        seconds[name] = round(time.monotonic() - started, 1)
        if on_step is not None:
            on_step(name, seconds[name])

    def sample(model_path: Path, task: str, repeats: int, folder: Path) -> None:
        docs = settings.train_docs if task == train_task else settings.eval_docs
        subset = {"samples": {task: list(docs)}} if docs is not None else {}
        arguments = {"pretrained": str(model_path)}
        if settings.sampler == "capcal-hf":
            arguments["sample_cache"] = settings.sample_cache
        evaluate(
            settings.sampler, [task], model_args=arguments, repeats=repeats, metadata=metadata,
            output_path=folder, log_samples=True, limit=settings.limit, data_dir=settings.data_dir,
            apply_chat_template=_has_chat_template(model_path), batch_size=settings.batch_size,
            gen_kwargs={"max_gen_toks": settings.max_gen_toks}, fewshot_random_seed=settings.seed, **seeds,
            **subset,
        )  # fmt: skip

    def check(model_path: Path, task: str, samples: Path, folder: Path) -> None:
        evaluate(
            settings.checker, [task], model_args={"pretrained": str(model_path)},
            metadata={**metadata, "samples_file": str(samples)}, output_path=folder, log_samples=True,
            data_dir=settings.data_dir, apply_chat_template=_has_chat_template(model_path),
            batch_size=settings.batch_size, fewshot_random_seed=settings.seed, **seeds,
        )  # fmt: skip

    before, after = output_dir / "before", output_dir / "after"
    folders = {
        "sample train": before / "train_sample",
        "check train": before / "train_selfcheck",
        "sample eval": before / "eval_sample",
        "check eval": before / "eval_selfcheck",
        "resample eval": after / "eval_sample",
        "recheck eval": after / "eval_selfcheck",
    }
    step(
        "sample train",
        folders["sample train"],
        lambda: sample(base, train_task, settings.train_repeats, folders["sample train"]),
    )
    step(
        "check train",
        folders["check train"],
        lambda: check(
            base, train_check, _samples_file(folders["sample train"], train_task), folders["check train"]
        ),
    )
    step(
        "sample eval",
        folders["sample eval"],
        lambda: sample(base, settings.task, settings.repeats, folders["sample eval"]),
    )
    step(
        "check eval",
        folders["check eval"],
        lambda: check(
            base, eval_check, _samples_file(folders["sample eval"], settings.task), folders["check eval"]
        ),
    )
    eval_ids = question_ids_of(_samples_file(folders["sample eval"], settings.task))
    data_dir = output_dir / "data"
    started = time.monotonic()
    build_training_data(
        folders["sample train"], folders["check train"], data_dir, confidence=settings.confidence,
        lm_threshold=settings.lm_threshold, exclude_question_ids=eval_ids,
    )  # fmt: skip
    seconds["data"] = round(time.monotonic() - started, 1)
    train_dir = output_dir / "train"
    step("train", train_dir, lambda: train_self_calibration(data_dir, base, train_dir, train_config))
    merged = train_dir / "merged"
    step(
        "resample eval",
        folders["resample eval"],
        lambda: sample(merged, settings.task, settings.repeats, folders["resample eval"]),
    )
    resampled = folders["resample eval"]
    step(
        "recheck eval",
        folders["recheck eval"],
        lambda: check(merged, eval_check, _samples_file(resampled, settings.task), folders["recheck eval"]),
    )
    started = time.monotonic()
    comparison = compare_runs(
        folders["sample eval"], folders["check eval"], folders["resample eval"], folders["recheck eval"],
        output_dir / "compare", training_data=data_dir, confidence=settings.confidence,
        tolerance=settings.tolerance, n_resamples=settings.resamples, seed=0,
    )  # fmt: skip
    seconds["compare"] = round(time.monotonic() - started, 1)
    record = {
        "settings": asdict(settings),
        "train_config": asdict(train_config or TrainConfig()),
        "base_model": str(base),
        "step_seconds": seconds,
        "reused_steps": reused,
        "training_tuples": len(read_training_data(data_dir)),
    }
    (output_dir / "loop.json").write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return LoopResult(output_dir, comparison, seconds, reused)


def question_ids_of(samples: str | Path) -> list[str]:
    """The question ids of a samples file, in order."""
    from analysis.runs import iter_sample_records

    ids = []
    for _, record in iter_sample_records(Path(samples)):
        doc = record.get("doc")
        if isinstance(doc, dict) and isinstance(doc.get("question_id"), str):
            ids.append(doc["question_id"])
    return ids
