"""The one real lm-eval run shared by the pipeline and CLI tests: SmolLM2, capcal_gsm8k, 2 questions, k 2."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_TASK, TINY_LIMIT, TINY_REPEATS = "capcal_gsm8k", 2, 2  # the tests repeat these numbers


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, smollm2_path: Path) -> tuple[Path, dict]:
    """``analysis.evaluation.evaluate`` on the real SmolLM2 with the bundled GSM8K data, saved with its
    samples: (output folder, the returned results)."""
    from analysis.evaluation import evaluate

    output = tmp_path_factory.mktemp("tiny_run")
    results = evaluate(
        "capcal-hf",
        TINY_TASK,
        model_args={"pretrained": str(smollm2_path), "sample_cache": False},
        repeats=TINY_REPEATS,
        limit=TINY_LIMIT,
        data_dir="bundled",
        output_path=output,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs={"max_gen_toks": 8},
        batch_size=4,
        random_seed=7,
        numpy_random_seed=7,
        torch_random_seed=7,
        fewshot_random_seed=7,
    )
    return output, results
