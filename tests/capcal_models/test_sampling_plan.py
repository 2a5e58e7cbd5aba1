"""capcal_models.sampling_plan: lm-eval's cloned requests -> sampling jobs, as all three wrappers use them.

Requests are real lm-eval ``Instance`` objects cloned the way lm-eval's evaluator clones them (k references to
one instance, not necessarily adjacent); the generation settings go through lm-eval's own
``normalize_gen_kwargs``; the request-cache hook is lm-eval's ``CacheHook``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.api.model import CacheHook, hash_args

from capcal_models.sample_cache import SampleCache
from capcal_models.sampling_plan import (
    RepeatGroup,
    SamplingPlan,
    group_repeats,
    is_greedy,
    request_question_id,
    resolve_run_seed,
    setting_key,
)
from capcal_models.seeding import sample_seed
from capcal_tasks.question_id import doc_question_id

SAMPLED = {"do_sample": True, "temperature": 1.0, "until": ["\n\n"], "max_gen_toks": 16}


def _instance(doc_id: int, context: str, gen_kwargs: dict, task: str = "capcal_gsm8k", idx: int = 0):
    doc = {"question_id": f"gsm8k/q{doc_id}", "question": context}
    return Instance("generate_until", doc, (context, gen_kwargs), idx=idx, metadata=(task, doc_id, 1))


def _cloned(instances: list[Instance], k: int, interleaved: bool = False) -> list[Instance]:
    """k references to each instance: blocks of k, or (``interleaved``) one of each, k times."""
    if interleaved:
        return [instance for _ in range(k) for instance in instances]
    return [instance for instance in instances for _ in range(k)]


def _plan(requests, seed: int | None = 1234, default_temperature: float = 1.0, **kwargs) -> SamplingPlan:
    return SamplingPlan(
        requests,
        backend="test",
        model_seed=seed,
        default_max_gen_toks=kwargs.get("default_max_gen_toks", 256),
        default_temperature=default_temperature,
    )


def test_clones_are_grouped_in_repeat_order_wherever_they_are():
    instances = [_instance(i, f"Question {i}?", dict(SAMPLED)) for i in range(3)]
    requests = _cloned(instances, 4, interleaved=True)
    groups = group_repeats(requests)
    assert [group.question_id for group in groups] == ["gsm8k/q0", "gsm8k/q1", "gsm8k/q2"]
    assert [group.positions for group in groups] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    assert all(group.k == 4 and group.task == "capcal_gsm8k" for group in groups)
    # another request index, another prompt or another setting of the same question is another group
    other = [
        _instance(0, "Question 0?", dict(SAMPLED), idx=1),
        _instance(0, "Question 0, again?", dict(SAMPLED)),
        _instance(0, "Question 0?", dict(SAMPLED, temperature=0.5)),
    ]
    assert len(group_repeats(_cloned(instances[:1] + other, 2))) == 4


def test_question_ids_come_from_the_doc_else_from_the_prompt():
    request = _instance(7, "What is 2 + 2?", dict(SAMPLED))
    assert request_question_id(request) == "gsm8k/q7" == doc_question_id("capcal_gsm8k", request.doc)
    bare = Instance("generate_until", {}, ("What is 2 + 2?", {}), idx=0, metadata=("t", 0, 1))
    assert request_question_id(bare).startswith("t/prompt-")
    assert request_question_id(bare) == request_question_id(
        Instance("generate_until", {}, ("What is 2 + 2?", {}), idx=0, metadata=("t", 5, 1))
    )


def test_setting_key_ignores_key_order():
    assert setting_key({"a": 1, "b": [2]}) == setting_key({"b": [2], "a": 1})
    assert setting_key({"a": 1}) != setting_key({"a": 2})


def test_settings_are_normalised_once_per_setting(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    cool = {"do_sample": True, "temperature": 0.5, "max_tokens": 8, "until": "Q:", "seed": 7, "n": 3}
    requests = _cloned(
        [_instance(i, f"Q{i}", dict(SAMPLED)) for i in range(2)] + [_instance(2, "Q2", cool)], 3
    )
    plan = _plan(requests, seed=None)
    assert [len(setting.groups) for setting in plan.settings] == [2, 1]
    first, second = plan.settings
    assert first.until == ("\n\n",) and first.max_gen_toks == 16 and not first.greedy
    assert first.options == {"do_sample": True, "temperature": 1.0}
    assert first.normalized() == {
        "do_sample": True,
        "temperature": 1.0,
        "until": ["\n\n"],
        "max_gen_toks": 16,
    }
    # seed selects the run seed, n is dropped, max_tokens is lm-eval's alias of max_gen_toks
    assert second.run_seed == 7 and second.until == ("Q:",) and second.max_gen_toks == 8
    assert "seed" not in second.options and "n" not in second.options
    assert second.gen_kwargs == cool  # the requests' own kwargs (the key of lm-eval's request cache)
    assert "n in the generation kwargs is ignored" in caplog.text
    assert (
        _plan(_cloned([_instance(0, "Q", {"do_sample": True})], 2), default_max_gen_toks=99)
        .settings[0]
        .max_gen_toks
        == 99
    )


def test_run_seed_order_model_argument_then_gen_kwargs_then_torch(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    assert resolve_run_seed(5, None, "test") == 5
    assert resolve_run_seed(5, 7, "test") == 5 and "seed=7 in the generation kwargs is ignored" in caplog.text
    assert resolve_run_seed(None, 7, "test") == 7
    torch.manual_seed(4321)
    assert resolve_run_seed(None, None, "test") == 4321


@pytest.mark.parametrize(
    "gen_kwargs, default_temperature, greedy",
    [
        ({"do_sample": False}, 1.0, True),
        ({"do_sample": False, "temperature": 0.7}, 1.0, True),  # lm-eval sets temperature 0.0
        ({}, 1.0, True),  # do_sample unset, temperature unset: lm-eval reads 0.0 and sets do_sample=False
        ({"temperature": 0.7}, 0.0, False),
        ({"do_sample": True, "temperature": 0.0}, 1.0, True),  # temperature 0 decodes greedily everywhere
        ({"do_sample": True}, 1.0, False),  # transformers / vLLM: default temperature 1.0
        ({"do_sample": True}, 0.0, True),  # lm-eval's API payloads: temperature 0 when unset
        ({"do_sample": True, "temperature": 1e-3}, 0.0, False),
    ],
)
def test_one_greedy_rule_after_lm_evals_normalisation(gen_kwargs, default_temperature, greedy):
    plan = _plan(_cloned([_instance(0, "Q", gen_kwargs)], 3), default_temperature=default_temperature)
    (setting,) = plan.settings
    assert setting.greedy is greedy
    assert is_greedy(setting.options, default_temperature) is greedy
    assert setting.samples(setting.groups[0]) == (1 if greedy else 3)


def test_seeds_depend_on_the_question_and_repeat_not_on_the_batch():
    instances = [_instance(i, f"Q{i}", dict(SAMPLED)) for i in range(4)]
    full = _plan(_cloned(instances, 3))
    (setting,) = full.settings
    seeds = {
        (group.question_id, repeat): setting.seed(group, repeat)
        for group in setting.groups
        for repeat in range(3)
    }
    assert len(set(seeds.values())) == 12
    assert seeds[("gsm8k/q2", 1)] == sample_seed(1234, "capcal_gsm8k", "gsm8k/q2", 0, 1)
    fewer = _plan(_cloned(instances[2:0:-1], 2, interleaved=True))  # other questions, order, k
    for group in fewer.settings[0].groups:
        for repeat in range(2):
            assert fewer.settings[0].seed(group, repeat) == seeds[(group.question_id, repeat)]
    other_run = _plan(_cloned(instances, 3), seed=1).settings[0]
    assert other_run.seed(other_run.groups[0], 0) != seeds[("gsm8k/q0", 0)]


def test_cache_look_up_returns_the_needed_samples_and_the_missing_repeats(tmp_path: Path):
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put("sampled", {0: "a", 2: "c", 5: "f"})
    cache.put("greedy", {0: "g"})
    sampled = _plan(_cloned([_instance(0, "Q", dict(SAMPLED))], 4)).settings[0]
    found, missing = sampled.look_up(cache, "sampled", sampled.groups[0])
    assert found == {0: "a", 2: "c"} and missing == [1, 3]  # repeat 5 is beyond k = 4
    assert sampled.look_up(None, "sampled", sampled.groups[0]) == ({}, [0, 1, 2, 3])
    greedy = _plan(_cloned([_instance(0, "Q", {"do_sample": False})], 4)).settings[0]
    assert greedy.look_up(cache, "greedy", greedy.groups[0]) == ({0: "g"}, [])
    assert greedy.look_up(cache, "nothing", greedy.groups[0]) == ({}, [0])


def test_texts_fan_out_to_the_clone_positions():
    store: dict = {}
    hook = CacheHook(SimpleNamespace(dbdict=store))  # lm-eval's hook, writing into a dict
    instances = [_instance(0, "Q0", dict(SAMPLED)), _instance(1, "Q1", {"do_sample": False, "until": ["\n"]})]
    requests = _cloned(instances, 3, interleaved=True)
    plan = _plan(requests)
    sampled, greedy = plan.settings
    plan.fill(sampled, sampled.groups[0], ["a", "b", "c"], hook)
    assert store == {}  # sampled texts never enter lm-eval's request cache (all clones share one key)
    plan.fill(greedy, greedy.groups[0], ["g"], hook)
    assert plan.results == ["a", "g", "b", "g", "c", "g"]
    group = greedy.groups[0]
    assert store == {hash_args("generate_until", (group.context, group.gen_kwargs)): "g"}
    with pytest.raises(RuntimeError, match="2 samples for 3 clones"):
        plan.fill(sampled, sampled.groups[0], ["a", "b"])
    with pytest.raises(RuntimeError, match="greedy"):
        plan.fill(greedy, greedy.groups[0], ["g", "h"])


# --- by kind: sibling fields, boundaries, whole messages, order ---------------------------------------------


def test_a_groups_seed_passes_each_field_to_its_own_place() -> None:
    group = RepeatGroup("task-t", "question-q", 3, "ctx", {}, positions=[9, 4])
    assert group.seed(11, 5) == sample_seed(11, "task-t", "question-q", 3, 5)
    assert group.seed(11, 5) != sample_seed(11, "task-t", "question-q", 5, 3)  # index and repeat differ
    assert group.k == 2
    setting = _plan(_cloned([_instance(0, "Q", dict(SAMPLED), idx=2)], 2), seed=21).settings[0]
    assert setting.seed(setting.groups[0], 1) == sample_seed(21, "capcal_gsm8k", "gsm8k/q0", 2, 1)


def test_a_bare_requests_question_id_is_its_task_and_the_prompts_hash() -> None:
    import hashlib

    bare = Instance("generate_until", {}, ("Prompt text", {}), idx=0, metadata=("task-x", 3, 1))
    digest = hashlib.sha256(b"Prompt text").hexdigest()[:16]
    assert request_question_id(bare) == f"task-x/prompt-{digest}"
    unnamed = Instance("generate_until", {}, ("Prompt text", {}), idx=0)
    assert request_question_id(unnamed) == f"/prompt-{digest}"


def test_another_task_or_document_is_another_group_in_first_seen_order() -> None:
    a = _instance(0, "Same prompt", dict(SAMPLED))
    b = _instance(1, "Same prompt", dict(SAMPLED))  # another document, the same prompt
    c = _instance(0, "Same prompt", dict(SAMPLED), task="other_task")
    groups = group_repeats([c, a, b, a, c, b])
    assert [(group.task, group.question_id, group.positions) for group in groups] == [
        ("other_task", "gsm8k/q0", [0, 4]),
        ("capcal_gsm8k", "gsm8k/q0", [1, 3]),
        ("capcal_gsm8k", "gsm8k/q1", [2, 5]),
    ]


def test_the_run_seed_warnings_are_whole_and_an_equal_seed_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    assert resolve_run_seed(5, "5", "be") == 5 and caplog.records == []
    assert resolve_run_seed(5, 6, "be") == 5
    assert resolve_run_seed(None, "8", "be") == 8
    assert [record.getMessage() for record in caplog.records] == [
        "be: seed=6 in the generation kwargs is ignored; the model argument seed=5 is the run seed",
        "be: seed=8 in the generation kwargs is used as the run seed; each sample still gets its own seed "
        "derived from it (stock lm-eval would give all k clones this one seed)",
    ]


def test_settings_keep_first_seen_order_and_their_own_fields(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    second = {"do_sample": True, "temperature": 0.25, "max_gen_toks": 5, "n": 4}  # no until
    first = {"do_sample": True, "temperature": 0.75, "until": ["A", "B"], "max_gen_toks": 9}
    requests = [_instance(1, "Q1", first), _instance(0, "Q0", second), _instance(2, "Q2", first)]
    plan = _plan(requests, seed=3)
    assert [
        (s.until, s.max_gen_toks, s.options["temperature"], [g.question_id for g in s.groups])
        for s in plan.settings
    ] == [
        (("A", "B"), 9, 0.75, ["gsm8k/q1", "gsm8k/q2"]),
        ((), 5, 0.25, ["gsm8k/q0"]),
    ]
    assert [record.getMessage() for record in caplog.records] == [
        "test: n in the generation kwargs is ignored; n is the task's repeats"
    ]
    assert plan.results == [None, None, None]


def test_a_cached_repeat_at_k_is_not_needed(tmp_path: Path) -> None:
    cache = SampleCache(tmp_path / "samples.sqlite")
    cache.put("key", {0: "zero", 3: "three", 2: "two"})
    setting = _plan(_cloned([_instance(0, "Q", dict(SAMPLED))], 3)).settings[0]
    assert setting.look_up(cache, "key", setting.groups[0]) == ({0: "zero", 2: "two"}, [1])
    assert setting.look_up(cache, None, setting.groups[0]) == ({}, [0, 1, 2])
    cache.close()


def test_the_fill_errors_name_both_counts() -> None:
    plan = _plan(
        _cloned([_instance(0, "Q0", dict(SAMPLED)), _instance(1, "Q1", {"do_sample": False})], 3), seed=1
    )
    sampled, greedy = plan.settings
    with pytest.raises(RuntimeError) as too_few:
        plan.fill(sampled, sampled.groups[0], ["a", "b"])
    assert str(too_few.value) == "test: 2 samples for 3 clones"
    with pytest.raises(RuntimeError) as two_greedy:
        plan.fill(greedy, greedy.groups[0], ["g", "h"])
    assert str(two_greedy.value) == "test: 2 greedy texts for one question, expected 1"


def test_is_greedy_reads_an_unset_do_sample_as_sampling_and_an_unset_temperature_as_the_default() -> None:
    assert is_greedy({"temperature": 0.5}, 1.0) is False  # options without do_sample (not normalised)
    assert is_greedy({}, 0.5) is False and is_greedy({}, 0.0) is True
    assert is_greedy({"do_sample": True, "temperature": 0.0}, 0.5) is True
    assert is_greedy({"do_sample": True, "temperature": 0.5}, 0.0) is False
