"""``analysis.checks.response_checks``: a task whose responses came back mostly empty or unreadable is
named, with its likely cause; a run with answers is not. Records are scored by capcal's real scorers."""

from __future__ import annotations

from analysis.checks.response_checks import (
    aggregate_notices,
    empty_response_cause,
    response_notices,
    tokenizer_source,
    unreadable_diagnosis,
)
from capcal_tasks.confidence.verbalized import process_results
from capcal_tasks.sampling import score_responses

SAMPLING = {"output_type": "generate_until", "generation_kwargs": {"max_gen_toks": 1024}}


def _sampling(responses: list[str]) -> dict:
    def extract(response: str) -> str | None:
        return response.rsplit("{", 1)[1].rstrip("}") if "\\boxed{" in response else None

    record = score_responses(responses, extract=extract, judge=lambda answer: answer == "4")
    return {"doc_id": 0, "resps": [responses], **record}


def _verbalized(response: str) -> dict:
    return {"doc_id": 0, "resps": [[response]], **process_results({}, [response])}


def test_mostly_empty_responses_of_a_chat_model_without_its_template(smollm2_path):
    samples = {"capcal_toy": [_sampling(["", " ", "\n", "\\boxed{4}"])] * 3}
    notices = response_notices(
        samples,
        {"capcal_toy": SAMPLING},
        model_args={"pretrained": str(smollm2_path)},
        chat_template_applied=False,
    )
    assert notices == [
        "task capcal_toy: 9 of 12 responses are empty; likely cause: the model has a chat template and the "
        "run did not apply it (add --apply_chat_template)"
    ]
    # the same responses with the template applied: another cause
    (applied,) = response_notices(
        samples,
        {"capcal_toy": SAMPLING},
        model_args={"pretrained": str(smollm2_path)},
        chat_template_applied=True,
    )
    assert "likely cause: generation stopped at once" in applied


def test_half_or_fewer_is_not_mostly():
    samples = {"capcal_toy": [_sampling(["", "\\boxed{4}"]), _sampling(["no idea", "\\boxed{5}"])]}
    assert response_notices(samples, {"capcal_toy": SAMPLING}) == []


def test_responses_without_an_answer_name_a_short_max_gen_toks():
    samples = {"capcal_toy": [_sampling(["Let me think step by", "First, we", "\\boxed{4}"])]}
    short = {"output_type": "generate_until", "generation_kwargs": {"max_gen_toks": 16}}
    assert response_notices(samples, {"capcal_toy": short}) == [
        "task capcal_toy: no answer could be read from 2 of 3 responses; likely cause: max_gen_toks=16 "
        "may cut the responses before their final answer (raise it)"
    ]
    (notice,) = response_notices(samples, {"capcal_toy": SAMPLING})
    assert notice.endswith("the responses do not state an answer in the form the task reads (\\boxed{...}); "
                           "look at a few with capcal analyze --responses")  # fmt: skip


def test_verbalized_confidences_that_never_parse():
    samples = {"capcal_toy_verbalized": [_verbalized("I am fairly sure."), _verbalized("\\boxed{0.8}")] * 2}
    samples["capcal_toy_verbalized"].append(_verbalized("no box"))
    (notice,) = response_notices(samples, {"capcal_toy_verbalized": SAMPLING})
    assert notice.startswith("task capcal_toy_verbalized: no confidence could be read from 3 of 5 responses")
    assert unreadable_diagnosis(SAMPLING, confidence=True)[0] in notice


def test_half_the_confidences_unparsed_is_not_mostly():
    """Exactly half of the verbalized confidences unread (2 of 4) is no notice; 3 of 4 is."""
    records = [_verbalized("\\boxed{0.8}"), _verbalized("no box")] * 2
    assert response_notices({"capcal_toy_verbalized": records}, {"capcal_toy_verbalized": SAMPLING}) == []
    records[0] = _verbalized("still no box")
    (notice,) = response_notices({"capcal_toy_verbalized": records}, {"capcal_toy_verbalized": SAMPLING})
    assert notice.startswith("task capcal_toy_verbalized: no confidence could be read from 3 of 4 responses")


def test_log_likelihood_tasks_are_not_looked_at():
    samples = {"capcal_toy_ptrue": [{"doc_id": 0, "resps": [["(-0.1, False)"], ["(-2.3, False)"]]}]}
    assert response_notices(samples, {"capcal_toy_ptrue": {"output_type": "multiple_choice"}}) == []


CHAT_TEMPLATE_CAUSE = "the model has a chat template and the run did not apply it (add --apply_chat_template)"
STOPPED_CAUSE = (
    "generation stopped at once: a stop sequence of the task's 'until' at the start of the response, or an "
    "end-of-text token (see the prompts with --write_out)"
)


def test_empty_response_causes(smollm2_path):
    """The checkpoint is the ``tokenizer`` argument, else ``pretrained``, in a dict or a recorded
    ``key=value,...`` string alike; a chat template applied, or a checkpoint without one, is not the cause."""
    assert "retries" in empty_response_cause({"model": "x"}, None, model="capcal-api")
    assert empty_response_cause("pretrained=/no/such/model", False) == STOPPED_CAUSE
    chat = str(smollm2_path)
    for model_args in (
        f"pretrained={chat}",
        f"pretrained={chat},dtype=float32",
        f"tokenizer={chat},pretrained=/no/such/model",
        {"pretrained": chat},
        {"tokenizer": chat, "pretrained": "/no/such/model"},
    ):
        assert empty_response_cause(model_args, False) == CHAT_TEMPLATE_CAUSE, model_args
        assert empty_response_cause(model_args, True) == STOPPED_CAUSE, model_args
    for model_args in (
        f"tokenizer=/no/such/model,pretrained={chat}",
        {"tokenizer": "/no/such", "pretrained": chat},
    ):
        assert empty_response_cause(model_args, False) == STOPPED_CAUSE, model_args


def test_without_logged_samples_the_aggregates_are_read():
    """The keys of a real results file (lm-eval's dummy model on capcal_arithmetic and its verbalized
    task)."""
    results = {
        "results": {
            "capcal_arithmetic": {
                "extracted_answers,all_responses": 0.0,
                "expected_accuracy,all_responses": 0.0,
            },
            "capcal_arithmetic_verbalized": {"parse_success,none": 0.25, "parse_failures,none": 3},
            "capcal_arithmetic_train": {"extracted_answers,all_responses": 0.5},
            "capcal_gsm8k": {"extracted_answers,all_responses": 0.1},  # no config: no limit to blame
            "a_group": ["not", "a", "mapping"],  # skipped, not a crash
        },
        "configs": {"capcal_arithmetic": {"generation_kwargs": {"max_gen_toks": 8}}},
    }
    assert aggregate_notices(results) == [
        "task capcal_arithmetic: an answer could be read from only 0% of the responses (empty or unreadable; "
        "--log_samples keeps them); likely cause: max_gen_toks=8 may cut the responses before their "
        "final answer (raise it)",
        "task capcal_arithmetic_verbalized: a confidence could be read from only 25% of the responses (empty "
        "or unreadable; --log_samples keeps them); likely cause: the responses do not state a confidence as "
        "\\boxed{P}; look at a few with capcal analyze --responses",
        "task capcal_gsm8k: an answer could be read from only 10% of the responses (empty or unreadable; "
        "--log_samples keeps them); likely cause: the responses do not state an answer in the form the task "
        "reads (\\boxed{...}); look at a few with capcal analyze --responses",
    ]


def test_complete_responses_without_a_box_are_not_blamed_on_max_gen_toks(smollm2_path):
    """SmolLM2's verbalized answers end on their own well before max_gen_toks=48 and never state \\boxed{P}:
    the cause is the answer's form, not the limit (issue 32: the check said "raise max_gen_toks")."""
    short = {"output_type": "generate_until", "generation_kwargs": {"max_gen_toks": 48}}
    texts = ["I am fairly sure the answer is 12.", "Confidence: high.", "The answer is 7."]
    samples = {"capcal_toy_verbalized": [_verbalized(text) for text in texts]}
    (notice,) = response_notices(
        samples, {"capcal_toy_verbalized": short}, model_args={"pretrained": str(smollm2_path)}
    )
    assert notice.endswith(
        "likely cause: the model does not state a confidence as \\boxed{P}: only 0 of the 3 responses that "
        "ended on their own before max_gen_toks=48 do, so raising the limit (0 responses reached it) is "
        "unlikely to help; look at a few with capcal analyze --responses"
    ), notice


def test_responses_that_reach_max_gen_toks_are_cut(smollm2_path):
    """Responses at least max_gen_toks tokens long (SmolLM2's tokenizer) were cut: raise it."""
    from analysis.checks.response_checks import responses_cut_by_limit

    long = "Let me work this out step by step, adding the tens first and then the units " * 3
    texts = [long, long, "\\boxed{0.5}"]
    assert responses_cut_by_limit(texts, 16, str(smollm2_path)) == [True, True, False]
    assert responses_cut_by_limit(texts, 1024, str(smollm2_path)) == [False, False, False]
    assert responses_cut_by_limit(texts, 16, "/no/such/tokenizer") is None
    # a limit that is not an integer (a bool, a string, a float, none) cannot be told, tokenizer or not
    for limit in (True, False, "16", 16.0, None):
        assert responses_cut_by_limit(texts, limit, str(smollm2_path)) is None, limit
    config = {"generation_kwargs": {"max_gen_toks": 16}}
    # the one that ended parsed: the limit is to blame
    diagnosis = unreadable_diagnosis(config, True, texts, str(smollm2_path), [False, False, True])
    assert diagnosis == ("max_gen_toks=16 cut 2 of 3 responses before their end (raise it)", True)
    # the one that ended did not parse either: the model's form, not the run
    cause, run_fault = unreadable_diagnosis(config, True, texts, str(smollm2_path), [False, False, False])
    assert not run_fault and cause.startswith(
        "the model does not state a confidence as \\boxed{P}: only 0 of the 1"
    )


def test_responses_that_mostly_end_and_parse_are_not_blamed_on_either(smollm2_path):
    """Most of the responses that ended on their own parsed, and few reached the limit: neither the model's
    form nor the limit is named; the run's settings may still be to blame (True), as when nothing can be
    counted."""
    texts = ["\\boxed{0.8}", "\\boxed{0.6}", "I am fairly sure."]
    config = {"generation_kwargs": {"max_gen_toks": 48}}
    assert unreadable_diagnosis(config, True, texts, str(smollm2_path), [True, True, False]) == (
        "3 of 3 responses end on their own before max_gen_toks=48 and some do not state a confidence as "
        "\\boxed{P}; look at a few with capcal analyze --responses",
        True,
    )
    assert unreadable_diagnosis(SAMPLING, confidence=False) == (
        "the responses do not state an answer in the form the task reads (\\boxed{...}); look at a few with "
        "capcal analyze --responses",
        True,
    )


def test_tokenizer_source_of_model_args_text_or_mapping() -> None:
    """The tokenizer folder of a run's ``model_args``: ``tokenizer`` before ``pretrained``; in the text form
    only the first "=" of an item separates name and value (a path may hold "="); None without either."""
    assert tokenizer_source("pretrained=/models/a=b,dtype=float32") == "/models/a=b"
    assert tokenizer_source("pretrained=/models/m,tokenizer=/tok/t=1") == "/tok/t=1"
    assert tokenizer_source({"pretrained": "/models/m", "tokenizer": ""}) == "/models/m"
    assert tokenizer_source("dtype=float32,trust_remote_code") is None
    assert tokenizer_source(None) is None and tokenizer_source({"pretrained": 3}) is None
