"""``capcal_tasks.task_names``: a task name that occurs in no task YAML is refused without lm-eval's index;
every name lm-eval's index knows occurs in some YAML (the screen never refuses a real task)."""

from __future__ import annotations

import time

import pytest

from capcal_tasks import task_names
from capcal_tasks.task_manager import CapcalTaskManager, task_manager_for
from capcal_tasks.task_names import (
    MANY_NAMES,
    UnknownTaskError,
    lm_eval_tasks_dir,
    unknown_task_message,
    unknown_task_names,
)


@pytest.fixture(scope="module")
def full_index() -> tuple[CapcalTaskManager, list]:
    """``task_manager_for`` an lm-eval task: lm-eval's whole task tree and capcal's, indexed as lm-eval does
    (tens of seconds), and the names it resolved."""
    return task_manager_for(["gsm8k", "capcal_arithmetic"])


def test_every_name_of_the_full_index_occurs_in_some_yaml(full_index):
    """Soundness: the text screen passes every task, group and tag lm-eval (and capcal) can load."""
    names = list(full_index[0].all_tasks)
    assert len(names) > 10_000 and "gsm8k" in names and "capcal_sampling" in names
    unknown, _ = unknown_task_names(names)
    assert unknown == []


def test_a_name_in_no_yaml_is_unknown_and_the_closest_declared_names_are_offered():
    started = time.process_time()
    unknown, declared = unknown_task_names(["capcal_gsm8kk", "gsm8k", "capcal_arithmetic", "hellaswag"])
    print(f"screen: {time.process_time() - started:.2f} s of CPU time")  # about 0.8 s here, not asserted
    assert unknown == ["capcal_gsm8kk"]
    assert {"capcal_gsm8k", "capcal_gsm8k_all", "gsm8k", "capcal_sampling"} <= declared  # tags too
    assert unknown_task_message("capcal_gsm8kk", declared) == (
        "unknown task capcal_gsm8kk; did you mean capcal_gsm8k, capcal_gsm8k_all or capcal_gsm8k_train?"
    )
    assert unknown_task_message("zzzzzz", declared) == "unknown task zzzzzz"


def test_many_names_get_the_answers_of_the_regex_screen(monkeypatch):
    """Above MANY_NAMES plain names the screen looks names up among each text's runs of name characters;
    it must give what the one-regex screen gives to the same names (the screen asked again with MANY_NAMES
    raised to their number, so that it takes its one-regex path: one scan of lm-eval's tree, where asking
    50 names at a time took nine)."""
    declared = sorted(unknown_task_names(["capcal_gsm8k"])[1])
    tricky = ["capcal_gsm8kk", "capcal_gsm8k_al", "gsm8", "gsm8k", "capcal_arithmetic", "hellaswag", "-", "."]
    tricky += ["mmlu_abstract_algebra", "zzz_no_such_task", "arc_easy", "capcal.gsm8k", "a b", "caf\u00e9"]
    names = tricky + declared[:: max(1, len(declared) // (2 * MANY_NAMES))]
    assert len(set(names)) > MANY_NAMES
    at_once = unknown_task_names(names)[0]
    monkeypatch.setattr(task_names, "MANY_NAMES", len(names))
    by_one_regex = unknown_task_names(names)[0]
    assert at_once == by_one_regex
    assert {"capcal_gsm8kk", "capcal_gsm8k_al", "gsm8", "zzz_no_such_task"} <= set(at_once)
    assert not {"gsm8k", "capcal_arithmetic", "hellaswag", "arc_easy"} & set(at_once)


def test_part_of_a_longer_name_is_not_a_name():
    """capcal_gsm8k_al is written only inside capcal_gsm8k_all: unknown."""
    assert unknown_task_names(["capcal_gsm8k_al", "gsm8"])[0] == ["capcal_gsm8k_al", "gsm8"]


def test_patterns_and_yaml_paths_are_left_to_the_index():
    assert unknown_task_names(["nothing_matches_*", "/no/such/task.yaml"]) == ([], set())


def test_a_task_of_an_include_path_is_known(tmp_path):
    (tmp_path / "mine.yaml").write_text("task: my_own_task\ndataset_path: json\n")
    assert unknown_task_names(["my_own_task"])[0] == ["my_own_task"]
    assert unknown_task_names(["my_own_task"], include_path=tmp_path)[0] == []
    assert unknown_task_names(["my_own_task"], include_path=[str(tmp_path)])[0] == []


def test_lm_evals_task_folder_is_found_without_importing_it():
    folder = lm_eval_tasks_dir()
    assert folder is not None and (folder / "gsm8k" / "gsm8k.yaml").is_file()


def test_task_manager_for_indexes_lm_eval_only_when_a_name_needs_it():
    small, names = task_manager_for(["capcal_arithmetic", "capcal_sampling"])
    assert names == ["capcal_arithmetic", "capcal_sampling"]
    assert "capcal_gsm8k" in small.task_index and "gsm8k" not in small.task_index  # capcal's folder only
    with pytest.raises(
        UnknownTaskError, match=r"^unknown task capcal_arithmetc; did you mean capcal_arithmetic"
    ):
        task_manager_for(["capcal_arithmetic", "capcal_arithmetc"])


def test_task_manager_for_an_lm_eval_task_indexes_everything(full_index):
    full, names = full_index
    assert names == ["gsm8k", "capcal_arithmetic"] and "hellaswag" in full.task_index
