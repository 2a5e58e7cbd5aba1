"""``CapcalTaskManager``: ``repeats`` is k for every task that declares k sampled responses per question
(sampling and leaderboard tasks; a leaderboard task clones only its sampling request), and task names are
resolved and checked before any task is loaded. Graded arithmetic is generated, so no data folder is read."""

from __future__ import annotations

import pytest

from capcal_tasks.calibration_task import RequestIndex
from capcal_tasks.task_manager import (
    REPEATED_SAMPLING_KINDS,
    CapcalTaskManager,
    UnknownTaskError,
    samples_k_responses,
)

SMALL = {"arithmetic_per_level": 1}  # 5 questions
LEADERBOARD = "capcal_arithmetic_calibration"
TASKS = [LEADERBOARD, "capcal_arithmetic", "capcal_arithmetic_verbalized", "capcal_arithmetic_ptrue"]


def _load(repeats: int | None) -> dict:
    manager = CapcalTaskManager(include_defaults=False, repeats=repeats, metadata=SMALL)
    return manager.load(TASKS)["tasks"]


def _repeats_by_idx(task) -> dict[int, set[int]]:
    task.build_all_requests(limit=2, rank=0, world_size=1)
    by_idx: dict[int, set[int]] = {}
    for instance in task.instances:
        by_idx.setdefault(instance.idx, set()).add(instance.repeats)
    return by_idx


def test_repeats_reaches_the_sampling_requests_of_a_leaderboard_task_only():
    tasks = _load(repeats=3)
    assert tasks[LEADERBOARD].config.repeats == 3
    assert _repeats_by_idx(tasks[LEADERBOARD]) == {
        RequestIndex.SAMPLING: {3},
        RequestIndex.PTRUE_YES: {1},
        RequestIndex.PTRUE_NO: {1},
        RequestIndex.VERBALIZED: {1},
    }
    assert _repeats_by_idx(tasks["capcal_arithmetic"]) == {0: {3}}
    assert _repeats_by_idx(tasks["capcal_arithmetic_verbalized"]) == {0: {1}}
    assert tasks["capcal_arithmetic_ptrue"].config.repeats == 1


def test_without_repeats_each_task_keeps_its_own_k():
    tasks = _load(repeats=None)
    default_k = tasks["capcal_arithmetic"].config.repeats
    assert default_k >= 2 and default_k != 3
    assert tasks[LEADERBOARD].config.repeats == default_k
    assert _repeats_by_idx(tasks[LEADERBOARD])[RequestIndex.SAMPLING] == {default_k}


def test_the_declared_kind_decides_which_tasks_sample_k_responses():
    tasks = _load(repeats=None)
    kinds = {name: task.config.metadata["capcal_task"] for name, task in tasks.items()}
    assert kinds == {
        LEADERBOARD: "leaderboard",
        "capcal_arithmetic": "sampling",
        "capcal_arithmetic_verbalized": "verbalized",
        "capcal_arithmetic_ptrue": "ptrue",
    }
    assert {name for name, task in tasks.items() if samples_k_responses(task)} == {
        LEADERBOARD,
        "capcal_arithmetic",
    }
    assert REPEATED_SAMPLING_KINDS == {"sampling", "leaderboard"}


@pytest.mark.parametrize("repeats", [0, -1, 1.5, True, "3"])
def test_repeats_must_be_a_positive_integer(repeats):
    with pytest.raises(ValueError, match="repeats must be a positive integer"):
        CapcalTaskManager(include_defaults=False, repeats=repeats)


def test_task_names_are_resolved_without_loading(tmp_path):
    manager = CapcalTaskManager(include_defaults=False)
    assert manager.resolve_task_names([LEADERBOARD, LEADERBOARD]) == [LEADERBOARD]
    assert set(manager.resolve_task_names(["capcal_arithmetic_train*"])) == {
        "capcal_arithmetic_train",
        "capcal_arithmetic_train_ptrue",
        "capcal_arithmetic_train_selfcheck",
        "capcal_arithmetic_train_verbalized",
    }
    with pytest.raises(
        UnknownTaskError, match=r"^unknown task capcal_arithmetc; did you mean capcal_arithmetic"
    ):
        manager.resolve_task_names(["capcal_arithmetc"])
    with pytest.raises(UnknownTaskError, match=r"^unknown task no_such_thing$"):
        manager.resolve_task_names(["no_such_thing"])
    missing = tmp_path / "missing.yaml"
    with pytest.raises(UnknownTaskError, match=f"^task file {missing} not found$"):
        manager.resolve_task_names([str(missing)])


def test_task_configs_expand_groups_into_their_tasks():
    manager = CapcalTaskManager(include_defaults=False)
    configs = manager.task_configs(["capcal_calibration"])
    assert LEADERBOARD in configs and all(name.endswith("_calibration") for name in configs)
    assert configs[LEADERBOARD]["metadata"]["capcal_task"] == "leaderboard"
    assert callable(manager.custom_dataset_of("capcal_arithmetic"))
    assert manager.custom_dataset_of("capcal_arithmetic_not_a_task") is None


def test_repeats_below_two_is_refused_for_a_leaderboard_task():
    """The calibration columns need k >= 2: ``--repeats 1`` is refused when the task loads."""
    manager = CapcalTaskManager(repeats=1)
    with pytest.raises(ValueError, match="repeats must be >= 2"):
        manager.load(["capcal_arithmetic_calibration"])
