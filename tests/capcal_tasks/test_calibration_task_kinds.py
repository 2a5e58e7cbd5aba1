"""Tests by kind (issue 49, point 2) of capcal_tasks.calibration_task: ``CalibrationColumns`` mixed into a
small hand-built host (no lm-eval task, no data), so every field it reads, every keyword it passes on and
every boundary it documents shows. Expected values are hand constants; P(True) is worked out in the test."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from capcal_tasks import calibration_task
from capcal_tasks.calibration_columns import COLUMNS, STDERR_DOES_NOT_COVER, value_without_standard_error
from capcal_tasks.calibration_task import (
    PTRUE_CHOICES,
    CalibrationColumns,
    RequestIndex,
    _positive_integer,
    column_metric_list,
    ptrue_delimiter,
)


def _base_mean(items):
    return sum(items) / len(items)


class _Base:
    """Stands for lm-eval's ConfigurableTask: records what the mixin passes on."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(
            task="toy_calibration", repeats=3, generation_kwargs={"until": ["Q:"], "temperature": 0.7}
        )
        self.set_calls: list[tuple] = []
        self.seen_rendering: list[Any] = []
        self._instances = []
        self._filters = []
        self._metric_fn_list = {"toy": None}

    def set_config(self, key, value, update=False):
        self.set_calls.append((key, value, update))
        if key == "repeats":
            self.config.repeats = value

    def dump_config(self):
        return {"task": self.config.task}

    def aggregation(self):
        return {"expected_accuracy": _base_mean, "ptrue_brier": _base_mean}

    def build_all_requests(self, **kwargs):
        self.seen_rendering.append(self._rendering)
        self.built_with = kwargs


class _Host(CalibrationColumns, _Base):
    def __init__(self, verbalized_kwargs=None, metadata=None, unavailable=None) -> None:
        _Base.__init__(self)
        self._init_calibration(verbalized_kwargs, metadata or {}, unavailable)
        self.sampling_calls: list[tuple] = []

    def _question_sampling(self, doc, responses):
        self.sampling_calls.append((doc["question"], list(responses)))
        labels = [int(r == doc["gold"]) for r in responses]
        return labels, [r or None for r in responses], {"extra_of": doc["question"]}

    def _ptrue_context(self, doc, rendering):
        return f"ptrue[{doc['question']}|{sorted(rendering.items())}]", doc.get("gen_prefix")

    def _verbalized_context(self, doc, rendering):
        return f"verbalized[{doc['question']}|{sorted(rendering.items())}]"


VERBALIZED = {"until": ["</s>"], "temperature": 1.0, "max_gen_toks": 64}


# --- column_metric_list, ptrue_delimiter, _positive_integer -----------------------------------------------


def test_column_metric_list_has_one_mean_entry_per_column_with_its_own_direction():
    entries = column_metric_list()
    assert [entry["metric"] for entry in entries] == [column.name for column in COLUMNS]
    assert {entry["aggregation"] for entry in entries} == {"mean"}
    by_name = {entry["metric"]: entry["higher_is_better"] for entry in entries}
    # hand-picked directions: accuracy and AUROC up, Brier and ECE down
    assert by_name["expected_accuracy"] is True
    assert by_name["ptrue_auroc"] is True
    assert by_name["ptrue_brier"] is False
    assert by_name["consistency_ece"] is False
    assert by_name["verbalized_parse_failure_rate"] is False


@pytest.mark.parametrize(
    ("apply_chat_template", "gen_prefix", "expected"),
    [
        (False, None, " "),  # plain prompt
        (False, "Answer: ", " "),  # plain prompt, a prefix changes nothing
        (True, None, ""),  # chat template's generation prompt
        (True, "", ""),  # an empty prefix is no prefix
        (True, "Answer: ", ""),  # a prefix ending in white space
        (True, "Answer:\n", ""),
        (True, "Answer:", " "),  # a prefix not ending in white space
    ],
)
def test_ptrue_delimiter_follows_lm_evals_multiple_choice_rule(apply_chat_template, gen_prefix, expected):
    assert ptrue_delimiter(apply_chat_template, gen_prefix) == expected


def test_positive_integer_accepts_one_and_refuses_zero_with_the_whole_message():
    assert _positive_integer(1, "t: metadata repeats") == 1
    assert _positive_integer("12", "t: metadata repeats") == 12
    for bad in (0, "0", True, 2.5, "-3", "x"):
        with pytest.raises(ValueError) as raised:
            _positive_integer(bad, "t: metadata repeats")
        assert str(raised.value) == f"t: metadata repeats must be a positive integer, got {bad!r}"


# --- state: _init_calibration, repeats, set_config, dump_config -------------------------------------------


def test_repeats_two_is_accepted_and_one_refused_with_the_whole_message():
    host = _Host()
    host._check_repeats(2)
    for bad in (1, 0, None):
        with pytest.raises(ValueError) as raised:
            host._check_repeats(bad)
        assert str(raised.value) == (
            f"toy_calibration: repeats must be >= 2 (k samples per question), got {bad}"
        )
    host.set_config("repeats", 5)
    assert host.config.repeats == 5
    with pytest.raises(ValueError, match="got 1$"):
        host.set_config("repeats", 1)
    assert host.config.repeats == 5  # refused before lm-eval's set_config


def test_set_config_passes_key_value_and_update_on_and_updates_the_verbalized_generation_only_on_update():
    host = _Host(VERBALIZED)
    host.set_config("generation_kwargs", {"max_gen_toks": 7}, update=True)
    assert host.set_calls == [("generation_kwargs", {"max_gen_toks": 7}, True)]
    assert host._verbalized_kwargs == {"until": ["</s>"], "temperature": 1.0, "max_gen_toks": 7}
    host.set_config("generation_kwargs", {"max_gen_toks": 9}, update=False)  # a replacement: not merged
    assert host.set_calls[-1] == ("generation_kwargs", {"max_gen_toks": 9}, False)
    assert host._verbalized_kwargs["max_gen_toks"] == 7
    host.set_config("fewshot_config", {"max_gen_toks": 11}, update=True)  # another key
    assert host._verbalized_kwargs["max_gen_toks"] == 7
    assert VERBALIZED["max_gen_toks"] == 64  # the caller's mapping is copied, not updated


def test_dump_config_adds_the_verbalized_generation_and_after_scoring_the_bookkeeping():
    host = _Host(VERBALIZED)
    assert host.dump_config() == {"task": "toy_calibration", "verbalized_generation_kwargs": VERBALIZED}
    host._bookkeeping = {"samples_per_question": 3}
    assert host.dump_config()["capcal_calibration"] == {"samples_per_question": 3}
    assert _Host().dump_config() == {"task": "toy_calibration"}  # no verbalized request


def test_metadata_ptrue_is_read_and_a_bad_value_names_the_task():
    assert _Host(metadata={"ptrue": "off"})._with_ptrue is False
    assert _Host(metadata={"ptrue": "yes"})._with_ptrue is True
    assert _Host(metadata={})._with_ptrue is True
    with pytest.raises(ValueError) as raised:
        _Host(metadata={"ptrue": "maybe"})
    assert str(raised.value).startswith("toy_calibration: metadata ptrue: not a boolean: 'maybe' (use one of")


# --- build_all_requests and the model probe ---------------------------------------------------------------


class _NoLoglikelihoods:
    def loglikelihood(self, requests):
        raise NotImplementedError

    def apply_chat_template(self, history):
        return ""


class _WithLoglikelihoods(_NoLoglikelihoods):
    def loglikelihood(self, requests):
        return []


def test_build_all_requests_refuses_two_ranks_and_accepts_one_with_the_whole_message():
    host = _Host()
    host.build_all_requests(world_size=1, rank=0)
    with pytest.raises(ValueError) as raised:
        host.build_all_requests(world_size=2, rank=0)
    assert str(raised.value) == (
        "toy_calibration: the calibration columns need all questions in one process; run it with a single "
        "rank (world_size 1)"
    )


def test_build_all_requests_renders_with_its_own_settings_and_forgets_them_afterwards():
    host = _Host()
    host._items, host._bookkeeping = {1: {}}, {"old": 1}
    template = _WithLoglikelihoods().apply_chat_template
    host.build_all_requests(
        limit=2, system_instruction="Be brief.", apply_chat_template=True, fewshot_as_multiturn=False,
        chat_template=template, rank=0, world_size=1,
    )  # fmt: skip
    assert host.seen_rendering == [
        {
            "system_instruction": "Be brief.",
            "apply_chat_template": True,
            "fewshot_as_multiturn": False,
            "chat_template": template,
        }
    ]
    assert host.built_with["limit"] == 2 and host.built_with["rank"] == 0
    assert host._rendering is None and host._items is None and host._bookkeeping is None


def test_a_model_without_loglikelihoods_turns_ptrue_off_unless_metadata_says(caplog):
    host = _Host()
    host.build_all_requests(chat_template=_NoLoglikelihoods().apply_chat_template)
    assert host._with_ptrue is False
    assert caplog.messages == [
        "toy_calibration: the model (_NoLoglikelihoods) gives no log-likelihoods: P(True) is not requested "
        "and the ptrue_* columns are NaN"
    ]
    host.build_all_requests(chat_template=_WithLoglikelihoods().apply_chat_template)
    assert host._with_ptrue is True  # state of the earlier build does not outlive it
    host.build_all_requests(chat_template=None)
    assert host._with_ptrue is True
    forced = _Host(metadata={"ptrue": True})
    forced.build_all_requests(chat_template=_NoLoglikelihoods().apply_chat_template)
    assert forced._with_ptrue is True
    off = _Host(metadata={"ptrue": False})
    off.build_all_requests(chat_template=_WithLoglikelihoods().apply_chat_template)
    assert off._with_ptrue is False


# --- construct_requests -----------------------------------------------------------------------------------


DOC = {"question": "q7", "gold": "42", "gen_prefix": None}


def test_construct_requests_builds_sampling_yes_no_and_verbalized_with_their_own_fields():
    host = _Host(VERBALIZED)
    requests = host.construct_requests(DOC, "CTX", metadata=("toy_calibration", 7, 99))
    assert [(r.request_type, r.idx, r.repeats, r.doc_id, r.task_name) for r in requests] == [
        ("generate_until", RequestIndex.SAMPLING, 3, 7, "toy_calibration"),
        ("loglikelihood", RequestIndex.PTRUE_YES, 1, 7, "toy_calibration"),
        ("loglikelihood", RequestIndex.PTRUE_NO, 1, 7, "toy_calibration"),
        ("generate_until", RequestIndex.VERBALIZED, 1, 7, "toy_calibration"),
    ]
    outside = "[('apply_chat_template', False), ('chat_template', None)]"
    assert requests[0].arguments == ("CTX", {"until": ["Q:"], "temperature": 0.7})
    assert requests[1].arguments == (f"ptrue[q7|{outside}]", " Yes")
    assert requests[2].arguments == (f"ptrue[q7|{outside}]", " No")
    assert requests[3].arguments == (f"verbalized[q7|{outside}]", VERBALIZED)
    assert all(r.doc is DOC for r in requests)
    # the settings are copies: a model that changes them changes neither the task's nor the next request's
    requests[0].arguments[1]["until"].append("X")
    requests[3].arguments[1]["until"].append("X")
    assert host.config.generation_kwargs["until"] == ["Q:"] and host._verbalized_kwargs["until"] == ["</s>"]


def test_construct_requests_outside_a_build_uses_the_chat_settings_given_and_passes_other_keywords_on():
    host = _Host(VERBALIZED)
    template = _WithLoglikelihoods().apply_chat_template
    requests = host.construct_requests(
        DOC, "CTX", apply_chat_template=True, chat_template=template, metadata=("toy_calibration", 4, 1)
    )
    rendering = sorted({"apply_chat_template": True, "chat_template": template}.items())
    assert requests[1].arguments == (f"ptrue[q7|{rendering}]", "Yes")  # chat template: no delimiter
    assert requests[3].arguments[0] == f"verbalized[q7|{rendering}]"
    # a gen_prefix not ending in white space brings the delimiter back
    prefixed = host.construct_requests({**DOC, "gen_prefix": "A:"}, "CTX", apply_chat_template=True)
    assert [r.arguments[1] for r in prefixed[1:3]] == [" Yes", " No"]
    # without lm-eval's metadata: the task's name, no doc id
    (sampling, *_) = host.construct_requests(DOC, "CTX")
    assert (sampling.task_name, sampling.doc_id, sampling.repeats) == ("toy_calibration", None, 3)
    # any other keyword reaches every Instance
    passed = host.construct_requests(DOC, "CTX", filtered_resps={"given": ["r"]})
    assert [r.filtered_resps for r in passed] == [{"given": ["r"]}] * 4


def test_construct_requests_inside_a_build_renders_with_the_builds_settings():
    host = _Host(VERBALIZED)
    host._rendering = {"system_instruction": "S", "apply_chat_template": True}
    requests = host.construct_requests(DOC, "CTX", apply_chat_template=False)
    rendering = sorted(host._rendering.items())
    assert requests[1].arguments == (f"ptrue[q7|{rendering}]", " Yes")  # delimiter: this request's flag
    assert requests[3].arguments[0] == f"verbalized[q7|{rendering}]"


def test_construct_requests_leaves_out_ptrue_when_off_and_verbalized_when_not_configured():
    off = _Host(VERBALIZED, metadata={"ptrue": False})
    assert [r.idx for r in off.construct_requests(DOC, "CTX")] == [0, 3]
    no_verbalized = _Host(None)
    assert [r.idx for r in no_verbalized.construct_requests(DOC, "CTX")] == [0, 1, 2]
    assert PTRUE_CHOICES == ("Yes", "No")


# --- apply_filters, aggregation, process_results ----------------------------------------------------------


class _Ensemble:
    def __init__(self, name: str) -> None:
        self.name = name
        self.applied: list = []

    def apply(self, instances):
        self.applied.append([i.idx for i in instances])
        for instance in instances:
            instance.filtered_resps[self.name] = [f"{self.name}:{r}" for r in instance.resps]


def _instances(host: _Host, docs: dict[int, dict], responses: dict[int, dict[int, Any]]):
    """Each doc's requests (doc ids as given), with responses by doc id and idx."""
    instances = []
    for doc_id, doc in docs.items():
        for request in host.construct_requests(doc, f"ctx{doc_id}", metadata=("toy_calibration", doc_id, 3)):
            request.resps = responses[doc_id][request.idx]
            instances.append(request)
    return instances


def test_apply_filters_runs_each_pipeline_on_the_sampling_requests_only():
    host = _Host(VERBALIZED)
    host._instances = _instances(
        host,
        {0: DOC},
        {0: {0: ["a", "b", "c"], 1: [(-0.5, False)], 2: [(-1.5, True)], 3: ["\\boxed{0.4}"]}},
    )
    first, second = _Ensemble("keep"), _Ensemble("other")
    host._filters = [first, second]
    host.apply_filters()
    assert first.applied == [[0]] and second.applied == [[0]]
    by_idx = {i.idx: i for i in host._instances}
    assert by_idx[0].filtered_resps == {
        "keep": ["keep:a", "keep:b", "keep:c"],
        "other": ["other:a", "other:b", "other:c"],
    }
    for idx, resps in ((1, [(-0.5, False)]), (2, [(-1.5, True)]), (3, ["\\boxed{0.4}"])):
        assert by_idx[idx].filtered_resps == {"keep": resps, "other": resps}


def test_aggregation_swaps_in_the_mean_without_stderr_for_the_undefined_columns_only():
    host = _Host()
    assert host.aggregation() == {"expected_accuracy": _base_mean, "ptrue_brier": _base_mean}
    host._bookkeeping = {"stderr_undefined": {"ptrue_brier": "one question"}}
    assert host.aggregation() == {
        "expected_accuracy": _base_mean,
        "ptrue_brier": value_without_standard_error,
    }


def _p_true(yes: float, no: float) -> float:
    return math.exp(yes) / (math.exp(yes) + math.exp(no))


def test_process_results_builds_every_question_once_from_its_own_requests(monkeypatch):
    """Questions in doc-id order (given out of order), each from its own sampling, Yes, No and verbalized
    responses; calibration_columns gets the task's name and unavailable sources; the bookkeeping fields come
    from the table's fields of the same name."""
    seen: dict[str, Any] = {}

    def fake_columns(questions, task, unavailable):
        seen.update(questions=list(questions), task=task, unavailable=unavailable)
        return SimpleNamespace(
            rows=[{"column": 10.0 + index} for index in range(len(questions))],
            samples_per_question=3,
            ptrue_requested="PTRUE_REQUESTED",
            undefined={"u": "undefined"},
            left_out={"l": "left out"},
            stderr_undefined={"s": "no stderr"},
        )

    monkeypatch.setattr(calibration_task, "calibration_columns", fake_columns)
    host = _Host(VERBALIZED, unavailable={"verbalized": "not asked"})
    docs = {5: {"question": "q5", "gold": "keep:7"}, 2: {"question": "q2", "gold": "keep:8"}}
    responses = {
        5: {0: ["7", "8", ""], 1: [(-0.25, True)], 2: [(-2.0, False)], 3: ["so \\boxed{0.3}"]},
        2: {0: ["8", "8", "9"], 1: [(-3.0, False)], 2: [(-0.5, True)], 3: ["no number"]},
    }
    host._instances = _instances(host, docs, responses)
    host._filters = [_Ensemble("keep")]
    host.apply_filters()
    sampling = {i.doc_id: i for i in host._instances if i.idx == RequestIndex.SAMPLING}
    second = host.process_results(docs[5], [sampling[5].filtered_resps["keep"]])
    first = host.process_results(docs[2], [sampling[2].filtered_resps["keep"]])
    assert first == {"column": 10.0, "extra_of": "q2"} and second == {"column": 11.0, "extra_of": "q5"}
    assert host.sampling_calls == [
        ("q2", ["keep:8", "keep:8", "keep:9"]),
        ("q5", ["keep:7", "keep:8", "keep:"]),
    ]  # once per question, at the first call
    q2, q5 = seen["questions"]
    assert (list(q2.correctness), list(q2.extracted_answers)) == ([1, 1, 0], ["keep:8", "keep:8", "keep:9"])
    assert (list(q5.correctness), list(q5.extracted_answers)) == ([1, 0, 0], ["keep:7", "keep:8", "keep:"])
    assert q2.p_true == pytest.approx(_p_true(-3.0, -0.5)) and q5.p_true == pytest.approx(
        _p_true(-0.25, -2.0)
    )
    assert q2.verbalized is None and q5.verbalized == pytest.approx(0.3)
    assert seen["task"] == "toy_calibration" and seen["unavailable"] == {"verbalized": "not asked"}
    assert host.dump_config()["capcal_calibration"] == {
        "samples_per_question": 3,
        "ptrue_requested": "PTRUE_REQUESTED",
        "verbalized_requested": True,
        "undefined_columns": {"u": "undefined"},
        "left_out_columns": {"l": "left out"},
        "stderr_undefined": {"s": "no stderr"},
        "stderr_does_not_cover": dict(STDERR_DOES_NOT_COVER),
    }
    assert host.aggregation()["s"] is value_without_standard_error
    # a list that is not one of the task's own sampling responses (equal, not the same object) is refused
    with pytest.raises(ValueError) as raised:
        host.process_results(docs[2], [list(sampling[2].filtered_resps["keep"])])
    assert str(raised.value) == (
        "toy_calibration: process_results was given responses that are not this run's; the calibration "
        "columns are computed by lm-eval's evaluator from the task's own instances"
    )


def test_process_results_without_ptrue_or_verbalized_requests_passes_none(monkeypatch):
    seen: dict[str, Any] = {}

    def fake_columns(questions, task, unavailable):
        seen["questions"] = list(questions)
        return SimpleNamespace(
            rows=[{}], samples_per_question=2, ptrue_requested=False, undefined={}, left_out={},
            stderr_undefined={},
        )  # fmt: skip

    monkeypatch.setattr(calibration_task, "calibration_columns", fake_columns)
    host = _Host(None, metadata={"ptrue": False})
    host._instances = _instances(host, {0: {"question": "q0", "gold": "keep:1"}}, {0: {0: ["1", "2"]}})
    host._filters = [_Ensemble("keep")]
    host.apply_filters()
    host.process_results({}, [host._instances[0].filtered_resps["keep"]])
    (question,) = seen["questions"]
    assert question.p_true is None and question.verbalized is None
    assert host.dump_config()["capcal_calibration"]["verbalized_requested"] is False


def test_predict_only_bypasses_the_columns():
    host = _Host()
    host._metric_fn_list = {"bypass": None}
    assert host.process_results({}, [["x"]]) == {"bypass": None}
    assert host._items is None


# --- CalibrationTask's own hooks (without lm-eval's __init__) ---------------------------------------------


def _score(doc, results):
    (responses,) = results
    return {
        "correctness": [int(r == doc["answer"]) for r in responses],
        "extracted_answers": [f"x{r}" for r in responses],
        "expected_accuracy": "not read",
    }


NEEDS_VERBALIZED = "toy_cal: the config needs verbalized_generation_kwargs (a mapping)"
NEEDS_SCORING = "process_results must be the sampling task's scoring function"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"task": "toy_cal", "process_results": _score}, NEEDS_VERBALIZED),
        ({"task": "toy_cal", "process_results": _score,
          "verbalized_generation_kwargs": [1]}, NEEDS_VERBALIZED),
        ({"task": "toy_cal", "verbalized_generation_kwargs": {}}, f"toy_cal: {NEEDS_SCORING}"),
        ({"process_results": "no", "verbalized_generation_kwargs": {}}, f"calibration task: {NEEDS_SCORING}"),
        (
            {"task": "toy_cal", "process_results": _score, "verbalized_generation_kwargs": {},
             "metadata": {"repeats": 0}},
            "toy_cal: metadata repeats must be a positive integer, got 0",
        ),
    ],
)  # fmt: skip
def test_calibration_task_refuses_a_config_without_its_parts_with_the_whole_message(config, message):
    with pytest.raises(ValueError) as raised:
        calibration_task.CalibrationTask(config)
    assert str(raised.value) == message


def test_calibration_task_reads_labels_and_answers_from_the_checkers_own_keys_and_its_gen_prefix():
    task = object.__new__(calibration_task.CalibrationTask)
    task._score_sampling = _score
    labels, classes, extra = task._question_sampling({"answer": "5"}, ["5", "6"])
    assert (labels, classes, extra) == ([1, 0], ["x5", "x6"], {})
    task._config = SimpleNamespace(gen_prefix="GP")
    task._confidence_context = lambda doc, prompt, rendering: (doc["question"], prompt, rendering)
    context, prefix = task._ptrue_context({"question": "q"}, {"r": 1})
    assert prefix == "GP"
    assert context == ("q", calibration_task.ptrue.capability_prompt, {"r": 1})
    assert task._verbalized_context({"question": "q"}, {"r": 2}) == (
        "q",
        calibration_task.verbalized.capability_prompt,
        {"r": 2},
    )


# --- CalibrationTask on an inline two-row task (lm-eval's own rendering, no data folder) ------------------

PTRUE_PROMPT = (
    "Question: one plus one?\n\nAre you able to answer the question correctly?\n"
    "Answer with only a single word: Yes or No."
)


def _rows(**_kwargs):
    import datasets

    rows = [
        {"question": "one plus one", "question_text": "one plus one?", "answer": "2"},
        {"question": "two plus two", "question_text": "two plus two?", "answer": "4"},
    ]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def _inline(**overrides) -> calibration_task.CalibrationTask:
    from capcal_tasks.sampling import keep_all_responses

    config = {
        "task": "toy_calibration",
        "custom_dataset": _rows,
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "Q: {{question}}\nA:",
        "doc_to_target": "{{answer}}",
        "repeats": 3,
        "generation_kwargs": {"until": ["Q:"], "do_sample": True, "temperature": 0.7},
        "filter_list": [
            {"name": "keep", "filter": [{"function": "custom", "filter_fn": keep_all_responses}]}
        ],
        "process_results": _score,
        "verbalized_generation_kwargs": {"until": [], "max_gen_toks": 64},
        "metadata": {"version": 1.0},
    }
    config.update(overrides)
    return calibration_task.CalibrationTask(config)


def test_an_inline_calibration_task_renders_each_prompt_from_its_own_field():
    task = _inline(metadata={"version": 1.0, "repeats": 4})
    assert task.config.repeats == 4  # metadata's repeats over the YAML's 3
    assert task.config.metric_list == column_metric_list()
    task.build_all_requests(limit=1, rank=0, world_size=1, system_instruction="Be brief.")
    requests = sorted(task.instances, key=lambda instance: instance.idx)
    assert requests[0].arguments[0] == "Be brief.Q: one plus one\nA:"  # doc_to_text: the question field
    assert requests[0].repeats == 4
    assert requests[1].arguments == (
        f"Be brief.{PTRUE_PROMPT}",
        " Yes",
    )  # question_text, the system instruction
    assert requests[3].arguments[0].startswith("Be brief.Question: one plus one?\n\nHow likely are you")
    assert requests[3].arguments[1] == {"until": [], "max_gen_toks": 64}
    # after the build, doc_to_text is the sampling prompt again
    assert task._confidence_prompt is None and task.doc_to_text(task.eval_docs[0]) == "Q: one plus one\nA:"


def test_the_confidence_prompt_is_dropped_even_when_rendering_fails_and_an_explicit_template_wins():
    task = _inline()

    def failing(doc):
        raise KeyError("question_text")

    with pytest.raises(KeyError):
        task._confidence_context(task.eval_docs[0], failing, {})
    assert task._confidence_prompt is None
    assert task.doc_to_text(task.eval_docs[1]) == "Q: two plus two\nA:"
    task._confidence_prompt = lambda doc: "confidence"
    assert task.doc_to_text(task.eval_docs[1]) == "confidence"
    assert task.doc_to_text(task.eval_docs[1], "{{answer}}") == "4"  # an explicit template is lm-eval's


def test_an_inline_calibration_task_needs_one_filter_and_generate_until():
    from capcal_tasks.sampling import keep_all_responses

    keep = {"function": "custom", "filter_fn": keep_all_responses}
    two = [{"name": "a", "filter": [keep]}, {"name": "b", "filter": [keep]}]
    with pytest.raises(ValueError) as raised:
        _inline(filter_list=two)
    assert str(raised.value) == "toy_calibration: expected a generate_until task with one (keep-all) filter"
