"""The ``capcal_<dataset>_calibration`` tasks build, per question, exactly the requests of the separate tasks
they replace: capcal_<dataset> (k clones), capcal_<dataset>_ptrue (Yes, No) and capcal_<dataset>_verbalized,
with and without a chat template; P(True) is left out for a model without log-likelihoods."""

from __future__ import annotations

import logging

import pytest
from lm_eval.models.openai_completions import LocalChatCompletion

from capcal_models.api import CapcalChatAPI
from capcal_tasks.calibration_columns import COLUMNS
from capcal_tasks.calibration_task import CalibrationTask, RequestIndex
from capcal_tasks.relations import capcal_task_declarations
from capcal_tasks.task_manager import CapcalTaskManager

SAMPLING_TASKS = [
    "capcal_gsm8k",
    "capcal_math500",
    "capcal_aime25",
    "capcal_triviaqa",
    "capcal_simpleqa",
    "capcal_mmlu",
    "capcal_gpqa",
    "capcal_arithmetic",
]
LIMIT = 2


@pytest.fixture(autouse=True)
def local_data_dir(local_data, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))


def _load(name: str, metadata: dict | None = None):
    return CapcalTaskManager(include_defaults=False, metadata=metadata).load([name])["tasks"][name]


@pytest.fixture
def loaded(loaded_task):
    """Tasks loaded once per session (``loaded_task``; build_all_requests replaces a task's instances on
    every call)."""
    return loaded_task


def _requests(task, chat_template=None, **kwargs) -> list:
    task.build_all_requests(
        limit=LIMIT, rank=0, world_size=1, apply_chat_template=chat_template is not None,
        chat_template=chat_template, **kwargs,
    )  # fmt: skip
    return sorted(task.instances, key=lambda instance: (instance.doc_id, instance.idx))


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat_template"])
@pytest.mark.parametrize("sampling_task", SAMPLING_TASKS)
def test_requests_are_those_of_the_separate_tasks(sampling_task, chat, smollm2_chat_template, loaded):
    template = smollm2_chat_template if chat else None
    task = loaded(f"{sampling_task}_calibration")
    assert isinstance(task, CalibrationTask)
    relation = capcal_task_declarations()[f"{sampling_task}_calibration"]
    assert relation.kind == "leaderboard" and relation.has("evaluation")
    k = task.config.repeats
    assert k == loaded(sampling_task).config.repeats >= 2
    instances = _requests(task, template)
    sampling, ptrue, verbalized = (
        _requests(loaded(name), template)
        for name in (sampling_task, f"{sampling_task}_ptrue", f"{sampling_task}_verbalized")
    )
    assert len(instances) == 4 * LIMIT
    for doc_id in range(LIMIT):
        mine = [i for i in instances if i.doc_id == doc_id]
        assert [i.idx for i in mine] == [0, 1, 2, 3]
        assert [(i.request_type, i.repeats) for i in mine] == [
            ("generate_until", k), ("loglikelihood", 1), ("loglikelihood", 1), ("generate_until", 1)
        ]  # fmt: skip
        theirs = [sampling[doc_id], *ptrue[2 * doc_id : 2 * doc_id + 2], verbalized[doc_id]]
        assert [i.arguments for i in mine] == [i.arguments for i in theirs]
        assert mine[RequestIndex.PTRUE_YES].arguments[1] == ("Yes" if chat else " Yes")


def test_model_without_loglikelihoods_gets_no_ptrue_requests(caplog, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPCAL_HOME", str(tmp_path))
    chat_model = LocalChatCompletion(base_url="http://127.0.0.1:9/v1/chat/completions", model="m")
    task = _load("capcal_arithmetic_calibration")
    with caplog.at_level(logging.WARNING):
        instances = _requests(task, chat_model.apply_chat_template)
    assert [i.idx for i in instances[:2]] == [RequestIndex.SAMPLING, RequestIndex.VERBALIZED]
    assert {i.request_type for i in instances} == {"generate_until"}
    assert "gives no log-likelihoods: P(True) is not requested" in caplog.text
    # capcal's chat wrapper reads P(True) from the top log-probabilities, unless told not to
    for first_token_logprobs, expected in ((True, 4), (False, 2)):
        wrapper = CapcalChatAPI(
            base_url="http://127.0.0.1:9/v1/chat/completions", model="m", sample_cache=False,
            first_token_logprobs=first_token_logprobs,
        )  # fmt: skip
        assert len(_requests(task, wrapper.apply_chat_template)) == expected * LIMIT
    off = _load("capcal_arithmetic_calibration", {"ptrue": "false"})
    assert {i.idx for i in _requests(off)} == {RequestIndex.SAMPLING, RequestIndex.VERBALIZED}


def test_metadata_and_gen_kwargs_reach_both_generations():
    task = _load("capcal_arithmetic_calibration", {"repeats": 3, "arithmetic_per_level": 1})
    assert task.config.repeats == 3 and len(task.eval_docs) == 5
    task.set_config("generation_kwargs", {"max_gen_toks": 7}, update=True)
    sampling, *_, verbalized = _requests(task)[:4]
    assert sampling.repeats == 3
    assert sampling.arguments[1]["max_gen_toks"] == verbalized.arguments[1]["max_gen_toks"] == 7
    assert sampling.arguments[1]["temperature"] == 0.7 and verbalized.arguments[1]["temperature"] == 1.0
    assert task.dump_config()["verbalized_generation_kwargs"]["max_gen_toks"] == 7
    with pytest.raises(ValueError, match="single rank"):
        task.build_all_requests(limit=1, rank=0, world_size=2)
    with pytest.raises(ValueError, match="repeats must be a positive integer"):
        _load("capcal_arithmetic_calibration", {"repeats": "many"})
    with pytest.raises(ValueError, match="metadata ptrue: not a boolean"):
        _load("capcal_arithmetic_calibration", {"ptrue": "maybe"})


def test_the_group_holds_the_eight_tasks_and_averages_every_column():
    loaded_group = CapcalTaskManager(include_defaults=False).load(["capcal_calibration"])
    assert sorted(loaded_group["tasks"]) == sorted(f"{task}_calibration" for task in SAMPLING_TASKS)
    assert all(isinstance(task, CalibrationTask) for task in loaded_group["tasks"].values())
    (group,) = loaded_group["groups"].values()
    assert [(m.metric, m.weight_by_size) for m in group.aggregate_metric_list] == [
        (column.name, False) for column in COLUMNS
    ]
