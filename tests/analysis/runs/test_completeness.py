"""check_run: a complete run passes; each way of being short of the asked-for samples is found and named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.runs import RunFormatError
from analysis.runs.completeness import check_run
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
            "null_responses": 0,
            "empty_responses": 0,
            "unmatched": 0,
            "unparsed": 0,
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


def test_null_response_makes_a_run_incomplete_never_the_text_none(tmp_path: Path) -> None:
    """A null response (hand-edited or broken writer) is counted as missing, not read as "None"."""
    line = _line(0, ["4", "5", "4", "3"])
    line["resps"] = [["4", None, "4", "3"]]
    line["extracted_answers"][1] = None
    line["correctness"][1] = 0
    root = _write(tmp_path, [line, _line(1, ["4"] * K)])
    checks = check_run(root)
    assert checks.loc[0, "null_responses"] == 1 and not checks.loc[0, "complete"]
    assert "1 null response(s) (missing)" in checks.loc[0, "problems"]
    assert checks.loc[0, "empty_responses"] == 0  # None is not an empty text either


def _confidence(folder: Path, question_ids: list[str], target: str | None = "capcal_toy") -> None:
    task = "capcal_toy_verbalized"
    lines = [
        {
            "doc_id": i,
            "doc": {"question_id": q},
            "resps": [["\\boxed{0.5}"]],
            "verbalized_confidence": 0.5,
            "parse_success": 1,
            "parse_failures": 0,
        }
        for i, q in enumerate(question_ids)
    ]
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    path = folder / f"results_{DATE}.json"
    results = json.loads(path.read_text())
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence"}
    if target:
        metadata["capcal_target_task"] = target
    results["results"][task] = {}
    results["configs"][task] = {"metadata": metadata}
    path.write_text(json.dumps(results))


def test_confidence_records_without_a_question_are_counted(tmp_path: Path) -> None:
    root = _write(tmp_path, [_line(i, ["4"] * K) for i in range(2)])
    _confidence(root / "model__toy", ["toy/0", "toy/1", "toy/7", "toy/8"])
    checks = check_run(root).set_index("task")
    assert bool(checks.loc["capcal_toy", "complete"])
    assert checks.loc["capcal_toy_verbalized", "unmatched"] == 2
    assert not checks.loc["capcal_toy_verbalized", "complete"]
    assert "toy/7" in checks.loc["capcal_toy_verbalized", "problems"]
    (report,) = check_run(root).attrs["joins"]
    assert (report.matched, report.unmatched_left) == (2, 2)


def test_confidence_task_without_declared_target_is_incomplete(tmp_path: Path) -> None:
    root = _write(tmp_path, [_line(0, ["4"] * K)])
    _confidence(root / "model__toy", ["toy/0"], target=None)
    with pytest.raises(ValueError, match="capcal_target_task"):
        check_run(root)  # the declaration itself is malformed: a confidence role needs a target


def test_a_backup_copy_is_checked_once(tmp_path: Path) -> None:
    import shutil

    root = _write(tmp_path, [_line(i, ["4"] * K) for i in range(3)])
    shutil.copytree(root / "model__toy", root / "model__toy" / "backup")
    checks = check_run(root)
    assert len(checks) == 1 and checks.loc[0, "questions"] == 3
    assert len(checks.attrs["duplicates"]) == 1


def test_undeclared_confidence_task_is_never_complete(tmp_path: Path) -> None:
    """No declaration at all: its records join nothing (no guess from the name), and check says why."""
    root = _write(tmp_path, [_line(0, ["4"] * K)])
    folder = root / "model__toy"
    _confidence(folder, ["toy/0"])
    results = json.loads((folder / f"results_{DATE}.json").read_text())
    results["configs"]["capcal_toy_verbalized"] = {"metadata": {"capcal_task": "verbalized"}}
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    checks = check_run(root).set_index("task")
    row = checks.loc["capcal_toy_verbalized"]
    assert not row["complete"] and row["unmatched"] == 1
    assert "declares no target task" in row["problems"]


def _verbalized_beside_sampling(root: Path, smollm2: Path, responses: list[str], max_gen_toks: int) -> Path:
    """A sampling run and a verbalized run of the same real checkpoint (its tokenizer counts the responses),
    no confidence parsed."""
    config = {"model": "capcal-hf", "model_args": {"pretrained": str(smollm2)}}
    folder = root / "model__smollm2"
    folder.mkdir(parents=True)
    sampling = [_line(i, ["4", "5", "4", "3"]) for i in range(len(responses))]
    (folder / f"samples_capcal_toy_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in sampling))
    metadata = {"capcal_task": "verbalized", "capcal_role": "confidence", "capcal_target_task": "capcal_toy"}
    verbalized = [
        {
            "doc_id": i,
            "doc": {"question_id": f"toy/{i}", "question_text": f"q{i}"},
            "resps": [[text]],
            "verbalized_confidence": None,
            "parse_success": 0,
            "parse_failures": 1,
        }
        for i, text in enumerate(responses)
    ]
    later = "2026-03-04T05-06-08.000001"
    (folder / f"samples_capcal_toy_verbalized_{later}.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in verbalized)
    )
    configs = {
        "capcal_toy": {"repeats": K, "metadata": {"capcal_task": "sampling"}},
        "capcal_toy_verbalized": {"metadata": metadata, "generation_kwargs": {"max_gen_toks": max_gen_toks}},
    }
    for date, task in ((DATE, "capcal_toy"), (later, "capcal_toy_verbalized")):
        results = {"results": {task: {}}, "configs": {task: configs[task]}, "config": config}
        (folder / f"results_{date}.json").write_text(json.dumps({**results, "model_name": "smollm2"}))
    return root


def test_a_verbalized_run_whose_model_never_states_the_confidence_is_complete(tmp_path, smollm2_path):
    """Responses that end on their own without \\boxed{P}: the run ran as asked (a note, exit 0 in capcal
    check); the same responses cut at the limit: incomplete, raise max_gen_toks (issue 32)."""
    short = ["I am fairly sure.", "Quite likely.", "The answer is 7."]
    checks = check_run(_verbalized_beside_sampling(tmp_path / "a", smollm2_path, short, 48))
    assert checks["complete"].all(), checks[["task", "problems"]].to_dict("records")
    (note,) = checks.attrs["notes"]
    assert "capcal_toy_verbalized" in note and note.endswith("; the run is complete")
    assert "the model does not state a confidence as \\boxed{P}: only 0 of the 3 responses" in note
    long = ["Let me think about how likely this is, step by step, from the level of the question " * 3] * 3
    checks = check_run(_verbalized_beside_sampling(tmp_path / "b", smollm2_path, long, 16))
    row = checks.set_index("task").loc["capcal_toy_verbalized"]
    assert not row["complete"] and checks.attrs["notes"] == []
    assert "max_gen_toks=16 cut 3 of 3 responses before their end (raise it)" in row["problems"]


def _confidence_run(folder: Path, task: str, kind: str, records: list[dict]) -> None:
    """A confidence run of ``kind`` with ``records`` (doc_id and question_id added) beside the sampling run
    written by ``_write``, in its results file."""
    lines = [{"doc_id": i, "doc": {"question_id": f"toy/{i}"}, **record} for i, record in enumerate(records)]
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    path = folder / f"results_{DATE}.json"
    results = json.loads(path.read_text())
    results["results"][task] = {}
    results["configs"][task] = {
        "metadata": {"capcal_task": kind, "capcal_role": "confidence", "capcal_target_task": "capcal_toy"}
    }
    path.write_text(json.dumps(results))


def test_confidence_rows_count_what_did_not_parse(tmp_path: Path) -> None:
    """The whole row of a confidence run: no null or empty responses counted (0, not missing), the records
    without a parsed confidence in ``unparsed``: a verbalized confidence that did not parse; a self-check
    record only when none of its P(Yes) is a number (one NaN among numbers still parsed). Fewer than half
    unparsed: complete."""
    root = _write(tmp_path, [_line(i, ["4"] * K) for i in range(4)])
    folder = root / "model__toy"
    parsed = {
        "resps": [["\\boxed{0.5}"]],
        "verbalized_confidence": 0.5,
        "parse_success": 1,
        "parse_failures": 0,
    }
    unparsed = {"resps": [["no box"]], "verbalized_confidence": None, "parse_success": 0, "parse_failures": 1}
    _confidence_run(folder, "capcal_toy_verbalized", "verbalized", [parsed, unparsed, parsed, parsed])

    def selfcheck(p_yes: list[float | None]) -> dict:
        """A self-check of the K responses (all correct, as the sampling run's): ``p_yes`` padded with its
        last value."""
        p_yes = p_yes + p_yes[-1:] * (K - len(p_yes))
        return {"p_yes": p_yes, "p_yes_normalized": p_yes, "response_correctness": [1] * K}

    records = [
        selfcheck([0.5, 0.25]),
        selfcheck([None, 0.75]),
        selfcheck([None, None]),
        selfcheck([0.5, 0.5]),
    ]
    _confidence_run(folder, "capcal_toy_selfcheck", "selfcheck", records)
    checks = check_run(root)
    assert checks.loc[checks["task"] != "capcal_toy", ["questions_expected", "k"]].isna().all().all()
    rows = {row["task"]: row for row in checks.drop(columns=["questions_expected", "k"]).to_dict("records")}
    common = {"model": "toy", "run_id": DATE, "questions": 4, "questions_short_of_k": 0, "null_responses": 0}
    common |= {"empty_responses": 0, "unmatched": 0}
    common |= {"complete": True, "problems": ""}
    assert rows["capcal_toy_verbalized"] == {**common, "task": "capcal_toy_verbalized", "unparsed": 1}
    assert rows["capcal_toy_selfcheck"] == {**common, "task": "capcal_toy_selfcheck", "unparsed": 1}
    assert checks.attrs["notes"] == []


CHAT_TEMPLATE_CAUSE = "the model has a chat template and the run did not apply it (add --apply_chat_template)"
STOPPED_CAUSE = (
    "generation stopped at once: a stop sequence of the task's 'until' at the start of the response, or an "
    "end-of-text token (see the prompts with --write_out)"
)
API_CAUSE = (
    "requests that still failed after their retries (allow_failures), or generation that stopped at once"
)


@pytest.mark.parametrize(
    ("model", "chat_template", "cause"),
    [
        ("capcal-hf", None, CHAT_TEMPLATE_CAUSE),  # recorded as not applied
        ("capcal-hf", "{{ messages }}", STOPPED_CAUSE),  # applied
        ("capcal-hf", "absent", STOPPED_CAUSE),  # not recorded: not blamed
        ("capcal-api", "{{ messages }}", API_CAUSE),
        (["not", "a", "name"], "{{ messages }}", STOPPED_CAUSE),
    ],
    ids=["template-not-applied", "template-applied", "not-recorded", "capcal-api", "model-not-a-name"],
)
def test_the_cause_of_empty_responses_is_read_from_the_results_file(
    tmp_path: Path, smollm2_path: Path, model, chat_template, cause
) -> None:
    """The results file's model, its model arguments (a chat checkpoint) and its ``chat_template`` (null:
    not applied; a template: applied) decide the cause named."""
    root = _write(tmp_path, [_line(0, ["4", "", " ", "4"])])
    path = next(root.rglob("results_*.json"))
    results = json.loads(path.read_text())
    results["config"] = {"model": model, "model_args": f"pretrained={smollm2_path}"}
    if chat_template != "absent":
        results["chat_template"] = chat_template
    path.write_text(json.dumps(results))
    checks = check_run(root)
    assert checks.loc[0, "problems"] == f"2 empty response(s) (likely cause: {cause})"


def test_the_responses_that_parsed_are_read_from_their_records(tmp_path, smollm2_path):
    """Three responses cut at max_gen_toks=16 without a confidence and one that ended and parsed: the one
    that ended did state it (its record's parse_success), so the limit is to blame, not the model's form."""
    long = "Let me think about how likely this is, step by step, from the level of the question " * 3
    root = _verbalized_beside_sampling(tmp_path, smollm2_path, [long, long, long, "\\boxed{0.5}"], 16)
    samples = next(root.rglob("samples_capcal_toy_verbalized_*.jsonl"))
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records[3].update(verbalized_confidence=0.5, parse_success=1, parse_failures=0)
    samples.write_text("".join(json.dumps(x) + "\n" for x in records))
    checks = check_run(root)
    row = checks.set_index("task").loc["capcal_toy_verbalized"]
    assert checks.attrs["notes"] == [] and not row["complete"] and row["unparsed"] == 3
    assert row["problems"] == (
        "verbalized confidence parsed for 1 of 4 records, fewer than half (likely cause: max_gen_toks=16 cut "
        "3 of 4 responses before their end (raise it))"
    )


def test_each_count_of_a_sampling_run_reaches_its_own_column(tmp_path: Path) -> None:
    """Distinct counts, so that a column read from a sibling count shows: one question short of k, two
    null responses, three empty ones; each column holds the count its problem names."""
    short = _line(0, ["4", "5"])
    null = _line(1, ["4", "x", "y", "3"])  # the two wrong ones then nulled, as a broken writer leaves them
    null["resps"] = [["4", None, None, "3"]]
    empty = _line(2, ["", " ", "\n", "4"])
    checks = check_run(_write(tmp_path, [short, null, empty, _line(3, ["4"] * K)]))
    row = checks.loc[0]
    assert (row["questions"], row["questions_expected"], row["k"]) == (4, 4, K)
    assert row["questions_short_of_k"] == 1
    assert row["null_responses"] == 2
    assert row["empty_responses"] == 3
    assert (row["unmatched"], row["unparsed"]) == (0, 0)
    assert row["problems"] == (
        f"1 question(s) with fewer than k = {K} responses; 2 null response(s) (missing); "
        "3 empty response(s) (likely cause: " + row["problems"].split("(likely cause: ", 1)[1]
    )
