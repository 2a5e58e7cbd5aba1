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
seconds, each step's fingerprint and whether it ran).

Never stale: every step folder records the fingerprint of the settings and input identities that made it
(``analysis.self_calibration.fingerprint``): a model by ``checkpoint_fingerprint``, a source run by the
digest of its files. A step is reused only when its fingerprint is unchanged and its output is as it wrote
it; otherwise it runs again (``reuse="auto"``), and since its new output has a new digest, so does every
step that reads it; ``reuse="strict"`` stops with ``StaleStepError`` instead. An interrupted loop goes on
where it stopped; training resumes from its last checkpoint when its settings and data are the same.

The training split is sampled at ``train_temperature`` (0.8, the method's ``T``; None: the task's own), the
held-out questions at the task's temperature.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.self_calibration.compare import (
    DEFAULT_TOLERANCE,
    Comparison,
    compare_runs,
    read_comparison,
)
from analysis.self_calibration.data import DEFAULT_LM_THRESHOLD, build_training_data, read_training_data
from analysis.self_calibration.fingerprint import REUSE_MODES, content_digest, run_step
from analysis.self_calibration.train import train_self_calibration
from analysis.self_calibration.train_config import TrainConfig

__all__ = [
    "STEP_FOLDERS",
    "LoopResult",
    "LoopSettings",
    "StepRunner",
    "model_path",
    "question_ids_of",
    "run_self_calibration_loop",
]


@dataclass
class LoopSettings:
    """The loop's settings besides training (``TrainConfig``)."""

    model: str = "smollm2"  # a capcal model name (capcal_models.prepare) or a checkpoint folder
    task: str = "capcal_arithmetic"  # the evaluation task; its calibration split gives the training questions
    train_repeats: int = 32  # N responses per training question (the method's N)
    train_temperature: float | None = 0.8  # the method's T for the training samples; None: the task's
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
    reuse: str = "auto"  # "strict": stop at a stale step instead of re-running it

    def __post_init__(self) -> None:
        if self.reuse not in REUSE_MODES:
            raise ValueError(f"reuse must be one of {', '.join(REUSE_MODES)}, got {self.reuse!r}")
        if self.train_temperature is not None and not self.train_temperature > 0:
            raise ValueError(f"train_temperature must be > 0 (sampling), got {self.train_temperature!r}")


@dataclass
class LoopResult:
    """Where everything is, the comparison, each step's seconds (about 0 when reused), the steps reused."""

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


STEP_FOLDERS = {  # step name -> its folder under the loop's output_dir
    "sample train": "before/train_sample",
    "check train": "before/train_selfcheck",
    "sample eval": "before/eval_sample",
    "check eval": "before/eval_selfcheck",
    "data": "data",
    "train": "train",
    "resample eval": "after/eval_sample",
    "recheck eval": "after/eval_selfcheck",
    "compare": "compare",
}


@dataclass
class StepRunner:
    """Runs or reuses each step (``fingerprint.run_step`` with ``reuse``) and keeps what ``loop.json``
    records of it: its seconds (about 0 when reused), its fingerprint's inputs and whether it ran."""

    reuse: str = "auto"
    on_step: Callable[[str, float], None] | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    reused: list[str] = field(default_factory=list)
    fingerprints: dict[str, dict] = field(default_factory=dict)

    def run(self, name: str, folder: Path, settings: dict, inputs: dict, action: Callable[[], Any]) -> None:
        """Step ``name``: ``action()`` writes ``folder`` unless its fingerprint (``settings``, ``inputs``) is
        unchanged and its output as it wrote it."""
        started = time.monotonic()
        ran = run_step(name, folder, settings, inputs, action, reuse=self.reuse)
        if not ran:
            self.reused.append(name)
        self.seconds[name] = round(time.monotonic() - started, 1)
        self.fingerprints[name] = {"inputs": inputs, "ran": ran}
        if self.on_step is not None:
            self.on_step(name, self.seconds[name])


@dataclass(frozen=True)
class _ModelSteps:
    """The loop's lm-eval runs (``analysis.evaluation.evaluate``): sampling and self-checking, with the
    settings every such run shares."""

    settings: LoopSettings
    train_task: str
    metadata: dict

    @property
    def seeds(self) -> dict[str, int]:
        return {key: self.settings.seed for key in ("random_seed", "numpy_random_seed", "torch_random_seed")}

    @property
    def common(self) -> dict:
        """The settings in every model step's fingerprint."""
        settings = self.settings
        return {"seed": settings.seed, "data_dir": settings.data_dir, "batch_size": settings.batch_size,
                "metadata": self.metadata}  # fmt: skip

    def sampling(self, task: str, repeats: int) -> dict:
        """A sampling step's settings (its fingerprint and its run): the training split at
        ``train_temperature``, the held-out questions at the task's own."""
        settings = self.settings
        docs = settings.train_docs if task == self.train_task else settings.eval_docs
        gen_kwargs: dict[str, Any] = {"max_gen_toks": settings.max_gen_toks}
        if task == self.train_task and settings.train_temperature is not None:
            gen_kwargs["temperature"] = settings.train_temperature
        return {"task": task, "engine": settings.sampler, "repeats": repeats, "limit": settings.limit,
                "docs": docs, "gen_kwargs": gen_kwargs, **self.common}  # fmt: skip

    def sample(self, model: Path, config: dict, folder: Path) -> None:
        """Sample ``config`` (``sampling``) from ``model`` into ``folder``."""
        from analysis.evaluation import evaluate

        settings = self.settings
        subset = {"samples": {config["task"]: list(config["docs"])}} if config["docs"] is not None else {}
        arguments = {"pretrained": str(model)}
        if settings.sampler == "capcal-hf":
            arguments["sample_cache"] = settings.sample_cache
        evaluate(
            settings.sampler, [config["task"]], model_args=arguments, repeats=config["repeats"],
            metadata=self.metadata, output_path=folder, log_samples=True, limit=settings.limit,
            data_dir=settings.data_dir, apply_chat_template=_has_chat_template(model),
            batch_size=settings.batch_size, gen_kwargs=config["gen_kwargs"],
            fewshot_random_seed=settings.seed, **self.seeds, **subset,
        )  # fmt: skip

    def check(self, model: Path, task: str, samples: Path, folder: Path) -> None:
        """``model``'s self-check task ``task`` on the responses of ``samples``, into ``folder``."""
        from analysis.evaluation import evaluate

        settings = self.settings
        evaluate(
            settings.checker, [task], model_args={"pretrained": str(model)},
            metadata={**self.metadata, "samples_file": str(samples)}, output_path=folder, log_samples=True,
            data_dir=settings.data_dir, apply_chat_template=_has_chat_template(model),
            batch_size=settings.batch_size, fewshot_random_seed=settings.seed, **self.seeds,
        )  # fmt: skip


def run_self_calibration_loop(
    output_dir: str | Path,
    settings: LoopSettings | None = None,
    train_config: TrainConfig | None = None,
    *,
    on_step: Callable[[str, float], None] | None = None,
) -> LoopResult:
    """Run (or finish) the loop of the module docstring; returns the comparison and the step times.
    ``StaleStepError`` (``settings.reuse == "strict"``) names the first stale step."""
    from capcal_models.model_identity import checkpoint_fingerprint

    settings = settings or LoopSettings()
    train_config = train_config or TrainConfig()
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    base = model_path(settings.model)
    train_task, train_check, eval_check = _tasks(settings.task)
    metadata: dict[str, Any] = {}
    if settings.per_level is not None:
        metadata["arithmetic_per_level"] = settings.per_level
    if settings.train_per_level is not None:
        metadata["arithmetic_train_per_level"] = settings.train_per_level
    runs = _ModelSteps(settings, train_task, metadata)
    steps = StepRunner(settings.reuse, on_step)
    folders = {name: output_dir / folder for name, folder in STEP_FOLDERS.items()}

    def sample_step(name: str, model: Path, model_id: str, task: str, repeats: int) -> None:
        config = runs.sampling(task, repeats)
        steps.run(
            name,
            folders[name],
            config,
            {"model": model_id},
            lambda: runs.sample(model, config, folders[name]),
        )

    def check_step(name: str, model: Path, model_id: str, task: str, sampled: str, sampled_task: str) -> None:
        inputs = {"model": model_id, "sampled run": content_digest(folders[sampled])}
        config = {"task": task, "engine": settings.checker, **runs.common}

        def action() -> None:
            runs.check(model, task, _samples_file(folders[sampled], sampled_task), folders[name])

        steps.run(name, folders[name], config, inputs, action)

    base_id = checkpoint_fingerprint(base)
    sample_step("sample train", base, base_id, train_task, settings.train_repeats)
    check_step("check train", base, base_id, train_check, "sample train", train_task)
    sample_step("sample eval", base, base_id, settings.task, settings.repeats)
    check_step("check eval", base, base_id, eval_check, "sample eval", settings.task)
    eval_ids = question_ids_of(_samples_file(folders["sample eval"], settings.task))
    data_dir, train_dir = folders["data"], folders["train"]
    steps.run(
        "data", data_dir, {"confidence": settings.confidence, "lm_threshold": settings.lm_threshold},
        {name: content_digest(folders[name]) for name in ("sample train", "check train", "sample eval")},
        lambda: build_training_data(
            folders["sample train"], folders["check train"], data_dir, confidence=settings.confidence,
            lm_threshold=settings.lm_threshold, exclude_question_ids=eval_ids,
        ),
    )  # fmt: skip
    steps.run(
        "train", train_dir, asdict(train_config), {"data": content_digest(data_dir), "base model": base_id},
        lambda: train_self_calibration(data_dir, base, train_dir, train_config),
    )  # fmt: skip
    merged = train_dir / "merged"
    merged_id = checkpoint_fingerprint(merged)
    sample_step("resample eval", merged, merged_id, settings.task, settings.repeats)
    check_step("recheck eval", merged, merged_id, eval_check, "resample eval", settings.task)
    training = json.loads((train_dir / "training.json").read_text(encoding="utf-8"))
    options = {"confidence": settings.confidence, "tolerance": settings.tolerance,
               "n_resamples": settings.resamples, "seed": 0}  # fmt: skip
    comparison_inputs = {name: content_digest(folders[name]) for name in
                         ("sample eval", "check eval", "data", "resample eval", "recheck eval")}  # fmt: skip
    comparison_inputs.update({"before model": base_id, "after model": merged_id})
    training_record = {"config": training["config"], "base_model": base_id, "trained_model": merged_id,
                       "data": comparison_inputs["data"], "global_step": training["global_step"],
                       "examples_per_epoch": training["examples_per_epoch"]}  # fmt: skip
    result: dict[str, Comparison] = {}

    def compare() -> None:
        result["comparison"] = compare_runs(
            folders["sample eval"], folders["check eval"], folders["resample eval"], folders["recheck eval"],
            folders["compare"], training_data=data_dir, training=training_record, **options,
        )  # fmt: skip

    compare_settings = {**options, "training": training_record}
    steps.run("compare", folders["compare"], compare_settings, comparison_inputs, compare)
    comparison = result.get("comparison") or read_comparison(folders["compare"])
    record = {
        "settings": asdict(settings),
        "train_config": asdict(train_config),
        "base_model": str(base),
        "base_model_identity": base_id,
        "trained_model_identity": merged_id,
        "training": training_record,  # what compare_checked_runs(training=...) lists in the report
        "step_seconds": steps.seconds,
        "reused_steps": steps.reused,
        "steps": steps.fingerprints,
        "training_tuples": len(read_training_data(data_dir)),
    }
    (output_dir / "loop.json").write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return LoopResult(output_dir, comparison, steps.seconds, steps.reused)


def question_ids_of(samples: str | Path) -> list[str]:
    """The question ids of a samples file, in order."""
    from analysis.runs import iter_sample_records

    ids = []
    for _, record in iter_sample_records(Path(samples)):
        doc = record.get("doc")
        if isinstance(doc, dict) and isinstance(doc.get("question_id"), str):
            ids.append(doc["question_id"])
    return ids
