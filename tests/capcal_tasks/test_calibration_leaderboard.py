"""A leaderboard reads a real run of the open group ``capcal_calibration_open`` (stock ``lm_eval``, SmolLM2,
offline from a local data folder, 2 questions per task x k = 4, 8 new tokens, ``--log_samples``) with its own
reader: plain ``json``, nothing of capcal, in the two styles leaderboards use (exact
``results[task]["metric,filter"]`` keys, as the Hugging Face leaderboard template; substring matching over
task names, as some of its forks). Checked: every headline column is found, with its direction; each group
column is the mean of the tasks that report it (a task whose targets leave nothing to measure leaves it out,
and says so; NaN stays NaN); no bookkeeping value is a ranked column. The template itself (its reading and
display logic re-implemented in ``tests/analysis/leaderboard_template.py``) fails on lm-eval's folder (no row:
the samples files make it skip the folder) and on lm-eval's results file alone, while ``capcal leaderboard``'s
export of the same run is one complete row, every column left off named with its reason. The two-model board
of docs/leaderboards.md is tested on the stored results of its runs (tests/analysis/test_leaderboard.py)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from leaderboard_template import TemplateTask, board  # noqa: E402  (tests/analysis)

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
K, LIMIT = 4, 2  # 70 generation requests (105 at 3 questions): prefill of prompts of up to 914 tokens
BIN = Path(sys.executable).parent
# The headline columns a leaderboard shows, with the direction it must rank them by (True: higher is better).
HEADLINE = {
    "expected_accuracy": True,
    **{f"{source}_corrected_brier_skill": True for source in ("ptrue", "verbalized", "consistency")},
    **{f"{source}_ece_debiased": False for source in ("ptrue", "verbalized", "consistency")},
    **{f"{source}_auroc": True for source in ("ptrue", "verbalized", "consistency")},
}
# every calibration column (the task's metric list), to tell a left-out column from one never reported
COLUMNS = [type("Column", (), {"name": name}) for name in [
    "expected_accuracy", "verbalized_parse_failure_rate",
    *(f"{source}_{statistic}" for source in ("ptrue", "verbalized", "consistency") for statistic in (
        "brier", "corrected_brier", "ece", "ece_debiased", "auroc", "brier_skill", "corrected_brier_skill"))
]]  # fmt: skip
BOOKKEEPING = ("n_samples", "ptrue_available", "samples_per_question", "ptrue_requested")


def _capcal(*arguments: str) -> str:
    return subprocess.run(
        [str(BIN / "capcal"), *arguments], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="session")
def open_group_run(tmp_path_factory, shared_data) -> tuple[Path, dict]:
    """The output folder and the results JSON (read with plain json) of one stock lm_eval run of the open
    group, with its samples logged."""
    output = tmp_path_factory.mktemp("open_group_run")
    model = _capcal("models", "path", "smollm2")
    command = [
        str(BIN / "lm_eval"), "--model", "hf", "--model_args", f"pretrained={model}",
        "--include_path", _capcal("tasks-dir"), "--tasks", GROUP, "--apply_chat_template",
        "--metadata", json.dumps({"repeats": K}), "--limit", str(LIMIT),
        "--gen_kwargs", "max_gen_toks=8", "--batch_size", str(K), "--seed", "7", "--output_path", str(output),
        "--log_samples",
    ]  # fmt: skip
    # batch k: stock hf pads a batch to its longest prompt (AIME's reach 914 tokens, the others' 360) and
    # prefills each of the k clones; a batch of one question's k clones pads nothing. The run took 950 s in
    # CI at 64; on the 2-core AMD machine (2026-11-29) 171 s at 16, 121 s at 8 and at 2, 107 s at 4
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CAPCAL_DATA_DIR": str(shared_data)}  # offline: local data
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3000)
    assert result.returncode == 0, result.stderr[-4000:]
    (results_file,) = output.rglob("results_*.json")
    return output, json.loads(results_file.read_text())


@pytest.fixture(scope="session")
def open_group_results(open_group_run) -> dict:
    return open_group_run[1]


def read_exact(results: dict, benchmark: str, metric: str) -> tuple[float, bool] | None:
    """Exact-key reader: ``results[benchmark]["metric,filter"]``, ``higher_is_better[benchmark][metric]``."""
    row = results["results"].get(benchmark, {})
    key = f"{metric},{FILTER}"
    if key not in row:
        return None
    return row[key], results["higher_is_better"][benchmark][metric]


def read_substring(results: dict, benchmark: str, metric: str) -> list[float]:
    """Substring reader (some forks of the leaderboard template): the metric of every result whose name
    contains ``benchmark``."""
    key = f"{metric},{FILTER}"
    return [row[key] for name, row in results["results"].items() if benchmark in name and key in row]


def mean_or_nan(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.slow
def test_exact_keys_find_every_headline_column_with_its_direction(open_group_results):
    for benchmark in [*TASKS, GROUP]:
        config = (open_group_results["configs"].get(benchmark) or {}).get("capcal_calibration", {})
        left_out = set(config.get("left_out_columns", {}))
        if benchmark == GROUP:  # left out of the group only where every task left it out
            every = [
                set(open_group_results["configs"][task]["capcal_calibration"]["left_out_columns"])
                for task in TASKS
            ]
            left_out = set.intersection(*every)
        for metric, higher in HEADLINE.items():
            found = read_exact(open_group_results, benchmark, metric)
            if metric in left_out:
                assert found is None, (benchmark, metric)
                continue
            assert found is not None, (benchmark, metric)
            value, higher_is_better = found
            assert isinstance(value, float), (benchmark, metric)
            assert higher_is_better is higher, (benchmark, metric)
    # every task reports every column but those its targets leave nothing to measure, which it names
    columns = {f"{column},{FILTER}" for column in HEADLINE}
    for task in TASKS:
        left_out = open_group_results["configs"][task]["capcal_calibration"]["left_out_columns"]
        present = {key for key in open_group_results["results"][task] if key.endswith(FILTER)}
        assert columns - present == {f"{column},{FILTER}" for column in left_out} & columns, task


@pytest.mark.slow
def test_each_group_column_is_the_mean_of_the_tasks_that_measure_it(open_group_results):
    left_out_somewhere = 0
    for results_json in [open_group_results]:
        results = results_json["results"]
        group_row = results[GROUP]
        metrics = {
            key.partition(",")[0] for key in group_row if key.endswith(FILTER) and "_stderr" not in key
        }
        for metric in HEADLINE:  # a column is in the group's row whenever one of its tasks measures it
            reported = [task for task in TASKS if f"{metric},{FILTER}" in results[task]]
            assert (metric in metrics) == bool(reported), metric
        for metric in metrics:
            values = [
                results[task][f"{metric},{FILTER}"] for task in TASKS if f"{metric},{FILTER}" in results[task]
            ]
            assert values, metric
            assert same(group_row[f"{metric},{FILTER}"], sum(values) / len(values)), metric
        for task in TASKS:  # why a column is NaN or missing, in the results JSON itself
            bookkeeping = results_json["configs"][task]["capcal_calibration"]
            nan_columns = {key.partition(",")[0] for key, value in results[task].items() if value != value}
            nan_columns = {column for column in nan_columns if not column.endswith("_stderr")}
            assert nan_columns == set(bookkeeping["undefined_columns"]), task
            missing = {column.name for column in COLUMNS} - {key.partition(",")[0] for key in results[task]}
            assert missing == set(bookkeeping["left_out_columns"]), task
            for reason in [
                *bookkeeping["undefined_columns"].values(),
                *bookkeeping["left_out_columns"].values(),
            ]:
                assert isinstance(reason, str) and reason
            for column, reason in bookkeeping["left_out_columns"].items():  # the reason is true
                assert "solved" in reason or "mu_hat" in reason, (task, column, reason)
            # a standard error is N/A exactly where the jackknife failed, and the value is still there
            for column in bookkeeping["stderr_undefined"]:
                assert results[task][f"{column}_stderr,{FILTER}"] == "N/A", (task, column)
                assert math.isfinite(results[task][f"{column},{FILTER}"]), (task, column)
            left_out_somewhere += len(bookkeeping["left_out_columns"])
    assert left_out_somewhere  # the degenerate case is exercised (no AIME question is solved in 8 tokens)
    # ... and a task that has something to measure keeps the group column defined
    assert math.isfinite(open_group_results["results"][GROUP][f"ptrue_auroc,{FILTER}"])


@pytest.mark.slow
def test_substring_matching_reads_each_task_and_the_group_once(open_group_results):
    for task in TASKS:  # a task name is in no other result's name
        for metric in HEADLINE:
            found = read_substring(open_group_results, task, metric)
            exact = read_exact(open_group_results, task, metric)
            assert (found == [] and exact is None) or same(found[0], exact[0]), (task, metric)
    # the pitfall the docs warn about: a short name matches several results (here every task and the group)
    assert len(read_substring(open_group_results, "calibration", "expected_accuracy")) == len(TASKS) + 1
    # a reader that averages the tasks that report a column gets the group's value
    for metric in HEADLINE:
        group_values = read_substring(open_group_results, GROUP, metric)
        task_values = [v for task in TASKS for v in read_substring(open_group_results, task, metric)]
        if not task_values:  # every task left the column out: so does the group
            assert group_values == [], metric
            continue
        (group_value,) = group_values
        assert same(group_value, mean_or_nan(task_values)), metric


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
        assert str(open_group_results["configs"][task]["metadata"]["version"]) == "3.0"


def _template_tasks(cli_output: str) -> list[TemplateTask]:
    """The ``Task(...)`` lines ``capcal leaderboard`` prints for the template's src/about.py."""
    entries = re.findall(r'Task\("([^"]+)", "([^"]+)", "([^"]+)"\)', cli_output)
    return [TemplateTask(*entry) for entry in entries]


@pytest.mark.slow
def test_the_template_fails_on_lm_evals_folder_and_reads_the_export(open_group_run, tmp_path):
    """lm-eval's folder, read by the template (the replica of its own files): skipped for its samples files,
    so no row and ``KeyError: 'Average ⬆️'``; its results file alone fails the whole board with
    ``AttributeError`` (``model_args`` is a dict, no ``model_name``). ``capcal leaderboard``'s export of the
    same run (2 questions per task in 8 tokens: most tasks degenerate) is one complete row, each column the
    group's value, each column left off named with its task's reason."""
    output, results = open_group_run
    tasks = [TemplateTask(GROUP, f"{metric},{FILTER}", metric) for metric in HEADLINE]
    with pytest.raises(KeyError, match="Average ⬆️"):  # --log_samples: the folder holds .jsonl files
        board(str(output), tasks)
    (results_file,) = output.rglob("results_*.json")
    alone = tmp_path / "results_only" / "model"
    alone.mkdir(parents=True)
    (alone / results_file.name).write_bytes(results_file.read_bytes())
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'split'"):
        board(str(tmp_path / "results_only"), tasks)
    exported = tmp_path / "board"
    run = subprocess.run(
        [str(BIN / "capcal"), "leaderboard", str(output), "--output", str(exported)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    board_tasks = _template_tasks(run.stdout)
    assert board_tasks and len({task.benchmark for task in board_tasks}) == len(board_tasks)
    for task in board_tasks:  # no benchmark is a fragment of another: the substring style finds one each
        assert [other for other in board_tasks if task.benchmark in other.benchmark] == [task]
    group = results["results"][GROUP]
    (exported_file,) = exported.rglob("*.json")
    payload = json.loads(exported_file.read_text())
    shown_keys = {task.benchmark.rpartition("/")[2] for task in board_tasks}
    for key in shown_keys:  # one model: a column over the tasks that define it is lm-eval's group value
        entry = payload["results"][f"{GROUP}/{key}"]
        value = group[f"{entry['source_metric']},{FILTER}"]
        higher = results["higher_is_better"][GROUP][entry["source_metric"]]
        assert math.isclose(entry["score"], value if higher else 1 - value, rel_tol=1e-12), key
        assert (entry["shown_as"] == "value") is higher, key
    for key, reason in payload["capcal"]["missing_columns"].items():  # left off: named, with the reason
        assert key not in shown_keys and f"({key}) is left off the board" in run.stderr, key
        assert "solved" in reason or "mu_hat" in reason or "needs" in reason, (key, reason)
    for style in ("exact", "substring"):
        shown, read = board(str(exported), board_tasks, style)
        assert read == 1 and len(shown) == 1, style
