"""``capcal_tasks.data_sources``: what a task's loader reads, found without reading it, and whether a hub
dataset can be loaded here (cached, or the hub reachable) before any model is loaded."""

from __future__ import annotations

import datasets
import huggingface_hub.constants
import pytest

from capcal_tasks.data_sources import (
    HubSplit,
    PlannedRead,
    data_read_by,
    hub_split_problem,
    local_files_read_by,
    shipped_with_capcal,
    unique_questions,
)
from capcal_tasks.gpqa import task as gpqa
from capcal_tasks.gsm8k import task as gsm8k

GSM8K_TEST = HubSplit("openai/gsm8k", "main", "test")


def test_a_loader_is_planned_not_run():
    reads = data_read_by(gsm8k.load_test)
    assert reads == [PlannedRead("gsm8k/test.jsonl", (GSM8K_TEST,))]
    assert local_files_read_by(gsm8k.load_test) == ["gsm8k/test.jsonl"]


def test_what_ships_with_capcal():
    assert shipped_with_capcal("gsm8k/test.jsonl")
    (gpqa_read,) = data_read_by(gpqa.load_diamond)
    assert not shipped_with_capcal(gpqa_read.local_path)  # gated: never bundled


@pytest.fixture
def empty_caches(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    return tmp_path


def test_offline_and_not_cached_is_a_reason(empty_caches):
    assert hub_split_problem(GSM8K_TEST) == (
        "the Hugging Face hub is offline here (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached"
    )


@pytest.mark.parametrize("cached", ["datasets/openai___gsm8k", "hub/datasets--openai--gsm8k"])
def test_a_cached_dataset_loads_offline(empty_caches, cached):
    (empty_caches / cached).mkdir(parents=True)
    assert hub_split_problem(GSM8K_TEST) is None


def test_unique_questions_keeps_the_first_of_identical_questions_in_order():
    """The question ids are read as one column (a row-by-row read of MMLU's 14,042 ids took about a second
    of each load); the first occurrence of each id is kept, in the dataset's order."""
    ids = ["q3", "q1", "q3", "q2", "q1", "q4"]
    dataset = datasets.Dataset.from_dict({"question_id": ids, "row": list(range(len(ids)))})
    kept = unique_questions(dataset)
    assert kept["row"][:] == [0, 1, 3, 5] and kept["question_id"][:] == ["q3", "q1", "q2", "q4"]
    distinct = datasets.Dataset.from_dict({"question_id": ["a", "b"], "row": [0, 1]})
    assert unique_questions(distinct) is distinct


def _matharena(root, answers: dict[str, list[tuple[str, str]]]):
    """A MathArena AIME folder: per exam, answers.csv (id,answer) and problems/<id>.tex."""
    for exam, rows in answers.items():
        (root / exam / "problems").mkdir(parents=True)
        (root / exam / "answers.csv").write_text("id,answer\n" + "".join(f"{i},{a}\n" for i, a in rows))
        for problem_id, _ in rows:
            (root / exam / "problems" / f"{problem_id.strip()}.tex").write_text(
                f"Problem {exam} {problem_id}"
            )
    return root


def test_matharena_rows_take_each_field_from_its_own_column_and_file(tmp_path):
    from capcal_tasks.aime.task import read_matharena_folder

    folder = _matharena(
        tmp_path, {"aime_2025_I": [("1", "70"), ("2", " 588")], "aime_2025_II": [("7", "16")]}
    )
    assert read_matharena_folder(folder) == [
        {"id": "aime_2025_I/1", "problem": "Problem aime_2025_I 1", "answer": "70"},
        {"id": "aime_2025_I/2", "problem": "Problem aime_2025_I 2", "answer": "588"},
        {"id": "aime_2025_II/7", "problem": "Problem aime_2025_II 7", "answer": "16"},
    ]


def test_a_matharena_answer_that_is_no_integer_is_refused_naming_file_and_line(tmp_path):
    from capcal_tasks.aime.task import read_matharena_folder

    folder = _matharena(tmp_path, {"aime_2025_I": [("1", "70"), ("2", "x^2")], "aime_2025_II": [("1", "5")]})
    with pytest.raises(ValueError) as refused:
        read_matharena_folder(folder)
    assert str(refused.value) == f"{folder / 'aime_2025_I' / 'answers.csv'}:3: answer 'x^2' is not an integer"


def test_gpqas_choices_are_shuffled_by_the_documented_rule_from_the_csvs_column_order():
    """GPQA's process_docs: the choices [correct, incorrect 1, 2, 3] (stripped), in the order that
    ``random.Random(seed).shuffle`` gives ``range(4)``, seed = the first 8 bytes (big-endian) of the SHA-256
    of the stripped question: written out here, not through ``shuffle_choices``."""
    import hashlib
    import random

    question = "Which particle mediates the strong force?"
    row = {
        "Question": f"  {question}\n",
        "Correct Answer": " gluon ",
        "Incorrect Answer 1": "photon",
        "Incorrect Answer 2": "W boson ",
        "Incorrect Answer 3": " graviton",
    }
    (doc,) = gpqa.process_docs(datasets.Dataset.from_list([row]))
    order = list(range(4))
    random.Random(int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big")).shuffle(order)
    expected = [["gluon", "photon", "W boson", "graviton"][i] for i in order]
    assert doc["choices"] == expected
    assert doc["gold_answer"] == "ABCD"[expected.index("gluon")]
    assert doc["question_id"] == gpqa.question_id("gpqa", question)
    for letter, choice in zip("ABCD", expected, strict=True):
        assert f"{letter}. {choice}" in doc["question_text"]


def test_local_files_are_read_as_utf8_whatever_the_locale(tmp_path):
    """A machine whose locale is C/POSIX without UTF-8 mode (some clusters' batch shells): the JSON-lines and
    CSV readers, and a wrapped task's local BBH rows, still read UTF-8, in a process whose default text
    encoding is ASCII."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "rows.jsonl").write_text('{"q": "Größe ✓"}\n', encoding="utf-8")
    (tmp_path / "rows.csv").write_text("q,a\nÄpfel ✓,zwölf\n", encoding="utf-8")
    (tmp_path / "bbh").mkdir()  # a wrapped BBH task's local rows (capcal_tasks.local_rows)
    (tmp_path / "bbh" / "t.json").write_text(
        '{"examples": [{"input": "Größe", "target": "✓"}]}', encoding="utf-8"
    )
    bbh = {"dataset_path": "lukaemon/bbh", "dataset_name": "t", "test_split": "test"}
    code = (
        "import locale, sys; from pathlib import Path\n"
        "from capcal_tasks.data_sources import read_csv, read_jsonl\n"
        "from capcal_tasks.local_rows import local_dataset\n"
        "assert locale.getpreferredencoding(False) != 'UTF-8' and not sys.flags.utf8_mode\n"
        f"folder = Path({str(tmp_path)!r})\n"
        f"bbh = local_dataset('bbh_t', {bbh!r}, root=folder)()['test'].to_list()\n"
        "print(ascii([read_jsonl(folder / 'rows.jsonl'), read_csv(folder / 'rows.csv'), bbh]))\n"
    )
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = [[{"q": "Größe ✓"}], [{"q": "Äpfel ✓", "a": "zwölf"}], [{"input": "Größe", "target": "✓"}]]
    assert run.stdout.strip() == ascii(expected)
