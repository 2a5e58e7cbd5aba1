"""The run reader: a valid log round-trips; malformed or partial logs fail with the file and line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.runs import RunFormatError, load_run, summarize, write_question_table
from capcal_tasks.sampling import score_responses

DATE = "2026-01-02T03-04-05.123456"


def _line(doc_id: int, answers: list[str | None], gold: str = "4") -> dict:
    responses = [f"... \\boxed{{{a}}}" if a is not None else "no idea" for a in answers]
    record = score_responses(
        responses, extract=lambda r: r.rsplit("{", 1)[1][:-1] if "{" in r else None, judge=lambda a: a == gold
    )
    question = f"What is {doc_id} + 4 - {doc_id}?"
    return {
        "doc_id": doc_id,
        "doc": {"question": question, "question_id": f"toy/{doc_id:04d}"},
        "target": gold,
        "arguments": {"gen_args_0": {"arg_0": question, "arg_1": {}}},
        "resps": [responses],
        "filtered_resps": [responses],
        "filter": "all_responses",
        "metrics": list(record),
        "doc_hash": f"hash{doc_id}",
        **record,
    }


def _write_run(
    root: Path, lines: list[dict | str], task: str = "capcal_toy", with_results: bool = True
) -> Path:
    folder = root / "model__x"
    folder.mkdir(parents=True, exist_ok=True)
    samples = folder / f"samples_{task}_{DATE}.jsonl"
    samples.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
    if with_results:
        results = {
            "results": {task: {}},
            "configs": {task: {"metadata": {"capcal_task": "sampling"}}},
            "model_name": "toy-model",
        }
        (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    return samples


def test_valid_run_round_trips(tmp_path):
    _write_run(tmp_path, [_line(0, ["4", "4", "5", None]), _line(1, ["3", "3", "3", "4"])])
    table = load_run(tmp_path)
    assert list(table["question_id"]) == ["toy/0000", "toy/0001"]
    assert list(table["model"]) == ["toy-model"] * 2
    assert list(table["expected_accuracy"]) == [0.5, 0.25]
    assert table.loc[0, "extracted_answers"] == ["4", "4", "5", None]
    assert list(table.columns[-3:]) == ["pass_at_1", "pass_at_2", "pass_at_4"]
    summary = summarize(table)
    assert summary.loc[0, "questions"] == 2
    assert summary.loc[0, "mean_expected_accuracy"] == pytest.approx(0.375)
    assert summary.loc[0, "extraction_rate"] == pytest.approx(7 / 8)
    for suffix in (".jsonl", ".csv"):
        assert write_question_table(table, tmp_path / f"t{suffix}").stat().st_size > 0
    back = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert back[0]["correctness"] == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="unsupported"):
        write_question_table(table, tmp_path / "t.pickle")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda line: json.dumps(line)[:-20], "malformed or truncated JSON"),
        (lambda line: {k: v for k, v in line.items() if k != "resps"}, "missing key"),
        (lambda line: {**line, "expected_accuracy": 0.9}, "is not the mean of its correctness"),
        (lambda line: {**line, "correctness": [1, 0, 1]}, "must be equal"),
        (lambda line: {**line, "correctness": [1, 0, 2, 0]}, "0/1 integers"),
        (lambda line: {**line, "correctness": [1.0, 0, 1, 0]}, "0/1 integers"),
        (lambda line: {**line, "resps": ["a", "b", "c", "d"]}, "one list of k responses"),
        (lambda line: "[1, 2]", "expected a JSON object"),
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, mutate, message):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4), mutate(_line(1, ["4", "1", "4", "2"]))])
    with pytest.raises(RunFormatError, match=message) as error:
        load_run(tmp_path)
    assert f"{samples}:2" in str(error.value)


def test_missing_samples_file_is_reported(tmp_path):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4)])
    samples.unlink()
    with pytest.raises(RunFormatError, match="--log_samples"):
        load_run(tmp_path)


def test_corrupt_results_file_is_reported(tmp_path):
    _write_run(tmp_path, [_line(0, ["4"] * 4)])
    results = next(tmp_path.rglob("results_*.json"))
    results.write_text('{"results": ')
    with pytest.raises(RunFormatError, match=str(results)):
        load_run(tmp_path)


def test_invalid_utf8_is_reported(tmp_path):
    samples = _write_run(tmp_path, [_line(0, ["4"] * 4)])
    samples.write_bytes(samples.read_bytes() + b'{"doc_id": "\xff"}\n')
    with pytest.raises(RunFormatError, match="UTF-8") as error:
        load_run(tmp_path)
    assert f"{samples}:2:" in str(error.value)


def test_folders_without_capcal_samples(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        load_run(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no capcal sampling samples"):
        load_run(tmp_path)
    other = {"doc_id": 0, "doc": {}, "resps": [["x"]], "acc": 1}
    _write_run(tmp_path, [other], task="arc_easy", with_results=False)
    with pytest.raises(FileNotFoundError, match="no capcal sampling samples"):
        load_run(tmp_path)
