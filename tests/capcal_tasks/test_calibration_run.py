"""One real run of ``capcal_arithmetic_calibration`` with the stock ``lm_eval`` command line on SmolLM2 (hf,
chat template, 10 questions x k = 4 samples): lm-eval's own table prints the calibration columns, and a
leaderboard reads them from the results JSON alone (plain ``json``, nothing of capcal)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

TASK = "capcal_arithmetic_calibration"
K, PER_LEVEL = 4, 2
BIN = Path(sys.executable).parent
# Every column of every run (SmolLM2-135M never writes \boxed{P}: its verbalized statistics are NaN).
STATISTICS = {
    "brier": False,
    "corrected_brier": False,
    "ece": False,
    "ece_debiased": False,
    "auroc": True,
    "brier_skill": True,
    "corrected_brier_skill": True,
}
EXPECTED = {
    "expected_accuracy": True,
    "verbalized_parse_failure_rate": False,
    **{
        f"{source}_{name}": higher
        for source in ("ptrue", "verbalized", "consistency")
        for name, higher in STATISTICS.items()
    },
}
NAN_COLUMNS = {f"verbalized_{name}" for name in STATISTICS}


@pytest.fixture(scope="session")
def calibration_run(tmp_path_factory) -> tuple[Path, str]:
    """The output folder and the printed output of the run."""
    output = tmp_path_factory.mktemp("calibration_run")

    def capcal(*arguments: str) -> str:
        return subprocess.run(
            [str(BIN / "capcal"), *arguments], capture_output=True, text=True, check=True
        ).stdout.strip()

    model = capcal("models", "path", "smollm2")
    command = [
        str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}",
        "--include_path", capcal("tasks-dir"), "--tasks", TASK, "--apply_chat_template",
        "--metadata", json.dumps({"arithmetic_per_level": PER_LEVEL, "repeats": K}),
        "--gen_kwargs", "max_gen_toks=16", "--batch_size", "64", "--seed", "7", "--log_samples",
        "--output_path", str(output),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return output, result.stdout


def read_leaderboard_columns(output: Path, task: str) -> dict[str, tuple[float, float, bool]]:
    """What a leaderboard reads: {metric: (value, stderr, higher_is_better)} from lm-eval's results JSON."""
    (results_file,) = output.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    row, directions = results["results"][task], results["higher_is_better"][task]
    columns = {}
    for key, value in row.items():
        metric, _, filter_name = key.partition(",")
        if filter_name and not metric.endswith("_stderr"):
            columns[metric] = (value, row[f"{metric}_stderr,{filter_name}"], directions[metric])
    return columns


@pytest.mark.slow
def test_lm_eval_prints_the_calibration_columns(calibration_run):
    _, printed = calibration_run
    rows = [
        [cell.strip() for cell in line.split("|")] for line in printed.splitlines() if line.startswith("|")
    ]
    header = rows[0]
    assert header[1:3] == ["Tasks", "Version"] and rows[2][1] == TASK
    printed_metrics = {row[header.index("Metric")]: row for row in rows[2:]}
    assert set(printed_metrics) == set(EXPECTED)
    for metric, row in printed_metrics.items():
        assert row[header.index("Metric") + 1] == ("↑" if EXPECTED[metric] else "↓"), metric
        assert "±" in row and "N/A" not in row, row
        assert math.isnan(float(row[-2])) == (metric in NAN_COLUMNS), row  # a number, or nan when undefined


@pytest.mark.slow
def test_a_leaderboard_reads_the_columns_from_the_results_json(calibration_run):
    output, _ = calibration_run
    columns = read_leaderboard_columns(output, TASK)
    assert set(columns) == set(EXPECTED)
    for metric, (value, stderr, higher_is_better) in columns.items():
        assert isinstance(value, float) and math.isfinite(value) == (metric not in NAN_COLUMNS), metric
        assert isinstance(stderr, float) and (math.isnan(stderr) or stderr >= 0.0), metric
        assert higher_is_better is EXPECTED[metric], metric
    (results_file,) = output.rglob("results_*.json")
    bookkeeping = json.loads(results_file.read_text())["configs"][TASK]["capcal_calibration"]
    assert bookkeeping["samples_per_question"] == K and bookkeeping["ptrue_requested"] is True
    assert set(bookkeeping["undefined_columns"]) == NAN_COLUMNS
    assert set(bookkeeping["stderr_does_not_cover"]) == {
        f"{s}_ece" for s in ("ptrue", "verbalized", "consistency")
    }
    assert 0.0 <= columns["expected_accuracy"][0] <= 1.0 and columns["expected_accuracy"][1] > 0.0
    for source in ("ptrue", "consistency"):
        assert 0.0 <= columns[f"{source}_ece"][0] <= 1.0 and columns[f"{source}_ece"][1] > 0.0
        assert 0.0 <= columns[f"{source}_auroc"][0] <= 1.0
        assert columns[f"{source}_brier_skill"][0] <= 1.0
        # 2|gap| - E|N(gap, s^2)| <= |gap| in every bin (equal when no bin holds two questions: no noise)
        assert columns[f"{source}_ece_debiased"][0] <= columns[f"{source}_ece"][0] + 1e-12
    assert columns["verbalized_parse_failure_rate"][0] == 1.0  # SmolLM2-135M writes no \boxed{P}


@pytest.mark.slow
def test_the_columns_agree_with_the_logged_samples(calibration_run):
    """Cross-check (not a leaderboard's job): P(True) and mu_hat from the samples file, scored by
    capcal_metrics, give the ptrue columns of the results JSON."""
    import numpy as np

    from capcal_metrics import (
        brier_score,
        corrected_brier_skill_score,
        debiased_expected_calibration_error,
        expected_calibration_error,
        soft_label_auroc,
    )

    output, _ = calibration_run
    (samples_file,) = output.rglob(f"samples_{TASK}_*.jsonl")
    lines = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(lines) == 5 * PER_LEVEL
    mu_hat, p_true = [], []
    for line in lines:
        assert len(line["resps"]) == 4 and len(line["resps"][0]) == K  # sampling, Yes, No, verbalized
        (yes, _), (no, _) = line["resps"][1][0], line["resps"][2][0]
        p_true.append(1.0 / (1.0 + math.exp(float(no) - float(yes))))
        mu_hat.append(line["expected_accuracy"])
    p_true, mu_hat = np.array(p_true), np.array(mu_hat)
    columns = read_leaderboard_columns(output, TASK)
    assert columns["ptrue_brier"][0] == pytest.approx(brier_score(p_true, mu_hat), rel=1e-6)
    assert columns["ptrue_ece"][0] == pytest.approx(expected_calibration_error(p_true, mu_hat), rel=1e-6)
    assert columns["ptrue_auroc"][0] == pytest.approx(soft_label_auroc(p_true, mu_hat), rel=1e-6)
    assert columns["ptrue_ece_debiased"][0] == pytest.approx(
        debiased_expected_calibration_error(p_true, mu_hat), rel=1e-6
    )
    assert columns["ptrue_corrected_brier_skill"][0] == pytest.approx(
        corrected_brier_skill_score(p_true, mu_hat, K), rel=1e-6
    )
