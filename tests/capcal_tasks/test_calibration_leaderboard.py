"""A leaderboard reads a real run of the open group ``capcal_calibration_open`` (stock ``lm_eval``,
SmolLM2, offline from a local data folder, 3 questions per task x k = 4, 8 new tokens) with its own reader:
plain ``json``, nothing of capcal, in the two styles leaderboards use (exact
``results[task]["metric,filter"]`` keys; substring matching over task names, as the Hugging Face leaderboard
template's). Checked: every headline column is found, with its direction; each group column is the mean of
its tasks' values (NaN when any task's is NaN: never the mean over a subset); no bookkeeping value is a
ranked column."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

GROUP = "capcal_calibration_open"
TASKS = [
    "capcal_gsm8k_calibration",
    "capcal_math500_calibration",
    "capcal_aime25_calibration",
    "capcal_triviaqa_calibration",
    "capcal_simpleqa_calibration",
    "capcal_mmlu_calibration",
    "capcal_arithmetic_calibration",
]
FILTER = "all_responses"
K, LIMIT = 4, 3
BIN = Path(sys.executable).parent
# The headline columns a leaderboard shows, with the direction it must rank them by (True: higher is better).
HEADLINE = {
    "expected_accuracy": True,
    **{f"{source}_corrected_brier_skill": True for source in ("ptrue", "verbalized", "consistency")},
    **{f"{source}_ece_debiased": False for source in ("ptrue", "verbalized", "consistency")},
    **{f"{source}_auroc": True for source in ("ptrue", "verbalized", "consistency")},
}
BOOKKEEPING = ("n_samples", "ptrue_available", "samples_per_question", "ptrue_requested")


@pytest.fixture(scope="session")
def open_group_results(tmp_path_factory, shared_data) -> dict:
    """The results JSON of one stock lm_eval run of the open group, read with plain json."""
    output = tmp_path_factory.mktemp("open_group_run")

    def capcal(*arguments: str) -> str:
        return subprocess.run(
            [str(BIN / "capcal"), *arguments], capture_output=True, text=True, check=True
        ).stdout.strip()

    model = capcal("models", "path", "smollm2")
    command = [
        str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}",
        "--include_path", capcal("tasks-dir"), "--tasks", GROUP, "--apply_chat_template",
        "--metadata", json.dumps({"repeats": K}), "--limit", str(LIMIT),
        "--gen_kwargs", "max_gen_toks=8", "--batch_size", "8", "--seed", "7", "--output_path", str(output),
    ]  # fmt: skip
    # batch 8, not 64: stock hf pads a batch to its longest prompt (AIME's reach 914 tokens, the others'
    # 360) and prefills each of the k clones; at 64 the run took 950 s in CI, at 8 it took 321 s here
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CAPCAL_DATA_DIR": str(shared_data)}  # offline: local data
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3000)
    assert result.returncode == 0, result.stderr[-4000:]
    (results_file,) = output.rglob("results_*.json")
    return json.loads(results_file.read_text())


def read_exact(results: dict, benchmark: str, metric: str) -> tuple[float, bool] | None:
    """Exact-key reader: ``results[benchmark]["metric,filter"]``, ``higher_is_better[benchmark][metric]``."""
    row = results["results"].get(benchmark, {})
    key = f"{metric},{FILTER}"
    if key not in row:
        return None
    return row[key], results["higher_is_better"][benchmark][metric]


def read_substring(results: dict, benchmark: str, metric: str) -> list[float]:
    """Substring reader (the leaderboard template's): the metric of every result whose name contains
    ``benchmark``."""
    key = f"{metric},{FILTER}"
    return [row[key] for name, row in results["results"].items() if benchmark in name and key in row]


def mean_or_nan(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.slow
def test_exact_keys_find_every_headline_column_with_its_direction(open_group_results):
    for benchmark in [*TASKS, GROUP]:
        for metric, higher in HEADLINE.items():
            found = read_exact(open_group_results, benchmark, metric)
            assert found is not None, (benchmark, metric)
            value, higher_is_better = found
            assert isinstance(value, float), (benchmark, metric)
            assert higher_is_better is higher, (benchmark, metric)
    # every task reports every column: the row of no model is dropped for a missing key
    columns = {key for task in TASKS for key in open_group_results["results"][task] if key.endswith(FILTER)}
    for task in TASKS:
        assert {key for key in open_group_results["results"][task] if key.endswith(FILTER)} == columns, task


@pytest.mark.slow
def test_each_group_column_is_the_mean_of_all_its_tasks(open_group_results):
    results = open_group_results["results"]
    group_row = results[GROUP]
    metrics = {key.partition(",")[0] for key in group_row if key.endswith(FILTER) and "_stderr" not in key}
    assert set(HEADLINE) <= metrics
    for metric in metrics:
        values = [results[task][f"{metric},{FILTER}"] for task in TASKS]
        assert same(group_row[f"{metric},{FILTER}"], sum(values) / len(values)), metric
    # a NaN column says why, in the results JSON itself
    for task in TASKS:
        bookkeeping = open_group_results["configs"][task]["capcal_calibration"]
        nan_columns = {key.partition(",")[0] for key, value in results[task].items() if value != value}
        nan_columns = {column for column in nan_columns if not column.endswith("_stderr")}
        assert nan_columns == set(bookkeeping["undefined_columns"]), task
        assert all(isinstance(reason, str) and reason for reason in bookkeeping["undefined_columns"].values())


@pytest.mark.slow
def test_substring_matching_reads_each_task_and_the_group_once(open_group_results):
    for task in TASKS:  # a task name is in no other result's name
        for metric in HEADLINE:
            (value,) = read_substring(open_group_results, task, metric)
            assert same(value, read_exact(open_group_results, task, metric)[0])
    # the pitfall the docs warn about: a short name matches several results (here every task and the group)
    assert len(read_substring(open_group_results, "calibration", "expected_accuracy")) == len(TASKS) + 1
    # a reader that averages the tasks itself gets the group's value (every task has every column)
    for metric in HEADLINE:
        (group_value,) = read_substring(open_group_results, GROUP, metric)
        tasks_mean = mean_or_nan([read_substring(open_group_results, task, metric)[0] for task in TASKS])
        assert same(group_value, tasks_mean), metric


@pytest.mark.slow
def test_no_bookkeeping_value_is_a_ranked_column(open_group_results):
    for name, directions in open_group_results["higher_is_better"].items():
        assert not set(directions) & set(BOOKKEEPING), name
        assert all(direction in (True, False) for direction in directions.values()), name
    for name, row in open_group_results["results"].items():
        assert not {key.partition(",")[0] for key in row} & set(BOOKKEEPING), name
    for task in TASKS:  # the bookkeeping is in the task's config, where no reader averages it
        bookkeeping = open_group_results["configs"][task]["capcal_calibration"]
        assert bookkeeping["samples_per_question"] == K and bookkeeping["ptrue_requested"] is True
        assert str(open_group_results["configs"][task]["metadata"]["version"]) == "2.0"
