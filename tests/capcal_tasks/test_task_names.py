"""``capcal_tasks.task_names``: a task name that occurs in no task YAML is refused without lm-eval's index;
every name lm-eval's index knows occurs in some YAML (the screen never refuses a real task)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from capcal_tasks import task_names, tasks_dir
from capcal_tasks.task_manager import CapcalTaskManager, task_manager_for
from capcal_tasks.task_names import (
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


def _yaml_texts_by_hand(folder: Path) -> list[bytes]:
    """Every ``.yaml`` under ``folder`` and every file an ``include:`` line names, read here (not with the
    module's reader), for a reference screen."""
    texts: dict[Path, bytes] = {}
    pending = [path for path in folder.rglob("*.yaml") if "__pycache__" not in path.parts]
    while pending:
        path = pending.pop()
        if path in texts or not path.is_file():
            continue
        texts[path] = path.read_bytes()
        for line in re.findall(rb"(?m)^include:[ \t]*(.+)$", texts[path]):
            pending += [path.parent / item.decode() for item in re.findall(rb"[\w./\-]+", line)]
    return list(texts.values())


def test_the_screen_gives_what_a_whole_word_search_of_the_texts_gives():
    """The screen looks names made of name characters up among the texts' runs of them (lm-eval's folder's
    kept for the process) and searches for any other name; both must give what a whole-word search of every
    YAML text for each name gives (written here; no name character on either side), on names that are
    parts of longer ones, declared names, punctuation, a space and a non-ASCII letter; asked twice (the
    second from the kept runs)."""
    declared = sorted(unknown_task_names(["capcal_gsm8k"])[1])
    tricky = ["capcal_gsm8kk", "capcal_gsm8k_al", "gsm8", "gsm8k", "capcal_arithmetic", "hellaswag", "-", "."]
    tricky += ["mmlu_abstract_algebra", "zzz_no_such_task", "arc_easy", "capcal.gsm8k", "a b", "caf\u00e9"]
    names = tricky + declared[:: max(1, len(declared) // 60)]
    # one text of all (a newline between two files is not a name character: no word spans two files)
    every_text = b"\n".join(
        text for folder in (lm_eval_tasks_dir(), tasks_dir()) for text in _yaml_texts_by_hand(folder)
    )
    expected = [
        name
        for name in names
        if re.search(rb"(?<![\w.\-])" + re.escape(name.encode("utf-8")) + rb"(?![\w.\-])", every_text) is None
    ]
    assert {"capcal_gsm8kk", "capcal_gsm8k_al", "gsm8", "zzz_no_such_task"} <= set(expected)
    assert not {"gsm8k", "capcal_arithmetic", "hellaswag", "arc_easy", "a b"} & set(expected)
    assert unknown_task_names(names)[0] == expected
    assert unknown_task_names(names)[0] == expected


def test_a_second_screen_reads_lm_evals_folder_no_more_but_an_include_path_again(monkeypatch, tmp_path):
    """What the screen read from lm-eval's installed task folder it keeps for the process; an include path
    (a user's folder, edited between two runs of one notebook) is read at every screen."""
    unknown_task_names(["gsm8k"])
    opened: list[str] = []

    def recording_open(path, *arguments, **keywords):
        opened.append(str(path))
        return open(path, *arguments, **keywords)

    monkeypatch.setattr(task_names, "open", recording_open, raising=False)  # the module's own name first
    (tmp_path / "mine.yaml").write_text("task: my_own_task\ndataset_path: json\n")
    names = ["gsm8k", "my_own_task", "my_later_task"]
    assert unknown_task_names(names, include_path=tmp_path)[0] == ["my_later_task"]
    lm_eval = str(lm_eval_tasks_dir())
    assert str(tmp_path / "mine.yaml") in opened and not [path for path in opened if path.startswith(lm_eval)]
    (tmp_path / "later.yaml").write_text("task: my_later_task\ndataset_path: json\n")
    assert unknown_task_names(names, include_path=tmp_path)[0] == []


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
