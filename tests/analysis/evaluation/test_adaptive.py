"""``capcal eval --adaptive`` (analysis.evaluation.adaptive) on the real SmolLM2 through real lm-eval.

- pre-flight: bad looks, a look above k_max, a rule typo, a non-sampling task, ``--looks`` without
  ``--adaptive``: one line, exit 2, before the model loads (no model needed for most);
- an adaptive run (capcal_arithmetic, 6 questions, looks 2 and k_max 4) against a fixed k = 4 run with the
  same seed and no sample cache: each question's n responses are the first n of the fixed run's; the records
  hold the plan's n, s, reason and capcal_metrics.sequential's estimates; questions unanimous at 2 stop there;
  the samples drawn are what the plan says;
- a ``capcal eval --adaptive`` killed (SIGKILL) once its first look is done, run again: the records equal the
  uninterrupted adaptive run's, and the re-run reads the first look's samples from the cache.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from capcal_metrics.sequential import confidence_sequence, unanimity_rule, unbiased_mean, unbiased_mean_square

REPO = Path(__file__).resolve().parents[3]
TASK, LIMIT, K_MAX, LOOKS, MAX_GEN_TOKS, SEED = "capcal_arithmetic", 6, 4, (2, 4), 8, 7


def _capcal(*arguments: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "analysis.cli", *arguments]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


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
def test_bad_adaptive_settings_are_one_line_before_the_model_loads(flags, message, smollm2_path) -> None:
    run = _capcal("eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
                  "--tasks", TASK, "--repeats", str(K_MAX), "--limit", "2", "--apply_chat_template",
                  *flags)  # fmt: skip
    assert message in _one_error_line(run)


def test_adaptive_on_a_task_that_does_not_sample_is_refused(smollm2_path) -> None:
    run = _capcal("eval", "--model", "capcal-hf", "--model_args", f"pretrained={smollm2_path}",
                  "--tasks", "capcal_arithmetic_ptrue", "--limit", "2", "--apply_chat_template",
                  "--adaptive")  # fmt: skip
    assert "--adaptive samples capcal's sampling tasks only; capcal_arithmetic_ptrue" in _one_error_line(run)


def test_adaptive_with_a_stock_model_is_refused() -> None:
    """Stock lm-eval models draw new samples at every look: the stop would depend on samples not logged."""
    run = _capcal("eval", "--model", "hf", "--model_args", "pretrained=/no/such/model",
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
def runs(smollm2_path: Path, tmp_path_factory) -> dict:
    """The adaptive run (``capcal eval --adaptive``, its own cache) and the fixed k = 4 run (in process,
    ``evaluate``, no cache), same seed: {"adaptive": folder, "stderr": text, "fixed": results}."""
    from analysis.evaluation import evaluate

    folder = tmp_path_factory.mktemp("adaptive")
    run = _capcal(*_arguments(smollm2_path, folder / "cache.sqlite", folder / "out"))
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
    )
    return {"adaptive": folder / "out", "stderr": run.stderr, "fixed": fixed, "folder": folder}


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
def test_the_results_file_records_the_plan_and_the_samples_drawn(runs) -> None:
    (results_file,) = runs["adaptive"].rglob("results_*.json")
    results = json.loads(results_file.read_text(encoding="utf-8"))
    records = _records(runs["adaptive"])
    drawn = sum(record["adaptive"]["n"] for record in records.values())
    summary = results["capcal_adaptive"]
    assert summary["looks"] == list(LOOKS) and summary["k_max"] == K_MAX
    assert summary["tasks"][TASK]["samples_drawn"] == drawn
    assert summary["tasks"][TASK]["fixed_k_samples"] == LIMIT * K_MAX
    assert summary["tasks"][TASK]["samples_saved"] == LIMIT * K_MAX - drawn
    stopped_first = sum(record["adaptive"]["n"] == LOOKS[0] for record in records.values())
    assert 0 < stopped_first < LIMIT  # both ways of stopping occur (4 of 6 stop at 2 with seed 7)
    assert summary["tasks"][TASK]["stopped_at"] == {"2": stopped_first, "4": LIMIT - stopped_first}
    mean = np.mean([record["expected_accuracy"] for record in records.values()])
    assert results["results"][TASK]["expected_accuracy,all_responses"] == pytest.approx(mean, abs=1e-12)
    assert results["configs"][TASK]["repeats"] == K_MAX
    # what k_max = 4 leaves out is said once; the smaller k of the first look is not warned about
    assert runs["stderr"].count("warning: --repeats 4 on capcal_arithmetic") == 1, runs["stderr"][-3000:]
    assert "--repeats 2 on" not in runs["stderr"]
    # the progress line of each look
    lines = [line for line in runs["stderr"].splitlines() if "adaptive look" in line]
    assert len(lines) == 2, runs["stderr"][-3000:]
    assert lines[0].startswith(f"capcal eval: adaptive look 1/2 (n = 2): {LIMIT - stopped_first} of {LIMIT} ")
    assert lines[0].endswith(f"{LIMIT * LOOKS[0]} samples drawn so far, {LIMIT * K_MAX} at fixed k = 4")
    assert lines[1].endswith(f"{drawn} samples drawn so far, {LIMIT * K_MAX} at fixed k = 4")


@pytest.mark.slow
def test_without_log_samples_the_aggregates_are_saved_as_a_fixed_run_saves_them(
    runs, smollm2_path: Path
) -> None:
    """``--adaptive`` without ``--log_samples`` (lm-eval's default) used to fail after all the sampling
    ("samples ... was not written"): it saves the results file, with ``capcal_adaptive``, and no samples file,
    as a fixed-k run without ``--log_samples`` does. Re-run from the first run's cache (nothing decoded)."""
    arguments = _arguments(smollm2_path, runs["folder"] / "cache.sqlite", runs["folder"] / "aggregates")
    arguments.remove("--log_samples")
    run = _capcal(*arguments)
    assert run.returncode == 0, run.stderr[-3000:]
    (results_file,) = (runs["folder"] / "aggregates").rglob("results_*.json")
    assert not list((runs["folder"] / "aggregates").rglob("samples_*"))
    results = json.loads(results_file.read_text(encoding="utf-8"))
    (with_samples,) = runs["adaptive"].rglob("results_*.json")
    expected = json.loads(with_samples.read_text(encoding="utf-8"))
    assert results["capcal_adaptive"] == expected["capcal_adaptive"]
    assert results["results"][TASK] == expected["results"][TASK]


@pytest.mark.slow
def test_a_killed_adaptive_run_resumes_to_the_uninterrupted_one(runs, smollm2_path: Path) -> None:
    folder = runs["folder"]
    arguments = _arguments(smollm2_path, folder / "resumed.sqlite", folder / "resumed")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    stopped = subprocess.Popen([sys.executable, "-m", "analysis.cli", *arguments], env=env,
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    seen = []
    deadline = time.monotonic() + 300
    for line in stopped.stderr:  # kill once the first look is done, before the second is sampled
        seen.append(line)
        if "adaptive look 1/2" in line or time.monotonic() > deadline:
            stopped.send_signal(signal.SIGKILL)
            break
    stopped.wait(timeout=60)
    assert stopped.returncode == -signal.SIGKILL, "".join(seen)[-3000:]
    assert not list((folder / "resumed").rglob("samples_*.jsonl"))  # nothing written yet
    again = _capcal(*arguments)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{LIMIT * LOOKS[0]} samples read from the sample cache" in again.stderr
    resumed, uninterrupted = _records(folder / "resumed"), _records(runs["adaptive"])
    for doc_id, record in uninterrupted.items():
        for key in ("resps", "correctness", "extracted_answers", "expected_accuracy", "adaptive", "doc"):
            assert resumed[doc_id][key] == record[key], (doc_id, key)


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
