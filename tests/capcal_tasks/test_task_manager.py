"""``CapcalTaskManager``: ``repeats`` is k for every task that declares k sampled responses per question
(sampling and leaderboard tasks; a leaderboard task clones only its sampling request), and task names are
resolved and checked before any task is loaded. Graded arithmetic is generated, so no data folder is read."""

from __future__ import annotations

from pathlib import Path

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


def _defaults_folder(folder: Path) -> Path:
    """A stand-in for lm-eval's task tree: a task, a task of the tag capcal_sampling (which capcal's folder
    declares too), a group of both and a task named as one of capcal's (which capcal's folder overrides)."""
    folder.mkdir()
    (folder / "alpha.yaml").write_text("task: stock_alpha\ndataset_path: json\ntag: [stock_tag]\n")
    (folder / "beta.yaml").write_text("task: stock_beta\ndataset_path: json\ntag: [capcal_sampling]\n")
    (folder / "group.yaml").write_text("group: stock_group\ntask: [stock_alpha, stock_beta]\n")
    (folder / "shadowed.yaml").write_text("task: capcal_arithmetic\ndataset_path: json\n")
    return folder


def _entries(manager) -> list[tuple]:
    return [
        (name, entry.name, entry.kind, entry.yaml_path, entry.cfg, entry.tags)
        for name, entry in manager.task_index.items()
    ]


def test_lm_evals_index_under_capcals_is_lm_evals_build_of_the_same_folders(tmp_path, monkeypatch, caplog):
    """``CapcalTaskManager`` puts its own index over the process's one index of lm-eval's tree; the result
    must be lm-eval's own build of the default folder followed by capcal's and the include path (entries,
    their order, the name lists, the override warnings)."""
    import logging

    from lm_eval.tasks import TaskManager

    from capcal_tasks import task_index as module  # lm-eval's index, parsed once per process
    from capcal_tasks import tasks_dir

    defaults = _defaults_folder(tmp_path / "defaults")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "own.yaml").write_text("task: stock_alpha\ndataset_path: json\n")  # overrides a default task
    monkeypatch.setattr(module, "lm_eval_tasks_dir", lambda: defaults)

    def overrides(build) -> tuple[object, list[str]]:
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            built = build()
        return built, [r.getMessage() for r in caplog.records if "overrides existing task" in r.getMessage()]

    manager, warned = overrides(lambda: CapcalTaskManager(include_path=mine))
    reference, expected = overrides(
        lambda: TaskManager(include_path=[defaults, tasks_dir(), mine], include_defaults=False)
    )
    assert _entries(manager) == _entries(reference)
    assert warned == expected
    assert (
        f"Task 'stock_alpha' from {mine / 'own.yaml'} overrides existing task from {defaults / 'alpha.yaml'}"
        in warned
    )
    assert manager.task_index["stock_alpha"].yaml_path == mine / "own.yaml"
    own_arithmetic = tasks_dir() / "arithmetic" / "capcal_arithmetic.yaml"
    assert manager.task_index["capcal_arithmetic"].yaml_path == own_arithmetic
    assert "stock_beta" in manager.task_index and "stock_group" in manager.all_groups
    for names in ("all_tasks", "all_subtasks", "all_groups", "all_tags"):
        assert getattr(manager, names) == getattr(reference, names), names
    assert manager.include_path == [str(tasks_dir()), str(mine)]
    small = CapcalTaskManager(include_path=mine, include_defaults=False)
    assert "stock_beta" not in small.task_index and "stock_alpha" in small.task_index


def test_lm_evals_tree_is_indexed_once_and_each_manager_has_its_own_dict(tmp_path, monkeypatch):
    from capcal_tasks import task_index as module  # lm-eval's index, parsed once per process

    defaults = _defaults_folder(tmp_path / "defaults")
    monkeypatch.setattr(module, "lm_eval_tasks_dir", lambda: defaults)
    first = CapcalTaskManager()
    misses = module.lm_eval_task_index.cache_info().misses
    second = CapcalTaskManager(repeats=2)
    assert module.lm_eval_task_index.cache_info().misses == misses  # not parsed again
    assert second.task_index["stock_beta"] is first.task_index["stock_beta"]  # shared entries
    # lm-eval adds a group's members to its manager's dict (TaskFactory): not to another manager's
    first.task_index["added_by_a_load"] = first.task_index["stock_beta"]
    assert "added_by_a_load" not in second.task_index
    assert "added_by_a_load" not in CapcalTaskManager().task_index
    # a caller may change the configs it is given: the shared entries keep theirs
    config = first.task_configs(["stock_group"])["stock_beta"]
    config["dataset_path"] = "changed"
    config["tag"].append("changed")
    assert second.task_configs(["stock_beta"])["stock_beta"] == {
        "task": "stock_beta",
        "dataset_path": "json",
        "tag": ["capcal_sampling"],
    }


def test_a_yaml_wrapped_task_finds_its_base_in_the_process_index(tmp_path, monkeypatch):
    """lm-eval's ``class:`` route (``base_task_from_metadata``) looks the base task up in the process's one
    index of lm-eval's tree, not a tree parsed again per wrapped task: a task of the (stand-in) tree is found
    there (and then refused by the admission rule: a stand-in without rows), without a new parse."""
    from capcal_tasks import task_index as module
    from capcal_tasks.sampled_task import base_task_from_metadata
    from capcal_tasks.task_admission import RefusedTask

    defaults = _defaults_folder(tmp_path / "defaults")
    monkeypatch.setattr(module, "lm_eval_tasks_dir", lambda: defaults)
    module.lm_eval_task_index(defaults)
    misses = module.lm_eval_task_index.cache_info().misses
    for _ in range(2):
        with pytest.raises(RefusedTask, match="^task stock_alpha: output_type is"):
            base_task_from_metadata("stock_alpha_k2", {"base_task": "stock_alpha", "k": 2})
    assert module.lm_eval_task_index.cache_info().misses == misses


def test_a_stock_calibration_task_reads_its_rows_from_the_local_data_folder(tmp_path, monkeypatch):
    """Catches ``<stock>_calibration`` built without ``local_rows``: with CAPCAL_DATA_DIR set, its questions
    are the local file's rows (openai/gsm8k -> gsm8k/test.jsonl), not the hub's."""
    data = tmp_path / "data"
    (data / "gsm8k").mkdir(parents=True)
    (data / "gsm8k" / "test.jsonl").write_text(
        '{"question": "What is 40 + 2?", "answer": "#### 42"}\n'
        '{"question": "What is 7 * 6?", "answer": "#### 42"}\n'
        '{"question": "What is 50 - 8?", "answer": "#### 42"}\n'
    )
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "alpha.yaml").write_text(
        "task: stock_alpha\ndataset_path: openai/gsm8k\ndataset_name: main\ntest_split: test\n"
        'output_type: generate_until\ndoc_to_text: "Q: {{question}}\\nA:"\ndoc_to_target: "{{answer}}"\n'
        'generation_kwargs:\n  until: ["\\n"]\nmetric_list:\n  - metric: exact_match\n'
    )
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(data))
    manager = CapcalTaskManager(include_path=tasks, include_defaults=False, repeats=2)
    task = manager.load(["stock_alpha_calibration"])["tasks"]["stock_alpha_calibration"]
    docs = list(task.test_docs())
    assert [doc["question"] for doc in docs] == ["What is 40 + 2?", "What is 7 * 6?", "What is 50 - 8?"]
