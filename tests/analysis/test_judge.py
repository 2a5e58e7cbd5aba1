"""The LLM judge (``analysis.judge``): prompts, strict verdict parsing, the cached client, the checker and
the judge-vs-rule agreement section.

The fast tests run the real client against a stand-in OpenAI-compatible server on 127.0.0.1 (an aiohttp app
that grades by string comparison): it stands in for a model so that requests, retries and the Authorization
header can be counted and checked at the server. The slow test runs ``capcal rescore --checker judge``
against a real ``vllm serve`` of SmolLM2 on a real TriviaQA sampling run (SmolLM2 as the judge only
exercises the machinery: its verdicts are not meant to be good).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from analysis.judge import JudgeChecker
from analysis.judge.agreement import NOT_SENT, rescore_agreement
from analysis.judge.checker import JUDGE_VERSION, is_non_answer
from analysis.judge.client import JudgeClient, JudgeRequest, _content, chat_completions_url
from analysis.judge.prompts import (
    EQUALITY_TEMPLATE,
    GRADER_TEMPLATE,
    JUDGE_PROMPTS,
    MATH_EQUIVALENCE,
    SIMPLEQA_GRADER,
    judge_messages,
    prompt_for_dataset,
)
from analysis.judge.verdicts import parse_verdict
from analysis.report.sections import judge_agreement_section
from capcal_metrics.agreement import pooled_kappa
from capcal_metrics.bootstrap import bootstrap_ci
from capcal_models.http_transport import APIRequestsFailed, RetryPolicy
from capcal_tasks.checkers import CheckItem

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "capcal_models"))  # local_server.py
from local_server import ThreadedApp  # noqa: E402

SECRET = "sk-test-9f8e7d6c5b4a-do-not-leak"
KEY_ENV = "CAPCAL_TEST_JUDGE_KEY"

# ---------------------------------------------------------------- prompts


def test_prompts_are_the_simple_evals_templates_filled_in_one_pass() -> None:
    grader, equality = JUDGE_PROMPTS[SIMPLEQA_GRADER], JUDGE_PROMPTS[MATH_EQUIVALENCE]
    assert grader.render("Q?", "Paris", "paris") == GRADER_TEMPLATE.format(
        question="Q?", target="Paris", predicted_answer="paris"
    )
    assert equality.render("ignored", "3/2", "1.5") == EQUALITY_TEMPLATE % {
        "expression1": "3/2",
        "expression2": "1.5",
    }
    # values that look like placeholders stay as they are (str.format / % would not re-read them either)
    text = grader.render("{target}?", "{predicted_answer}", "%(expression1)s {question}")
    assert (
        "Question: {target}?\nGold target: {predicted_answer}\nPredicted answer: %(expression1)s {question}"
        in (text)
    )
    assert text.endswith('Just return the letters "A", "B", or "C", with no text around it.')
    assert "Expression 1: 50%\n    Expression 2: {x}" in equality.render("", "50%", "{x}")
    messages = judge_messages(grader, "Q?", "Paris", "paris")
    assert messages == [{"role": "user", "content": grader.render("Q?", "Paris", "paris")}]


def test_prompt_per_dataset_and_refusal() -> None:
    assert prompt_for_dataset("triviaqa", "t").name == SIMPLEQA_GRADER
    assert prompt_for_dataset("simpleqa", "t").name == SIMPLEQA_GRADER
    assert prompt_for_dataset("math", "t").name == MATH_EQUIVALENCE
    with pytest.raises(ValueError, match="no prompt for task 'capcal_gsm8k'"):
        prompt_for_dataset("gsm8k", "capcal_gsm8k")


# ---------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    ("raw", "grade"),
    [
        ("A", "A"), ("a", "A"), (" **A** \n", "A"), ("A.", "A"), ("(B)", "B"), ("C: NOT_ATTEMPTED", "C"),
        ("Grade: A", "A"), ("CORRECT", "A"), ("incorrect", "B"), ("NOT ATTEMPTED", "C"), ('"B"', "B"),
        ("<think>maybe B... or A</think>\nA", "A"),
        ("<|channel|>analysis<|message|>x<|channel|>final<|message|>C", "C"),
        # the thinking part ends at the LAST marker: a trace that mentions the marker, or thinks twice
        ("<think>end it with </think> then grade</think>\nB", "B"),
        ("<think>A?</think><think>no</think>B", "B"),
        ("<|channel|>analysis<|message|>say <|channel|>final<|message|>A<|channel|>final<|message|>B", "B"),
        ("A: INCORRECT", None), ("BANANA", None), ("A or B", None), ("A\nB", None), ("", None), ("   ", None),
        ("The answer is A", None), ("<think>A", None), ("D", None), ("AA", None), ("A" * 10_000, None),
        ("Ａ", None), ("A\u200b", None), ("\x00A", None), ("CORRECT INCORRECT", None), (None, None),
    ],
)  # fmt: skip
def test_grader_verdicts_are_read_strictly(raw: str | None, grade: str | None) -> None:
    verdict = parse_verdict(SIMPLEQA_GRADER, raw)
    assert verdict.grade == grade
    assert verdict.correct == (None if grade is None else int(grade == "A"))


@pytest.mark.parametrize(
    ("raw", "grade"),
    [
        ("Yes", "Yes"), ("yes.", "Yes"), ("NO", "No"), ("**No**", "No"), ("<think>no</think> Yes", "Yes"),
        ("<think>write </think> Yes? or</think> No", "No"),
        ("eyes", None), ("Yes, no", None), ("I cannot say yes", None), ("Yes\nNo", None), ("", None),
        ("A", None),
    ],
)  # fmt: skip
def test_equivalence_verdicts_are_read_strictly(raw: str, grade: str | None) -> None:
    verdict = parse_verdict(MATH_EQUIVALENCE, raw)
    assert verdict.grade == grade
    assert verdict.correct == (None if grade is None else int(grade == "Yes"))


def test_unknown_prompt_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown judge prompt"):
        parse_verdict("other", "A")


# ---------------------------------------------------------------- a stand-in server (no model)

_GRADER_FIELDS = re.compile(r"Gold target: (.*)\nPredicted answer: (.*)\n```\n\nGrade the predicted")
_EQUALITY_FIELDS = re.compile(r"Expression 1: (.*)\n    Expression 2: (.*)$")


class StandInJudge:
    """An OpenAI-compatible chat-completions server that grades by comparing the gold and the predicted
    answer as lower-cased text. ``garbage``: predicted answers it answers with prose; ``flaky``: answers
    whose first request gets HTTP 500; ``down``: answers whose requests always get HTTP 503."""

    def __init__(self) -> None:
        self.garbage: set[str] = set()
        self.flaky: set[str] = set()
        self.down: set[str] = set()
        self.requests: Counter = Counter()  # predicted answer -> requests
        self.authorizations: set[str] = set()
        self.payloads: list[dict] = []
        self._server = ThreadedApp()
        self.base_url = f"http://127.0.0.1:{self._server.port}/v1"

    def __enter__(self) -> StandInJudge:
        from aiohttp import web

        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._server.start(app)
        return self

    def __exit__(self, *exc_info) -> None:
        self._server.stop()

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    async def _models(self, request):
        from aiohttp import web

        return web.json_response({"object": "list", "data": [{"id": "stand-in-judge", "object": "model"}]})

    async def _chat(self, request):
        from aiohttp import web

        payload = await request.json()
        self.payloads.append(payload)
        self.authorizations.add(request.headers.get("Authorization", ""))
        content = payload["messages"][-1]["content"]
        grader = _GRADER_FIELDS.search(content)
        gold, answer = (grader or _EQUALITY_FIELDS.search(content)).groups()
        self.requests[answer] += 1
        if answer in self.down:
            return web.Response(status=503, text=f"overloaded (echo: {request.headers.get('Authorization')})")
        if answer in self.flaky and self.requests[answer] == 1:
            return web.Response(status=500, text="try again")
        same = gold.strip().lower() == answer.strip().lower()
        text = ("A" if same else "B") if grader else ("Yes" if same else "No")
        if answer in self.garbage:
            text = "Well, it could be A or B."
        return web.json_response(
            {"id": "x", "object": "chat.completion", "model": payload["model"],
             "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                          "finish_reason": "stop"}]}
        )  # fmt: skip


@pytest.fixture
def judge_server():
    with StandInJudge() as server:
        yield server


def _item(task: str, qid: str, gold: str, answer: str | None, index: int = 0) -> CheckItem:
    """An item whose response states ``answer`` as the task's checker reads it (None: an empty response)."""
    doc = {"question_text": f"question {qid}?", "gold_answer": gold}
    if answer is None:
        response = ""
    elif task.startswith(("capcal_math", "capcal_gsm8k", "capcal_aime")):  # a boxed answer
        response = f"So the answer is \\boxed{{{answer}}}."
    else:
        response = f"... {answer}"
    return CheckItem(task, qid, doc, response, answer, gold, f"question {qid}?", (gold,), index)


def _items() -> list[CheckItem]:
    return [
        _item("capcal_triviaqa", "q1", "Paris", "paris"),
        _item("capcal_triviaqa", "q1", "Paris", "paris", 1),  # the same prompt: asked once
        _item("capcal_triviaqa", "q1", "Paris", "Lyon", 2),
        _item("capcal_triviaqa", "q2", "Blue", None),  # no extracted answer: incorrect, not sent
        _item("capcal_simpleqa", "q3", "1969", "1969"),
        _item("capcal_triviaqa", "q4", "Nile", "the river"),  # the stand-in answers with prose
        _item("capcal_math500", "q5", "\\frac{3}{2}", "\\frac{3}{2}"),
        _item("capcal_math500", "q5", "\\frac{3}{2}", "1.5", 1),
    ]


def _checker(server: StandInJudge, tmp_path: Path, **options) -> JudgeChecker:
    options = {"api_key_env": KEY_ENV, "cache_path": tmp_path / "judge.sqlite", "retry_base_delay": 0.01,
               "num_concurrent": 4, **options}  # fmt: skip
    return JudgeChecker(server.base_url, **options)


def test_rules_decide_non_answers_before_the_judge_sees_them(tmp_path) -> None:
    """Issue 34: the judge graded "True" and "correct." as CORRECT. A cascade: no answer, or a non-answer
    (a verdict word, a refusal) that is not the gold, is incorrect without a request; the answer judged is
    the one the installed checker extracts (an echoed question leaves none). No server runs here: a request
    would fail."""
    question = "Which river flows through Cairo?"
    doc = {"question_text": question, "gold_answer": "Nile"}
    responses = ["True", "correct.", "\\boxed{Yes}", "I don't know.", question, ""]
    items = [
        CheckItem("capcal_triviaqa", "q", doc, response, "stale", "Nile", question, ("Nile",), index)
        for index, response in enumerate(responses)
    ]
    checker = JudgeChecker("http://127.0.0.1:9/v1", model="judge", cache=False, max_retries=0)
    verdicts = checker.check(items)
    assert [v.correct for v in verdicts] == [0] * len(items) and all(v.raw is None for v in verdicts)
    assert [v.extracted_answer for v in verdicts] == ["True", "correct", "Yes", "I don't know", None, None]
    assert checker.counts == Counter(refused=4, not_sent=2)
    assert is_non_answer("True", "Nile") and is_non_answer("  ", "Nile") and not is_non_answer("Nile", "Nile")
    assert not is_non_answer("Yes", "yes") and not is_non_answer("The Nile", "Nile")  # the gold is no refusal


def test_checker_verdicts_raw_outputs_and_counts(judge_server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.garbage.add("the river")
    judge_server.flaky.add("Lyon")  # retried
    checker = _checker(judge_server, tmp_path)
    assert checker.judge_model == "stand-in-judge" and checker.version == JUDGE_VERSION
    assert checker.supports("capcal_triviaqa") and checker.supports("capcal_math500")
    assert not checker.supports("capcal_gsm8k") and not checker.supports("capcal_mmlu")
    verdicts = checker.check(_items())
    assert [v.correct for v in verdicts] == [1, 1, 0, 0, 1, None, 1, 0]
    assert [v.raw for v in verdicts] == ["A", "A", "B", None, "A", "Well, it could be A or B.", "Yes", "No"]
    assert verdicts[3].extracted_answer is None and verdicts[2].extracted_answer == "Lyon"
    assert checker.counts == Counter(judged=7, not_sent=1, unparseable=1)
    # 6 distinct prompts, one retry; the paper's sampling settings and a seed per request
    assert (
        judge_server.total == 7 and judge_server.requests["paris"] == 1 and judge_server.requests["Lyon"] == 2
    )
    assert checker.client.stats["retries"] == 1
    assert {(p["temperature"], p["top_p"]) for p in judge_server.payloads} == {(1.0, 1.0)}
    assert all(isinstance(p["seed"], int) for p in judge_server.payloads)
    assert judge_server.authorizations == {f"Bearer {SECRET}"}


def test_a_rerun_reads_the_cache_and_sends_nothing(judge_server, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    first = _checker(judge_server, tmp_path).check(_items())
    sent = judge_server.total
    again = _checker(judge_server, tmp_path).check(_items())
    assert again == first
    assert judge_server.total == sent  # counted at the server: no new request
    other = _checker(judge_server, tmp_path, temperature=0.0).check(_items()[:1])  # another setting: asked
    assert other[0].correct == 1 and judge_server.total == sent + 1


def test_requests_are_sent_in_chunks_with_the_same_verdicts(judge_server, tmp_path, monkeypatch) -> None:
    import analysis.judge.client as client

    whole = _checker(judge_server, tmp_path / "whole").check(_items())
    monkeypatch.setattr(client, "CHUNK", 2)
    judge_server.down.add("1969")  # a failure in one chunk does not stop the later chunks
    with pytest.raises(APIRequestsFailed, match="1 of 6 requests"):
        _checker(judge_server, tmp_path / "chunked", max_retries=0).check(_items())
    judge_server.down.clear()
    assert _checker(judge_server, tmp_path / "chunked").check(_items()) == whole


def test_an_interrupted_run_resumes_with_only_the_missing_requests(
    judge_server, tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.down.add("1969")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(APIRequestsFailed) as failed:
        _checker(judge_server, tmp_path, max_retries=2).check(_items())
    report = str(failed.value)
    assert "1 of 6 requests" in report and "To resume, re-run the same command" in report
    assert "HTTP 503" in report
    assert judge_server.requests["1969"] == 3  # first attempt + 2 retries
    before = Counter(judge_server.requests)
    judge_server.down.clear()
    verdicts = _checker(judge_server, tmp_path).check(_items())
    assert verdicts[4].correct == 1
    assert judge_server.requests - before == Counter({"1969": 1})  # only the missing one was asked
    # the key never shows: not in the failure report (the server echoed it), the logs or the cache file
    assert SECRET not in report and "[API key]" in report
    assert SECRET not in caplog.text
    cache = tmp_path / "judge.sqlite"
    assert SECRET.encode() not in cache.read_bytes()
    with sqlite3.connect(cache) as connection:
        values = [row[0] for row in connection.execute("SELECT value FROM samples")]
    assert sorted(values) == sorted(["A", "B", "A", "B", "Yes", "No"])  # raw outputs, nothing else


def test_a_second_failing_ask_reports_what_it_received_and_where_it_is_cached(
    judge_server, tmp_path, monkeypatch
) -> None:
    """The failure report of a client's second ``ask`` counts only the samples received by that ask (not
    those of the first) and names the cache file the finished ones are in."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    checker = _checker(judge_server, tmp_path, max_retries=0)
    checker.check(_items()[:1])  # one sample received, and cached
    judge_server.down.add("1969")
    with pytest.raises(APIRequestsFailed) as failed:
        checker.check(_items())
    # 6 distinct prompts: "paris" from the cache, 5 asked, of which "1969" failed: 4 received now
    cache = (tmp_path / "judge.sqlite").resolve()
    assert f"Finished: 5 of 6 samples (1 read from the cache, 4 received now), all cached in {cache}." in str(
        failed.value
    )


def test_the_default_cache_is_the_judge_folder_of_capcal_home(tmp_path, monkeypatch) -> None:
    """Without ``cache_path`` the judge's cache is ``$CAPCAL_HOME/cache/judge/samples.sqlite`` (not another
    backend's folder); ``cache=False`` opens none."""
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path))
    client = JudgeClient("http://127.0.0.1:9/v1", "judge-m")
    assert client.cache is not None
    assert client.cache.path == (tmp_path / "cache" / "judge" / "samples.sqlite").resolve()
    assert JudgeClient("http://127.0.0.1:9/v1", "judge-m", cache=False).cache is None


def test_close_closes_the_cache_and_is_harmless_without_one(tmp_path) -> None:
    """``close`` closes the cache's connection (a leaked one keeps the SQLite file open) and does nothing for
    a client without a cache (not an AttributeError on None)."""
    client = JudgeClient("http://127.0.0.1:9/v1", "judge-m", cache_path=tmp_path / "judge.sqlite")
    assert client.cache is not None and client.cache.get("key") == {}
    client.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        client.cache.get("key")
    JudgeClient("http://127.0.0.1:9/v1", "judge-m", cache=False).close()


def test_credentials_in_the_url_are_refused_without_echoing_them(tmp_path) -> None:
    with pytest.raises(ValueError, match="api_key_env") as refused:
        JudgeClient(f"http://user:{SECRET}@127.0.0.1:9/v1", "m", cache_path=tmp_path / "c.sqlite")
    assert SECRET not in str(refused.value)
    with pytest.raises(ValueError, match="query parameter 'api_key'") as refused:
        JudgeClient(f"http://127.0.0.1:9/v1?api_key={SECRET}", "m", cache_path=tmp_path / "c.sqlite")
    assert SECRET not in str(refused.value)
    assert chat_completions_url("http://h/v1/") == "http://h/v1/chat/completions"
    assert chat_completions_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


def test_client_defaults_settings_stats_and_payload() -> None:
    """The client's public defaults (5 retries backing off from 1 s up to 60 s, 300 s timeout, 8 at once, the
    paper's temperature and top_p), the settings sent (``max_tokens`` only when given, as an int), the stats
    it counts from zero, and each request's payload: its seed is the first 8 hex digits of the request key
    below 2**31, so a server that honours seeds gets the same seed for the same request in every release. No
    server: ``model`` is given and nothing is sent."""
    client = JudgeClient("http://127.0.0.1:9/v1", "judge-m", cache=False)
    assert client.retry == RetryPolicy(max_retries=5, base_delay=1.0, max_delay=60.0)
    assert (client.timeout, client.concurrency, client.seed, client.cache) == (300.0, 8, 0, None)
    assert client.settings == {"temperature": 1.0, "top_p": 1.0}
    assert client.stats == {
        "prompts": 0, "cached": 0, "requests_sent": 0, "samples_received": 0, "retries": 0,
        "retries_by_cause": {}, "failed_requests": 0,
    }  # fmt: skip
    request = JudgeRequest(prompt_for_dataset("triviaqa", "t"), "Q?", "Paris", "paris")
    messages = judge_messages(request.prompt, "Q?", "Paris", "paris")
    key = "12345678" + "9" * 56
    assert client.payload(request, key) == {
        "model": "judge-m", "messages": messages, "temperature": 1.0, "top_p": 1.0, "seed": 0x12345678,
    }  # fmt: skip
    assert client.payload(request, "f" * 64)["seed"] == 2**31 - 1  # 0xffffffff below 2**31
    sized = JudgeClient(
        "http://127.0.0.1:9/v1", "judge-m", cache=False, max_tokens=16.0, temperature=0, seed=None,
        retry_base_delay=0.5, retry_max_delay=4, max_retries=2,
    )  # fmt: skip
    assert sized.retry == RetryPolicy(max_retries=2, base_delay=0.5, max_delay=4.0)
    assert sized.settings == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 16}
    assert isinstance(sized.settings["max_tokens"], int)
    assert sized.payload(request, key) == {
        "model": "judge-m", "messages": messages, "temperature": 0.0, "top_p": 1.0, "max_tokens": 16,
    }  # fmt: skip
    # the cache key's fields, each under its name: a renamed field re-asks the judge for every request
    # cached before; a dropped one gives requests that differ in it one key
    template = hashlib.sha256(request.prompt.template.encode("utf-8")).hexdigest()
    assert client.request_identity(request) == {
        "kind": "judge-chat", "url": "http://127.0.0.1:9/v1/chat/completions", "model": "judge-m",
        "prompt": request.prompt.name, "template": template, "question": "Q?", "gold": "Paris",
        "answer": "paris", "settings": {"temperature": 1.0, "top_p": 1.0}, "seed": 0,
    }  # fmt: skip
    assert sized.request_identity(request)["settings"] == sized.settings
    assert sized.request_identity(request)["seed"] is None


def test_message_content_is_text_or_null() -> None:
    """A choice's content: its text, "" for null (the server generated nothing), anything else refused (the
    transport retries it as an unreadable response) instead of being passed on as a verdict."""
    assert _content({"choices": [{"message": {"content": "A"}}]}) == ["A"]
    assert _content({"choices": [{"message": {"content": None}}]}) == [""]
    for content in (42, ["A"], {"text": "A"}):
        with pytest.raises(ValueError, match=f"message content is {type(content).__name__}, not text"):
            _content({"choices": [{"message": {"content": content}}]})


def test_progress_bar_retry_log_and_stats_name_the_judge(
    judge_server, tmp_path, monkeypatch, capsys, caplog
) -> None:
    """``progress`` reaches the transport (a bar on stderr named after the judge; none without it); a retry's
    log line names the judge; the stats count the prompts, attempts and retries by cause."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    judge_server.flaky.add("Lyon")  # its first request gets HTTP 500: one retry
    caplog.set_level(logging.INFO)
    quiet = _checker(judge_server, tmp_path / "quiet")
    assert quiet.progress is False
    quiet.check(_items())
    assert "judge requests" not in capsys.readouterr().err
    retries = [record.getMessage() for record in caplog.records if "request failed" in record.getMessage()]
    assert retries == ["capcal judge: request failed (HTTP 500: try again); retry 1 of 5 in 0.0 s"]
    assert quiet.client.stats == {
        "prompts": 6, "cached": 0, "requests_sent": 7, "samples_received": 6, "retries": 1,
        "retries_by_cause": {"http_500": 1}, "failed_requests": 0,
    }  # fmt: skip
    shown = _checker(judge_server, tmp_path / "shown", progress=True)
    assert shown.progress is True
    shown.check(_items())
    assert "capcal judge: judge requests: 100%" in capsys.readouterr().err


def test_a_judge_item_without_question_or_gold_is_an_error(judge_server, tmp_path) -> None:
    item = CheckItem("capcal_triviaqa", "q9", {}, "x", "x", None)
    with pytest.raises(ValueError, match="capcal_triviaqa q9: the judge needs the question text"):
        _checker(judge_server, tmp_path).check([item])
    with pytest.raises(ValueError, match="no prompt for task 'capcal_gsm8k'"):
        _checker(judge_server, tmp_path).check([_item("capcal_gsm8k", "q1", "4", "4")])


# ---------------------------------------------------------------- agreement from a rescored run


def _rescored_file(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "samples_capcal_triviaqa_2026-11-23T18-00-00.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


RESCORE = {
    "checker": "judge", "checker_version": JUDGE_VERSION, "judge_model": "stand-in-judge",
    "source_run": {"samples_file": "/runs/source/samples_capcal_triviaqa_1.jsonl", "run_id": "1"},
    "counts": {"responses": 9, "unparseable_verdicts": 1, "questions_left_out": 1, "left_out_ids": ["q4"]},
}  # fmt: skip


def test_agreement_counts_kappa_and_grades(tmp_path) -> None:
    records = [
        {"source_correctness": [1, 1, 0], "correctness": [1, 1, 0], "checker_outputs": ["A", "A", "B"]},
        {"source_correctness": [0, 0], "correctness": [0, 1], "checker_outputs": [None, "A"]},
        {"source_correctness": [1, 0], "correctness": [0, 0], "checker_outputs": ["C", "B"]},
    ]
    agreement = rescore_agreement(_rescored_file(tmp_path, records), RESCORE, "capcal_triviaqa")
    assert agreement.confusion.tolist() == [[3, 1], [1, 2]]  # [rule][judge]
    assert agreement.responses == 7 and agreement.questions == 3
    # p_o = 5/7, p_e = (4*4 + 3*3)/49 = 25/49
    assert agreement.kappa == pytest.approx((5 / 7 - 25 / 49) / (1 - 25 / 49))
    assert agreement.grades == Counter({(1, "A"): 2, (0, "B"): 2, (0, NOT_SENT): 1, (0, "A"): 1, (1, "C"): 1})
    assert (agreement.unparseable_verdicts, agreement.questions_left_out) == (1, 1)
    assert agreement.left_out_ids == ["q4"]
    assert agreement.source == "run 1 (/runs/source/samples_capcal_triviaqa_1.jsonl)"
    section = judge_agreement_section(agreement, "/models/SmolLM2-135M-Instruct")
    assert section.title == "Judge vs rule agreement · SmolLM2-135M-Instruct · capcal_triviaqa"
    # the interval resamples questions: each question's counts, as capcal_metrics.bootstrap_ci resamples them
    assert agreement.question_confusions.tolist() == [[[1, 0], [0, 2]], [[1, 1], [0, 0]], [[1, 0], [1, 0]]]
    counts = agreement.question_confusions.reshape(3, 4)
    expected = bootstrap_ci(pooled_kappa, counts, n_resamples=1000, seed=0)
    assert agreement.kappa_interval() == expected and expected.low < agreement.kappa < expected.high
    assert section.facts["Cohen's kappa"] == (
        f"{agreement.kappa:.3f} [{expected.low:.3f}, {expected.high:.3f}] (95% bootstrap over questions)"
    )
    assert section.facts["unparseable verdicts"] == 1
    seeded = bootstrap_ci(pooled_kappa, counts, n_resamples=50, seed=7)  # another seed, another interval
    assert agreement.kappa_text(50, seed=7) == (
        f"{agreement.kappa:.3f} [{seeded.low:.3f}, {seeded.high:.3f}] (95% bootstrap over questions)"
    )
    assert agreement.kappa_text(50, seed=7) != agreement.kappa_text(50, seed=0)
    confusion = section.tables[0][1]
    assert confusion.iloc[:, 1:].to_numpy().tolist() == [[2, 1, 3], [1, 3, 4], [3, 4, 7]]
    grades = section.tables[1][1]
    assert list(grades.columns) == ["rule label (source run)", "A", "B", "C", NOT_SENT]


def test_kappa_interval_defaults_to_1000_resamples_from_seed_0(tmp_path) -> None:
    """``kappa_interval()`` and ``kappa_text()`` use 1000 resamples from seed 0 by default: on 12 questions
    the percentiles take enough distinct values that 1001 resamples give another interval."""
    records = [
        {
            "source_correctness": [(i + j) % 2 for j in range(3)],
            "correctness": [(i * j + i // 3) % 2 for j in range(3)],
        }
        for i in range(12)
    ]
    agreement = rescore_agreement(_rescored_file(tmp_path, records), RESCORE, "capcal_triviaqa")
    counts = agreement.question_confusions.reshape(12, 4)
    expected = bootstrap_ci(pooled_kappa, counts, n_resamples=1000, seed=0)
    # the data tell the two apart (3 questions, as above, give the same interval for both)
    assert expected != bootstrap_ci(pooled_kappa, counts, n_resamples=1001, seed=0)
    assert agreement.kappa_interval() == expected
    assert agreement.kappa_text() == (
        f"{agreement.kappa:.3f} [{expected.low:.3f}, {expected.high:.3f}] (95% bootstrap over questions)"
    )


def test_agreement_provenance_is_read_from_capcal_rescore_with_its_defaults(tmp_path) -> None:
    """What the section names comes from ``capcal_rescore`` as recorded (another checker version, a source
    run path); without it: the judge's version for a judge run, "" otherwise (never "None"), no source; a
    ``left_out_ids`` that is not a list is no list of ids (not its characters)."""
    path = _rescored_file(tmp_path, [{"source_correctness": [1, 0], "correctness": [1, 1]}])
    recorded = {
        "checker": "judge", "checker_version": "judge v0 (an older release)", "judge_model": "m",
        "source_run": "/runs/source", "counts": {"left_out_ids": "q4", "questions_left_out": 1},
    }  # fmt: skip

    def named(recorded: dict) -> tuple:
        got = rescore_agreement(path, recorded, "capcal_triviaqa")
        return got.checker, got.checker_version, got.judge_model, got.source, got.left_out_ids

    assert named(recorded) == ("judge", "judge v0 (an older release)", "m", "/runs/source", [])
    assert named({"checker": "judge"}) == ("judge", JUDGE_VERSION, None, "", [])
    assert named({"checker": "exact"}) == ("exact", "", None, "", [])
    ids = rescore_agreement(path, {"counts": {"left_out_ids": list(range(12))}}, "capcal_triviaqa")
    assert ids.left_out_ids == [str(i) for i in range(10)]  # the first 10, as text


def test_agreement_refuses_a_malformed_record_naming_file_and_line(tmp_path) -> None:
    good = {"source_correctness": [1], "correctness": [1], "checker_outputs": ["A"]}
    bad_length = {"source_correctness": [1, 0], "correctness": [1], "checker_outputs": ["A"]}
    path = _rescored_file(tmp_path, [good, bad_length])
    with pytest.raises(ValueError, match=rf"{re.escape(path.name)}:2: .*one entry per response"):
        rescore_agreement(path, RESCORE, "capcal_triviaqa")
    path = _rescored_file(tmp_path, [{"source_correctness": [0.5], "correctness": [1]}])
    with pytest.raises(ValueError, match=":1: source_correctness must be a list of 0/1"):
        rescore_agreement(path, RESCORE, "capcal_triviaqa")


def test_agreement_without_question_counts_keeps_kappa_with_an_undefined_interval(tmp_path) -> None:
    """Without per-question counts (none recorded) the interval has no bounds but its estimate is still the
    pooled kappa, not a missing value."""
    records = [
        {"source_correctness": [1, 1, 0], "correctness": [1, 0, 0]},
        {"source_correctness": [0], "correctness": [0]},
    ]
    agreement = rescore_agreement(_rescored_file(tmp_path, records), RESCORE, "capcal_triviaqa")
    for missing in (None, np.zeros((0, 2, 2), dtype=int)):
        interval = dataclasses.replace(agreement, question_confusions=missing).kappa_interval()
        assert interval.estimate == agreement.kappa == pytest.approx(0.5)  # p_o 3/4, p_e 1/2
        assert np.isnan(interval.low) and np.isnan(interval.high)


def test_agreement_of_one_label_only_says_kappa_is_undefined(tmp_path) -> None:
    path = _rescored_file(tmp_path, [{"source_correctness": [0, 0], "correctness": [0, 0]}])
    agreement = rescore_agreement(
        path, {**RESCORE, "checker": "exact", "judge_model": None}, "capcal_triviaqa"
    )
    assert np.isnan(agreement.kappa) and agreement.kappa_text().startswith("undefined")
    section = judge_agreement_section(agreement, "m")
    assert section.title.startswith("Rescored vs source labels") and len(section.tables) == 1


def test_rescore_with_the_judge_and_the_report_section(
    judge_server, tmp_path, monkeypatch, shared_data
) -> None:
    """``rescore(..., "judge")`` on real TriviaQA questions with written responses
    (evaluation/test_rescore.py's run), judged by the stand-in; the report's agreement section matches sklearn
    on the rescored labels."""
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    from analysis.evaluation.rescore import rescore
    from analysis.report.build import ReportOptions, build_report

    sys.path.insert(0, str(Path(__file__).resolve().parent / "evaluation"))
    from test_rescore import TASK, write_trivia_run

    monkeypatch.setenv(KEY_ENV, SECRET)
    run = write_trivia_run(tmp_path / "run", shared_data)
    result = rescore(
        run,
        "judge",
        base_url=judge_server.base_url,
        api_key_env=KEY_ENV,
        cache_path=tmp_path / "judge.sqlite",
    )
    assert result.judge_model == "stand-in-judge" and result.runs[0].unparseable_verdicts == 0
    records = [json.loads(line) for line in result.runs[0].samples_path.read_text().splitlines()]
    rule = [label for record in records for label in record["source_correctness"]]
    judge = [label for record in records for label in record["correctness"]]
    assert 0 < sum(judge) < sum(rule) < len(rule)  # "<gold> indeed" is alias-correct, not judged correct
    provenance = json.loads(result.runs[0].results_path.read_text())["capcal_rescore"]
    agreement = rescore_agreement(result.runs[0].samples_path, provenance, TASK)
    assert agreement.confusion.tolist() == confusion_matrix(rule, judge, labels=[0, 1]).tolist()
    assert agreement.kappa == pytest.approx(cohen_kappa_score(rule, judge), abs=1e-12)
    files = build_report([run], tmp_path / "report", options=ReportOptions(n_resamples=20))
    markdown = files.markdown.read_text(encoding="utf-8")
    assert re.search(rf"## Judge vs rule agreement · \S+ · {TASK}", markdown)
    assert f"Cohen's kappa: {agreement.kappa:.3f}" in markdown
    assert SECRET not in markdown and SECRET not in files.html.read_text(encoding="utf-8")


# ---------------------------------------------------------------- end to end: a real vllm serve of SmolLM2

E2E_TASK, E2E_LIMIT, E2E_REPEATS = "capcal_triviaqa", 6, 2


@pytest.fixture(scope="module")
def triviaqa_run(tmp_path_factory, smollm2_path: Path) -> Path:
    """A real TriviaQA sampling run of SmolLM2 (capcal-hf, bundled data, 6 questions x 2 samples)."""
    from analysis.evaluation import evaluate

    output = tmp_path_factory.mktemp("triviaqa_run")
    evaluate(
        "capcal-hf",
        E2E_TASK,
        model_args={"pretrained": str(smollm2_path), "sample_cache": False},
        repeats=E2E_REPEATS,
        limit=E2E_LIMIT,
        data_dir="bundled",
        output_path=output,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs={"max_gen_toks": 16},
        batch_size=8,
        random_seed=7,
        numpy_random_seed=7,
        torch_random_seed=7,
        fewshot_random_seed=7,
    )
    return output


@pytest.fixture
def judge_url(smollm2_server: str):
    """The session's real ``vllm serve`` of SmolLM2 (tests/conftest.py), behind a proxy of this test's own
    (``FaultInjectingProxy``, injecting nothing) that counts the requests it passes on: other tests may be
    using the server at the same time, so the server's own counters cannot tell this test's requests apart."""
    from local_server import FaultInjectingProxy

    with FaultInjectingProxy(smollm2_server) as proxy:
        yield proxy


def _rescore_arguments(run: Path, base_url: str, output: Path, cache: Path) -> list[str]:
    """``capcal rescore``'s arguments (run in a child of ``forked_cli``). Temperature 0 and one token:
    SmolLM2 answers with its grade letter and then goes on listing the grades ("A: CORRECT\nB: IN..."),
    which the strict parser refuses (the stand-in tests cover unreadable verdicts)."""
    return [
        "rescore", str(run), "--checker", "judge", "--base_url", base_url, "--model", "smollm2",
        "--api_key_env", KEY_ENV, "--cache_path", str(cache), "--output", str(output),
        "--num_concurrent", "4", "--max_tokens", "1", "--temperature", "0", "--max_retries", "2",
        "--timeout", "600",
    ]  # fmt: skip


@pytest.mark.slow
def test_rescore_with_the_judge_against_a_real_vllm_server(
    triviaqa_run, judge_url, tmp_path, forked_cli
) -> None:
    import os

    from analysis.report.build import ReportOptions, build_report

    env = {**os.environ, KEY_ENV: SECRET, "OMP_NUM_THREADS": "1"}
    cache = tmp_path / "judge.sqlite"
    proxy = judge_url
    first = forked_cli.capcal(
        _rescore_arguments(triviaqa_run, proxy.base_url, tmp_path / "rescored", cache), tmp_path, 1500, env
    )
    assert first.returncode == 0, first.stderr[-4000:]
    asked = len(proxy.forwarded)
    assert sum(proxy.answered.values()) == asked  # every request answered (status 200) at its first attempt
    source = [
        json.loads(line) for line in next(triviaqa_run.rglob("samples_*.jsonl")).read_text().splitlines()
    ]
    results_file = next((tmp_path / "rescored").rglob("results_*.json"))
    provenance = json.loads(results_file.read_text())["capcal_rescore"]
    counts = provenance["counts"]
    assert provenance["checker"] == "judge" and provenance["judge_model"] == "smollm2"
    assert provenance["checker_version"] == JUDGE_VERSION
    # the verdict counts add up: every response checked; questions written + left out = the source's
    assert counts["responses"] == E2E_LIMIT * E2E_REPEATS == sum(len(r["resps"][0]) for r in source)
    assert counts["questions"] + counts["questions_left_out"] == E2E_LIMIT
    assert counts["questions_left_out"] <= counts["unparseable_verdicts"] <= counts["responses"]
    distinct = {
        (r["doc"]["question_text"], a) for r in source for a in r["extracted_answers"] if a and a.strip()
    }
    assert 0 < asked == len(distinct)  # one request per distinct (question, extracted answer)
    samples_file = next((tmp_path / "rescored").rglob("samples_*.jsonl"))
    agreement = rescore_agreement(samples_file, provenance, E2E_TASK)
    assert agreement.responses == counts["responses"] - E2E_REPEATS * counts["questions_left_out"]
    assert sum(agreement.grades.values()) == agreement.responses
    assert agreement.unparseable_verdicts == counts["unparseable_verdicts"]
    print(
        f"judge agreement ({E2E_TASK}, SmolLM2 judging SmolLM2): confusion [rule][judge] "
        f"{agreement.confusion.tolist()}, kappa {agreement.kappa_text()}, grades {dict(agreement.grades)}, "
        f"unparseable verdicts {counts['unparseable_verdicts']} of {counts['responses']}, questions left out "
        f"{counts['questions_left_out']} of {E2E_LIMIT}"
    )

    # resume: the same command again asks the server nothing (everything is in the cache)
    again = forked_cli.capcal(
        _rescore_arguments(triviaqa_run, proxy.base_url, tmp_path / "again", cache), tmp_path, 600, env
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(proxy.forwarded) == asked
    rerun = next((tmp_path / "again").rglob("samples_*.jsonl")).read_text()
    assert [json.loads(x)["correctness"] for x in rerun.splitlines()] == [
        json.loads(x)["correctness"] for x in samples_file.read_text().splitlines()
    ]

    # the report shows the agreement section; the key is in no output
    files = build_report([tmp_path / "rescored"], tmp_path / "report", options=ReportOptions(n_resamples=50))
    markdown = files.markdown.read_text(encoding="utf-8")
    assert re.search(rf"Judge vs rule agreement · \S+ · {E2E_TASK}", markdown) and "Cohen's kappa" in markdown
    outputs = [first.stdout, first.stderr, again.stdout, again.stderr, cache.read_bytes().decode("latin-1")]
    outputs += [p.read_text(encoding="utf-8", errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert not [text for text in outputs if SECRET in text]
