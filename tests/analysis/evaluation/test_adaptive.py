"""``capcal eval --adaptive`` (analysis.evaluation.adaptive) on the real SmolLM2 through real lm-eval.

- pre-flight: bad looks, a look above k_max, a rule typo, a non-sampling task, ``--looks`` without
  ``--adaptive``: one line, exit 2, before the model loads (no model needed for most);
- an adaptive run (capcal_arithmetic, 6 questions, looks 2, 3 and k_max 4) against a fixed k = 4 run with
  the same seed and no sample cache: each question's n responses are the first n of the fixed run's; the
  records hold the plan's n, s, reason and capcal_metrics.sequential's estimates; questions unanimous at 2
  stop there; the samples drawn are what the plan says; two lm-eval passes (look 3 skipped: no question
  mixed at 2 can stop there); ``correctness`` is the per-question unbiased mean; ``capcal analyze`` reads a
  folder holding both runs;
- a ``capcal eval --adaptive`` killed (SIGKILL) once its first look is done, run again: the records equal the
  uninterrupted adaptive run's, and the re-run reads the first look's samples from the cache;
- every analysis reads the adaptive run (issue 37, deliverable 2; the fast tests of that path are in
  tests/analysis/runs/test_adaptive_runs.py): ``capcal check`` exits 0; a record truncated at its first look
  (the rule does not stop there) is caught naming file:line; the question table carries n, s, mu_hat,
  mu_squared_hat and the plan; the capability metrics equal ``analysis.estimators.adaptive``'s on the same
  (confidence, n, s); ``capcal table``'s rows and ``capcal report`` state the sampling and the samples drawn
  and saved. The calibration-table test scores a seeded uniform confidence column (a stand-in: a real
  confidence run would be a second model run; the metrics' routing, not the estimator, is under test).

One adaptive run serves all of them (module fixture ``runs``, one file so that one worker runs it).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import capcal_metrics as cm
from capcal_metrics.sequential import confidence_sequence, unanimity_rule, unbiased_mean, unbiased_mean_square

REPO = Path(__file__).resolve().parents[3]
# looks 2, 3 and k_max 4: under unanimity no question mixed at 2 can stop at 3, so the run takes two passes
TASK, LIMIT, K_MAX, LOOKS, MAX_GEN_TOKS, SEED = "capcal_arithmetic", 6, 4, (2, 3, 4), 8, 7


@pytest.fixture(scope="module")
def forked_capcal(forked_cli) -> Callable[..., subprocess.CompletedProcess]:
    """``capcal ARGUMENTS``: in a process of its own forked from ``forked_cli`` (the server that imported
    lm-eval and torch once), a refusal or a real run (its model loads in that process). The run killed by
    SIGKILL is a fresh process (``test_a_killed_adaptive_run_resumes_to_the_uninterrupted_one``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return lambda *arguments: forked_cli.capcal(list(arguments), Path.cwd(), timeout=600, env=env)


def _one_error_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, (run.returncode, run.stderr[-3000:])
    assert "Traceback" not in run.stderr and "Initializing" not in run.stderr, run.stderr[-3000:]
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("capcal eval: error: "), run.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--adaptive", "--looks", "4,2"], "--looks 4,2: the looks must be strictly increasing"),
        (["--adaptive", "--looks", "2,x"], "--looks 2,x: expected increasing whole numbers"),
        (["--adaptive", "--looks", "1,2"], "the first look must be 2 or more"),
        (["--adaptive", "--looks", "2,8"], "--looks: look 8 is above k_max = 4"),
        (["--adaptive", "--adaptive_rule", "widht:0.2"], "adaptive rule 'widht:0.2': expected unanimity"),
        (["--adaptive", "--adaptive_rule", "width:2"], "the width W must be in (0, 1]"),
        (["--looks", "2"], "--looks and --adaptive_rule need --adaptive"),
    ],
)
def test_bad_adaptive_settings_are_one_line_before_the_model_loads(
    flags, message, smollm2_path, forked_capcal
) -> None:
    run = forked_capcal("eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
                  "--tasks", TASK, "--repeats", str(K_MAX), "--limit", "2", "--apply_chat_template",
                  *flags)  # fmt: skip
    assert message in _one_error_line(run)


@pytest.mark.parametrize(
    ("repeats", "message"),
    [
        ("1", "--adaptive needs k_max >= 2 samples per question (--repeats or the task's repeats), got 1"),
        ("8", "--adaptive with k_max = 8 (--repeats or the task's repeats): the default looks (8, 16, 32, 64 "
         "below k_max) leave one look, so nothing could stop early"),
    ],
)  # fmt: skip
def test_adaptive_with_too_few_repeats_is_one_line_before_the_model_loads(
    repeats, message, smollm2_path, forked_capcal
) -> None:
    """Issue 47.11/14: ``--adaptive --repeats 1`` failed only after the model loaded and sampled (exit 1, "an
    unbiased mu^2 needs a first look l_1 >= 2"); a k_max the default looks leave one look of ran as fixed k
    with no notice (exit 0, 0% saved)."""
    run = forked_capcal("eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
                  "--tasks", TASK, "--repeats", repeats, "--limit", "2", "--apply_chat_template",
                  "--adaptive")  # fmt: skip
    assert message in _one_error_line(run)


def test_adaptive_on_a_task_that_does_not_sample_is_refused(smollm2_path, forked_capcal) -> None:
    run = forked_capcal("eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
                  "--tasks", "capcal_arithmetic_ptrue", "--limit", "2", "--apply_chat_template",
                  "--adaptive")  # fmt: skip
    assert "--adaptive samples capcal's sampling tasks only; capcal_arithmetic_ptrue" in _one_error_line(run)


def test_adaptive_with_a_stock_model_is_refused(forked_capcal) -> None:
    """Stock lm-eval models draw new samples at every look: the stop would depend on samples not logged."""
    run = forked_capcal("eval", "--model", "hf", "--model_args", "pretrained=/no/such/model",
                  "--tasks", TASK, "--limit", "2", "--adaptive")  # fmt: skip
    assert "--adaptive needs one of capcal's engines (capcal-hf, capcal-vllm" in _one_error_line(run)


def _arguments(model: Path, cache: Path, output: Path) -> list[str]:
    return [
        "eval", "--model", "capcal-hf", "--model_args", f"pretrained={model},seed={SEED},cache_path={cache}",
        "--tasks", TASK, "--limit", str(LIMIT), "--repeats", str(K_MAX), "--adaptive",
        "--looks", ",".join(map(str, LOOKS[:-1])), "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}",
        "--batch_size", "8", "--apply_chat_template", "--log_samples", "--output_path", str(output),
    ]  # fmt: skip


def _records(output: Path) -> dict[int, dict]:
    (samples_file,) = output.rglob(f"samples_{TASK}_*.jsonl")
    lines = samples_file.read_text(encoding="utf-8").splitlines()
    return {record["doc_id"]: record for record in map(json.loads, lines)}


@pytest.fixture(scope="module")
def runs(smollm2_path: Path, tmp_path_factory, forked_capcal) -> dict:
    """The adaptive run (``capcal eval --adaptive``, its own cache) and the fixed k = 4 run (in process,
    ``evaluate``, no cache), same seed: {"adaptive": folder, "stderr": text, "fixed": results}."""
    from analysis.evaluation import evaluate

    folder = tmp_path_factory.mktemp("adaptive")
    run = forked_capcal(*_arguments(smollm2_path, folder / "cache.sqlite", folder / "out"))
    assert run.returncode == 0, run.stderr[-3000:]
    fixed = evaluate(
        "capcal-hf",
        TASK,
        model_args={"pretrained": str(smollm2_path), "seed": SEED, "sample_cache": False},
        repeats=K_MAX,
        limit=LIMIT,
        gen_kwargs={"max_gen_toks": MAX_GEN_TOKS},
        batch_size=3,
        apply_chat_template=True,
        log_samples=True,
        output_path=folder / "fixed",
    )
    return {
        "adaptive": folder / "out",
        "stderr": run.stderr,
        "stdout": run.stdout,
        "fixed": fixed,
        "folder": folder,
    }


@pytest.mark.slow
def test_each_question_gets_the_first_n_responses_of_the_fixed_k_run(runs) -> None:
    adaptive = _records(runs["adaptive"])
    fixed = {record["doc_id"]: record for record in runs["fixed"]["samples"][TASK]}
    assert sorted(adaptive) == sorted(fixed) == list(range(LIMIT))
    for doc_id, record in adaptive.items():
        n = record["adaptive"]["n"]
        assert record["resps"][0] == fixed[doc_id]["resps"][0][:n]
        assert record["correctness"] == fixed[doc_id]["correctness"][:n]


@pytest.mark.slow
def test_records_follow_the_plan_and_hold_the_sequential_estimates(runs) -> None:
    from analysis.runs import load_runs

    plan = unanimity_rule(LOOKS)
    fixed = {record["doc_id"]: record for record in runs["fixed"]["samples"][TASK]}
    for doc_id, record in _records(runs["adaptive"]).items():
        first = fixed[doc_id]["correctness"][: LOOKS[0]]
        unanimous = sum(first) in (0, LOOKS[0])
        n, s = (LOOKS[0], sum(first)) if unanimous else (K_MAX, sum(fixed[doc_id]["correctness"]))
        adaptive = record["adaptive"]
        assert (adaptive["n"], adaptive["s"], record["n_samples"]) == (n, s, n)
        assert adaptive["stopped"] == (f"unanimous at {LOOKS[0]}" if unanimous else "k_max")
        assert adaptive["looks"] == list(LOOKS) and adaptive["rule"] == {"name": "unanimity"}
        ns, ss = np.array([n]), np.array([s])
        assert record["expected_accuracy"] == adaptive["mu_hat"] == unbiased_mean(plan, ns, ss)[0]
        assert adaptive["mu_squared_hat"] == unbiased_mean_square(plan, ns, ss)[0]
        bounds = confidence_sequence(ns, ss)
        assert adaptive["interval"] == [bounds.lower[0], bounds.upper[0]]
        assert not any(key.startswith("pass_at_") and int(key[8:]) > LOOKS[0] for key in record)
    loaded = load_runs([runs["adaptive"]])  # the analysis reads it (parse_sampling_record's checks)
    assert len(loaded.questions) == LIMIT


@pytest.mark.slow
def test_the_results_file_records_the_plan_and_the_samples_drawn(runs, smollm2_path: Path) -> None:
    (results_file,) = runs["adaptive"].rglob("results_*.json")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    model_args = results["config"]["model_args"]  # the run's own, not another field of its checked inputs
    assert isinstance(model_args, dict) and Path(model_args["pretrained"]).resolve() == smollm2_path.resolve()
    assert results["config"]["model"] == "capcal-hf"
    records = _records(runs["adaptive"])
    drawn = sum(record["adaptive"]["n"] for record in records.values())
    summary = results["capcal_adaptive"]
    assert summary["looks"] == list(LOOKS) and summary["k_max"] == K_MAX
    assert summary["tasks"][TASK]["samples_drawn"] == drawn
    assert summary["tasks"][TASK]["fixed_k_samples"] == LIMIT * K_MAX
    assert summary["tasks"][TASK]["samples_saved"] == LIMIT * K_MAX - drawn
    stopped_first = sum(record["adaptive"]["n"] == LOOKS[0] for record in records.values())
    assert 0 < stopped_first < LIMIT  # both ways of stopping occur (4 of 6 stop at 2 with seed 7)
    assert summary["tasks"][TASK]["stopped_at"] == {"2": stopped_first, "3": 0, "4": LIMIT - stopped_first}
    mean = np.mean([record["expected_accuracy"] for record in records.values()])
    assert results["results"][TASK]["expected_accuracy,all_responses"] == pytest.approx(mean, abs=1e-12)
    # correctness: the per-question unbiased mean (issue 48.3), the pooled responses kept and labelled
    pooled = sum(sum(r["correctness"]) for r in records.values()) / drawn
    assert results["results"][TASK]["correctness,all_responses"] == pytest.approx(mean, abs=1e-12)
    assert summary["tasks"][TASK]["pooled_response_accuracy"] == pytest.approx(pooled, abs=1e-12)
    assert f"{TASK}, adaptive: correctness is the mean over questions of the unbiased" in runs["stdout"]
    assert results["configs"][TASK]["repeats"] == K_MAX
    # what k_max = 4 leaves out is said once; the smaller k of the first look is not warned about
    assert runs["stderr"].count("warning: --repeats 4 on capcal_arithmetic") == 1, runs["stderr"][-3000:]
    assert "--repeats 2 on" not in runs["stderr"] and "--repeats 3 on" not in runs["stderr"]
    assert runs["stderr"].count("warning: --adaptive with a first look of 2, below 8: the capability") == 1
    # one progress line per pass: look 3 is skipped (issue 47.13: every look was a pass of its own)
    lines = [line for line in runs["stderr"].splitlines() if "adaptive look" in line]
    assert len(lines) == 2, runs["stderr"][-3000:]
    assert lines[0].startswith(f"capcal eval: adaptive look 1/3 (n = 2): {LIMIT - stopped_first} of {LIMIT} ")
    assert lines[0].endswith(
        f"{LIMIT * LOOKS[0]} samples drawn so far, {LIMIT * K_MAX} at fixed k = 4; next pass to n = 4 (no "
        "question still sampling can stop at 3)"
    )
    assert lines[1].startswith("capcal eval: adaptive look 3/3 (n = 4): 0 of 6 questions still sampling")
    assert lines[1].endswith(f"{drawn} samples drawn so far, {LIMIT * K_MAX} at fixed k = 4")


@pytest.mark.slow
def test_analyze_reads_a_folder_with_a_fixed_k_and_an_adaptive_run_of_one_task(
    runs, tmp_path, forked_capcal
) -> None:
    """Issue 47.14: exit 2, "questions of several adaptive plans in one table (first looks [2, 4])", while
    report, table and check read such a folder."""
    import shutil

    folder = tmp_path / "both"
    shutil.copytree(runs["adaptive"], folder / "adaptive")
    shutil.copytree(runs["folder"] / "fixed", folder / "fixed")
    run = forked_capcal("analyze", str(folder), "--output", str(tmp_path / "questions.jsonl"))
    assert run.returncode == 0, run.stderr[-3000:]
    table = [json.loads(line) for line in (tmp_path / "questions.jsonl").read_text().splitlines()]
    assert sorted(row["sampling"] for row in table) == sorted(
        ["fixed k"] * LIMIT + ["adaptive (looks 2, 3, 4, rule unanimity)"] * LIMIT
    )
    assert "warning: capcal_arithmetic" in run.stderr and "first look of 2 responses" in run.stderr


@pytest.mark.slow
def test_without_log_samples_the_aggregates_are_saved_as_a_fixed_run_saves_them(
    runs, smollm2_path: Path, forked_capcal
) -> None:
    """``--adaptive`` without ``--log_samples`` (lm-eval's default) used to fail after all the sampling
    ("samples ... was not written"): it saves the results file, with ``capcal_adaptive``, and no samples file,
    as a fixed-k run without ``--log_samples`` does. Re-run from the first run's cache (nothing decoded)."""
    arguments = _arguments(smollm2_path, runs["folder"] / "cache.sqlite", runs["folder"] / "aggregates")
    arguments.remove("--log_samples")
    run = forked_capcal(*arguments)
    assert run.returncode == 0, run.stderr[-3000:]
    (results_file,) = (runs["folder"] / "aggregates").rglob("results_*.json")
    assert not list((runs["folder"] / "aggregates").rglob("samples_*"))
    results = json.loads(results_file.read_text(encoding="utf-8"))
    (with_samples,) = runs["adaptive"].rglob("results_*.json")
    expected = json.loads(with_samples.read_text(encoding="utf-8"))
    assert results["capcal_adaptive"] == expected["capcal_adaptive"]
    assert results["results"][TASK] == expected["results"][TASK]


@pytest.mark.slow
def test_a_killed_adaptive_run_resumes_to_the_uninterrupted_one(
    runs, smollm2_path: Path, forked_cli, forked_capcal
) -> None:
    folder = runs["folder"]
    arguments = _arguments(smollm2_path, folder / "resumed.sqlite", folder / "resumed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    log = folder / "killed.log"
    stopped = forked_cli.popen_capcal(arguments, folder, env, stderr=log)
    deadline = time.monotonic() + 300
    # kill once the first look is done, before the second is sampled
    while "adaptive look 1/3" not in log.read_text(encoding="utf-8", errors="replace"):
        assert stopped.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.02)
    stopped.send_signal(signal.SIGKILL)
    stopped.wait(timeout=60)
    assert stopped.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    assert not list((folder / "resumed").rglob("samples_*.jsonl"))  # nothing written yet
    again = forked_capcal(*arguments)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{LIMIT * LOOKS[0]} samples read from the sample cache" in again.stderr
    resumed, uninterrupted = _records(folder / "resumed"), _records(runs["adaptive"])
    for doc_id, record in uninterrupted.items():
        for key in ("resps", "correctness", "extracted_answers", "expected_accuracy", "adaptive", "doc"):
            assert resumed[doc_id][key] == record[key], (doc_id, key)


# --- the analyses read the adaptive run ------------------------------------------------------------------
# (issue 37, deliverable 2; until 2026-11-28 in tests/analysis/runs/test_adaptive_runs.py, on a second run of
# this very invocation: the fast tests of the analysis path are still there)

LABEL = "adaptive (looks 2, 3, 4, rule unanimity)"


@pytest.fixture(scope="module")
def adaptive_run(runs) -> Path:
    """The output folder of the adaptive run of ``runs`` (``capcal eval --adaptive``, its own cache)."""
    return runs["adaptive"]


def _samples_file(output: Path) -> Path:
    (path,) = output.rglob(f"samples_{TASK}_*.jsonl")
    return path


@pytest.mark.slow
def test_capcal_check_accepts_the_adaptive_run(adaptive_run: Path, forked_capcal) -> None:
    run = forked_capcal("check", str(adaptive_run))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 of 1 run(s) complete" in run.stdout and "fewer than k" not in run.stdout
    from analysis.runs.completeness import check_run

    (row,) = check_run(adaptive_run).itertuples()
    assert row.complete and row.questions == LIMIT and row.questions_short_of_k == 0 and row.k == K_MAX


@pytest.mark.slow
def test_a_truncated_adaptive_record_is_caught_naming_file_and_line(
    adaptive_run: Path, tmp_path: Path, forked_capcal
) -> None:
    """A question that went on to k_max cut back to its first look, with n and s made to match: the rule does
    not stop there (its first l_1 samples are mixed), so the record is short of its n."""
    copy = tmp_path / "out"
    shutil.copytree(adaptive_run, copy)
    path = _samples_file(copy)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    look = LOOKS[0]
    line, record = next(
        (i + 1, r)
        for i, r in enumerate(records)
        if r["adaptive"]["n"] == K_MAX and 0 < sum(r["correctness"][:look]) < look
    )
    for key in ("resps", "filtered_resps"):
        record[key] = [record[key][0][:look]]
    record["correctness"], record["extracted_answers"] = (
        record["correctness"][:look],
        record["extracted_answers"][:look],
    )
    record["n_samples"] = look
    record["adaptive"].update(n=look, s=sum(record["correctness"]))
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    run = forked_capcal("check", str(copy))
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    (error,) = [text for text in run.stderr.splitlines() if "error:" in text]
    assert error.startswith(f"capcal check: error: {path}:{line}: the rule does not stop at 1 of {look}"), (
        error
    )


@pytest.mark.slow
def test_the_question_table_carries_the_plan_and_the_unbiased_estimates(adaptive_run: Path) -> None:
    from analysis.estimators.adaptive import adaptive_estimates
    from analysis.runs import load_run
    from capcal_tasks.adaptive_records import sequential_plan

    table = load_run(adaptive_run)
    records = {r["doc_id"]: r for r in map(json.loads, _samples_file(adaptive_run).read_text().splitlines())}
    assert table["sampling"].eq(LABEL).all() and len(table) == LIMIT
    for row in table.itertuples():
        adaptive = records[row.doc_id]["adaptive"]
        assert (row.n, row.s, row.looks, row.rule) == (
            adaptive["n"],
            adaptive["s"],
            list(LOOKS),
            adaptive["rule"],
        )
        assert row.mu_hat == row.expected_accuracy == adaptive["mu_hat"]
        assert row.mu_squared_hat == adaptive["mu_squared_hat"]
    # some stopped at the first look, the others went on to k_max (look 3 skipped)
    assert set(table["n"]) <= {LOOKS[0], K_MAX} and (table["n"] < K_MAX).any()
    plan = sequential_plan(table["looks"].iloc[0], table["rule"].iloc[0])
    estimates = adaptive_estimates(plan, table["n"], table["s"])
    np.testing.assert_allclose(table["mu_hat"], estimates.mu_hat, atol=1e-12)
    np.testing.assert_allclose(table["mu_squared_hat"], estimates.mu_square_hat, atol=1e-12)


@pytest.mark.slow
def test_the_calibration_table_equals_the_adaptive_estimators(adaptive_run: Path) -> None:
    from analysis.estimators.adaptive import ADAPTIVE_CAPABILITY_METRICS, adaptive_capability_metrics
    from analysis.report.calibration_table import calibration_table
    from analysis.runs import load_run
    from capcal_tasks.adaptive_records import sequential_plan

    table = load_run(adaptive_run)
    table["c"] = np.random.default_rng(0).uniform(size=len(table))  # stand-in confidences (module docstring)
    rows = calibration_table(table, ["c"], n_resamples=50).set_index(["estimator", "metric"])
    plan = sequential_plan(table["looks"].iloc[0], table["rule"].iloc[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cm.UndefinedMetricWarning)  # the skill is NaN on 6 questions
        expected = adaptive_capability_metrics(table["c"], table["n"], table["s"], plan)
    for metric in ADAPTIVE_CAPABILITY_METRICS:
        got = rows.loc[("c", metric), "estimate"]
        assert (math.isnan(got) and math.isnan(expected[metric])) or math.isclose(
            got, expected[metric], abs_tol=1e-12
        ), metric
    assert rows["sampling"].eq(LABEL).all()
    # the n-corrected Brier (a fixed n) differs where questions stopped early: the routing matters here
    fixed_form = cm.corrected_capability_brier_score(table["c"], table["mu_hat"], table["n"])
    assert not math.isclose(fixed_form, expected["corrected_capability_brier"], abs_tol=1e-9)


@pytest.mark.slow
def test_capcal_table_rows_and_the_report_say_how_the_run_was_sampled(
    adaptive_run: Path, tmp_path: Path, forked_capcal
) -> None:
    """Through ``analyze_runs`` (``capcal table``'s path, with consistency at k = 1 so that the 2-sample run
    has an estimator) and ``capcal report`` (Markdown): the rows' sampling, consistency from the first look,
    and the samples drawn and saved of the results file's ``capcal_adaptive``."""
    from analysis.report import ReportOptions
    from analysis.report.paper_table import format_table, paper_table

    rows = paper_table([adaptive_run], options=ReportOptions(n_resamples=50, consistency_ks=(1,)))
    main = rows[rows["estimator"] != "consistency_lf_k1"]
    assert main["sampling"].eq(LABEL).all()
    free = rows[rows["estimator"] == "consistency_lf_k1"]
    assert not free.empty and free["sampling"].eq(f"fixed k (first look {LOOKS[0]} of {LABEL})").all()
    assert f"sampling: {TASK}: {LABEL}" in format_table(rows)

    (results,) = adaptive_run.rglob("results_*.json")
    summary = json.loads(results.read_text())["capcal_adaptive"]["tasks"][TASK]
    drawn, fixed = summary["samples_drawn"], summary["fixed_k_samples"]
    report = forked_capcal(
        "report", str(adaptive_run), "--output", str(tmp_path / "report"), "--resamples", "50"
    )
    assert report.returncode == 0, report.stderr[-3000:]
    markdown = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert LABEL in markdown  # plain Markdown: parentheses bare
    saved = f"{drawn} of {fixed} (fixed k), {fixed - drawn} saved ({1 - drawn / fixed:.0%})"
    assert f"samples drawn: {saved}" in markdown, markdown[:3000]
    # the few-samples texts speak of the first look and k_max, not of "k = n_min samples per question" (no
    # estimator here, so no ranking and none of its warnings: those are in the fast test above)
    assert "k = 2 samples per question" not in markdown
    assert f"(adaptive, k_max = {K_MAX})" in markdown
    assert "was sampled adaptively with a first look of 2 responses" in report.stderr


def test_adaptive_flags_become_evaluate_adaptive_arguments() -> None:
    from analysis.cli import build_parser
    from analysis.cli.eval_command import eval_request

    def request(*flags: str) -> dict:
        return eval_request(
            build_parser().parse_args(["eval", "--model", "capcal-hf", "--tasks", TASK, *flags])
        )

    assert "looks" not in request() and "rule" not in request()
    assert (request("--adaptive")["looks"], request("--adaptive")["rule"]) == (None, "unanimity")
    chosen = request("--adaptive", "--looks", "16,32", "--adaptive_rule", "width:0.2")
    assert (chosen["looks"], chosen["rule"]) == ((16, 32), "width:0.2")


# --- the plan's edges, the passes and the printed aggregate (no model) --------------------------------------


def test_the_default_looks_leave_a_first_look_of_8_below_k_max() -> None:
    """Issue 47.11/12: at the tasks' default repeats (16) the old default looks (16, 32, 64 below k_max)
    collapsed to the single look (16,): a fixed-k run, 0% saved, no notice. The default first look is 8, so
    the saving under unanimity is u (1 - 8 / k_max) for a share u unanimous at 8."""
    from analysis.evaluation.adaptive import DEFAULT_LOOKS, adaptive_looks

    assert DEFAULT_LOOKS[0] == 8
    assert adaptive_looks(None, 16) == (8, 16)
    assert adaptive_looks(None, 9) == (8, 9)
    assert adaptive_looks(None, 64) == (8, 16, 32, 64)
    assert adaptive_looks(None, 100) == (8, 16, 32, 64, 100)
    assert adaptive_looks((16,), 16 * 4) == (16, 64) and adaptive_looks((2, 4), 4) == (2, 4)


@pytest.mark.parametrize(
    ("looks", "k_max", "message"),
    [
        (None, 8, "--adaptive with k_max = 8 (--repeats or the task's repeats): the default looks (8, 16, "
         "32, 64 below k_max) leave one look, so nothing could stop early; give --repeats above 8 (e.g. 16 "
         "or 64), or --looks below 8"),
        (None, 2, "--adaptive with k_max = 2 (--repeats or the task's repeats): the default looks"),
        (None, 1, "--adaptive needs k_max >= 2 samples per question (--repeats or the task's repeats), "
         "got 1"),
        ((2,), 1, "--adaptive needs k_max >= 2 samples per question"),
        ((16,), 16, "--looks 16 with k_max = 16: one look, so nothing could stop early; give looks below "
         "k_max (e.g. --looks 8) or a larger --repeats"),
        ((2,), 2, "--looks 2 with k_max = 2: one look"),
    ],
)  # fmt: skip
def test_a_plan_of_one_look_is_refused(looks, k_max, message) -> None:
    from analysis.evaluation.adaptive import adaptive_looks

    with pytest.raises(ValueError) as raised:
        adaptive_looks(looks, k_max)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def _passes(plan, vector: list[int]) -> tuple[int, int, int]:
    """One question alone through evaluate_adaptive's passes: (n, s, passes)."""
    from analysis.evaluation.adaptive import next_look

    index, passes = 0, 1
    while True:
        s = sum(vector[: plan.looks[index]])
        if plan.stop[index, s]:
            return plan.looks[index], s, passes
        index, passes = next_look(plan, index, [s]), passes + 1


@pytest.mark.parametrize("rule", ["unanimity", "width:0.5", "width:0.7:0.2"])
def test_passes_that_skip_looks_stop_every_question_where_the_plan_does(rule) -> None:
    """Issue 47.13: a pass skips only looks where no question still sampling could stop, so every 0/1
    sequence of length k_max stops at the (n, s) of the plan applied look by look
    (``analysis.estimators.adaptive.stopped_counts``); under unanimity a question mixed at l_1 draws k_max in
    its second pass (two passes at most, against one per look before)."""
    import itertools

    from analysis.estimators.adaptive import stopped_counts
    from capcal_tasks.adaptive_records import parse_rule, sequential_plan

    plan = sequential_plan((2, 4, 6, 10), parse_rule(rule))
    vectors = [list(bits) for bits in itertools.product((0, 1), repeat=10)]
    cumulative = np.array([[sum(v[:look]) for look in plan.looks] for v in vectors])
    n, s = stopped_counts(cumulative, plan)
    skipped = 0
    for vector, want_n, want_s in zip(vectors, n, s, strict=True):
        got_n, got_s, passes = _passes(plan, vector)
        assert (got_n, got_s) == (want_n, want_s), vector
        looks_reached = plan.looks.index(got_n) + 1
        assert passes <= looks_reached
        skipped += looks_reached - passes
        if rule == "unanimity":
            assert passes == (1 if sum(vector[:2]) in (0, 2) else 2)
    if rule == "unanimity":  # the looks 4 and 6 of every mixed first look
        assert skipped == 2 * sum(sum(v[:2]) == 1 for v in vectors)


def test_a_mixed_first_look_goes_straight_to_k_max_under_unanimity() -> None:
    from analysis.evaluation.adaptive import next_look
    from capcal_metrics.sequential import confidence_width_rule

    plan = unanimity_rule((8, 16, 32, 64))
    assert next_look(plan, 0, [1, 4, 7]) == 3
    # the width rule can stop at 16 on s in {0, 16} only (interval 0.267 wide at 0 of 16 < 0.3): a question
    # at 0 of 8 may still reach it, one at 3 of 8 may not stop before 32
    width = confidence_width_rule((8, 16, 32, 64), 0.3)
    assert width.stop[1, 0] and not width.stop[1, 1:16].any()
    assert next_look(width, 0, [0, 3]) == 1
    assert next_look(width, 0, [3]) == next(i for i in (2, 3) if width.stop[i, 3 : 3 + 24 + 1].any())


def _stopped_records(vectors: list[list[int]], looks: tuple[int, ...]) -> list[dict]:
    from capcal_tasks.adaptive_records import adaptive_fields

    rule = {"name": "unanimity"}
    return [
        {"doc_id": index, "correctness": vector, "extracted_answers": ["1"] * len(vector),
         **adaptive_fields(list(looks), rule, vector)}
        for index, vector in enumerate(vectors)
    ]  # fmt: skip


def test_the_correctness_aggregate_is_the_per_question_unbiased_mean() -> None:
    """Issue 48.3: lm-eval's ``correctness`` aggregate pooled every response, so after stopping the mixed
    questions (k_max responses each) outweighed the unanimous ones (l_1 each): 0.2 pooled here, against the
    mean of the unbiased per-question estimates."""
    from analysis.evaluation.adaptive import _aggregate
    from capcal_metrics.sequential import unbiased_mean

    looks = (2, 8)
    vectors = [[1, 1], [1, 1], [0, 0], [1, 0, 0, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0]]
    records = _stopped_records(vectors, looks)
    template = {"alias": TASK, "correctness,all_responses": 0.0, "correctness_stderr,all_responses": "N/A",
                "expected_accuracy,all_responses": 0.0}  # fmt: skip
    entry = _aggregate(records, template)
    plan = unanimity_rule(looks)
    n = np.array([len(v) for v in vectors])
    s = np.array([sum(v) for v in vectors])
    want = float(np.mean(unbiased_mean(plan, n, s)))
    pooled = s.sum() / n.sum()
    assert pooled == pytest.approx(6 / 22)
    assert entry["correctness,all_responses"] == pytest.approx(want, abs=1e-12)
    assert entry["expected_accuracy,all_responses"] == pytest.approx(want, abs=1e-12)
    assert abs(want - pooled) > 0.1
    # at a single look (fixed k) the per-question mean is the pooled response accuracy
    fixed = [[1, 0, 1, 1], [0, 0, 0, 1]]
    same = _aggregate([{"correctness": v, "expected_accuracy": sum(v) / 4} for v in fixed], template)
    assert same["correctness,all_responses"] == pytest.approx(4 / 8)


def test_the_printed_table_says_what_correctness_is_after_stopping() -> None:
    from analysis.evaluation import format_results

    results = {
        "results": {TASK: {"alias": TASK, "correctness,all_responses": 0.5}},
        "versions": {TASK: 1},
        "n-shot": {TASK: 0},
        "higher_is_better": {TASK: {"correctness": True}},
        "config": {"model": "capcal-hf", "model_args": {}},
        "capcal_adaptive": {"tasks": {TASK: {
            "correctness": "mean over questions of the unbiased estimate of mu (expected_accuracy)",
            "pooled_response_accuracy": 0.25, "samples_drawn": 1234, "fixed_k_samples": 2560,
            "saved_fraction": 1 - 1234 / 2560}}},
    }  # fmt: skip
    text = format_results(results)
    assert text.splitlines()[-1] == (
        f"{TASK}, adaptive: correctness is the mean over questions of the unbiased estimate of mu "
        "(expected_accuracy), not the responses pooled over unequal n (0.2500); 1,234 samples drawn, "
        "2,560 at fixed k (51.8% saved)"
    )


def test_a_first_look_below_8_is_warned_about() -> None:
    from analysis.evaluation.adaptive import small_first_look_warning

    assert small_first_look_warning((8, 64)) is None and small_first_look_warning((16, 64)) is None
    assert small_first_look_warning((4, 8, 16)).startswith(
        "--adaptive with a first look of 4, below 8: the capability Brier skill after stopping is not "
        "reliable"
    )


def test_each_look_gets_the_runs_notify_which_repeats_no_notice_of_k_max(smollm2_path, monkeypatch) -> None:
    """``evaluate_adaptive`` tells the caller's ``notify`` what k_max leaves out once, before the looks; each
    look's ``evaluate`` gets a ``notify`` that drops the notices of a look's own smaller k (already known
    from the plan) and passes every other one on to the caller (lm-eval's default, a logger warning, would
    hide the look's response notices from the caller and repeat the k notices at every look).

    A stand-in for the model run (no model loads: a fast test of the looks' wiring): ``_load_model`` returns
    a placeholder, and each look's ``evaluate`` notifies what the harness's ``evaluate`` notifies before a
    run (its ``check_inputs``' notices for that look's k, the real check on the real task) and one notice of
    its own, then returns two questions' records: doc 0 always correct (unanimous at the first look), doc 1
    mixed (sampled again, to k_max)."""
    from analysis.evaluation import adaptive
    from analysis.evaluation.harness import check_inputs

    model_args = {"pretrained": str(smollm2_path)}
    received: list[str] = []
    looks: list[tuple[int, object, object]] = []
    vectors = {0: [1, 1, 1, 1], 1: [1, 0, 0, 1]}

    def evaluate_look(lm, tasks, *, repeats, limit, samples, notify=None, **kwargs):
        notify = notify or logging.getLogger("analysis.evaluation").warning  # the harness's default
        looks.append((repeats, limit, samples))
        checked = check_inputs("capcal-hf", tasks, model_args, repeats=repeats, limit=limit,
                               apply_chat_template=True)  # fmt: skip
        for notice in checked.notices:
            notify(notice)
        notify(f"look at k = {repeats}: a notice of its own")
        docs = samples[TASK] if samples else range(2)
        records = [{"doc_id": doc, "correctness": vectors[doc][:repeats]} for doc in docs]
        return {
            "samples": {TASK: records},
            "results": {TASK: {"alias": TASK, "correctness,all_responses": 0.0}},
            "configs": {TASK: {}},
            "config": {},
        }

    monkeypatch.setattr(adaptive, "_load_model", lambda *arguments: object())
    monkeypatch.setattr(adaptive, "evaluate", evaluate_look)
    results = adaptive.evaluate_adaptive(
        "capcal-hf", [TASK], model_args, looks=[2], repeats=4, limit=2, device="cpu", batch_size=1,
        apply_chat_template=True, notify=received.append, inform=lambda line: None,
    )  # fmt: skip
    assert looks == [(2, 2, None), (4, None, {TASK: [1]})]
    k_max_notice = (
        "--repeats 4 on capcal_arithmetic: the consistency estimator needs k >= 6 and will be missing, and "
        "mu_hat takes only 5 values; use --repeats 16 (the tasks' default)"
    )
    first_look_warning = received[1]
    assert first_look_warning.startswith("--adaptive with a first look of 2, below 8")
    assert received == [
        k_max_notice,
        first_look_warning,
        "look at k = 2: a notice of its own",
        "look at k = 4: a notice of its own",
    ]
    assert [record["adaptive"]["n"] for record in results["samples"][TASK]] == [2, 4]


@pytest.mark.parametrize(
    ("asked", "chat_template", "multiturn"),
    [
        ({"apply_chat_template": True}, "TEMPLATE(True)", True),
        ({"apply_chat_template": True, "fewshot_as_multiturn": False}, "TEMPLATE(True)", False),
        ({"apply_chat_template": False, "fewshot_as_multiturn": True, "plain_prompts": True}, None, True),
        ({"plain_prompts": True}, None, False),
    ],
    ids=["template", "template-not-multiturn", "multiturn-without-template", "neither"],
)
def test_the_saved_run_records_the_chat_template_and_multiturn_as_asked(
    smollm2_path, tmp_path, monkeypatch, asked, chat_template, multiturn
) -> None:
    """The adaptive run's results file logs lm-eval's experiment arguments as ``evaluate`` does: the chat
    template only when applied, ``fewshot_as_multiturn`` as given, else as the chat template (lm-eval's
    default). A stand-in for the model run (no model loads); the tracker is lm-eval's own, read back."""
    from analysis.evaluation import adaptive

    class StandIn:
        def chat_template(self, apply: bool) -> str:
            return f"TEMPLATE({apply})"

    def evaluate_look(lm, tasks, *, repeats, limit, samples, **kwargs):
        docs = samples[TASK] if samples else range(2)
        records = [{"doc_id": doc, "correctness": [1, 0, 1, 1][:repeats]} for doc in docs]
        return {
            "samples": {TASK: records},
            "results": {TASK: {"alias": TASK, "correctness,all_responses": 0.0}},
            "configs": {TASK: {}},
            "config": {},
        }

    saved = {}

    def save_run(results, tracker, *arguments):
        saved["config"] = tracker.general_config_tracker
        return results

    monkeypatch.setattr(adaptive, "_load_model", lambda *arguments: StandIn())
    monkeypatch.setattr(adaptive, "evaluate", evaluate_look)
    monkeypatch.setattr(adaptive, "save_run", save_run)
    adaptive.evaluate_adaptive(
        "capcal-hf", [TASK], {"pretrained": str(smollm2_path)}, looks=[2], repeats=4, limit=2,
        device="cpu", batch_size=1, output_path=tmp_path, notify=lambda line: None,
        inform=lambda line: None, **asked,
    )  # fmt: skip
    assert saved["config"].chat_template == chat_template
    assert saved["config"].fewshot_as_multiturn is multiturn


@pytest.mark.parametrize(("limit", "refusal"), [
    (-2, r"^limit must be positive \(a count, or a fraction below 1\), got -2$"),
    (2.5, r"^limit must be a whole number of questions when >= 1, got 2\.5$"),
])  # fmt: skip
def test_an_adaptive_runs_limit_reaches_its_input_checks(smollm2_path, monkeypatch, limit, refusal) -> None:
    """``evaluate_adaptive``'s ``limit`` is checked by ``check_inputs`` as ``evaluate``'s is, before any
    model loads (the model loader is made to fail, so reaching it fails the test)."""
    from analysis.evaluation import EvaluationInputError, adaptive

    monkeypatch.setattr(adaptive, "_load_model", lambda *args, **kwargs: pytest.fail("a model was loaded"))
    with pytest.raises(EvaluationInputError, match=refusal):
        adaptive.evaluate_adaptive(
            "capcal-hf", [TASK], {"pretrained": str(smollm2_path)}, repeats=K_MAX, limit=limit, device="cpu"
        )


def test_an_adaptive_runs_metadata_reaches_its_input_checks(smollm2_path, monkeypatch) -> None:
    """Catches ``evaluate_adaptive`` handing ``check_inputs`` something other than its ``metadata``: a
    metadata that is not a mapping is refused in one line before any model loads (the loader fails the
    test)."""
    from analysis.evaluation import EvaluationInputError, adaptive

    monkeypatch.setattr(adaptive, "_load_model", lambda *args, **kwargs: pytest.fail("a model was loaded"))
    with pytest.raises(
        EvaluationInputError, match=r"^metadata must be a JSON object \(a mapping\), got list$"
    ):
        adaptive.evaluate_adaptive(
            "capcal-hf", [TASK], {"pretrained": str(smollm2_path)}, repeats=K_MAX, device="cpu",
            metadata=["ptrue", False],
        )  # fmt: skip
