"""Real runs shared by the Self-Calibration tests: SmolLM2 samples a few graded-arithmetic training questions
(``capcal-hf``) and self-checks its responses (``hf``), once per session; a tiny held-out run (not
self-checked) for the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

TRAIN_LIMIT, TRAIN_REPEATS = 6, 4  # 6 training questions x 4 responses
SEED = 11


def _evaluate(model: str, task: str, output: Path, model_args: dict, **kwargs) -> dict:
    from analysis.evaluation import evaluate

    return evaluate(
        model,
        [task],
        model_args=model_args,
        output_path=output,
        log_samples=True,
        data_dir="bundled",
        apply_chat_template=True,
        batch_size=16,
        random_seed=SEED,
        numpy_random_seed=SEED,
        torch_random_seed=SEED,
        fewshot_random_seed=SEED,
        **kwargs,
    )


@pytest.fixture(scope="session")
def selfcal_runs(tmp_path_factory, smollm2_path: Path) -> dict[str, Path]:
    """Folders of real runs: ``train_sample`` (capcal_arithmetic_train, 6 questions x 4 responses),
    ``train_selfcheck`` (capcal_arithmetic_train_selfcheck on them) and ``eval_sample`` (capcal_arithmetic,
    2 questions x 2, an evaluation split), plus the two samples files."""
    root = tmp_path_factory.mktemp("selfcal_runs")
    sampler = {"pretrained": str(smollm2_path), "sample_cache": False}
    checker = {"pretrained": str(smollm2_path)}
    out: dict[str, Path] = {}
    for name, task, limit, repeats in (
        ("train", "capcal_arithmetic_train", TRAIN_LIMIT, TRAIN_REPEATS),
        ("eval", "capcal_arithmetic", 2, 2),
    ):
        sampled = _evaluate(
            "capcal-hf", task, root / f"{name}_sample", sampler, limit=limit, repeats=repeats,
            gen_kwargs={"max_gen_toks": 8},
        )  # fmt: skip
        samples = sampled["capcal_files"]["samples"][task]
        out[f"{name}_sample"], out[f"{name}_samples_file"] = root / f"{name}_sample", samples
    checked = {"samples_file": str(out["train_samples_file"])}
    _evaluate("hf", "capcal_arithmetic_train_selfcheck", root / "train_selfcheck", checker, metadata=checked)
    out["train_selfcheck"] = root / "train_selfcheck"
    return out


@pytest.fixture(scope="session")
def selfcal_data(selfcal_runs: dict[str, Path], tmp_path_factory):
    """``build_training_data`` on the real training runs (lm_threshold 0.5, so that some tuples carry the
    language-modelling loss)."""
    from analysis.self_calibration.data import build_training_data

    return build_training_data(
        selfcal_runs["train_sample"],
        selfcal_runs["train_selfcheck"],
        tmp_path_factory.mktemp("selfcal_data"),
        lm_threshold=0.5,
    )
