"""Mistakes that used to waste work or end in a traceback (issue 32, item 5): each is one line on stderr and
exit status 2, before the work it would waste. Real commands, each in a process of its own (``capcal``, and
lm-eval's own ``lm_eval``; forked from ``forked_cli``, the server that imported lm-eval and torch once), with
lm-eval's dummy model where no model output is needed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis.runs import load_runs
from analysis.runs.versions import NOT_RECORDED, run_versions, version_mix_warnings

REPO = Path(__file__).resolve().parents[2]


def _hostile_logs():
    """tests/hostile/logs.py: the writers of real lm-eval output folders."""
    spec = importlib.util.spec_from_file_location("hostile_logs", REPO / "tests" / "hostile" / "logs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


UNWRITABLE = "/proc/capcal_cannot_write_here"  # /proc takes no new files, even as root


@pytest.fixture
def capcal(forked_cli) -> Callable[..., subprocess.CompletedProcess]:
    """``capcal(cwd, *arguments)``: ``python -m analysis.cli ARGUMENTS`` run in ``cwd``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return lambda cwd, *arguments: forked_cli.capcal(list(arguments), cwd, timeout=600, env=env)


def _one_error_line(run: subprocess.CompletedProcess, prefix: str) -> str:
    """The run's last stderr line, checked to be its one error line (exit 2, no traceback)."""
    assert run.returncode == 2, (run.returncode, run.stderr[-3000:])
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith(prefix), run.stderr[-3000:]
    return errors[0]


def test_report_and_table_refuse_an_unwritable_output_before_reading_any_run(tmp_path, capcal):
    """The folders do not even exist: the output is checked first (before: an OSError traceback after all
    the computation)."""
    report = capcal(tmp_path, "report", "no_such_runs/", "--output", UNWRITABLE)
    line = _one_error_line(report, "capcal report: error: --output ")
    assert (
        line
        == f"capcal report: error: --output {UNWRITABLE}: /proc is not writable (No such file or directory)"
    )
    table = capcal(tmp_path, "table", "no_such_runs/", "--output", f"{UNWRITABLE}/table.md")
    line = _one_error_line(table, "capcal table: error: --output ")
    assert "/proc is not writable" in line
    (tmp_path / "a_folder").mkdir()
    folder = capcal(tmp_path, "table", "no_such_runs/", "--output", "a_folder")
    assert _one_error_line(folder, "capcal table: error: ").endswith("a_folder is a folder, not a file")


def test_apply_chat_template_on_a_model_without_one_is_refused_before_it_loads(tmp_path, capcal):
    """Gemma-3-270M (base) has no chat template (its manifest's has_chat_template, its tokenizer_config.json):
    before, transformers' ValueError came after the model loaded, exit 1."""
    from capcal_models.prepare import prepare_model

    gemma = prepare_model("gemma3-270m").path
    run = capcal(tmp_path, "eval", "--model", "capcal-hf", "--model_args", f"pretrained={gemma}",
                  "--tasks", "capcal_arithmetic", "--limit", "1", "--apply_chat_template")  # fmt: skip
    line = _one_error_line(run, "capcal eval: error: --apply_chat_template: ")
    assert "has no chat template" in line and "capcal_arithmetic_qa" in line
    assert "Initializing" not in run.stderr  # lm-eval never started on the model


def test_implausible_repeats_are_refused_at_once_and_allowed_with_the_flag(tmp_path, capcal):
    run = capcal(tmp_path, "eval", "--model", "dummy", "--tasks", "capcal_arithmetic", "--repeats", "1000000")
    line = _one_error_line(run, "capcal eval: error: --repeats 1000000 is above 1000")
    assert line.endswith("add --allow_large if you mean it")


def test_eval_states_the_samples_it_will_draw_and_refuses_too_many(tmp_path, capcal):
    """lm-eval's dummy model: the line comes once the tasks are loaded, before any request; GSM8K's 1,319
    questions x k = 400 = 527,600 responses are above the 500,000 bound."""
    small = capcal(tmp_path, "eval", "--model", "dummy", "--tasks", "capcal_arithmetic", "--limit", "3",
                    "--repeats", "6")  # fmt: skip
    assert small.returncode == 0, small.stderr[-3000:]
    plan = "capcal eval: will draw 18 responses (capcal_arithmetic: 3 questions x k = 6)"
    assert plan in small.stderr.splitlines(), small.stderr[-3000:]
    assert small.stderr.index(plan) < small.stderr.index("Running generate_until requests")
    large = capcal(tmp_path, "eval", "--model", "dummy", "--tasks", "capcal_gsm8k", "--repeats", "400",
                    "--data_dir", "bundled")  # fmt: skip
    line = _one_error_line(large, "capcal eval: error: this run would draw 527,600 responses, above 500,000")
    assert "--allow_large" in line
    assert "Running generate_until requests" not in large.stderr


def test_an_lm_eval_task_name_offline_points_to_capcals_bundled_task(tmp_path, capcal):
    env_offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    assert all(os.environ.get(key) == value for key, value in env_offline.items())
    run = capcal(tmp_path, "eval", "--model", "dummy", "--tasks", "gsm8k", "--limit", "1")
    line = _one_error_line(run, "capcal eval: error: task gsm8k reads openai/gsm8k")
    assert line.endswith(
        "capcal ships this dataset with its own task: --tasks capcal_gsm8k --data_dir bundled"
    )


def test_stock_lm_eval_offline_says_the_data_is_bundled_in_one_line(tmp_path, forked_cli):
    """The README's stock ``lm_eval ... --tasks capcal_gsm8k`` without CAPCAL_DATA_DIR, offline: before, a
    RuntimeError traceback."""
    tasks_dir = REPO / "capcal_tasks"
    env = {key: value for key, value in os.environ.items() if key != "CAPCAL_DATA_DIR"}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    lm_eval = Path(sys.executable).parent / "lm_eval"
    run = forked_cli.run(f"import runpy\nrunpy.run_path({str(lm_eval)!r}, run_name='__main__')\n",
                         ["--model", "dummy", "--include_path", str(tasks_dir), "--tasks", "capcal_gsm8k",
                          "--limit", "2", "--output_path", "out/"],
                         tmp_path, timeout=600, env=env)  # fmt: skip
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("lm_eval: error: could not load openai/gsm8k"), last
    assert last.endswith(
        "capcal ships this dataset (gsm8k/test.jsonl): set CAPCAL_DATA_DIR=bundled (capcal eval --data_dir "
        "bundled)"
    )


def _versioned_run(root: Path, folder: str, date: str, task_version: float, lm_eval_version: str) -> None:
    logs = _hostile_logs()
    results = {
        **logs.results_json(),
        "versions": {"capcal_toy": task_version},
        "lm_eval_version": lm_eval_version,
    }
    results["capcal_version"] = "0.1.0"
    lines = [logs.sampling_line(i, ["4", "5"]) for i in range(3)]
    logs.write_run(root, lines, folder=folder, date=date, results=results)


def test_versions_of_every_run_and_a_warning_when_they_are_mixed(tmp_path):
    _versioned_run(tmp_path, "a", "2026-01-02T03-04-05.000000", 1.0, "0.4.13")
    _versioned_run(tmp_path, "b", "2026-01-03T03-04-05.000000", 2.0, "0.4.12")
    files = load_runs([tmp_path], select="all").files
    table = run_versions(files)
    assert sorted(map(tuple, table[["task_version", "lm_eval_version", "capcal_version"]].values)) == [
        ("1.0", "0.4.13", "0.1.0"),
        ("2.0", "0.4.12", "0.1.0"),
    ]
    assert version_mix_warnings(table) == [
        "capcal_toy: runs of task versions 1.0, 2.0 are compared; they may not ask or score the same way "
        "(versions in the appendix)",
        "runs made by lm-eval 0.4.12, 0.4.13 are compared; their prompts or scoring may differ (versions in "
        "the appendix)",
    ]
    same = table.assign(task_version="1.0", lm_eval_version="0.4.13")
    assert version_mix_warnings(same) == []
    unrecorded = table.assign(lm_eval_version=NOT_RECORDED, task_version=[NOT_RECORDED, "1.0"])
    assert version_mix_warnings(unrecorded) == []


def test_a_results_file_records_the_capcal_version(tmp_path, capcal):
    run = capcal(tmp_path, "eval", "--model", "dummy", "--tasks", "capcal_arithmetic", "--limit", "1",
                  "--repeats", "2", "--output_path", "out/")  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    (results,) = (tmp_path / "out").glob("*/results_*.json")
    from importlib.metadata import version

    assert json.loads(results.read_text(encoding="utf-8"))["capcal_version"] == version("capcal")


@pytest.mark.parametrize("key", ["activations", "samples_file"])
def test_recorded_paths_are_made_absolute(key, tmp_path, monkeypatch):
    from analysis.runs.recorded_paths import absolute_recorded_paths

    monkeypatch.chdir(tmp_path)
    assert absolute_recorded_paths({key: "acts/", "pretrained": "x/y"}) == {
        key: str(tmp_path / "acts"),
        "pretrained": "x/y",
    }
