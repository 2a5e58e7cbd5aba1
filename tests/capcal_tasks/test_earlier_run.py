"""Reading an earlier sampling run's samples file for the response-level tasks: every malformed input gives an
error naming the file (and line)."""

from __future__ import annotations

import json
import re

import pytest

from capcal_tasks.confidence.earlier_run import load_earlier_responses, read_earlier_responses
from capcal_tasks.relations import TASKS_DIR, read_task_yaml


def _line(question_id="gsm8k/abc", responses=("\\boxed{1}", "no"), correctness=(1, 0), **extra) -> str:
    record = {
        "doc_id": 0,
        "doc": {"question_id": question_id, "question_text": "What is 0 + 1?", "gold_answer": 1.0},
        "resps": [list(responses)],
        "correctness": list(correctness),
        "extracted_answers": ["1", None][: len(responses)],
        "expected_accuracy": sum(correctness) / len(correctness),
        **extra,
    }
    return json.dumps(record) + "\n"


def test_reads_questions_and_responses(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(_line("gsm8k/q1") + "\n" + _line("gsm8k/q2", correctness=(0, 0)))
    docs = read_earlier_responses(path, "gsm8k")
    assert [doc["question_id"] for doc in docs] == ["gsm8k/q1", "gsm8k/q2"]
    assert docs[0]["responses"] == ["\\boxed{1}", "no"]
    assert docs[0]["response_correctness"] == [1, 0] and docs[1]["response_correctness"] == [0, 0]
    assert docs[0]["response_answers"] == ["1", None]
    assert docs[0]["question_text"] == "What is 0 + 1?"


def test_metadata_forms(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text(_line())
    single = load_earlier_responses(samples_file=str(path), capcal_dataset="gsm8k", pretrained="model")
    mapping = load_earlier_responses(samples_file={"gsm8k": str(path)}, capcal_dataset="gsm8k")
    assert single["responses"][0]["question_id"] == mapping["responses"][0]["question_id"] == "gsm8k/abc"
    with pytest.raises(ValueError, match="samples_file"):
        load_earlier_responses(capcal_dataset="gsm8k")
    with pytest.raises(ValueError, match="samples_file"):
        load_earlier_responses(samples_file={"mmlu": str(path)}, capcal_dataset="gsm8k")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_line() + '{"doc_id": 1, "doc": {', r"samples\.jsonl:2: malformed or truncated JSON"),
        (
            _line() + json.dumps({"doc": {"question_id": "gsm8k/x"}, "p_true": 0.5}) + "\n",
            r":2: not a capcal sampling",
        ),
        (_line(question_id="mmlu/abc"), r":1: question mmlu/abc is not a gsm8k question"),
        (_line() + _line(), r":2: question gsm8k/abc appears twice"),
        (_line(correctness=(1,)), r":1: 2 responses, 1 correctness values and 2 extracted answers"),
        (_line(correctness=(2, 0)), r":1: 'correctness' entries \(a list of 0/1 integers\) must be 0 or 1"),
        (_line(correctness=(True, False)), r":1: 'correctness' entries \(a list of 0/1 integers\) must be 0"),
        (_line(responses=()), r":1: 0 responses, 2 correctness values"),
        ("", r"samples\.jsonl: no samples"),
    ],
)
def test_malformed_files_name_the_file_and_line(tmp_path, content, message):
    path = tmp_path / "samples.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        read_earlier_responses(path, "gsm8k")


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(_line().encode() + b'{"doc": "\xff"}\n')
    with pytest.raises(ValueError, match=r"samples\.jsonl:2: not valid UTF-8"):
        read_earlier_responses(path, "gsm8k")


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        load_earlier_responses(samples_file=str(missing), capcal_dataset="gsm8k")


def _response_level_tasks() -> dict[str, dict]:
    """Every capcal task YAML that reads an earlier run's samples file, with its (included) config."""
    configs = {}
    for path in sorted(TASKS_DIR.glob("*/*.yaml")):
        config = read_task_yaml(path)
        if "load_earlier_responses" in str(config.get("custom_dataset", "")):
            configs[config["task"]] = config
    return configs


def test_missing_samples_file_message_names_the_file_lm_eval_writes_for_every_task():
    """lm-eval writes ``samples_<task name>_<time>.jsonl``: the example in the error names the sampling
    task (``capcal_math500``, ``capcal_aime25``), not the dataset (``capcal_math``, ``capcal_aime``). The
    sampling task is read off the response-level task's own name here (``capcal_math500_ptrue_rc`` ->
    ``capcal_math500``), apart from the metadata the message uses."""
    configs = _response_level_tasks()
    assert len(configs) >= 20 and {"capcal_math500_selfcheck", "capcal_aime25_ptrue_rc"} <= set(configs)
    all_tasks = {path.stem for path in TASKS_DIR.glob("*/*.yaml")}
    for task, config in configs.items():
        sampling_task = re.sub(r"_(verbalized_rc|ptrue_rc|selfcheck)$", "", task)
        assert sampling_task != task and sampling_task in all_tasks, task
        with pytest.raises(ValueError) as error:
            load_earlier_responses(**config["metadata"])
        assert f'"OUTPUT/MODEL/samples_{sampling_task}_TIME.jsonl"' in str(error.value), task
        assert f"an earlier {sampling_task} run" in str(error.value), task
