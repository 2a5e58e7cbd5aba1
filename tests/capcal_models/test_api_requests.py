"""The requests capcal-api builds for a call (no server: nothing is sent). The real-server checks of the same
paths (n = k, a server that returns fewer choices, resume from the cache) are in test_api.py."""

from __future__ import annotations

from lm_eval.api.instance import Instance

from capcal_models.api_requests import (
    RequestOrigin,
    context_groups,
    follow_up_jobs,
    request_identity,
    sampling_jobs,
)
from capcal_models.sample_cache import request_key
from capcal_models.sampling_plan import RepeatGroup
from capcal_models.seeding import sample_seed


def _parse(response: dict) -> list[str]:
    return [choice["text"] for choice in response["choices"]]


def _origin(run_seed: int = 7) -> RequestOrigin:
    group = RepeatGroup("capcal_gsm8k", "capcal_gsm8k/q1", 0, "prompt", {}, positions=list(range(8)))
    return RequestOrigin(group, run_seed, key="k")


def test_missing_repeats_go_in_n_requests_so_that_repeat_r_has_seed_s_plus_r() -> None:
    """One request per run of consecutive missing repeats, seeded s + its first repeat (s: repeat 0's seed;
    vLLM gives choice i seed + i), so the samples do not depend on how the repeats were split."""
    origin = _origin()
    payload = {"prompt": "prompt", "max_tokens": 8, "temperature": 1.0}
    s = sample_seed(7, "capcal_gsm8k", "capcal_gsm8k/q1", 0, 0)
    [whole] = list(sampling_jobs(origin, payload, list(range(8)), supports_n=True, parse=_parse))
    assert whole.repeats == list(range(8)) and (whole.payload["n"], whole.payload["seed"]) == (8, s)
    first, job = list(sampling_jobs(origin, payload, [2, 5, 6], supports_n=True, parse=_parse))
    assert first.repeats == [2] and "n" not in first.payload and first.payload["seed"] == s + 2
    assert job.repeats == [5, 6] and job.payload["n"] == 2 and job.payload["seed"] == s + 5
    assert (job.task, job.question_id) == ("capcal_gsm8k", "capcal_gsm8k/q1")
    assert job.tag is origin and job.parse is _parse
    assert payload == {"prompt": "prompt", "max_tokens": 8, "temperature": 1.0}  # the caller's is not changed


def test_without_n_each_repeat_has_its_own_request_and_seed() -> None:
    origin = _origin()
    jobs = list(sampling_jobs(origin, {"prompt": "p"}, [0, 3], supports_n=False, parse=_parse))
    assert [job.repeats for job in jobs] == [[0], [3]]
    assert all("n" not in job.payload for job in jobs)
    seeds = [job.payload["seed"] for job in jobs]
    assert seeds == [origin.group.seed(7, 0), origin.group.seed(7, 3)] and seeds[0] != seeds[1]
    # one missing repeat needs no n even where the server supports it; its seed is then s + 4
    [single] = list(sampling_jobs(origin, {"prompt": "p"}, [4], supports_n=True, parse=_parse))
    assert "n" not in single.payload and single.payload["seed"] == origin.group.seed(7, 0) + 4


def test_repeats_a_response_left_out_are_asked_for_one_by_one() -> None:
    origin = _origin()
    [job] = list(sampling_jobs(origin, {"prompt": "p", "temperature": 1.0}, [1, 2, 3], True, _parse))
    follow_ups = follow_up_jobs(job, [2, 3])
    assert [f.repeats for f in follow_ups] == [[2], [3]]
    for follow_up, repeat in zip(follow_ups, [2, 3], strict=True):
        assert follow_up.payload == {"prompt": "p", "temperature": 1.0, "seed": origin.group.seed(7, repeat)}
        assert follow_up.tag is origin and follow_up.parse is _parse
    assert job.payload["n"] == 3  # the original request is left as it was


def test_the_cache_key_ignores_seed_and_n_but_not_what_the_samples_depend_on() -> None:
    group = _origin().group
    url = "http://127.0.0.1:8000/v1/completions"

    def key(payload: dict, run_seed: int = 7, kind: str = "generate", g: RepeatGroup = group) -> str:
        return request_key(request_identity("completions", url, g, payload, run_seed, kind))

    base = key({"prompt": "p", "temperature": 1.0})
    assert key({"prompt": "p", "temperature": 1.0, "seed": 3, "n": 4}) == base
    other_question = RepeatGroup("capcal_gsm8k", "capcal_gsm8k/q2", 0, "prompt", {})
    changed = [
        key({"prompt": "p", "temperature": 0.5}),
        key({"prompt": "p", "temperature": 1.0}, run_seed=8),
        key({"prompt": "p", "temperature": 1.0}, kind="first_token_logprobs"),
        key({"prompt": "p", "temperature": 1.0}, g=other_question),
    ]
    assert len({base, *changed}) == 5


def _loglikelihood_request(question: str, context: str, word: str) -> Instance:
    return Instance(
        request_type="loglikelihood",
        doc={"question_id": question},
        arguments=(context, word),
        idx=0,
        metadata=("capcal_ptrue", int(question[1:]), 1),
    )


def test_answer_words_of_one_question_and_prompt_share_one_request() -> None:
    requests = [
        _loglikelihood_request("q1", "Is it right?", " Yes"),
        _loglikelihood_request("q2", "Is it right?", " Yes"),
        _loglikelihood_request("q1", "Is it right?", " No"),
        _loglikelihood_request("q2", "Is it right?", " No"),
        _loglikelihood_request("q1", "Is it wrong?", " Yes"),
    ]
    groups = context_groups(requests)
    assert [group.positions for group in groups] == [[0, 2], [1, 3], [4]]
    assert [group.context for group in groups] == ["Is it right?", "Is it right?", "Is it wrong?"]
    assert {group.request_index for group in groups} == {0} and all(g.gen_kwargs == {} for g in groups)
    assert groups[0].question_id != groups[1].question_id
