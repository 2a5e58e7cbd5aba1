"""The real runs shared by the analysis tests: ``tiny_run`` (SmolLM2, capcal_gsm8k, 2 questions, k 2) for the
pipeline and CLI tests, and ``small_demo`` (the README's demo at a small size) for the demo tests and the
report tests on its output (both in tests/analysis/evaluation/test_demo.py, so that one worker runs it).
``forked_cli``, the server that the CLI tests fork their commands from, is tests/conftest.py's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis.report import figures

TINY_TASK, TINY_LIMIT, TINY_REPEATS = "capcal_gsm8k", 2, 2  # the tests repeat these numbers
REPO = Path(__file__).resolve().parents[2]


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


@pytest.fixture(scope="session")
def small_demo(tmp_path_factory, smollm2_path: Path, forked_cli) -> tuple[Path, str]:
    """``capcal demo`` at a small size (10 arithmetic questions, k 6; 20 training questions; the second model
    k 4, and its verbalized confidence at most 32 tokens), in a process forked from ``forked_cli`` (the
    models load in it): (output folder, the command's stdout)."""
    output = tmp_path_factory.mktemp("demo")
    command = ["demo", "--output_dir", str(output)]
    command += ["--per_level", "2", "--train_per_level", "4", "--resamples", "100"]
    # consistency k = 5 needs n > 5 samples per question
    command += [
        "--repeats",
        "6",
        "--train_repeats",
        "6",
        "--strong_repeats",
        "4",
        "--strong_verbalized",
        "32",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = forked_cli.capcal(command, REPO, 1500, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return output, result.stdout


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The figures ``analysis.report.figures._png`` renders during the test, in order (each kept as it is
    rendered), for the report tests that read a figure's lines, bars and labels."""
    figures_drawn: list = []
    render = figures._png

    def keep(figure) -> bytes:
        figures_drawn.append(figure)
        return render(figure)

    monkeypatch.setattr(figures, "_png", keep)
    return figures_drawn
