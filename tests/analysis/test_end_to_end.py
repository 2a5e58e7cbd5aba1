"""End to end on a real model: lm-eval samples k responses per question from SmolLM2, capcal reads them back.

Runs the real ``capcal`` command line, each command in a process of its own forked from the session's
``forked_cli`` server (which imported lm-eval, torch and transformers once; the model is loaded in the
command's own process), minutes on a 2-core CPU. Stock ``lm_eval
--include_path`` on capcal_gsm8k at the YAML's k = 16 is tested in tests/capcal_tasks/test_task_runs.py
(``run_b``: capcal_core, every dataset's task with the same settings); a run of its own here repeated it at
full cost until 2026-11-28.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.runs import load_run

LIMIT, K, MAX_GEN_TOKS = 3, 4, 48


def _env(shared_data: Path) -> dict:
    return {**os.environ, "CAPCAL_DATA_DIR": str(shared_data), "OMP_NUM_THREADS": "1"}


def _capcal(
    forked_cli, shared_data: Path, *arguments: str, timeout: int = 300
) -> subprocess.CompletedProcess:
    """``capcal ARGUMENTS`` in a process of its own (forked from ``forked_cli``), offline on the shared
    data."""
    return forked_cli.capcal(list(arguments), Path.cwd(), timeout, env=_env(shared_data))


def _samples_lines(output: Path, task: str) -> list[dict]:
    files = list(output.rglob(f"samples_{task}_*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


@pytest.fixture(scope="module")
def capcal_eval_run(tmp_path_factory, smollm2_path, shared_data, forked_cli) -> Path:
    output = tmp_path_factory.mktemp("capcal_eval")
    result = _capcal(
        forked_cli, shared_data,
        "eval", "--model", "hf", "--model_args", f"pretrained={smollm2_path}",
        "--tasks", "capcal_gsm8k", "--limit", str(LIMIT), "--repeats", str(K),
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--apply_chat_template",
        "--batch_size", "16", "--seed", "7", "--log_samples", "--output_path", str(output),
        timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "expected_accuracy" in result.stdout  # lm-eval's results table
    return output


@pytest.mark.slow
def test_every_question_has_k_independent_logged_responses(capcal_eval_run):
    lines = _samples_lines(capcal_eval_run, "capcal_gsm8k")
    assert len(lines) == LIMIT
    all_responses = []
    for line in lines:
        responses = line["resps"][0]
        assert len(responses) == K
        assert len(line["correctness"]) == K and set(line["correctness"]) <= {0, 1}
        assert line["n_samples"] == K
        assert line["expected_accuracy"] == pytest.approx(sum(line["correctness"]) / K)
        assert line["pass_at_1"] == pytest.approx(line["expected_accuracy"])
        assert line["doc"]["question_id"].startswith("gsm8k/")
        all_responses.extend(responses)
    # Sampling at temperature 1 with 48 tokens: identical responses would mean the k clones were not sampled.
    assert len(set(all_responses)) > len(all_responses) // 2


@pytest.mark.slow
def test_results_table_reports_mean_expected_accuracy_with_stderr(capcal_eval_run):
    results = json.loads(next(capcal_eval_run.rglob("results_*.json")).read_text())
    task = results["results"]["capcal_gsm8k"]
    assert isinstance(task["expected_accuracy_stderr,all_responses"], float)
    assert results["configs"]["capcal_gsm8k"]["repeats"] == K
    lines = _samples_lines(capcal_eval_run, "capcal_gsm8k")
    mean = sum(line["expected_accuracy"] for line in lines) / len(lines)
    assert task["expected_accuracy,all_responses"] == pytest.approx(mean)


@pytest.mark.slow
def test_capcal_analyze_on_the_run(capcal_eval_run, shared_data, forked_cli):
    table_file = capcal_eval_run / "questions.csv"
    result = _capcal(forked_cli, shared_data, "analyze", str(capcal_eval_run), "--output", str(table_file))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mean_expected_accuracy" in result.stdout and table_file.is_file()

    table = load_run(capcal_eval_run, responses=True)
    lines = {line["doc_id"]: line for line in _samples_lines(capcal_eval_run, "capcal_gsm8k")}
    assert len(table) == LIMIT and table["question_id"].is_unique
    for row in table.itertuples():
        line = lines[row.doc_id]
        assert row.responses == line["resps"][0]
        assert row.correctness == line["correctness"]
        assert row.n == K
        assert row.expected_accuracy == pytest.approx(sum(row.correctness) / K)
        assert row.question == line["doc"]["question"]


@pytest.mark.slow
def test_capcal_check_passes_the_run_and_flags_a_lost_question(
    capcal_eval_run, shared_data, tmp_path, forked_cli
):
    def check(folder: Path) -> subprocess.CompletedProcess:
        return _capcal(forked_cli, shared_data, "check", str(folder))

    result = check(capcal_eval_run)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "1 of 1 run(s) complete" in result.stdout

    damaged = tmp_path / "damaged"
    shutil.copytree(capcal_eval_run, damaged)
    samples = next(damaged.rglob("samples_capcal_gsm8k_*.jsonl"))
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:-1]))  # drop one question
    result = check(damaged)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert f"{LIMIT - 1} questions logged, the results file counts {LIMIT}" in result.stdout


# ---------------------------------------------------------------- MATH-500 + AIME with Probe-MATH
MATH_LIMIT, MATH_K, MATH_TOKS = 12, 2, 16


def _sections(markdown: str) -> dict[str, str]:
    """The report's ``## `` sections by title, with Markdown's backslash escapes and entities undone."""
    text = html.unescape(re.sub(r"\\(.)", r"\1", markdown))
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.fixture(scope="session")
def math_runs(tmp_path_factory, smollm2_path, shared_data, forked_cli) -> tuple[Path, float]:
    """Sampling with activations (capcal-hf) on MATH-500, AIME 2025 and MATH train, then P(True) (capcal-hf,
    as ``capcal demo`` asks it: each prompt prefilled once for both answer words, where stock hf prefills it
    twice) on the same questions: (lm-eval output folder, seconds). MATH train is not in ../shared/data, so
    its local file holds MATH-500 problems 401-416 (real MATH problems, none of them among the evaluated
    first 12); the tasks read it as capcal_math_train."""
    root = tmp_path_factory.mktemp("math_runs")
    data = root / "data"
    (data / "math").mkdir(parents=True)
    for name in ("math500", "aime2025"):
        (data / name).symlink_to(shared_data / name, target_is_directory=True)
    lines = (shared_data / "math500" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    (data / "math" / "train.jsonl").write_text("\n".join(lines[400:416]) + "\n", encoding="utf-8")
    output, activations = root / "lm_eval", root / "activations"
    common = ["--limit", str(MATH_LIMIT), "--apply_chat_template", "--batch_size", "16", "--log_samples",
              "--output_path", str(output), "--data_dir", str(data)]  # fmt: skip
    sampler = f"pretrained={smollm2_path},activations={activations}"
    commands = [
        ["eval", "--model", "capcal-hf", "--model_args", sampler,
         "--tasks", "capcal_math500,capcal_aime25,capcal_math_train", "--repeats", str(MATH_K),
         "--gen_kwargs", f"max_gen_toks={MATH_TOKS}", "--seed", "7", *common],
        ["eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
         "--tasks", "capcal_math500_ptrue,capcal_aime25_ptrue,capcal_math_train_ptrue", *common],
    ]  # fmt: skip
    started = time.monotonic()
    for command in commands:
        result = _capcal(forked_cli, shared_data, *command, timeout=900)
        assert result.returncode == 0, result.stderr[-4000:]
    return output, time.monotonic() - started


MATH_OPTIONS = {"n_resamples": 50, "seed": 3}  # the report's and the paper table's (analysis.report)


@pytest.fixture(scope="module")
def math_report(math_runs, tmp_path_factory) -> str:
    """The Markdown of the report on ``math_runs`` (``build_report``, in this process), read by the report
    test and compared cell by cell with ``capcal table`` (one build of it for both). Its figures are built
    but not drawn (``figures_not_rendered``: the Markdown is the same, an empty PNG behind each link); the
    ``capcal report`` of ``test_capcal_report_calibration_option`` draws them on the same runs."""
    from analysis.report import ReportOptions, build_report
    from analysis.report.figures import figures_not_rendered

    output, _ = math_runs
    folder = tmp_path_factory.mktemp("math_report")
    with figures_not_rendered():
        files = build_report([output], folder / "report", options=ReportOptions(**MATH_OPTIONS))
    return files.markdown.read_text(encoding="utf-8")


@pytest.mark.slow
def test_report_has_probe_math_and_isotonic_for_math500_and_aime(math_runs, math_report):
    _, seconds = math_runs
    print(f"MATH-500 + AIME + MATH train runs: {seconds:.0f} s")
    sections = _sections(math_report)
    # MATH train is a calibration split: not reported as an evaluation task (its own section nor an appendix)
    evaluated = {title for title in sections if title.startswith("smollm2 · ")}
    assert evaluated == {"smollm2 · capcal_math500", "smollm2 · capcal_aime25"}
    assert not [title for title in sections if "capcal_math_train" in title]
    assert list(sections)[0] == "Summary" and list(sections)[-1].startswith("Appendix")
    relations = sections["Appendix: runs and task relations"]
    assert re.search(
        r"^\| capcal_aime25 \| evaluation \| capcal_math_train \|  \| \S+results_", relations, re.M
    )
    assert re.search(r"^\| capcal_math_train \| calibration \|  \|  \| \S+results_", relations, re.M)
    assert re.search(r"^\| capcal_aime25_ptrue \| confidence \|  \| capcal_aime25 \| ", relations, re.M)
    for task, domain in (("capcal_math500", "in-domain"), ("capcal_aime25", "cross-domain")):
        # the results first, the task's bookkeeping (runs, joins, identity) in its appendix section
        section = (
            sections[f"smollm2 · {task}"] + sections[f"Appendix · smollm2 · {task}: runs, joins and identity"]
        )
        trained = f"capcal_math_train ({MATH_LIMIT} questions, {domain}, declared in"
        for estimator in ("probe", "isotonic_p_true"):
            assert f"| {estimator} | {trained}" in section, (task, estimator)  # what it was trained on
            assert f"| {estimator} | {MATH_LIMIT} | " in section, (task, estimator)  # in the metric tables
        assert f"evaluated on {MATH_LIMIT} {task} questions" in section
        assert f"fitted on {MATH_LIMIT} questions with p_true" in section
        for joined in (
            f"{task} <-> activations",
            "capcal_math_train <-> activations",
            "capcal_math_train <-> capcal_math_train_ptrue",
            f"{task} <-> {task}_ptrue",
        ):
            assert f"| {joined} | {MATH_LIMIT} | {MATH_LIMIT} | {MATH_LIMIT} |" in section, joined
        for run in (task, "capcal_math_train", f"{task}_ptrue", "capcal_math_train_ptrue"):
            assert re.search(rf"^\| {run} \| \S+ \| [0-9T.-]+ \| True \| only run \|", section, re.M), run


@pytest.mark.slow
def test_capcal_table_of_two_real_tasks_matches_the_report_cell_by_cell(
    math_runs, math_report, tmp_path, report_markdown
):
    """The paper table from two real runs of one model (SmolLM2 on MATH-500 and AIME 2025, probe and
    isotonic P(True) fitted on MATH train): the report's "Across models and tasks" grids have one column per
    task, every cell equals the cell of its task's section, and ``capcal table`` exports the same numbers."""
    from analysis.cli import main
    from analysis.report import ReportOptions
    from analysis.report.analyze import analyze_runs
    from analysis.report.figures import figures_not_rendered
    from analysis.report.paper_table import metric_rows

    output, _ = math_runs
    markdown = math_report
    with figures_not_rendered():  # the numbers only
        rows = metric_rows(analyze_runs([output], None, ReportOptions(**MATH_OPTIONS)).results)
    tasks = ("capcal_math500", "capcal_aime25")
    assert set(zip(rows["model"], rows["task"], strict=True)) == {("smollm2", task) for task in tasks}
    for task in tasks:  # the fitted estimators and P(True) in both columns
        assert {"p_true", "probe", "isotonic_p_true"} <= set(rows.loc[rows["task"] == task, "estimator"]), (
            task
        )
    assert report_markdown.assert_grid_matches_sections(markdown, rows) >= 3 * 2 * 3
    grids = report_markdown.tables(report_markdown.section_of(markdown, "## Across models and tasks"))
    (brier,) = [grid for caption, grid in grids.items() if caption.startswith("corrected_capability_brier ↓")]
    assert sorted(brier[0]) == sorted(["estimator", *tasks])

    table = tmp_path / "table.csv"
    command = ["table", str(output), "--resamples", str(MATH_OPTIONS["n_resamples"]), "--seed",
               str(MATH_OPTIONS["seed"]), "--format", "csv"]  # fmt: skip
    assert main([*command, "--output", str(table)]) == 0
    exported = pd.read_csv(table)
    chosen = rows[rows["metric"].isin(set(exported["metric"]))].reset_index(drop=True)
    assert len(exported) == len(chosen) >= 3 * 2 * 3 and set(exported["task"]) == set(tasks)
    assert list(zip(exported["task"], exported["estimator"], exported["metric"], strict=True)) == list(
        zip(chosen["task"], chosen["estimator"], chosen["metric"], strict=True)
    )
    np.testing.assert_allclose(
        exported[["estimate", "low", "high"]], chosen[["estimate", "low", "high"]], equal_nan=True
    )


@pytest.mark.slow
def test_capcal_report_calibration_option(math_runs, shared_data, tmp_path, forked_cli):
    output, _ = math_runs
    report = tmp_path / "report"
    command = ["report", str(output), "--output", str(report), "--resamples", "20",
               "--calibration", "capcal_aime25=capcal_math_train"]  # fmt: skip
    result = _capcal(forked_cli, shared_data, *command)
    assert result.returncode == 0, result.stderr[-3000:]
    sections = _sections((report / "report.md").read_text(encoding="utf-8"))
    assert (
        f"| probe | capcal_math_train ({MATH_LIMIT} questions, cross-domain, override"
        in sections["smollm2 · capcal_aime25"]
    )
    assert "override" not in sections["smollm2 · capcal_math500"]

    bad = ["report", str(output), "--output", str(report), "--calibration", "capcal_aime25=capcal_math500"]
    result = _capcal(forked_cli, shared_data, *bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    *warnings, line = result.stderr.strip().splitlines()  # the input notices first, then the one error line
    assert all(warning.startswith("capcal report: warning: ") for warning in warnings), warnings
    assert re.fullmatch(
        r"capcal report: error: override: task capcal_aime25: capcal_math500 is not a calibration task "
        r"\(declared evaluation in \S+/results_[0-9T.-]+\.json\)",
        line,
    ), line
