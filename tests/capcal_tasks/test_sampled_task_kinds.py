"""Tests by kind (issue 49, point 2) of capcal_tasks.sampled_task on a small inline lm-eval task (two rows,
two pipelines, a case-blind exact_match; built in memory, no task index, no data folder): every field of the
protocol against the base task's field it comes from, the generation settings' boundaries (temperature 0 vs
above 0), each normalisation flag on its own, k = 1 vs 0, the YAML route's keys, and whole messages."""

from __future__ import annotations

import math
from types import SimpleNamespace

import datasets
import pytest
from lm_eval.api.task import ConfigurableTask

from capcal_tasks import sampled_task
from capcal_tasks.sampled_task import (
    SAMPLING_SETTINGS,
    SampledPTrueTask,
    SampledTask,
    _normaliser,
    _plain,
    _zero_one,
    config_of,
    sampling_generation_kwargs,
)
from capcal_tasks.task_admission import RefusedTask

ROWS = {
    "train": [{"q": "one plus one", "a": "2"}, {"q": "one plus two", "a": "3"}],
    "test": [{"q": "two plus two", "a": "4"}, {"q": "Name the first letter", "a": "A"}],
}


def _rows(**_kwargs) -> datasets.DatasetDict:
    return datasets.DatasetDict({split: datasets.Dataset.from_list(rows) for split, rows in ROWS.items()})


def _config(**overrides) -> dict:
    config = {
        "task": "toy",
        "custom_dataset": _rows,
        "training_split": "train",
        "test_split": "test",
        "fewshot_split": "train",
        "num_fewshot": 1,
        "output_type": "generate_until",
        "doc_to_text": "Q: {{q}}\nA:",
        "doc_to_target": "{{a}}",
        "generation_kwargs": {"until": ["Q:"], "do_sample": False, "temperature": 0.0, "top_p": 0.9},
        "filter_list": [
            {
                "name": "strict",
                "filter": [
                    {"function": "regex", "regex_pattern": "#### (\\w+)", "fallback": "[none]"},
                    {"function": "take_first"},
                ],
            },
            {
                "name": "loose",
                "filter": [{"function": "regex", "regex_pattern": "(\\w+)$"}, {"function": "take_first"}],
            },
        ],
        "metric_list": [
            {"metric": "exact_match", "aggregation": "mean", "higher_is_better": True, "ignore_case": True}
        ],
        "metadata": {"version": 3.5, "capcal_sampled_local_rows": True, "own_key": "kept"},
    }
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def base() -> ConfigurableTask:
    return ConfigurableTask(config=_config())


# --- sampling_generation_kwargs ---------------------------------------------------------------------------


def test_a_temperature_of_zero_is_greedy_and_any_temperature_above_zero_with_do_sample_samples():
    greedy, changed = sampling_generation_kwargs({"until": ["Q:"], "do_sample": True, "temperature": 0.0})
    assert greedy == {"until": ["Q:"], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    assert changed == {"temperature": [0.0, 1.0], "top_p": [None, 1.0], "top_k": [None, 0]}
    kept, none = sampling_generation_kwargs({"do_sample": True, "temperature": 0.01})
    assert kept == {"do_sample": True, "temperature": 0.01} and none == {}
    # do_sample false: greedy whatever the temperature says
    after, changed = sampling_generation_kwargs({"do_sample": False, "temperature": 0.8, "top_k": 40})
    assert after == {"do_sample": True, "temperature": 1.0, "top_k": 40, "top_p": 1.0}
    assert changed == {"do_sample": [False, True], "temperature": [0.8, 1.0], "top_p": [None, 1.0]}
    assert sampling_generation_kwargs(None) == (
        dict(SAMPLING_SETTINGS),
        {key: [None, value] for key, value in SAMPLING_SETTINGS.items()},
    )


def test_the_temperature_given_reaches_a_greedy_task_and_a_sampling_one_as_a_float():
    greedy, changed = sampling_generation_kwargs({"do_sample": False}, temperature=0)
    assert greedy["temperature"] == 0.0 and isinstance(greedy["temperature"], float)
    greedy, _ = sampling_generation_kwargs({"do_sample": False, "temperature": 0.0}, temperature=2)
    assert greedy["temperature"] == 2.0 and isinstance(greedy["temperature"], float)
    sampled, changed = sampling_generation_kwargs({"do_sample": True, "temperature": 0.6, "top_p": 0.5}, 0.3)
    assert sampled == {"do_sample": True, "temperature": 0.3, "top_p": 0.5}
    assert changed == {"temperature": [0.6, 0.3]}  # [the task's, capcal's]
    settings = {"do_sample": False}
    sampling_generation_kwargs(settings, 0.5)
    assert settings == {"do_sample": False}  # the task's own settings are not changed


# --- _normaliser, _zero_one, _plain, config_of -----------------------------------------------------------


def test_exact_match_classes_apply_each_flag_of_the_metric_entry_on_its_own():
    text = "  The Answer, 42!  "
    assert _normaliser({"metric": "exact_match"})(text) == "The Answer, 42!"
    assert _normaliser({"metric": "exact_match", "ignore_case": True})(text) == "the answer, 42!"
    assert _normaliser({"metric": "exact_match", "ignore_punctuation": True})(text) == "The Answer 42"
    assert _normaliser({"metric": "exact_match", "ignore_numbers": True})(text) == "The Answer, !"
    regexes = {"metric": "exact_match", "regexes_to_ignore": ["The ", ","]}
    assert _normaliser(regexes)(text) == "Answer 42!"
    every = {
        "metric": "exact_match",
        "regexes_to_ignore": ["Answer"],
        "ignore_case": True,
        "ignore_punctuation": True,
        "ignore_numbers": True,
    }
    assert _normaliser(every)(text) == "the"  # "answer" would stay if the regex ran after lower-casing
    # another metric: the answer stripped, nothing else
    assert _normaliser({"metric": "f1", "ignore_case": True})(text) == "The Answer, 42!"


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0, True, False])
def test_zero_one_labels_are_read_as_integers(value):
    assert _zero_one(value, "toy", "exact_match") == int(value)
    assert type(_zero_one(value, "toy", "exact_match")) is int


@pytest.mark.parametrize("value", [0.5, 2, -1, "1", None])
def test_a_label_that_is_not_zero_or_one_is_refused_naming_task_and_metric(value):
    with pytest.raises(ValueError) as raised:
        _zero_one(value, "toy_task", "my_metric")
    assert str(raised.value) == (
        f"task toy_task: its metric my_metric gave {value!r} for one response, not 0 or 1; name a 0/1 "
        "metric with --metadata correct_metric=NAME"
    )


def test_plain_turns_tuples_into_lists_and_other_objects_into_text_at_every_depth():
    assert _plain({1: (2, [3, {"x": object}]), "n": None, "b": True, "f": 0.5}) == {
        "1": [2, [3, {"x": str(object)}]],
        "n": None,
        "b": True,
        "f": 0.5,
    }


def test_config_of_reads_every_field_of_the_tasks_config(base):
    config = config_of(base)
    assert config["task"] == "toy" and config["doc_to_text"] == "Q: {{q}}\nA:"
    assert config["num_fewshot"] == 1 and config["fewshot_split"] == "train"
    assert config["custom_dataset"] is _rows  # callables kept


# --- SampledTask.__init__ ----------------------------------------------------------------------------------


def test_k_one_is_accepted_and_zero_or_a_bool_refused_with_the_whole_message(base):
    assert SampledTask(base=base, k=1).config.repeats == 1
    for bad in (0, -2, True, 2.0, None):
        with pytest.raises(ValueError) as raised:
            SampledTask(base=base, k=bad)
        assert str(raised.value) == f"k (repeats) must be a positive integer, got {bad!r}"


def test_the_protocol_records_each_field_from_its_own_source(base):
    wrapped = SampledTask(base=base, k=5, metadata={"filter": "loose", "temperature": 0.4}, name="toy_k5")
    protocol = wrapped.config.metadata["capcal_sampled"]
    assert protocol == {
        "base_task": "toy",
        "base_version": 3.5,
        "base_config": None,
        "pipeline": "loose",
        "pipeline_filters": ["regex"],
        "dropped": "take_first",
        "metric": "exact_match",
        "metric_named_by_user": False,
        "answer_classes": "filter output",
        "k": 5,
        "task_generation_kwargs": {"until": ["Q:"], "do_sample": False, "temperature": 0.0, "top_p": 0.9},
        "generation_changed": {"do_sample": [False, True], "temperature": [0.0, 0.4], "top_k": [None, 0]},
        "num_fewshot": 1,
        "fewshot_split": "train",
        "local_rows": True,
    }
    assert wrapped.config.task == "toy_k5" and wrapped.config.repeats == 5
    assert wrapped.config.generation_kwargs == {
        "until": ["Q:"], "do_sample": True, "temperature": 0.4, "top_p": 0.9, "top_k": 0
    }  # fmt: skip
    assert wrapped.config.filter_list == [
        {"name": "loose", "filter": [{"function": "regex", "regex_pattern": "(\\w+)$"}]}
    ]
    assert {
        key: wrapped.config.metadata[key] for key in wrapped.config.metadata if key != "capcal_sampled"
    } == {
        "version": 3.5,
        "own_key": "kept",
        "capcal_task": "sampling",
        "capcal_role": "evaluation",
        "capcal_calibration_tasks": [],
        "capcal_dataset": "lm_eval/toy",
    }
    # the base task is left as it was
    assert base.config.repeats == 1 and base.config.task == "toy"
    assert base.config.generation_kwargs["do_sample"] is False
    assert base.config.metadata["capcal_sampled_local_rows"] is True


@pytest.mark.parametrize(("k", "levels"), [(1, [1]), (3, [1, 2]), (4, [1, 2, 4]), (7, [1, 2, 4])])
def test_the_metric_list_holds_the_record_metrics_and_pass_at_levels_up_to_k(base, k, levels):
    wrapped = SampledTask(base=base, k=k)
    expected = [
        "expected_accuracy",
        "majority_vote_accuracy",
        "n_samples",
        *(f"pass_at_{level}" for level in levels),
        "exact_match",
    ]
    assert [entry["metric"] for entry in wrapped.config.metric_list] == expected
    assert wrapped.config.task == "toy"  # no name given: the base task's
    assert set(wrapped.aggregation()) == {*expected, "correctness", "extracted_answers"}
    assert wrapped.aggregation()["correctness"] is sampled_task.response_accuracy
    assert wrapped.aggregation()["extracted_answers"] is sampled_task.extraction_rate


def test_each_response_is_scored_by_the_base_metric_and_the_fallback_is_no_answer(base):
    wrapped = SampledTask(base=base, k=4)
    doc = base.eval_docs[1]  # gold "A"
    record = wrapped.process_results(doc, [["a", "[none]", "A", "b"]])
    assert record["correctness"] == [1, 0, 1, 0]  # exact_match ignores case
    assert record["extracted_answers"] == ["a", None, "A", "b"]  # the strict pipeline's fallback
    assert record["majority_vote_accuracy"] == 1.0  # "a" and "A" are one class: 2 votes against 1
    assert record["n_samples"] == 4 and record["expected_accuracy"] == 0.5 and record["exact_match"] == 0.5
    assert record["pass_at_2"] == pytest.approx(1 - 1 / 6)  # 1 - C(2, 2) / C(4, 2)
    # a fallback that the metric scores correct is an answer
    fallback_gold = {"q": "x", "a": "[none]"}
    assert wrapped.process_results(fallback_gold, [["[none]", "c"]])["extracted_answers"] == ["[none]", "c"]
    # the loose pipeline's regex names no fallback: lm-eval's "[invalid]" is no answer, "[none]" is one
    loose = SampledTask(base=base, k=2, metadata={"filter": "loose"})
    assert loose.process_results(doc, [["[none]", "[invalid]"]])["extracted_answers"] == ["[none]", None]
    # one answer given as a bare string is one response
    bare = wrapped.process_results(doc, ["ab"])
    assert (bare["correctness"], bare["n_samples"], bare["extracted_answers"]) == ([0], 1, ["ab"])


def test_answer_classes_read_the_admitted_metrics_entry(base):
    case_blind = SampledTask(base=base, k=2)
    assert case_blind.answer_class(" Paris ") == "paris"
    assert case_blind.answer_class(None) is None
    assert case_blind.answer_class("  ") is None  # nothing left: no vote
    exact = ConfigurableTask(
        config=_config(
            metric_list=[{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]
        )
    )
    assert SampledTask(base=exact, k=2).answer_class(" Paris ") == "Paris"


# --- process_results on a scripted base ---------------------------------------------------------------------


def _scripted(scores: dict[str, dict], metric: str = "em", base_metrics=("em", "f1")) -> SampledTask:
    """A SampledTask whose base scores answer -> record from ``scores``."""
    task = object.__new__(SampledTask)
    task.base = SimpleNamespace(
        config=SimpleNamespace(task="scripted"), process_results=lambda doc, results: scores[results[0]]
    )
    task.admission = SimpleNamespace(metric=metric, extracts=True)
    task.base_metrics = list(base_metrics)
    task._fallbacks = {"[invalid]"}
    task._answer_key = lambda answer: answer.strip()
    return task


def test_process_results_reads_the_label_from_the_admitted_metric_and_averages_each_base_metric():
    task = _scripted(
        {
            "x": {"acc": 0, "em": 1, "f1": 0.25, "other": 0},
            "y": {"acc": 1, "em": 0, "f1": 0.75, "other": 1},
            "z": {"acc": 1, "em": 1, "f1": "n/a", "other": 1},
        },
        base_metrics=("acc", "f1", "em"),
    )
    record = task.process_results({}, [["x", "y", "z"]])
    assert record["correctness"] == [1, 0, 1]  # em's, not the first base metric's
    assert record["f1"] == pytest.approx(0.5)  # (0.25 + 0.75) / 2: text is skipped
    assert record["em"] == pytest.approx(2 / 3) and record["acc"] == pytest.approx(2 / 3)
    assert "other" not in record
    none = _scripted({"x": {"em": 1}}, base_metrics=("em", "f1")).process_results({}, [["x"]])
    assert math.isnan(none["f1"])


def test_a_missing_label_is_refused_naming_the_task_the_metric_the_response_and_what_it_gave():
    task = _scripted({"x": {"em": 1, "f1": 1.0}, "y": {"f1": 0.0, "bleu": 3.0}})
    with pytest.raises(ValueError) as raised:
        task.process_results({}, [["x", "y"]])
    assert str(raised.value) == (
        "task scripted: its process_results gave no em for response 2 (it gave f1, bleu); name one with "
        "--metadata correct_metric=NAME"
    )


# --- the YAML routes ------------------------------------------------------------------------------------


def test_the_yaml_route_reads_k_then_repeats_and_passes_name_and_metadata(base, monkeypatch):
    seen = []

    def fake_base(task, metadata):
        seen.append((task, dict(metadata)))
        return base

    monkeypatch.setattr(sampled_task, "base_task_from_metadata", fake_base)
    wrapped = SampledTask(config={"task": "toy_k3", "metadata": {"base_task": "toy", "k": 3, "repeats": 9}})
    assert (wrapped.config.task, wrapped.config.repeats) == ("toy_k3", 3)
    assert seen == [("toy_k3", {"base_task": "toy", "k": 3, "repeats": 9})]
    by_repeats = SampledTask(config={"task": "toy_r2", "metadata": {"base_task": "toy", "repeats": 2}})
    assert by_repeats.config.repeats == 2
    one = SampledTask(config={"task": "toy_k1", "metadata": {"base_task": "toy", "k": 1}})
    assert one.config.repeats == 1
    for bad in (0, "3", True, None):
        with pytest.raises(RefusedTask) as raised:
            SampledTask(config={"task": "toy_bad", "metadata": {"base_task": "toy", "k": bad}})
        assert str(raised.value) == (
            f"task toy_bad: metadata.k must be the number of samples per question, got {bad!r}"
        )


def test_the_ptrue_yaml_route_asks_about_its_target_and_keeps_its_own_name(base, monkeypatch):
    seen = []

    def fake_base(task, metadata):
        seen.append(("base", task, dict(metadata)))
        return base

    def fake_ptrue(base_task, target):
        seen.append(("ptrue", base_task.config.task, target))
        return ConfigurableTask(config=_config(task=f"{target}_ptrue"))

    monkeypatch.setattr(sampled_task, "base_task_from_metadata", fake_base)
    monkeypatch.setattr(sampled_task, "ptrue_task", fake_ptrue)
    task = SampledPTrueTask(config={"task": "toy_k8_ptrue", "metadata": {"base_task": "toy"}})
    assert task.config.task == "toy_k8_ptrue"
    assert seen == [("base", "toy_k8_ptrue", {"base_task": "toy"}), ("ptrue", "toy", "toy_k8")]
    seen.clear()
    named = SampledPTrueTask(
        config={"task": "mine_ptrue", "metadata": {"base_task": "toy", "target_task": "t"}}
    )
    assert named.config.task == "mine_ptrue" and seen[-1] == ("ptrue", "toy", "t")


# --- base_task_config, build_base_task, base_task_from_metadata (a hand-built index, no lm-eval tree) -------


def _manager(tmp_path, text: str, kind: str = "TASK"):
    path = tmp_path / "toy.yaml"
    path.write_text(text, encoding="utf-8")
    entry = SimpleNamespace(kind=SimpleNamespace(name=kind), yaml_path=path)
    return SimpleNamespace(
        task_index={"toy": entry, "no_path": SimpleNamespace(kind=entry.kind, yaml_path=None)}
    )


YAML = (
    "task: toy\ntag: [t1]\ngroup: g\ntask_list: [a]\noutput_type: generate_until\n"
    "metadata:\n  version: 2.0\n  k: own\n"
)


def test_base_task_config_drops_grouping_keys_and_merges_the_metadata_given_over_the_tasks_own(tmp_path):
    manager = _manager(tmp_path, YAML)
    config = sampled_task.base_task_config("toy", manager, {"k": "given", "extra": 1})
    assert config == {
        "task": "toy",
        "output_type": "generate_until",
        "metadata": {"version": 2.0, "k": "given", "extra": 1, "config_source": str(tmp_path / "toy.yaml")},
    }
    again = sampled_task.base_task_config("toy", manager)
    assert again["metadata"] == {"version": 2.0, "k": "own", "config_source": str(tmp_path / "toy.yaml")}
    plain = _manager(tmp_path, "task: toy\nmetadata: 3\n")
    assert sampled_task.base_task_config("toy", plain)["metadata"] == {
        "_metadata": 3,
        "config_source": str(tmp_path / "toy.yaml"),
    }


@pytest.mark.parametrize(
    ("name", "kind"), [("missing", "TASK"), ("toy", "GROUP"), ("toy", "TAG"), ("no_path", "TASK")]
)
def test_base_task_config_refuses_what_is_not_a_yaml_task(tmp_path, name, kind):
    with pytest.raises(RefusedTask) as raised:
        sampled_task.base_task_config(name, _manager(tmp_path, YAML, kind))
    assert str(raised.value) == (
        "is not a task defined by a YAML file in lm-eval's index (a group, tag or inline task)"
    )
    assert sampled_task.base_task_config("toy", _manager(tmp_path, YAML, "PY_TASK"))["task"] == "toy"


def test_build_base_task_refuses_a_python_task_class(tmp_path):
    manager = _manager(tmp_path, "task: toy\nclass: some.Class\noutput_type: generate_until\n")
    with pytest.raises(RefusedTask, match="^is a Python task class"):
        sampled_task.build_base_task("toy", manager)


@pytest.mark.parametrize("base_task", [None, "", 3])
def test_a_yaml_task_without_a_base_task_name_is_refused_before_any_index_is_read(base_task):
    with pytest.raises(RefusedTask) as raised:
        sampled_task.base_task_from_metadata("toy_k4", {"base_task": base_task, "k": 4})
    assert (
        str(raised.value)
        == "task toy_k4: metadata.base_task must name the lm-eval task to sample (e.g. gsm8k)"
    )
