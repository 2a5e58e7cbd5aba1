"""check_run: a complete run passes; each way of being short of the asked-for samples is found and named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.completeness import check_run
from analysis.runs import RunFormatError
from capcal_tasks.sampling import score_responses

DATE = "2026-03-04T05-06-07.000001"
K = 4


def _line(doc_id: int, responses: list[str]) -> dict:
    record = score_responses(responses, extract=lambda r: r.strip() or None, judge=lambda a: a == "4")
    return {
        "doc_id": doc_id,
        "doc": {"question": f"q{doc_id}", "question_id": f"toy/{doc_id}"},
        "target": "4",
        "arguments": {"gen_args_0": {"arg_0": f"q{doc_id}", "arg_1": {}}},
        "resps": [responses],
        "filtered_resps": [responses],
        "filter": "all_responses",
        "doc_hash": f"h{doc_id}",
        **record,
    }


def _write(root: Path, lines: list[dict], logged: int | None = None, with_results: bool = True) -> Path:
    folder = root / "model__toy"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_capcal_toy_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    if with_results:
        effective = len(lines) if logged is None else logged
        results = {
            "results": {"capcal_toy": {}},
            "configs": {"capcal_toy": {"repeats": K, "metadata": {"capcal_task": "sampling"}}},
            "n-samples": {"capcal_toy": {"original": 100, "effective": effective}},
            "model_name": "toy",
        }
        (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    return root


def test_complete_run_has_no_problems(tmp_path: Path) -> None:
    checks = check_run(_write(tmp_path, [_line(i, ["4", "5", "4", "3"]) for i in range(3)]))
    assert checks.to_dict("records") == [
        {
            "model": "toy",
            "task": "capcal_toy",
            "run_id": DATE,
            "questions": 3,
            "questions_expected": 3,
            "k": K,
            "questions_short_of_k": 0,
            "empty_responses": 0,
            "complete": True,
            "problems": "",
        }
    ]


@pytest.mark.parametrize(
    ("lines", "logged", "with_results", "problem"),
    [
        (
            [_line(0, ["4"] * K), _line(1, ["4"] * K)],
            3,
            True,
            "2 questions logged, the results file counts 3",
        ),
        ([_line(0, ["4"] * K), _line(1, ["4", "4"])], None, True, "1 question(s) with fewer than k = 4"),
        ([_line(0, ["4", "", " ", "4"])], None, True, "2 empty response(s)"),
        ([_line(0, ["4"] * K)], None, False, "no results file beside samples_capcal_toy_"),
    ],
    ids=["missing-question", "short-of-k", "empty-responses", "no-results-file"],
)
def test_each_shortfall_is_named(tmp_path: Path, lines, logged, with_results, problem) -> None:
    checks = check_run(_write(tmp_path, lines, logged, with_results))
    assert not checks.loc[0, "complete"]
    assert problem in checks.loc[0, "problems"]


def test_malformed_logs_still_raise_with_the_line(tmp_path: Path) -> None:
    root = _write(tmp_path, [_line(0, ["4"] * K)])
    samples = next(root.rglob("samples_*.jsonl"))
    samples.write_text(samples.read_text() + '{"doc_id": 1, "resps": [["4"\n')
    with pytest.raises(RunFormatError, match=r"samples_capcal_toy_.*\.jsonl:2"):
        check_run(root)
