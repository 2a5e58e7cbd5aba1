"""``analysis.self_calibration.data`` tested by kind (issue 49, point 2), on a small hand-written sampling run
and self-check run (no model): every count of the card against the question it comes from, every field of a
tuple from its own source (the confidence field chosen, the answer key, the threshold at its boundary, the
response's span), the held-out list, and whole messages.

The sampling run (task ``capcal_toy_train``, a calibration split; gold "4") and its self-check run, by
question:

==== =================== ===================== ====================== =====================================
name answers             p_yes                 p_yes_normalized       what it tests
==== =================== ===================== ====================== =====================================
g0   4, 4, 5             .5, .25, .25          .875, .5, .125         SSC .75 = the default threshold
n0   4, 5, 6             (no self-check record)                       questions_without_selfcheck
g1   4, -, -             .5, .125, .5          .25, .75, .5           two unparseable responses dropped
z0   1, 2, -             0, 0, .5              .5, .5, .5             zero total under p_yes only
m0   4, 4, 4             .5, null, .5          .5, .5, .5             missing under p_yes only
g2   7, 7, "  "          .5, .5, .5            .5, .25, .75           a blank answer is unparseable
u0   -, -, -             .5, .5, .5            .5, .5, .5             no parseable response
u1   -, "  ", -          .5, .5, .5            .5, .5, .5             no parseable response (blank)
g3   " 8", 8, -          .25, .25, .5          .5, .125, .875         " 8" groups with "8" (answer key)
m1   5, 5, 5             .5, .5, .5            null, .5, .5           missing under p_yes_normalized only
g4   9, -, 6             .5, .5, .125          .75, .5, .25           SSC .8 / .2
==== =================== ===================== ====================== =====================================

Responses without an LM span (the self-check context does not start with the sampling prompt): g0's third,
g1's first, g2's second, g4's third. Two self-check records (x0, x1) have no question in the sampling run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.self_calibration.data import (
    SelfCalibrationDataError,
    build_training_data,
    read_checked_sides,
    read_training_data,
    ssc_targets,
    target_histogram,
)
from tests.hostile.logs import sampling_line, write_run

TASK = "capcal_toy_train"
CHECK_TASK = "capcal_toy_train_selfcheck"
DATE = "2026-01-02T03-04-05.000006"
CASES: dict[str, tuple[list[str | None], list[float | None], list[float | None]]] = {
    "g0": (["4", "4", "5"], [0.5, 0.25, 0.25], [0.875, 0.5, 0.125]),
    "n0": (["4", "5", "6"], [], []),
    "g1": (["4", None, None], [0.5, 0.125, 0.5], [0.25, 0.75, 0.5]),
    "z0": (["1", "2", None], [0.0, 0.0, 0.5], [0.5, 0.5, 0.5]),
    "m0": (["4", "4", "4"], [0.5, None, 0.5], [0.5, 0.5, 0.5]),
    "g2": (["7", "7", "  "], [0.5, 0.5, 0.5], [0.5, 0.25, 0.75]),
    "u0": ([None, None, None], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
    "u1": ([None, "  ", None], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
    "g3": ([" 8", "8", None], [0.25, 0.25, 0.5], [0.5, 0.125, 0.875]),
    "m1": (["5", "5", "5"], [0.5, 0.5, 0.5], [None, 0.5, 0.5]),
    "g4": (["9", None, "6"], [0.5, 0.5, 0.125], [0.75, 0.5, 0.25]),
}
NO_SPAN = {("g0", 2), ("g1", 0), ("g2", 1), ("g4", 2)}


def prompt_of(name: str) -> str:
    return f"Question {name}: what is it?\n"


def response_of(name: str, index: int, answer: str | None) -> str:
    return (
        f" Response {name}{index}: \\boxed{{{answer}}}" if answer is not None else f" Response {name}{index}."
    )


def context_of(name: str, index: int, answer: str | None) -> str:
    """The self-check context: the sampling prompt, the response (stripped) and the check question; for the
    responses of NO_SPAN a system line first (not the sampling prompt's rendering)."""
    head = "System line.\n" if (name, index) in NO_SPAN else ""
    return (
        f"{head}{prompt_of(name)}{response_of(name, index, answer).strip()}\nIs the answer correct? (Yes/No)"
    )


def yes_of(name: str, index: int) -> str:
    return f" Yes-{name}{index}"


def write_runs(root: Path) -> tuple[Path, Path]:
    """The sampling run under root/sampling and its self-check run under root/selfcheck."""
    sampling_lines, check_lines = [], []
    for number, (name, (answers, p_yes, p_norm)) in enumerate(CASES.items()):
        responses = [response_of(name, i, a) for i, a in enumerate(answers)]
        line = sampling_line(
            number, answers, question=prompt_of(name), question_id=f"toy/{name}", responses=responses
        )
        assert line["extracted_answers"] == answers  # the case as meant
        sampling_lines.append(line)
        if p_yes:
            check_lines.append(
                _check_line(number, name, responses, line["correctness"], p_yes, p_norm, answers)
            )
    for number, name in ((98, "x0"), (99, "x1")):  # two questions not in the run
        check_lines.append(_check_line(number, name, ["r"], [0], [0.5], [0.5], ["4"]))
    sampling_results = {
        "results": {TASK: {}},
        "configs": {TASK: {"metadata": {"capcal_task": "sampling", "capcal_role": "calibration"}}},
        "model_name": "toy-model",
    }
    check_results = {
        "results": {CHECK_TASK: {}},
        "configs": {
            CHECK_TASK: {
                "metadata": {
                    "capcal_task": "selfcheck",
                    "capcal_role": "confidence",
                    "capcal_target_task": TASK,
                }
            }
        },
        "model_name": "toy-model",
    }
    sampling = write_run(root / "sampling", sampling_lines, task=TASK, date=DATE, results=sampling_results)
    check = write_run(root / "selfcheck", check_lines, task=CHECK_TASK, date=DATE, results=check_results)
    return sampling, check


def _check_line(
    number: int,
    name: str,
    responses: list[str],
    correctness: list[int],
    p_yes: list[float | None],
    p_norm: list[float | None],
    answers: list[str | None],
) -> dict:
    arguments = {}
    for index, answer in enumerate(answers):
        context = context_of(name, index, answer)
        arguments[f"gen_args_{2 * index}"] = {"arg_0": context, "arg_1": yes_of(name, index)}
        arguments[f"gen_args_{2 * index + 1}"] = {"arg_0": context, "arg_1": " No"}
    record = {"p_yes": p_yes, "p_yes_normalized": p_norm, "response_correctness": correctness}
    doc = {"question_id": f"toy/{name}", "responses": responses, "response_correctness": correctness}
    return {
        "doc_id": number,
        "doc": doc,
        "target": "",
        "arguments": arguments,
        "resps": [[]],
        "metrics": list(record),
        **record,
    }


@pytest.fixture
def runs(tmp_path) -> tuple[Path, Path]:
    write_runs(tmp_path)
    return tmp_path / "sampling", tmp_path / "selfcheck"


def _by_key(tuples: list[dict]) -> dict[tuple[str, int], dict]:
    return {(t["question_id"].removeprefix("toy/"), t["response_index"]): t for t in tuples}


# SSC by (question, response) under p_yes and under p_yes_normalized, worked out by hand from the table above
SSC_P_YES = {
    ("g0", 0): 0.75, ("g0", 1): 0.75, ("g0", 2): 0.25,
    ("g1", 0): 1.0,
    ("g2", 0): 1.0, ("g2", 1): 1.0,
    ("g3", 0): 1.0, ("g3", 1): 1.0,
    ("m1", 0): 1.0, ("m1", 1): 1.0, ("m1", 2): 1.0,
    ("g4", 0): 0.8, ("g4", 2): 0.2,
}  # fmt: skip
SSC_NORMALIZED = {
    ("g0", 0): 1.375 / 1.5, ("g0", 1): 1.375 / 1.5, ("g0", 2): 0.125 / 1.5,
    ("g1", 0): 1.0,
    ("z0", 0): 0.5, ("z0", 1): 0.5,
    ("m0", 0): 1.0, ("m0", 1): 1.0, ("m0", 2): 1.0,
    ("g2", 0): 1.0, ("g2", 1): 1.0,
    ("g3", 0): 1.0, ("g3", 1): 1.0,
    ("g4", 0): 0.75, ("g4", 2): 0.25,
}  # fmt: skip


def test_every_field_of_a_tuple_comes_from_its_own_source(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out")
    tuples = read_training_data(data.path)
    assert [(t["question_id"], t["response_index"]) for t in tuples] == [
        (f"toy/{name}", index) for name, index in SSC_P_YES
    ]  # in run order, response order
    for (name, index), item in _by_key(tuples).items():
        answers, p_yes, _ = CASES[name]
        response = response_of(name, index, answers[index])
        prompt, context = prompt_of(name), context_of(name, index, answers[index])
        spanned = (name, index) not in NO_SPAN
        start, end = (len(prompt), len(prompt) + len(response.strip())) if spanned else (-1, -1)
        ssc = SSC_P_YES[(name, index)]
        assert item == {
            "question_id": f"toy/{name}",
            "task": TASK,
            "response_index": index,
            "context": context,
            "yes_text": yes_of(name, index),
            "response": response,
            "response_start": start,
            "response_end": end,
            "extracted_answer": answers[index],
            "confidence": p_yes[index],
            "ssc": pytest.approx(ssc, abs=1e-12),
            "lm_loss": ssc > 0.75 + 1e-9 and spanned,
            "correct": int(answers[index] == "4"),
        }, (name, index)
        if spanned:
            assert context[start:end] == response.strip()


def test_every_count_of_the_card_comes_from_its_own_questions(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out")
    assert data.counts == {
        "questions_in_run": 11,
        "responses_in_run": 33,
        "questions_without_selfcheck": 1,  # n0
        "selfcheck_records_without_question": 2,  # x0, x1
        "questions_missing_confidence": 1,  # m0
        "questions_without_parseable_response": 2,  # u0, u1
        "questions_zero_total_confidence": 1,  # z0
        "responses_unparseable_dropped": 5,  # g1 2, g2 1, g3 1, g4 1
        "responses_without_lm_span": 4,
        "tuples": 13,
        "lm_tuples": 7,  # g2 1, g3 2, m1 3, g4 1 (g0's .75 is not above .75)
        "questions_used": 6,
    }
    card = json.loads(data.card.read_text())
    assert card["counts"] == data.counts
    ssc = list(SSC_P_YES.values())
    assert card["mean_target"] == pytest.approx(sum(ssc) / 13, abs=1e-12)
    assert card["accuracy_of_tuples"] == pytest.approx(3 / 13, abs=1e-12)  # g0 4, 4; g1 4
    assert card["settings"] == {"confidence": "p_yes", "lm_threshold": 0.75}
    bins = [0] * 10
    for value in ssc:
        bins[min(int(value * 10 + 1e-9), 9)] += 1
    assert [b["count"] for b in card["target_histogram"]] == bins == [0, 0, 2, 0, 0, 0, 0, 2, 1, 8]
    assert data.histogram == card["target_histogram"]
    assert (data.path.name, data.card.name, data.readme.name) == ("train.jsonl", "card.json", "README.md")
    assert data.path.parent == data.card.parent == data.readme.parent == tmp_path / "out"
    for side, path, task in (("sampling", sampling, TASK), ("selfcheck", selfcheck, CHECK_TASK)):
        source = card["sources"][side]
        samples = path / "model__x" / f"samples_{task}_{DATE}.jsonl"
        assert (source["task"], source["model"], source["run_id"]) == (task, "toy-model", DATE)
        assert source["samples_file"] == str(samples)
        assert source["results_file"] == str(path / "model__x" / f"results_{DATE}.json")
        assert source["model_id"] == "unresolved:toy-model" and len(source["run_key"]) == 64
    assert card["sources"]["sampling"]["run_key"] != card["sources"]["selfcheck"]["run_key"]


def test_the_readme_is_the_card_line_by_line(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out")
    lines = data.readme.read_text().splitlines()
    assert lines[:6] == [
        "# Self-Calibration training data",
        "",
        'Tuples in `train.jsonl` (load with `datasets.load_dataset("json", data_files=...)`); targets are '
        "soft self-consistency scores (Huang et al. 2025).",
        "",
        "| count | value |",
        "|---|---|",
    ]
    assert lines[6:19] == [
        "| questions_in_run | 11 |",
        "| responses_in_run | 33 |",
        "| questions_without_selfcheck | 1 |",
        "| selfcheck_records_without_question | 2 |",
        "| questions_missing_confidence | 1 |",
        "| questions_without_parseable_response | 2 |",
        "| questions_zero_total_confidence | 1 |",
        "| responses_unparseable_dropped | 5 |",
        "| responses_without_lm_span | 4 |",
        "| tuples | 13 |",
        "| lm_tuples | 7 |",
        "| questions_used | 6 |",
        "",
    ]
    start = lines.index("| SSC bin | tuples |")
    assert lines[start + 2] == "| [0.0, 0.1) | 0 |" and lines[start + 4] == "| [0.2, 0.3) | 2 |"
    assert lines[start + 11] == "| [0.9, 1.0) | 8 |"
    sources = [line for line in lines if line.startswith("- ")]
    # a path in the text: Markdown's backslash escapes (not in a code span, where they would show)
    sampling_file = sampling / "model__x" / f"samples_{TASK}_{DATE}.jsonl"
    selfcheck_file = selfcheck / "model__x" / f"samples_{CHECK_TASK}_{DATE}.jsonl"
    assert [line.replace("\\", "") for line in sources] == [
        f"- sampling: task {TASK}, model toy-model, run {DATE} ({sampling_file})",
        f"- selfcheck: task {CHECK_TASK}, model toy-model, run {DATE} ({selfcheck_file})",
    ]
    assert "model\\_\\_x" in sources[0]  # escaped: "__" would open emphasis
    assert lines[-1] == 'Settings: {"confidence": "p_yes", "lm_threshold": 0.75}'


def test_the_card_and_readme_are_utf8_under_an_ascii_locale(runs, tmp_path):
    """Under a C/POSIX locale without UTF-8 mode (default text encoding ASCII) a model named with non-ASCII
    letters still gives a UTF-8 ``card.json`` and ``README.md``, and no file is written in the locale's
    encoding (``-X warn_default_encoding``: an ``EncodingWarning`` names any ``write_text`` or ``open``
    without an encoding; the card's JSON escapes non-ASCII, so only that warning tells a dropped
    ``encoding=`` on it)."""
    import os
    import subprocess
    import sys

    model = "tøy-modèl—β"
    sampling, selfcheck = runs
    for results in [*sampling.rglob("results_*.json"), *selfcheck.rglob("results_*.json")]:
        content = json.loads(results.read_text(encoding="utf-8"))
        results.write_text(json.dumps({**content, "model_name": model}), encoding="utf-8")
    out = tmp_path / "out"
    code = (
        "import locale, sys, warnings\n"
        "from analysis.self_calibration.data import build_training_data\n"
        "assert locale.getpreferredencoding(False) != 'UTF-8' and not sys.flags.utf8_mode\n"
        "assert sys.flags.warn_default_encoding\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always', EncodingWarning)\n"
        f"    build_training_data({str(sampling)!r}, {str(selfcheck)!r}, {str(out)!r})\n"
        "print(ascii([f'{w.filename}:{w.lineno}' for w in caught if w.category is EncodingWarning]))\n"
    )
    env = {**os.environ, "LANG": "C", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[3]), env.get("PYTHONPATH")]))
    command = [sys.executable, "-X", "warn_default_encoding", "-c", code]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"  # no file written in the locale's encoding
    card = json.loads((out / "card.json").read_bytes().decode("utf-8"))
    assert card["sources"]["sampling"]["model"] == model and card["sources"]["selfcheck"]["model"] == model
    readme = (out / "README.md").read_bytes().decode("utf-8")
    assert f"- sampling: task {TASK}, model {model}, run " in readme


def test_the_normalized_confidence_is_read_from_its_own_field(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out", confidence="p_yes_normalized")
    tuples = _by_key(read_training_data(data.path))
    assert list(tuples) == list(SSC_NORMALIZED)
    for key, item in tuples.items():
        assert item["ssc"] == pytest.approx(SSC_NORMALIZED[key], abs=1e-12), key
        assert item["confidence"] == CASES[key[0]][2][key[1]], key
    counts = data.counts
    assert (counts["questions_missing_confidence"], counts["questions_zero_total_confidence"]) == (1, 0)  # m1
    assert (counts["tuples"], counts["lm_tuples"], counts["questions_used"]) == (15, 8, 7)
    assert counts["responses_unparseable_dropped"] == 6
    assert json.loads(data.card.read_text())["settings"] == {
        "confidence": "p_yes_normalized",
        "lm_threshold": 0.75,
    }


def test_the_threshold_is_passed_through_and_strict(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out", lm_threshold=0.7)
    tuples = _by_key(read_training_data(data.path))
    assert tuples[("g0", 0)]["lm_loss"] and tuples[("g0", 1)]["lm_loss"]  # .75 > .7
    assert data.counts["lm_tuples"] == 9
    data = build_training_data(sampling, selfcheck, tmp_path / "out2", lm_threshold=0.8)
    tuples = _by_key(read_training_data(data.path))
    assert not tuples[("g4", 0)]["lm_loss"]  # .8 is not above .8
    assert data.counts["lm_tuples"] == 6
    assert json.loads(data.card.read_text())["settings"] == {"confidence": "p_yes", "lm_threshold": 0.8}


def test_the_answer_key_is_passed_through(runs, tmp_path):
    sampling, selfcheck = runs
    data = build_training_data(sampling, selfcheck, tmp_path / "out", answer_key=lambda answer: answer)
    tuples = _by_key(read_training_data(data.path))
    assert tuples[("g3", 0)]["ssc"] == 0.5 and tuples[("g3", 1)]["ssc"] == 0.5  # " 8" and "8" apart
    assert tuples[("g2", 0)]["ssc"] == pytest.approx(2 / 3) and tuples[("g2", 2)]["ssc"] == pytest.approx(
        1 / 3
    )


def test_held_out_questions_are_refused_naming_the_first_three_in_run_order(runs, tmp_path):
    sampling, selfcheck = runs
    with pytest.raises(SelfCalibrationDataError) as refused:
        build_training_data(
            sampling,
            selfcheck,
            tmp_path / "out",
            exclude_question_ids=["toy/g4", "toy/x0", "toy/g0", "toy/m1", "toy/n0"],
        )
    samples = sampling / "model__x" / f"samples_{TASK}_{DATE}.jsonl"
    assert str(refused.value) == (
        f"{samples}: 4 question(s) are held-out (evaluation) questions, e.g. toy/g0, toy/n0, toy/m1; they "
        "may not enter Self-Calibration training data"
    )
    assert not (tmp_path / "out").exists()
    build_training_data(sampling, selfcheck, tmp_path / "out", exclude_question_ids=["toy/x0", "other"])


@pytest.mark.parametrize("threshold, refused", [(-0.01, True), (0.0, False), (1.0, False), (1.01, True)])
def test_the_threshold_bounds_are_inclusive(runs, tmp_path, threshold, refused):
    sampling, selfcheck = runs
    if not refused:
        assert (
            build_training_data(sampling, selfcheck, tmp_path / "o", lm_threshold=threshold).counts["tuples"]
            == 13
        )
        return
    with pytest.raises(SelfCalibrationDataError) as error:
        build_training_data(sampling, selfcheck, tmp_path / "o", lm_threshold=threshold)
    assert str(error.value) == f"lm_threshold must lie in [0, 1], got {threshold}"


def test_a_run_declared_evaluation_is_refused_whole(tmp_path):
    sampling_file, selfcheck_file = write_runs(tmp_path)
    results = sampling_file.parent / f"results_{DATE}.json"
    content = json.loads(results.read_text())
    content["configs"][TASK]["metadata"].update(
        capcal_role=["evaluation", "calibration"], capcal_calibration_tasks=[]
    )
    results.write_text(json.dumps(content))
    with pytest.raises(SelfCalibrationDataError) as refused:
        build_training_data(tmp_path / "sampling", tmp_path / "selfcheck", tmp_path / "out")
    assert str(refused.value) == (
        f"{results}: task {TASK} is declared calibration, evaluation ({results}); "
        "Self-Calibration training data may only come from a calibration (training) split, never from "
        "evaluation questions"
    )


def test_two_runs_in_one_folder_are_refused_whole(tmp_path):
    sampling_file, _ = write_runs(tmp_path)
    other = sampling_file.with_name(f"samples_capcal_toy2_train_{DATE}.jsonl")  # another task, same folder
    other.write_text(sampling_file.read_text().replace("Question", "Other question"))  # another run
    results = sampling_file.parent / f"results_{DATE}.json"
    content = json.loads(results.read_text())
    content["results"]["capcal_toy2_train"] = {}
    content["configs"]["capcal_toy2_train"] = content["configs"][TASK]
    results.write_text(json.dumps(content))
    with pytest.raises(SelfCalibrationDataError) as refused:
        build_training_data(tmp_path / "sampling", tmp_path / "selfcheck", tmp_path / "out")
    assert str(refused.value) == (
        f"{tmp_path / 'sampling'}: expected exactly one sampling run, found capcal_toy2_train ({other}), "
        f"{TASK} ({sampling_file})"
    )


# ---------------------------------------------------------------- the pure parts, by kind


def test_ssc_targets_pass_the_answer_key_and_keep_the_response_order():
    answers = ["b", "a", None, "B", "a "]
    confidences = [0.5, 0.25, 0.75, 0.125, 0.125]
    assert ssc_targets(answers, confidences) == [0.5, 0.375, None, 0.125, 0.375]  # "a " is "a"
    total = 1.0
    assert ssc_targets(answers, confidences, answer_key=lambda s: s.strip().lower()) == [
        0.625 / total, 0.375 / total, None, 0.625 / total, 0.375 / total,
    ]  # fmt: skip
    with pytest.raises(ValueError) as error:
        ssc_targets(["1", "2"], [0.0, 0.0])
    assert str(error.value) == "the parseable responses' confidences sum to 0: SSC is undefined"
    with pytest.raises(ValueError) as error:
        ssc_targets(["1"], [1.0000001])
    assert str(error.value) == "confidence 1.0000001 is not a number in [0, 1]"
    assert ssc_targets(["1"], [1.0]) == [1.0] and ssc_targets(["1", "2"], [0.0, 1.0]) == [0.0, 1.0]  # bounds
    assert ssc_targets([], []) == []


def test_target_histogram_edges_and_bins_passed_through():
    histogram = target_histogram([0.0, 0.2499, 0.25, 0.5, 0.75, 1.0], bins=4)
    assert histogram == [
        {"low": 0.0, "high": 0.25, "count": 2},
        {"low": 0.25, "high": 0.5, "count": 1},
        {"low": 0.5, "high": 0.75, "count": 1},
        {"low": 0.75, "high": 1.0, "count": 2},
    ]
    assert [b["high"] for b in target_histogram([])][:3] == [0.1, 0.2, 0.3]


def test_read_training_data_boundaries_of_the_span(tmp_path):
    base = {
        "question_id": "q", "task": "t", "response_index": 0, "context": "abcdef", "yes_text": "Yes",
        "response": "cd", "response_start": 2, "response_end": 6, "extracted_answer": "cd", "confidence": 0.5,
        "ssc": 1.0, "lm_loss": True, "correct": 1,
    }  # fmt: skip
    path = tmp_path / "train.jsonl"
    for change, accepted in (
        ({}, True),  # end = len(context)
        ({"response_end": 7}, False),
        ({"response_start": 6}, False),  # start = end
        ({"response_start": 0, "response_end": 1}, True),
        ({"ssc": 0.0}, True),
        ({"response_start": -1, "response_end": -1, "lm_loss": False}, True),
    ):
        path.write_text(json.dumps({**base, **change}) + "\n")
        if accepted:
            assert read_training_data(path) == [{**base, **change}]
            continue
        with pytest.raises(SelfCalibrationDataError) as error:
            read_training_data(path)
        start, end = {**base, **change}["response_start"], {**base, **change}["response_end"]
        assert str(error.value) == f"{path}:1: response span {start}..{end} is not inside the context"
    missing = {key: value for key, value in base.items() if key not in ("yes_text", "correct")}
    path.write_text(json.dumps(missing) + "\n")
    with pytest.raises(SelfCalibrationDataError) as error:
        read_training_data(path)
    assert str(error.value) == f"{path}:1: missing field(s) yes_text, correct"


@pytest.mark.parametrize(
    ("start", "end", "accepted"),
    [(0, 6, True), (0, 0, False), (0, 7, False)],  # context "abcdef": 0..6 is all of it
)
def test_a_span_starting_at_zero_is_checked_like_any_other(tmp_path, start, end, accepted):
    """A span at the context's very start (0) still needs 0 < end <= len(context); catches a check that
    only looks at spans starting after 0."""
    record = {
        "question_id": "q", "task": "t", "response_index": 0, "context": "abcdef", "yes_text": "Yes",
        "response": "abcdef", "response_start": start, "response_end": end, "extracted_answer": "abcdef",
        "confidence": 0.5, "ssc": 1.0, "lm_loss": True, "correct": 1,
    }  # fmt: skip
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(record) + "\n")
    if accepted:
        assert read_training_data(path) == [record]
        return
    with pytest.raises(SelfCalibrationDataError) as error:
        read_training_data(path)
    assert str(error.value) == f"{path}:1: response span 0..{end} is not inside the context"


@pytest.mark.parametrize("tamper", ["another response", "the same responses in another order"])
def test_a_self_check_of_other_responses_names_both_lines_whole(tmp_path, tamper):
    """g2 is line 6 of the sampling run and line 5 of the self-check run (n0 has no record)."""
    _, check_file = write_runs(tmp_path)
    lines = [json.loads(line) for line in check_file.read_text().splitlines()]
    assert lines[4]["doc"]["question_id"] == "toy/g2"
    responses = lines[4]["doc"]["responses"]
    if tamper == "another response":
        responses[1] = "another response"
    else:
        responses[0], responses[1] = responses[1], responses[0]
    check_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(SelfCalibrationDataError) as refused:
        build_training_data(tmp_path / "sampling", tmp_path / "selfcheck", tmp_path / "out")
    assert str(refused.value) == (
        "self-check record line 5 (question toy/g2) scored other responses than the sampling run's line 6: "
        "different runs"
    )


def test_checked_sides_keep_before_after_and_the_training_questions(tmp_path):
    before_sampling, _ = write_runs(tmp_path / "before")
    after_sampling, _ = write_runs(tmp_path / "after")
    data = build_training_data(
        tmp_path / "before" / "sampling", tmp_path / "before" / "selfcheck", tmp_path / "d"
    )
    sides = read_checked_sides(
        (tmp_path / "before" / "sampling", tmp_path / "before" / "selfcheck"),
        (tmp_path / "after" / "sampling", tmp_path / "after" / "selfcheck"),
        training_data=data.path.parent,
    )
    assert sides.before.sampling.path == before_sampling and sides.after.sampling.path == after_sampling
    assert sides.before.selfcheck.path.parents[1] == tmp_path / "before" / "selfcheck"
    assert sides.after.selfcheck.path.parents[1] == tmp_path / "after" / "selfcheck"
    assert sides.training_question_ids == [f"toy/{name}" for name, _ in SSC_P_YES]  # one per tuple
    assert list(sides.before.table["question_id"]) == [f"toy/{name}" for name in CASES]
    assert (sides.before.join.unmatched_left, sides.before.join.unmatched_right) == (1, 2)
    assert (
        read_checked_sides(
            (tmp_path / "before" / "sampling", tmp_path / "before" / "selfcheck"),
            (tmp_path / "after" / "sampling", tmp_path / "after" / "selfcheck"),
        ).training_question_ids
        == []
    )


def test_a_loop_folder_whose_training_data_holds_an_evaluation_question_is_not_compared(tmp_path):
    """``read_comparisons`` on a loop folder passes its ``data`` folder's training questions to the
    comparison: here they are the evaluation run's own questions, so the loop is not compared (its section
    says why); without a ``data`` folder the same sides are compared."""
    import shutil

    from analysis.self_calibration.results import read_comparisons

    loop = tmp_path / "loop"
    for side in ("before", "after"):
        write_runs(tmp_path / side)
        shutil.copytree(tmp_path / side / "sampling", loop / side / "eval_sample")
        shutil.copytree(tmp_path / side / "selfcheck", loop / side / "eval_selfcheck")
    (loop / "loop.json").write_text("{}", encoding="utf-8")
    (compared,) = read_comparisons([loop], n_resamples=10)
    assert compared.comparison is not None and compared.problem is None
    build_training_data(tmp_path / "before" / "sampling", tmp_path / "before" / "selfcheck", loop / "data")
    (refused,) = read_comparisons([loop], n_resamples=10)
    assert refused.comparison is None and "were training questions" in refused.problem
    assert refused.section.warnings == [refused.problem]
