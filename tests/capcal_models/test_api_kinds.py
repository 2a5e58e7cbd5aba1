"""capcal-api / capcal-api-chat by kind, against a local recording server (no model, no vLLM): each generation
setting and model argument reaches the payload or the transport, each response field is read from its own key
(texts by choice index, the answer token's log-probabilities), the failure report and the warnings are matched
whole, and state that outlives a call (``supports_n`` turned off, the cache) is checked across two calls.

The server answers each request by its identity (its prompt and seed, or a per-prompt script), never by
arrival order. Expected values are constants or loops written here (seeds from ``capcal_models.seeding``,
whose own tests pin them)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from aiohttp import web

sys.path.insert(0, str(Path(__file__).parent))  # local_server.py
from local_server import PostServer  # noqa: E402

from capcal_models import api as api_module  # noqa: E402
from capcal_models.api import APIRequestsFailed  # noqa: E402
from capcal_models.http_transport import RetryPolicy  # noqa: E402
from capcal_models.registry import register_models  # noqa: E402
from capcal_models.seeding import sample_seed  # noqa: E402

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
API = "capcal_models.api"  # the logger of the module under test


class RecordingServer(PostServer):
    """Records every body; answers by identity. Completions: choice i of a request with prompt p and seed s
    has text ``"<p>#<s + i> STOP tail"``; the choices are listed in reverse index order (a reader must sort
    them by ``index``). ``script[prompt]``: the answers of that prompt's attempts in turn ("400", "500",
    "one_choice", "none_content"), then "ok". Chat: the prompt is the last message's content; a request
    with ``logprobs`` gets ``logprobs_answer`` (a list of (token, logprob, {alt: logprob}))."""

    def __init__(
        self,
        route: str = COMPLETIONS,
        script: dict[str, list[str]] | None = None,
        logprobs_answer: dict[str, list] | None = None,
    ) -> None:
        super().__init__()
        self.ROUTE = route
        self.script = {prompt: list(answers) for prompt, answers in (script or {}).items()}
        self.logprobs_answer = logprobs_answer or {}
        self.bodies: list[dict] = []
        self._attempts: dict[str, int] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.ROUTE}"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        chat = "messages" in body
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        attempt = self._attempts.get(prompt, 0)
        self._attempts[prompt] = attempt + 1
        script = self.script.get(prompt, [])
        behaviour = script[attempt] if attempt < len(script) else "ok"
        if behaviour in ("400", "500"):
            return web.Response(status=int(behaviour), text=f"refused {prompt}")
        if chat and body.get("logprobs"):
            content = [
                {
                    "token": token,
                    "logprob": logprob,
                    "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()],
                }
                for token, logprob, top in self.logprobs_answer[prompt]
            ]
            choice = {
                "index": 0,
                "message": {"content": content[0]["token"]},
                "logprobs": {"content": content},
            }
            return web.json_response({"choices": [choice]})
        seed, n = int(body.get("seed", 0)), int(body.get("n", 1))
        if behaviour == "one_choice":
            n = 1
        texts = [f"{prompt}#{seed + i} STOP tail" for i in range(n)]
        if chat:
            choices = [
                {"index": i, "message": {"content": None if behaviour == "none_content" else text}}
                for i, text in enumerate(texts)
            ]
        else:
            choices = [{"index": i, "text": text} for i, text in enumerate(texts)]
        return web.json_response({"choices": choices[::-1]})


def _lm(name: str, url: str, **model_args: object):
    register_models()
    from lm_eval.api.registry import get_model

    arguments = {"model": "stand-in", "base_url": url, "tokenizer_backend": "none", "seed": 7}
    arguments.update(model_args)
    return get_model(name).create_from_arg_string(",".join(f"{k}={v}" for k, v in arguments.items()))


def _generate_request(question: str, context: object, gen_kwargs: dict, idx: int = 0):
    from lm_eval.api.instance import Instance

    return Instance(
        request_type="generate_until",
        doc={"question_id": question},
        arguments=(context, gen_kwargs),
        idx=idx,
        metadata=("stand_in", int(question[1:]), 1),
    )


SAMPLED = {
    "do_sample": True,
    "temperature": 0.7,
    "top_p": 0.85,
    "max_gen_toks": 11,
    "until": ["STOP"],
    "top_k": 0,
}


def _seed(question: str, repeat: int, run_seed: int = 7, idx: int = 0) -> int:
    return sample_seed(run_seed, "stand_in", question, idx, repeat)


# --- the payload of a sampled request ----------------------------------------------------------------------


def test_each_generation_setting_reaches_the_payload_and_choice_i_fills_repeat_i(tmp_path: Path) -> None:
    """k = 3 clones of q1 with every setting away from its default: one request with n = 3, the setting's
    temperature / top_p / max tokens / stop sequences (+ the model's EOS string), the seed of repeat 0, no
    top_k (0 means none); the choices come back in reverse order and repeat i gets choice index i, cut at
    its stop sequence."""
    with RecordingServer() as server:
        lm = _lm("capcal-api", server.url, eos_string="<eos>", sample_cache="False")
        request = _generate_request("q1", "ctx one", dict(SAMPLED))
        texts = lm.generate_until([request] * 3, disable_tqdm=True)
    s = _seed("q1", 0)
    assert server.bodies == [
        {
            "prompt": "ctx one",
            "model": "stand-in",
            "max_tokens": 11,
            "temperature": 0.7,
            "top_p": 0.85,
            "stop": ["STOP", "<eos>"],
            "seed": s,
            "n": 3,
        }
    ]
    assert texts == [f"ctx one#{s} ", f"ctx one#{s + 1} ", f"ctx one#{s + 2} "]
    counts = {name: lm.stats[name] for name in ("samples_needed", "requests_needed", "samples_received")}
    assert counts == {"samples_needed": 3, "requests_needed": 1, "samples_received": 3}
    assert lm.stats["cached_samples_used"] == 0 and lm.stats["requests_sent"] == 1


def test_a_top_k_other_than_none_is_sent_and_the_run_seed_changes_every_seed() -> None:
    settings = dict(SAMPLED, top_k=5)
    with RecordingServer() as server:
        lm = _lm("capcal-api", server.url, seed=8, sample_cache="False")
        lm.generate_until([_generate_request("q2", "ctx two", settings, idx=1)] * 2, disable_tqdm=True)
    [body] = server.bodies
    assert body["top_k"] == 5 and body["n"] == 2
    assert body["seed"] == _seed("q2", 0, run_seed=8, idx=1) != _seed("q2", 0, run_seed=7, idx=1)


def test_without_n_each_repeat_is_its_own_request_with_its_own_seed() -> None:
    with RecordingServer() as server:
        lm = _lm("capcal-api", server.url, supports_n="False", sample_cache="False")
        texts = lm.generate_until(
            [_generate_request("q3", "ctx three", dict(SAMPLED))] * 3, disable_tqdm=True
        )
    assert sorted(body["seed"] for body in server.bodies) == sorted(_seed("q3", r) for r in range(3))
    assert all("n" not in body for body in server.bodies)
    assert texts == [f"ctx three#{_seed('q3', r)} " for r in range(3)]
    assert lm.stats["requests_needed"] == 3


def test_a_greedy_setting_is_sent_once_and_copied_to_the_clones() -> None:
    greedy = {"do_sample": False, "until": ["STOP"], "max_gen_toks": 5}
    with RecordingServer() as server:
        lm = _lm("capcal-api", server.url, sample_cache="False")
        texts = lm.generate_until([_generate_request("q4", "ctx four", greedy)] * 3, disable_tqdm=True)
    [body] = server.bodies
    assert "n" not in body and body["temperature"] == 0.0 and body["max_tokens"] == 5
    assert texts == [f"ctx four#{body['seed']} "] * 3


# --- state across two calls: supports_n, the cache ------------------------------------------------------


def test_fewer_choices_turn_n_off_for_the_rest_of_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """The first call's server returns 1 of 3 choices: repeats 1 and 2 are asked for one by one (their own
    seeds), one warning says so, and the second call sends no n at all."""
    with RecordingServer(script={"ctx five": ["one_choice"]}) as server:
        lm = _lm("capcal-api", server.url, sample_cache="False")
        with caplog.at_level(logging.WARNING, logger="capcal_models.api"):
            first = lm.generate_until(
                [_generate_request("q5", "ctx five", dict(SAMPLED))] * 3, disable_tqdm=True
            )
        assert [(body.get("n"), body["seed"]) for body in server.bodies] == [
            (3, _seed("q5", 0)),
            (None, _seed("q5", 1)),
            (None, _seed("q5", 2)),
        ]
        assert first == [f"ctx five#{_seed('q5', r)} " for r in range(3)]
        assert [r.getMessage() for r in caplog.records if r.name == "capcal_models.api"] == [
            "capcal-api: the server returned 1 choices for n=3; sampling the other repeats one request each "
            "(supports_n=False from now on)"
        ]
        assert lm.supports_n is False
        lm.generate_until([_generate_request("q6", "ctx six", dict(SAMPLED))] * 2, disable_tqdm=True)
    assert [body.get("n") for body in server.bodies[3:]] == [None, None]
    assert lm.get_model_info()["capcal_sampler"] == "capcal-api: n=k (supports_n=False), per-sample seeds"


def test_a_second_model_reads_the_first_ones_samples_from_the_cache(tmp_path: Path) -> None:
    cache_path = tmp_path / "samples.sqlite"
    request = _generate_request("q7", "ctx seven", dict(SAMPLED))
    with RecordingServer() as server:
        first = _lm("capcal-api", server.url, cache_path=cache_path).generate_until([request] * 2, True)
        second_lm = _lm("capcal-api", server.url, cache_path=cache_path)
        second = second_lm.generate_until([request] * 3, disable_tqdm=True)
    s = _seed("q7", 0)  # the one missing repeat 2 is asked for alone, seeded s + 2 (as choice 2 of n = 3)
    assert [(body.get("n"), body["seed"]) for body in server.bodies] == [(2, s), (None, s + 2)]
    assert second == [*first, f"ctx seven#{s + 2} "]
    stats = second_lm.stats
    assert (stats["samples_needed"], stats["cached_samples_used"], stats["samples_received"]) == (3, 2, 1)


# --- model arguments that reach the transport and the cache writer ----------------------------------------


def test_model_arguments_reach_the_retry_policy_the_transport_and_the_cache_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[dict] = []
    runs: list[dict] = []

    class RecordingTransport(api_module.HTTPTransport):
        def __init__(self, url: str, **kwargs) -> None:
            made.append({"url": url, **kwargs})
            super().__init__(url, **kwargs)

        def run(self, jobs, what="requests", **kwargs):
            runs.append({"what": what, **{k: kwargs[k] for k in ("progress", "total")}})
            return super().run(jobs, what, **kwargs)

    monkeypatch.setattr(api_module, "HTTPTransport", RecordingTransport)
    with RecordingServer() as server:
        lm = _lm(
            "capcal-api",
            server.url,
            cache_path=tmp_path / "c.sqlite",
            max_retries=4,
            retry_base_delay=0.25,
            retry_max_delay=9,
            timeout=17,
            num_concurrent=3,
            cache_commit_rows=13,
            cache_commit_seconds=0.5,
        )
        writers: list[tuple] = []
        open_writer = lm.cache.writer

        def recording_writer(max_rows: int, max_seconds: float):
            writers.append((max_rows, max_seconds))
            return open_writer(max_rows, max_seconds)

        lm.cache.writer = recording_writer
        lm.generate_until([_generate_request("q8", "ctx eight", dict(SAMPLED))] * 2, disable_tqdm=False)
        lm.first_token_logprobs = True  # a list of jobs: the progress bar is sized by it
        lm.loglikelihood([_loglikelihood_request("q9", "ctx nine", " Yes")], disable_tqdm=True)
    assert lm.retry == RetryPolicy(max_retries=4, base_delay=0.25, max_delay=9.0)
    settings = made[0]
    assert len(made) == 2 and made[1] == settings
    assert (settings["url"], settings["name"], settings["concurrency"], settings["timeout"]) == (
        server.url,
        "capcal-api",
        3,
        17,
    )
    assert settings["retry"] is lm.retry and settings["stats"] is lm.stats
    assert runs == [
        {"what": "sampling", "progress": True, "total": None},
        {"what": "first-token log-probabilities", "progress": False, "total": 1},
    ]
    assert writers == [(13, 0.5), (13, 0.5)]


@pytest.mark.parametrize(
    "rows, seconds, accepted", [(1, 0.001, True), (0, 0.2, False), (1, 0.0, False)]
)  # fmt: skip
def test_the_cache_commit_bounds_are_checked_on_both_sides(
    tmp_path: Path, rows: int, seconds: float, accepted: bool
) -> None:
    arguments = {
        "cache_path": tmp_path / "c.sqlite",
        "cache_commit_rows": rows,
        "cache_commit_seconds": seconds,
    }
    if accepted:
        lm = _lm("capcal-api", "http://127.0.0.1:9/v1/completions", **arguments)
        assert (lm.cache_commit_rows, lm.cache_commit_seconds) == (rows, seconds)
        return
    with pytest.raises(ValueError) as refused:
        _lm("capcal-api", "http://127.0.0.1:9/v1/completions", **arguments)
    assert str(refused.value) == (
        f"capcal-api: cache_commit_rows must be >= 1 and cache_commit_seconds > 0, not {rows} and {seconds}"
    )


# --- failures: the report, allow_failures, the counters ----------------------------------------------------


def _two_questions() -> list:
    """q1 (4 samples, one request) is answered, q2 (3 samples) gets a 400: 4 samples from 2 requests."""
    return [_generate_request("q1", "good", dict(SAMPLED))] * 4 + [
        _generate_request("q2", "bad", dict(SAMPLED))
    ] * 3


def test_a_failed_request_raises_one_report_with_every_count(tmp_path: Path) -> None:
    cache_path = tmp_path / "c.sqlite"
    with RecordingServer(script={"bad": ["400"]}) as server:
        lm = _lm("capcal-api", server.url, cache_path=cache_path, max_retries=4)
        with pytest.raises(APIRequestsFailed) as failed:
            lm.generate_until(_two_questions(), disable_tqdm=True)
    resolved = cache_path.resolve()
    assert str(failed.value).splitlines() == [
        "capcal-api: sampling did not finish: 1 of 2 requests (3 of 7 samples) still failed after up to 4 "
        "retries; last error: HTTP 400: refused bad",
        f"Finished: 4 of 7 samples (0 read from the cache, 4 received now), all cached in {resolved}.",
        "Not finished: 1 requests:",
        "  stand_in q2 repeats 0,1,2 (1 attempts): HTTP 400: refused bad",
        f"To resume, re-run the same command: finished samples are read from {resolved} and only the "
        "unfinished requests are sent.",
    ]
    assert [(f.task, f.question_id, f.repeats, f.attempts) for f in failed.value.failures] == [
        ("stand_in", "q2", [0, 1, 2], 1)
    ]
    assert (lm.stats["failed_requests"], lm.stats["missing_samples"]) == (1, 3)


def test_allow_failures_logs_the_report_and_leaves_the_failed_samples_empty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with RecordingServer(script={"bad": ["400"]}) as server:
        lm = _lm("capcal-api", server.url, sample_cache="False", allow_failures="True", max_retries=2)
        with caplog.at_level(logging.INFO, logger="capcal_models.api"):
            texts = lm.generate_until(_two_questions(), disable_tqdm=True)
            lm.generate_until([_generate_request("q2", "bad", dict(SAMPLED))] * 3, disable_tqdm=True)
    s = _seed("q1", 0)
    assert texts == [f"good#{s + r} " for r in range(4)] + ["", "", ""]
    errors = [r.getMessage() for r in caplog.records if r.name == API and r.levelno == logging.ERROR]
    assert errors[0].splitlines() == [
        "capcal-api: sampling did not finish: 1 of 2 requests (3 of 7 samples) still failed after up to 2 "
        "retries; last error: HTTP 400: refused bad",
        "Finished: 4 of 7 samples (not cached: sample_cache=False).",
        "Not finished: 1 requests:",
        "  stand_in q2 repeats 0,1,2 (1 attempts): HTTP 400: refused bad",
        "To resume, re-run the same command (everything is sampled again: no sample cache).",
        "The failed samples are empty strings (allow_failures=True).",
    ]
    summaries = [r.getMessage() for r in caplog.records if r.name == API and r.levelno == logging.INFO]
    assert summaries[0] == (
        "capcal-api sampling: 7 samples needed, 0 from the cache; 2 requests (2 HTTP attempts), 4 samples "
        "received; 0 retries; 1 requests failed (3 samples missing)"
    )
    # the second call (its q2 request now succeeds) adds to the counters kept across calls
    assert (lm.stats["failed_requests"], lm.stats["missing_samples"], lm.stats["samples_received"]) == (
        1,
        3,
        7,
    )
    assert len(lm.failures) == 1 and len(errors) == 1


def test_get_model_info_reports_every_field() -> None:
    lm = _lm("capcal-api", "http://127.0.0.1:9/v1/completions", sample_cache="False", seed=31)
    lm.stats["requests_sent"] = 6
    info = lm.get_model_info()
    assert info["capcal_sampler"] == "capcal-api: n=k (supports_n=True), per-sample seeds"
    assert info["capcal_api_cache"] is None and info["capcal_run_seed"] == 31
    assert info["capcal_api_stats"]["requests_sent"] == 6 and info["capcal_api_stats"] is not lm.stats
    unseeded = _lm("capcal-api", "http://127.0.0.1:9/v1/completions", sample_cache="False", seed="None")
    assert "capcal_run_seed" not in unseeded.get_model_info()


# --- prompts: truncation at the context window -----------------------------------------------------------


def test_a_tokenized_prompt_is_left_truncated_to_max_length_minus_max_gen_toks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # lm-eval keeps max_length - 1 (one token for generation): a window of 14
    lm = _lm("capcal-api", "http://127.0.0.1:9/v1/completions", sample_cache="False", max_length=15)
    assert lm.max_length == 14
    lm.tokenized_requests = True
    lm.tok_encode = lambda context, add_special_tokens=None: list(range(100, 110))
    # only this module's records count: lm-eval's own INFO lines from the constructor above reach caplog
    # when an earlier test on the worker lowered lm-eval's log level (seen on CI)
    with caplog.at_level(logging.WARNING, logger=API):
        assert lm._prompt("ten tokens", 4) == list(range(100, 110))  # 10 == 14 - 4: kept whole
        assert [r for r in caplog.records if r.name == API] == []
        assert lm._prompt("ten tokens", 6) == list(range(102, 110))  # 8 of 10: the first two dropped
    assert [r.getMessage() for r in caplog.records if r.name == API] == [
        "capcal-api: prompt of 10 tokens left-truncated to 8"
    ]
    asked = []  # the prompt is encoded with a BOS token exactly when the model argument add_bos_token says so
    lm.tok_encode = lambda context, add_special_tokens=None: asked.append(add_special_tokens) or [1, 2]
    for add_bos_token in (False, True):
        lm.add_bos_token = add_bos_token
        assert lm._prompt("two tokens", 4) == [1, 2]
    assert asked[0] is False and asked[1] is True


# --- capcal-api-chat: texts and first-token log-likelihoods ------------------------------------------------


def _chat(content: str):
    from lm_eval.models.api_models import JsonChatStr

    return JsonChatStr(json.dumps([{"role": "user", "content": content}]))


def test_chat_texts_are_read_by_choice_index_a_null_content_is_empty_and_stop_is_left_to_the_server() -> None:
    with RecordingServer(CHAT, script={"no text": ["none_content"]}) as server:
        lm = _lm("capcal-api-chat", server.url, sample_cache="False")
        texts = lm.generate_until(
            [_generate_request("q1", _chat("hello"), dict(SAMPLED))] * 2
            + [_generate_request("q2", _chat("no text"), dict(SAMPLED))],
            disable_tqdm=True,
        )
    s = _seed("q1", 0)
    assert texts == [f"hello#{s} STOP tail", f"hello#{s + 1} STOP tail", ""]
    assert server.bodies[0]["messages"] == [{"role": "user", "content": "hello"}]
    assert server.bodies[0]["stop"] == ["STOP"] and server.bodies[0]["n"] == 2


def _loglikelihood_request(question: str, context: object, word: str):
    from lm_eval.api.instance import Instance

    return Instance(
        request_type="loglikelihood",
        doc={"question_id": question},
        arguments=(context, word),
        idx=0,
        metadata=("stand_in", int(question[1:]), 1),
    )


LOGPROBS = {
    "is it?": [("Yes", -0.25, {"Yes": -0.25, " No": -1.5, "Maybe": -3.0})],
    "is it not?": [("Maybe", -0.5, {"Maybe": -0.5, "Perhaps": -1.0})],
    "is it so?": [("No", -0.125, {"No": -0.125, "Perhaps": -2.5})],
}


def test_chat_first_token_logprobs_payload_and_answers(caplog: pytest.LogCaptureFixture) -> None:
    """One greedy request of 1 token per question asking for the top-7 log-probabilities, seeded as repeat
    0; each answer word's log-likelihood is its own token's and is_greedy says whether it was chosen; a
    question with neither word is counted in one warning."""
    with RecordingServer(CHAT, logprobs_answer=LOGPROBS) as server:
        lm = _lm("capcal-api-chat", server.url, sample_cache="False", top_logprobs=7)
        requests = [
            _loglikelihood_request("q1", _chat("is it?"), " Yes"),
            _loglikelihood_request("q2", _chat("is it not?"), " Yes"),
            _loglikelihood_request("q1", _chat("is it?"), " No"),
            _loglikelihood_request("q2", _chat("is it not?"), " No"),
            _loglikelihood_request("q3", _chat("is it so?"), " Yes"),
            _loglikelihood_request("q3", _chat("is it so?"), " No"),
        ]
        with caplog.at_level(logging.WARNING, logger="capcal_models.api"):
            results = lm.loglikelihood(requests, disable_tqdm=True)
    assert results == [
        (-0.25, True),
        (-100.0, False),
        (-1.5, False),
        (-100.0, False),
        (-100.0, False),
        (-0.125, True),
    ]
    by_prompt = {body["messages"][-1]["content"]: body for body in server.bodies}
    assert by_prompt["is it?"] == {
        "model": "stand-in",
        "messages": [{"role": "user", "content": "is it?"}],
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 7,
        "seed": _seed("q1", 0),
    }
    assert by_prompt["is it not?"]["seed"] == _seed("q2", 0)
    assert [r.getMessage() for r in caplog.records if r.name == "capcal_models.api"] == [
        "capcal-api-chat: 1 of 3 questions have none of their answer words among the top-7 tokens of the "
        "first answer token (parse failures: their log-likelihoods are all -100.0)"
    ]
    assert (lm.stats["samples_needed"], lm.stats["requests_needed"]) == (3, 3)


@pytest.mark.parametrize(
    "model_args, max_tokens",
    [({}, 1), ({"ptrue_max_tokens": 5}, 5), ({"think_end_token": "[/reason]", "max_gen_toks": 33}, 33),
     ({"think_end_token": "[/reason]", "max_gen_toks": 33, "ptrue_max_tokens": 5}, 5)],
)  # fmt: skip
def test_the_first_token_request_is_as_long_as_the_thinking_needs(model_args: dict, max_tokens: int) -> None:
    answer = {"is it?": [("[/reason]", -0.1, {}), ("Yes", -0.25, {"Yes": -0.25, "No": -1.5})]}
    with RecordingServer(CHAT, logprobs_answer=answer) as server:
        lm = _lm("capcal-api-chat", server.url, sample_cache="False", **model_args)
        results = lm.loglikelihood([_loglikelihood_request("q1", _chat("is it?"), "Yes")], disable_tqdm=True)
    assert [body["max_tokens"] for body in server.bodies] == [max_tokens]
    # the answer token follows the thinking end when one is set; without one, the first token is read
    assert results == [(-0.25, True)] if "think_end_token" in model_args else [(-100.0, False)]


def test_completions_logprobs_fields_name_the_top_count() -> None:
    lm = _lm("capcal-api", "http://127.0.0.1:9/v1/completions", sample_cache="False", top_logprobs=9)
    assert lm._logprobs_payload("p", 3) == {
        "model": "stand-in",
        "prompt": "p",
        "max_tokens": 3,
        "temperature": 0,
        "logprobs": 9,
    }
    choice = {
        "logprobs": {
            "tokens": ["A", " B"],
            "token_logprobs": [-0.5, -0.75],
            "top_logprobs": [{"A": -0.5}, {" B": -0.75, "C": -2.0}],
        }
    }
    assert [(t.token, t.logprob, t.top) for t in lm._answer_tokens(choice)] == [
        ("A", -0.5, {"A": -0.5}),
        (" B", -0.75, {" B": -0.75, "C": -2.0}),
    ]
