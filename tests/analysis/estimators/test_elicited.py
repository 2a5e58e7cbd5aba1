"""Elicited confidences: lm-eval-shaped logs written with the confidence tasks' own process_results, read,
joined on question_id, and parse failures counted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.estimators import attach_elicited, parse_failure_counts, read_elicited
from analysis.runs import RunFormatError, load_run
from capcal_tasks.confidence import ptrue, selfcheck, verbalized
from capcal_tasks.sampling import score_responses

DATE = "2026-02-03T04-05-06.000001"
MODEL = "toy-model"
QUESTIONS = [f"toy/{i:04d}" for i in range(6)]
ANSWERS = [
    ["4", "4", "5"],
    ["3", None, "4"],
    ["4", "4", "4"],
    ["1", "2", "3"],
    ["4", "5", "5"],
    [None, None, "4"],
]
VERBALIZED = [
    r"\boxed{0.8}",
    "I am not sure.",
    r"\boxed{1.0}",
    r"maybe \boxed{1.7}",
    r"\boxed{0.25}",
    r"\boxed{.5}",
]


def _write(folder: Path, task: str, lines: list[dict], capcal_task: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{DATE}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    results_path = folder / f"results_{DATE}.json"
    results = (
        json.loads(results_path.read_text()) if results_path.exists() else {"results": {}, "configs": {}}
    )
    results["results"][task] = {}
    metadata = {"capcal_task": capcal_task} if capcal_task else {}
    if capcal_task == "sampling":
        metadata.update(capcal_role="evaluation", capcal_calibration_tasks=[])
    elif capcal_task:
        metadata.update(capcal_role="confidence", capcal_target_task="capcal_toy")
    results["configs"][task] = {"metadata": metadata} if metadata else {}
    results["model_name"] = MODEL
    results_path.write_text(json.dumps(results))


def _line(doc_id: int, doc: dict, record: dict) -> dict:
    return {"doc_id": doc_id, "doc": doc, "target": "4", "resps": [[]], "metrics": list(record), **record}


def _sampling_lines(answers_of: list[list[str | None]] = ANSWERS) -> list[dict]:
    lines = []
    for i, answers in enumerate(answers_of):
        responses = [rf"\boxed{{{a}}}" if a is not None else "none" for a in answers]
        record = score_responses(
            responses,
            extract=lambda r: r[7:-1] if r.startswith("\\boxed") else None,
            judge=lambda a: a == "4",
        )
        doc = {"question": f"q{i}", "question_id": QUESTIONS[i]}
        lines.append({**_line(i, doc, record), "resps": [responses]})
    return lines


@pytest.fixture()
def run_folder(tmp_path) -> Path:
    folder = tmp_path / "out" / "toy-model"
    sampling = _sampling_lines()
    _write(folder, "capcal_toy", sampling, "sampling")
    verbalized_lines = [
        _line(i, {"question_id": q}, verbalized.process_results({}, [text]))
        for i, (q, text) in enumerate(zip(QUESTIONS, VERBALIZED, strict=True))
    ]
    _write(folder, "capcal_toy_verbalized", verbalized_lines, "verbalized")
    ptrue_lines = [
        _line(i, {"question_id": q}, ptrue.process_results({}, [(-0.1 * i, False), (-1.0, False)]))
        for i, q in enumerate(QUESTIONS[:5])  # one question has no P(True) record
    ]
    _write(folder, "capcal_toy_ptrue", ptrue_lines, "ptrue")
    selfcheck_lines = []
    for i, line in enumerate(sampling):
        doc = {
            "question_id": QUESTIONS[i],
            "responses": line["resps"][0],
            "response_correctness": line["correctness"],
        }
        results = [
            (-0.2 * (j + 1), False) if position == 0 else (-1.5, False)
            for j in range(3)
            for position in (0, 1)
        ]
        selfcheck_lines.append(_line(i, doc, selfcheck.process_results(doc, results)))
    _write(folder, "capcal_toy_selfcheck", selfcheck_lines, "selfcheck")
    rc_lines = []
    for i, line in enumerate(sampling):
        doc = {"question_id": QUESTIONS[i], "response_correctness": line["correctness"]}
        rc_lines.append(_line(i, doc, verbalized.process_results_for_response(doc, [r"\boxed{0.6}"])))
    _write(folder, "capcal_toy_verbalized_rc", rc_lines, "verbalized_rc")
    return tmp_path / "out"


def test_read_elicited_kinds_and_values(run_folder):
    elicited = read_elicited(run_folder)
    counts = elicited.groupby("kind").size().to_dict()
    assert counts == {"ptrue": 5, "selfcheck": 6, "verbalized": 6, "verbalized_rc": 6}
    assert set(elicited["model"]) == {MODEL}
    verbal = elicited[elicited["kind"] == "verbalized"].set_index("question_id")
    # "\boxed{1.7}" is out of [0, 1] and "I am not sure." has no box: both failures, kept as NaN
    expected = [0.8, math.nan, 1.0, math.nan, 0.25, 0.5]
    np.testing.assert_array_equal(verbal.loc[QUESTIONS, "confidence"].to_numpy(), expected)
    assert verbal.loc[QUESTIONS, "parse_success"].tolist() == [1, 0, 1, 0, 1, 1]
    p = elicited[elicited["kind"] == "ptrue"].set_index("question_id")
    np.testing.assert_allclose(p.loc[QUESTIONS[2], "confidence"], 1 / (1 + math.exp(-1.0 + 0.2)), rtol=1e-12)


def test_attach_joins_on_question_id_and_counts_failures(run_folder):
    table = load_run(run_folder)
    elicited = read_elicited(run_folder)
    joined = attach_elicited(table.iloc[::-1].reset_index(drop=True), elicited)  # order must not matter
    joined = joined.set_index("question_id").loc[QUESTIONS]
    np.testing.assert_array_equal(
        joined["verbalized_confidence"].to_numpy(), [0.8, np.nan, 1.0, np.nan, 0.25, 0.5]
    )
    assert joined["verbalized_parse_success"].tolist() == [1, 0, 1, 0, 1, 1]
    assert math.isnan(joined.loc[QUESTIONS[5], "p_true"])  # no record: NaN, success <NA>
    assert joined["p_true_parse_success"].isna().tolist() == [False] * 5 + [True]
    assert joined.loc[QUESTIONS[0], "selfcheck_p_yes"] == pytest.approx(
        [math.exp(-0.2), math.exp(-0.4), math.exp(-0.6)]
    )
    assert (joined["verbalized_rc_confidence"] == 0.6).all()

    counts = parse_failure_counts(elicited, table)
    assert counts.columns.tolist() == [
        "model",
        "task",
        "kind",
        "questions",
        "parse_failures",
        "failure_rate",
        "responses",
        "response_failures",
        "missing",
    ]
    counts = counts.set_index("kind")
    assert counts.loc["verbalized", "parse_failures"] == 2
    assert counts.loc["verbalized", "failure_rate"] == pytest.approx(2 / 6)
    assert counts.loc["ptrue", "parse_failures"] == 0 and counts.loc["ptrue", "missing"] == 1
    assert counts.loc["selfcheck", "responses"] == 18 and counts.loc["selfcheck", "response_failures"] == 0
    assert counts.loc["verbalized", "missing"] == 0
    # only selfcheck samples responses: the other kinds leave both response columns missing
    kinds = ["ptrue", "selfcheck", "verbalized", "verbalized_rc"]
    assert counts.loc[kinds, "responses"].isna().tolist() == [True, False, True, True]
    assert counts.loc[kinds, "response_failures"].isna().tolist() == [True, False, True, True]


def test_attach_without_model_id_joins_on_the_model_label(run_folder):
    """Without a model_id column on both sides the join falls back to the model label, and every kind's
    report says so; a wrong fallback column would refuse the table or join nothing."""
    table = load_run(run_folder).drop(columns="model_id")
    elicited = read_elicited(run_folder).drop(columns="model_id")
    joined = attach_elicited(table, elicited)
    reports = joined.attrs["joins"]
    np.testing.assert_array_equal(
        joined.set_index("question_id").loc[QUESTIONS, "verbalized_confidence"].to_numpy(),
        [0.8, np.nan, 1.0, np.nan, 0.25, 0.5],
    )
    assert [report.name for report in reports] == [
        f"{kind} <-> questions" for kind in ["ptrue", "selfcheck", "verbalized", "verbalized_rc"]
    ]
    assert [report.matched for report in reports] == [5, 6, 6, 6]
    assert all(report.notes == ("joined on the model label (no model_id column)",) for report in reports)


def test_mismatched_sampling_run_is_refused(run_folder):
    table = load_run(run_folder)
    elicited = read_elicited(run_folder)
    other = table.copy()
    other.at[0, "correctness"] = [1 - z for z in other.at[0, "correctness"]]
    with pytest.raises(ValueError, match="different sampling runs"):
        attach_elicited(other, elicited[elicited["kind"] == "selfcheck"])
    with pytest.raises(ValueError, match="different sampling runs"):
        attach_elicited(other, elicited[elicited["kind"] == "verbalized_rc"])
    doubled = pd.concat([elicited, elicited[elicited["kind"] == "verbalized"]])
    with pytest.raises(ValueError, match="several records"):
        attach_elicited(table, doubled)


def test_malformed_logs_name_the_line(tmp_path):
    folder = tmp_path / "m"
    _write(
        folder,
        "capcal_toy_verbalized",
        [_line(0, {"question_id": "toy/0"}, {"verbalized_confidence": 0.3})],
        None,
    )
    with (folder / f"samples_capcal_toy_verbalized_{DATE}.jsonl").open("a") as handle:
        handle.write('{"doc_id": 1, "doc": {"question_id": "toy/1"}, "verbalized_confidence": 1.5}\n')
    with pytest.raises(RunFormatError, match=r":2: verbalized_confidence = 1.5"):
        read_elicited(tmp_path)
    (folder / f"samples_capcal_toy_verbalized_{DATE}.jsonl").write_text(
        '{"doc_id": 0, "doc": {}, "p_true": 0.5}\n'
    )
    with pytest.raises(RunFormatError, match="no question_id"):
        read_elicited(tmp_path)
    _write(
        folder, "capcal_toy_verbalized", [_line(0, {"question_id": "toy/0"}, {"p_true": 0.5})], "verbalized"
    )
    with pytest.raises(RunFormatError, match="task config says verbalized"):
        read_elicited(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_elicited(tmp_path / "empty")


def test_missing_counts_follow_model_id_and_target_task(run_folder):
    """With model_id on both sides, `missing` counts the table's questions of the target task only (a question
    of another task sharing the id prefix is not wanted); without model_id in the table it falls back to the
    model label and the question-id prefix."""
    table = load_run(run_folder)
    elicited = read_elicited(run_folder)
    extra = table.iloc[[0]].assign(task="capcal_other", question_id="toy/0099")
    with_other = pd.concat([table, extra], ignore_index=True)
    counts = parse_failure_counts(elicited, with_other).set_index("kind")
    assert counts["missing"].to_dict() == {"ptrue": 1, "selfcheck": 0, "verbalized": 0, "verbalized_rc": 0}
    fallback = parse_failure_counts(elicited, with_other.drop(columns="model_id")).set_index("kind")
    assert fallback["missing"].to_dict() == {"ptrue": 2, "selfcheck": 1, "verbalized": 1, "verbalized_rc": 1}


def test_table_without_correctness_is_refused_by_name(run_folder):
    """The per-question table lacking a needed column is named as 'table' in the error."""
    table = load_run(run_folder).drop(columns="correctness")
    with pytest.raises(ValueError) as error:
        attach_elicited(table, read_elicited(run_folder))
    assert str(error.value) == "table has no column(s) correctness"


@pytest.mark.parametrize("kind", ["verbalized_rc", "ptrue_rc"])
def test_each_response_level_confidence_is_refused_from_another_sampling_run(run_folder, kind):
    """Both response-level kinds are checked against the table's first response (a check of one kind only,
    the other silently joined to another run's responses, is the bug this catches): a table whose first
    response of one question is scored the other way is refused naming the kind; the same records join the
    unchanged table, each confidence on its own question."""
    folder = run_folder / MODEL
    sampling = _sampling_lines()
    if kind == "ptrue_rc":  # the run_folder has no P(True) response form: its records, one log-odds each
        lines = []
        for i, line in enumerate(sampling):
            doc = {"question_id": QUESTIONS[i], "response_correctness": line["correctness"]}
            results = [(-0.1 * (i + 1), False), (-1.0, False)]
            lines.append(_line(i, doc, ptrue.process_results_for_response(doc, results)))
        _write(folder, "capcal_toy_ptrue_rc", lines, "ptrue_rc")
    table = load_run(run_folder)
    elicited = read_elicited(run_folder)
    records = elicited[elicited["kind"] == kind]
    assert len(records) == len(QUESTIONS)
    joined = attach_elicited(table, records).set_index("question_id").loc[QUESTIONS]
    column = {"verbalized_rc": "verbalized_rc_confidence", "ptrue_rc": "p_true_rc"}[kind]
    if kind == "ptrue_rc":  # sigmoid(log P(Yes) - log P(No)), worked out per question
        expected = [1 / (1 + math.exp(0.1 * (i + 1) - 1.0)) for i in range(len(QUESTIONS))]
    else:
        expected = [0.6] * len(QUESTIONS)
    np.testing.assert_allclose(joined[column].to_numpy(), expected, rtol=1e-12)
    row = int(np.flatnonzero(table["question_id"] == QUESTIONS[3])[0])
    other = table.copy()
    other.at[row, "correctness"] = [1 - other.at[row, "correctness"][0], *other.at[row, "correctness"][1:]]
    with pytest.raises(ValueError, match=rf"^{kind} record of .*{QUESTIONS[3]}.*different sampling runs"):
        attach_elicited(other, records)


def test_mismatched_sampling_run_is_left_out_when_asked(run_folder):
    """``on_mismatch="leave_out"`` (the report's): the kinds whose records scored other responses are not
    attached and each is named in one line; the others are attached as before."""
    table = load_run(run_folder)
    elicited = read_elicited(run_folder)
    other = table.copy()
    other.at[0, "correctness"] = [1 - z for z in other.at[0, "correctness"]]
    out = attach_elicited(other, elicited, on_mismatch="leave_out")
    assert sorted(out.attrs["left_out"]) == ["selfcheck", "verbalized_rc"]
    assert "selfcheck_p_yes" not in out.columns and "verbalized_rc_confidence" not in out.columns
    assert "verbalized_confidence" in out.columns and "p_true" in out.columns
    line = out.attrs["left_out"]["selfcheck"]
    assert line.startswith(f"selfcheck record of capcal_toy_selfcheck (run {DATE}) for (")
    assert line.endswith("different sampling runs; per-response confidences would be misaligned")
    assert attach_elicited(table, elicited, on_mismatch="leave_out").attrs["left_out"] == {}
    with pytest.raises(ValueError, match="on_mismatch must be"):
        attach_elicited(table, elicited, on_mismatch="ignore")


def _rerun_sampling(run_folder: Path) -> None:
    """The sampling run written again into the same folder with other responses on the first question (as
    step 1 re-run with another k, or another model's run): the self-check now scores responses it is not."""
    lines = _sampling_lines()
    responses = [r"\boxed{5}", r"\boxed{5}", r"\boxed{4}"]
    record = score_responses(responses, extract=lambda r: r[7:-1], judge=lambda a: a == "4")
    lines[0] = {**_line(0, lines[0]["doc"], record), "resps": [responses]}
    _write(run_folder / MODEL, "capcal_toy", lines, "sampling")


def test_check_catches_a_self_check_of_another_sampling_run_and_the_report_leaves_it_out(
    run_folder, tmp_path
):
    """What the report used to refuse as a whole (exit 2, "different sampling runs", no file, no fix):
    ``capcal check`` exits 1 naming the file, the run and the fix; ``capcal report`` leaves the self-check
    (and the response-form confidence) out with a warning and reports the rest."""
    from analysis.cli.main import main
    from analysis.report import build_report

    _rerun_sampling(run_folder)
    folder = run_folder / MODEL
    selfcheck = folder / f"samples_capcal_toy_selfcheck_{DATE}.jsonl"
    sampling = folder / f"samples_capcal_toy_{DATE}.jsonl"
    from analysis.runs.completeness import check_run

    checks = check_run(run_folder).set_index("task")
    assert not checks.at["capcal_toy_selfcheck", "complete"]
    assert checks.at["capcal_toy_selfcheck", "problems"] == (
        f"{selfcheck} (run {DATE}) scored other responses than the capcal_toy run the report uses, "
        f"{sampling} (run {DATE}): question toy/0000 has response correctness [1, 1, 0], the sampling run "
        f'[0, 0, 1]; re-run capcal_toy_selfcheck with --metadata \'{{"samples_file": "{sampling}"}}\' '
        "(the report leaves it out)"
    )
    assert "scored other responses" in checks.at["capcal_toy_verbalized_rc", "problems"]
    assert checks.at["capcal_toy_verbalized", "complete"] and checks.at["capcal_toy", "complete"]
    assert main(["check", str(run_folder)]) == 1
    markdown = build_report([run_folder], tmp_path / "report").markdown.read_text()
    assert (
        "selfcheck confidences not computed on capcal_toy: selfcheck record of capcal_toy_selfcheck"
        in markdown
    )
    assert "re-run the selfcheck task on the samples file of the sampling run used here" in markdown
    assert "| p_true |" in markdown or "p_true" in markdown


def test_the_report_leaves_out_a_kind_that_scored_another_run_and_says_so(run_folder):
    """The report reads the folder with ``on_mismatch="leave_out"``: when the sampling run's first response
    of a question is scored the other way than the response-level records saw it (a sampling run re-made
    after them), the report is still made; the two kinds that read responses are each left out in one line
    of ``not_computed``, the question-level kinds are still joined."""
    from analysis.report.analyze import analyze_runs

    folder = run_folder / MODEL
    remade = [["5", "4", "5"], *ANSWERS[1:]]  # question 0's first response now wrong (it was "4")
    _write(folder, "capcal_toy", _sampling_lines(remade), "sampling")
    (section,) = analyze_runs([run_folder]).results
    left_out = [line for line in section.computed.not_computed if "confidences not computed" in line]
    tail = (
        "re-run the {kind} task on the samples file of the sampling run used here (the latest), or pick the "
        "matching runs with --run"
    )
    assert sorted(line.split(" ")[0] for line in left_out) == ["selfcheck", "verbalized_rc"]
    for line in left_out:
        kind = line.split(" ")[0]
        assert line.startswith(f"{kind} confidences not computed on capcal_toy: ")
        assert line.endswith(tail.format(kind=kind))
    assert "verbalized_confidence" in section.computed.evaluation.columns
    assert "verbalized_rc_confidence" not in section.computed.evaluation.columns
