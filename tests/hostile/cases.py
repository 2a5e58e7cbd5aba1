r"""The hostile and malformed input corpus (issue #6, point 3).

Each case builds its input in a fresh folder, sends it through one real entry point (``load_run``,
``read_elicited``, an answer extractor/checker, the verbalized-confidence parser, a metric, the report) and
states the behaviour it must get, with one line of why:

- ``Raises(error, where, message)``: an error of that type whose message names the file and line
  (``{samples}``, ``{results}``, ``{tmp}`` are filled in with the case's paths), and says what is wrong;
- ``Returns(check)``: the entry point returns, and ``check`` asserts on its value (a correct number, a
  counted parse failure, a bounded run time).

Policy: an error naming file:line, or a counted and reported parse failure; never a crash without a
message, a hang (every case runs in a child process under ``time_limit_s``), or a silently wrong metric.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

import capcal_metrics
from analysis.estimators.elicited import parse_failure_counts, read_elicited
from analysis.runs import RunFormatError, load_run, load_runs, summarize
from capcal_tasks.answers.aliases import extract_short_answer, matches_an_alias
from capcal_tasks.answers.boxed import boxed_contents, last_boxed
from capcal_tasks.answers.choices import extract_choice_letter
from capcal_tasks.answers.integer import parse_integer
from capcal_tasks.answers.math_equivalence import MathEquivalenceChecker
from capcal_tasks.answers.numeric import numbers_equal, parse_number
from capcal_tasks.confidence.verbalized import failure_count, parse_verbalized_confidence, process_results

from .logs import (
    DATE,
    LATER,
    confidence_line,
    results_json,
    samples_path,
    sampling_line,
    write_run,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/time_limits.py
from time_limits import contention, cpu_seconds  # noqa: E402

HOSTILE_HTML = "<script>window.__capcal_pwned = 1</script><img src=x onerror='window.__capcal_pwned=1'>"
TEN_MB = 10 * 1024 * 1024


@dataclass(frozen=True)
class Raises:
    """The entry point raises ``error``; its message contains ``where`` (file:line) and ``message``."""

    error: type[BaseException]
    where: str
    message: str = ""


@dataclass(frozen=True)
class Returns:
    """The entry point returns a value that ``check`` accepts (``check`` asserts)."""

    check: Callable[[Any], None]


@dataclass(frozen=True)
class Case:
    name: str
    category: str
    why: str
    run: Callable[[Path], Any]  # builds the input under the folder, calls the entry point, returns its value
    expect: Raises | Returns
    time_limit_s: float = 20.0


CASES: list[Case] = []


def case(
    name: str, category: str, why: str, expect: Raises | Returns, time_limit_s: float = 20.0
) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    def register(run: Callable[[Path], Any]) -> Callable[[Path], Any]:
        CASES.append(Case(name, category, why, run, expect, time_limit_s))
        return run

    return register


def timed(seconds: float, function: Callable[[], Any]) -> Any:
    """``function()``, asserting that it took less than ``seconds`` of CPU time (tests/time_limits.py: a
    bound on work, which other processes on the machine do not inflate)."""
    value, elapsed = cpu_seconds(function)
    assert elapsed < seconds, f"took {elapsed:.2f} s of CPU time (limit {seconds} s)"
    return value


def good(doc_id: int) -> dict:
    return sampling_line(doc_id, ["4", "4", "5", None])


def run_with_second_line(root: Path, second: dict | str | bytes) -> pd.DataFrame:
    write_run(root, [good(0), second, good(2)])
    return load_run(root)


# ---------------------------------------------------------------- samples files (load_run)
SAMPLES = "samples file"
LINE2 = "{samples}:2"


def _mutated(**changes: object) -> dict:
    return {**sampling_line(1, ["4", "1", None, "2"]), **changes}


@case(
    "truncated_last_line",
    SAMPLES,
    "an interrupted run: the last line stops mid-JSON, no newline",
    Raises(RunFormatError, "{samples}:3", "truncated"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1), json.dumps(good(2))[:-40].encode()])
    return load_run(root)


@case(
    "partial_line_in_middle",
    SAMPLES,
    "a partially written line followed by later lines",
    Raises(RunFormatError, LINE2, "truncated"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, json.dumps(good(1))[:57])


@case(
    "empty_samples_file",
    SAMPLES,
    "the results file declares a sampling task whose samples file is empty",
    Raises(RunFormatError, "{samples}", "no capcal sampling records"),
)
def _(root: Path) -> Any:
    write_run(root, [])
    return load_run(root)


@case(
    "blank_samples_file",
    SAMPLES,
    "only blank lines: the same as empty, never zero silent rows",
    Raises(RunFormatError, "{samples}", "no capcal sampling records"),
)
def _(root: Path) -> Any:
    write_run(root, ["", "   ", ""])
    return load_run(root)


@case(
    "blank_lines_between_records",
    SAMPLES,
    "blank lines are not records; the others load unchanged",
    Returns(lambda table: assert_equal(list(table["doc_id"]), [0, 2])),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), "", "  ", good(2)])
    return load_run(root)


@case(
    "line_is_not_an_object",
    SAMPLES,
    "a JSON array where a record belongs",
    Raises(RunFormatError, LINE2, "expected a JSON object"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, "[1, 2]")


@case(
    "missing_resps",
    SAMPLES,
    "a record without its responses",
    Raises(RunFormatError, LINE2, "missing key(s) resps"),
)
def _(root: Path) -> Any:
    line = _mutated()
    del line["resps"]
    return run_with_second_line(root, line)


@case(
    "resps_not_nested",
    SAMPLES,
    "lm-eval nests the k responses in one list",
    Raises(RunFormatError, LINE2, "one list of k responses"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(resps=["a", "b", "c", "d"]))


@case(
    "correctness_wrong_length",
    SAMPLES,
    "3 correctness values for 4 responses",
    Raises(RunFormatError, LINE2, "must be equal"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(correctness=[1, 0, 1], expected_accuracy=2 / 3))


@case("correctness_empty", SAMPLES, "k = 0 has no mean", Raises(RunFormatError, LINE2, "non-zero"))
def _(root: Path) -> Any:
    return run_with_second_line(
        root, _mutated(resps=[[]], correctness=[], extracted_answers=[], expected_accuracy=0)
    )


@case(
    "correctness_value_2",
    SAMPLES,
    "only 0/1 are correctness values",
    Raises(RunFormatError, LINE2, "0/1 integers"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(correctness=[1, 0, 2, 0], expected_accuracy=0.75))


@case(
    "correctness_true_false",
    SAMPLES,
    "capcal writes 0/1 integers; booleans mean another writer",
    Raises(RunFormatError, LINE2, "0/1 integers"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(correctness=[True, False, True, False], expected_accuracy=0.5))


@case(
    "correctness_floats",
    SAMPLES,
    "1.0 is not a 0/1 integer (a probability leaked in)",
    Raises(RunFormatError, LINE2, "0/1 integers"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(correctness=[1.0, 0, 1, 0], expected_accuracy=0.5))


@case("correctness_string", SAMPLES, "a string is not a list", Raises(RunFormatError, LINE2, "0/1 integers"))
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(correctness="1010"))


@case(
    "expected_accuracy_inconsistent",
    SAMPLES,
    "mu_hat must be the mean of its own correctness vector",
    Raises(RunFormatError, LINE2, "is not the mean of its correctness vector"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(expected_accuracy=0.9))


@case(
    "expected_accuracy_nan",
    SAMPLES,
    "NaN (valid for Python's json, not JSON) is rejected on read, before any field sees it",
    Raises(RunFormatError, LINE2, "non-finite number NaN"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, json.dumps(_mutated(expected_accuracy=math.nan)))


@case(
    "expected_accuracy_string",
    SAMPLES,
    "a number written as text",
    Raises(RunFormatError, LINE2, "expected_accuracy '0.5'"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(expected_accuracy="0.5"))


@case(
    "doc_id_not_integer",
    SAMPLES,
    "was a bare ValueError from int() without file or line (fixed)",
    Raises(RunFormatError, LINE2, "'doc_id' must be an integer"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(doc_id="one"))


@case(
    "extracted_answers_not_list",
    SAMPLES,
    "per-response answers must be a list",
    Raises(RunFormatError, LINE2, "'extracted_answers' must be a list"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, _mutated(extracted_answers="4"))


@case(
    "invalid_utf8",
    SAMPLES,
    "a byte that is not UTF-8 in a response",
    Raises(RunFormatError, "{samples}", "not valid UTF-8"),
)
def _(root: Path) -> Any:
    return run_with_second_line(
        root, json.dumps(_mutated()).encode().replace(b"no idea", b"no \xff\xfe") + b"\n"
    )


@case(
    "lone_surrogate_escape",
    SAMPLES,
    "valid JSON but not Unicode: pandas crashed with a bare UnicodeEncodeError (fixed)",
    Raises(RunFormatError, LINE2, "lone UTF-16 surrogate"),
)
def _(root: Path) -> Any:
    return run_with_second_line(root, json.dumps(_mutated()).replace("no idea", "no \\ud800 idea"))


@case(
    "duplicate_question_id",
    SAMPLES,
    "the same question twice in one run would be double-counted in every metric (was silent; fixed)",
    Raises(RunFormatError, "{samples}:3", "appears twice (first on line 1)"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0), good(1), sampling_line(7, ["4"] * 4, question_id="toy/0000")])
    return load_run(root)


def _check_varying_k(value: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    table, summary = value
    assert list(table["n"]) == [2, 8, 5]
    assert list(table["expected_accuracy"]) == [0.5, 0.25, 0.6]
    assert (summary.loc[0, "k_min"], summary.loc[0, "k_max"]) == (2, 8)


@case(
    "different_k_across_questions",
    SAMPLES,
    "allowed (an interrupted or budgeted run): n and mu_hat are per row; summarize reports k_min/k_max",
    Returns(_check_varying_k),
)
def _(root: Path) -> Any:
    lines = [
        sampling_line(0, ["4", None]),
        sampling_line(1, ["4", "4", "1", "1", "1", "1", "1", "1"]),
        sampling_line(2, ["4", "4", "4", "1", None]),
    ]
    write_run(root, lines)
    table = load_run(root)
    return table, summarize(table)


def _check_ten_mb(value: tuple[pd.DataFrame, float]) -> None:
    table, elapsed = value
    assert len(table.loc[0, "responses"][0]) > TEN_MB
    assert table.loc[0, "extracted_answers"][0] == "4" and table.loc[0, "expected_accuracy"] == 1.0
    assert elapsed < 10.0, f"load_run took {elapsed:.1f} s of CPU time"


@case(
    "ten_mb_response",
    SAMPLES,
    "a runaway generation is data, read in bounded time",
    Returns(_check_ten_mb),
    time_limit_s=40,
)
def _(root: Path) -> Any:
    write_run(root, [sampling_line(0, [], responses=["x" * TEN_MB + " \\boxed{4}", "\\boxed{4}"])])
    return cpu_seconds(lambda: load_run(root, responses=True))


@case(
    "other_tasks_lines_skipped",
    SAMPLES,
    "lines of a non-capcal task in the folder are not questions",
    Returns(lambda table: assert_equal(sorted(set(table["task"])), ["capcal_toy"])),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    write_run(
        root, [{"doc_id": 0, "doc": {}, "resps": [["x"]], "acc": 1}], task="arc_easy", with_results=False
    )
    return load_run(root)


# ---------------------------------------------------------------- results files
RESULTS = "results file"


@case(
    "results_invalid_json",
    RESULTS,
    "a results file cut while writing",
    Raises(RunFormatError, "{results}:1", "not valid JSON"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results='{"results": ')
    return load_run(root)


@case(
    "results_missing_results_key",
    RESULTS,
    "some other JSON file named like a results file",
    Raises(RunFormatError, "{results}", "no 'results' key"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={"configs": {}, "model_name": "m"})
    return load_run(root)


@case(
    "results_is_a_list",
    RESULTS,
    "valid JSON of the wrong shape",
    Raises(RunFormatError, "{results}", "no 'results' key"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results="[1, 2]")
    return load_run(root)


@case(
    "results_invalid_utf8",
    RESULTS,
    "a non-UTF-8 byte in the results file",
    Raises(RunFormatError, "{results}", "not valid UTF-8"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results=b'{"results": {}, "model_name": "\xff"}')
    return load_run(root)


@case(
    "results_missing_configs",
    RESULTS,
    "older lm-eval files have no configs: rows still load, the model comes from model_name",
    Returns(lambda table: assert_equal(list(table["model"]), ["toy-model"])),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={"results": {"capcal_toy": {}}, "model_name": "toy-model"})
    return load_run(root)


@case(
    "results_configs_not_object",
    RESULTS,
    "was a bare AttributeError (fixed)",
    Raises(RunFormatError, "{results}", "'configs' must be a JSON object"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={"results": {}, "configs": [1, 2]})
    return load_run(root)


@case(
    "results_task_config_not_object",
    RESULTS,
    "was a bare AttributeError (fixed)",
    Raises(RunFormatError, "{results}", "config of task capcal_toy"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], results={"results": {}, "configs": {"capcal_toy": "sampling"}})
    return load_run(root)


@case(
    "sampling_task_without_samples_file",
    RESULTS,
    "a run made without --log_samples",
    Raises(RunFormatError, "{results}", "--log_samples"),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)])
    samples_path(root).unlink()
    write_run(root, [good(0)], task="capcal_other", results=results_json("capcal_other"), date=LATER)
    return load_run(root)


@case(
    "no_results_file",
    RESULTS,
    "samples without results: the model is the output sub-folder's name",
    Returns(lambda table: assert_equal(list(table["model"]), ["model__x"])),
)
def _(root: Path) -> Any:
    write_run(root, [good(0)], with_results=False)
    return load_run(root)


# ---------------------------------------------------------------- mixed folders
MIXED = "mixed folders"


def _check_two_models(table: pd.DataFrame) -> None:
    by_model = table.groupby("model")["expected_accuracy"].apply(list).to_dict()
    assert by_model == {"model-a": [1.0, 1.0], "model-b": [0.0]}


@case(
    "two_models_one_folder", MIXED, "rows are kept apart by model, nothing mixed", Returns(_check_two_models)
)
def _(root: Path) -> Any:
    write_run(
        root,
        [sampling_line(0, ["4"] * 2), sampling_line(1, ["4"] * 2)],
        folder="a",
        results=results_json(model="model-a"),
    )
    write_run(root, [sampling_line(0, ["5"] * 3)], folder="b", results=results_json(model="model-b"))
    return load_run(root)


def _check_two_tasks(value: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    table, summary = value
    assert table.groupby("task")["n"].apply(list).to_dict() == {"capcal_toy": [4], "capcal_other": [2, 2]}
    assert list(summary["questions"]) == [2, 1]  # groups sorted by task name


@case(
    "two_tasks_one_folder",
    MIXED,
    "two tasks of one model in one folder stay separate tables",
    Returns(_check_two_tasks),
)
def _(root: Path) -> Any:
    results = {
        "results": {"capcal_toy": {}, "capcal_other": {}},
        "configs": {t: {"metadata": {"capcal_task": "sampling"}} for t in ("capcal_toy", "capcal_other")},
        "model_name": "toy-model",
    }
    write_run(root, [good(0)], results=results)
    write_run(
        root,
        [sampling_line(0, ["4", "5"]), sampling_line(1, ["4", "4"])],
        task="capcal_other",
        with_results=False,
    )
    table = load_run(root)
    return table, summarize(table)


def _check_rerun(value: tuple[pd.DataFrame, Any]) -> None:
    table, collection = value
    latest = collection.questions
    assert sorted(set(table["run_id"])) == [DATE, LATER]
    assert list(latest["run_id"]) == [LATER] and list(latest["expected_accuracy"]) == [0.0]
    runs = collection.runs.set_index("run_id")
    assert bool(runs.loc[LATER, "used"]) and not bool(runs.loc[DATE, "used"])
    assert "older" in runs.loc[DATE, "reason"]


@case(
    "same_model_task_run_twice",
    MIXED,
    "load_run keeps both runs (two run_ids); load_runs uses the latest and says which it left out",
    Returns(_check_rerun),
)
def _(root: Path) -> Any:
    write_run(root, [sampling_line(0, ["4"] * 4)])
    write_run(root, [sampling_line(0, ["5"] * 4)], date=LATER)
    return load_run(root), load_runs([root])


# ---------------------------------------------------------------- confidence-task logs (read_elicited)
ELICITED = "confidence logs"


def _elicited(root: Path, *lines: str, task: str = "capcal_toy_verbalized") -> pd.DataFrame:
    write_run(root, list(lines), task=task, results={"results": {task: {}}, "model_name": "toy-model"})
    return read_elicited(root)


def _elicited_path(task: str = "capcal_toy_verbalized") -> str:
    return "{tmp}/model__x/samples_" + task + "_" + DATE + ".jsonl"


def _check_counted_failure(elicited: pd.DataFrame) -> None:
    counts = parse_failure_counts(elicited)
    assert (int(counts.loc[0, "questions"]), int(counts.loc[0, "parse_failures"])) == (2, 1)
    assert math.isnan(elicited.loc[1, "confidence"])


@case(
    "elicited_verbalized_null_is_counted",
    ELICITED,
    "a failed parse is NaN and counted, never 0.5",
    Returns(_check_counted_failure),
)
def _(root: Path) -> Any:
    return _elicited(
        root,
        confidence_line(0),
        confidence_line(1, verbalized_confidence=None, parse_success=0, parse_failures=1),
    )


@case(
    "elicited_verbalized_nan_rejected",
    ELICITED,
    "no writer logs NaN (a failure is null): NaN is a broken log, named, not a silent failure",
    Raises(RunFormatError, _elicited_path() + ":2", "non-finite number NaN"),
)
def _(root: Path) -> Any:
    return _elicited(
        root, confidence_line(0), confidence_line(1, verbalized_confidence=math.nan, parse_success=0)
    )


@case(
    "elicited_verbalized_null_claimed_success",
    ELICITED,
    "parse_success 1 with no value contradicts itself",
    Raises(RunFormatError, _elicited_path() + ":2", "disagrees"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0), confidence_line(1, verbalized_confidence=None))


@case(
    "elicited_p_true_infinity_rejected",
    ELICITED,
    "Infinity is not JSON and not a probability",
    Raises(RunFormatError, _elicited_path("capcal_toy_ptrue") + ":2", "non-finite number Infinity"),
)
def _(root: Path) -> Any:
    return _elicited(
        root,
        confidence_line(0, "ptrue"),
        confidence_line(1, "ptrue", p_true=math.inf),
        task="capcal_toy_ptrue",
    )


@case(
    "elicited_verbalized_negative",
    ELICITED,
    "-0.1 can only come from a broken writer",
    Raises(RunFormatError, _elicited_path() + ":2", "not a probability in [0, 1]"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0), confidence_line(1, verbalized_confidence=-0.1))


@case(
    "elicited_verbalized_above_one",
    ELICITED,
    "1.5 is not a probability",
    Raises(RunFormatError, _elicited_path() + ":2", "1.5 is not a probability"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0), confidence_line(1, verbalized_confidence=1.5))


@case(
    "elicited_p_true_as_text",
    ELICITED,
    "a probability written as text",
    Raises(RunFormatError, _elicited_path("capcal_toy_ptrue") + ":1", "must be a number or null"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, "ptrue", p_true="0.5"), task="capcal_toy_ptrue")


def _check_selfcheck_nan(elicited: pd.DataFrame) -> None:
    counts = parse_failure_counts(elicited)
    assert int(counts.loc[0, "parse_failures"]) == 1 and int(counts.loc[0, "response_failures"]) == 1


@case(
    "elicited_selfcheck_null_entry_is_counted",
    ELICITED,
    "one unparsed check among k (null) is a counted failure",
    Returns(_check_selfcheck_nan),
)
def _(root: Path) -> Any:
    return _elicited(
        root, confidence_line(0, "selfcheck", p_yes_normalized=[0.5, None]), task="capcal_toy_selfcheck"
    )


@case(
    "elicited_selfcheck_lists_differ",
    ELICITED,
    "per-response lists must align",
    Raises(RunFormatError, _elicited_path("capcal_toy_selfcheck") + ":1", "differ in length"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, "selfcheck", p_yes=[0.5]), task="capcal_toy_selfcheck")


@case(
    "elicited_without_question_id",
    ELICITED,
    "it could not be joined to its question",
    Raises(RunFormatError, _elicited_path() + ":1", "no question_id"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, doc={"question_text": "q"}))


@case(
    "elicited_doc_id_not_integer",
    ELICITED,
    "was a bare ValueError from int() (fixed)",
    Raises(RunFormatError, _elicited_path() + ":1", "'doc_id' must be an integer"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0, doc_id="zero"))


@case(
    "elicited_truncated_line",
    ELICITED,
    "an interrupted confidence run",
    Raises(RunFormatError, _elicited_path() + ":2", "truncated"),
)
def _(root: Path) -> Any:
    return _elicited(root, confidence_line(0), confidence_line(1)[:30])


# ---------------------------------------------------------------- verbalized \boxed{P} parser
VERBALIZED = "verbalized parser"


def parses_to(expected: float | None) -> Returns:
    return Returns(lambda value: assert_equal(value, expected))


VERBALIZED_CASES = [
    ("no_box", "I am fairly sure, maybe 0.7.", None, "no \\boxed{P}: a parse failure"),
    ("several_boxes", "\\boxed{0.3} no wait \\boxed{0.8}", 0.8, "the last valid box wins"),
    ("last_box_out_of_range", "\\boxed{0.3} then \\boxed{1.5}", 0.3, "1.5 is skipped, the previous one kept"),
    ("only_out_of_range", "\\boxed{1.5}", None, "1.5 is not a probability: failure"),
    ("percent", "\\boxed{70\\%}", None, "70% is not a number in [0, 1] as written: failure"),
    ("nan_inf_text", "\\boxed{nan} \\boxed{inf}", None, "only plain decimals are probabilities"),
    ("negative", "\\boxed{-0.2}", None, "negative: failure"),
    ("nested_braces", "\\boxed{{0.7}}", None, "extra braces are not a number: failure"),
    ("nested_box", "\\boxed{\\boxed{0.7}}", 0.7, "the inner box holds the number"),
    ("unbalanced_only", "\\boxed{0.7", None, "a box that never closes is not a box"),
    ("unbalanced_after_valid", "\\boxed{0.6} and \\boxed{0.7", 0.6, "the unclosed one is skipped"),
    ("stray_closing_brace", "}} \\boxed{0.4}}", 0.4, "stray braces outside the box are ignored"),
    ("box_before_think_end", "\\boxed{0.9}</think> I'd say \\boxed{0.4}", 0.4, "only text after </think>"),
    ("box_only_inside_think", "<think>\\boxed{0.9}</think> no box here", None, "thinking is not the answer"),
    ("several_think_ends", "</think>\\boxed{0.2}</think>\\boxed{0.3}", 0.3, "after the LAST </think>"),
    ("unclosed_think", "<think> \\boxed{0.35}", 0.35, "no </think>: the whole response counts"),
]

for _name, _text, _expected, _why in VERBALIZED_CASES:
    CASES.append(
        Case(
            f"verbalized_{_name}",
            VERBALIZED,
            _why,
            lambda _root, t=_text: parse_verbalized_confidence(t),
            parses_to(_expected),
        )
    )


def _check_failure_record(value: tuple[dict, int]) -> None:
    record, count = value
    assert record == {"verbalized_confidence": None, "parse_success": 0, "parse_failures": 1}
    assert count == 2


@case(
    "verbalized_failure_is_logged_and_counted",
    VERBALIZED,
    "the task logs null + parse_success 0, and the aggregation counts failures",
    Returns(_check_failure_record),
)
def _(root: Path) -> Any:
    return process_results({}, ["no box"]), failure_count([1, 0, 1])


# ---------------------------------------------------------------- answer extraction and checkers
EXTRACTION = "extraction"


@case(
    "nested_boxes_10k_deep",
    EXTRACTION,
    "was quadratic (one scan per box to the end; fixed): bounded now",
    Returns(lambda value: assert_equal(value, "3")),
)
def _(root: Path) -> Any:
    return timed(3.0, lambda: last_boxed("\\boxed{" * 10_000 + "3" + "}" * 10_000))


@case(
    "unclosed_boxes_100k",
    EXTRACTION,
    "100k boxes that never close: no answer, in linear time (fixed)",
    Returns(lambda value: assert_equal(value, None)),
)
def _(root: Path) -> Any:
    return timed(3.0, lambda: last_boxed("\\boxed{" * 100_000 + " 3"))


@case(
    "braces_10k_deep_in_one_box",
    EXTRACTION,
    "no recursion: 10k nested braces are one answer",
    Returns(lambda value: assert_equal(value, "{" * 10_000 + "3" + "}" * 10_000)),
)
def _(root: Path) -> Any:
    return timed(3.0, lambda: last_boxed("\\boxed{" + "{" * 10_000 + "3" + "}" * 10_000 + "}"))


@case(
    "many_unbraced_boxes",
    EXTRACTION,
    "was quadratic (text[start:] copied per \\boxed token; fixed)",
    Returns(lambda value: assert_equal((len(value), value[-1]), (200_000, "7"))),
)
def _(root: Path) -> Any:
    return timed(3.0, lambda: boxed_contents("\\boxed 1 " * 199_999 + "\\boxed 7"))


@case(
    "ten_mb_numeric",
    EXTRACTION,
    "a 10 MB response: the final box is found in < 2 s",
    Returns(lambda value: assert_equal(value, (42.0, True))),
    time_limit_s=30,
)
def _(root: Path) -> Any:
    response = "Let me think. " * (TEN_MB // 14) + "So the answer is \\boxed{42}."
    value = timed(2.0, lambda: parse_number(last_boxed(response)))
    return value, numbers_equal(value, 42.0)


@case(
    "ten_mb_choice",
    EXTRACTION,
    "a 10 MB response: the letter is found in < 2 s",
    Returns(lambda value: assert_equal(value, "C")),
    time_limit_s=30,
)
def _(root: Path) -> Any:
    response = "hmm, " * (TEN_MB // 5) + "The answer is (C)."
    return timed(2.0, lambda: extract_choice_letter(response))


@case(
    "ten_mb_alias",
    EXTRACTION,
    "a 10 MB response: the alias check finishes in < 2 s",
    Returns(lambda value: assert_equal(value, True)),
    time_limit_s=30,
)
def _(root: Path) -> Any:
    response = "words " * (TEN_MB // 6) + "\n\\boxed{\\text{Sinclair Lewis}}"
    return timed(2.0, lambda: matches_an_alias(extract_short_answer(response), ["Sinclair Lewis"]))


NUMERIC_CASES = [
    ("overflow", "1" * 400, None, "overflows to inf: not a number"),
    ("exponent", "1e999", None, "exponent notation is not accepted"),
    ("two_numbers", "3 or 4", None, "ambiguous"),
    ("divide_by_zero", "\\frac{1}{0}", None, "no ZeroDivisionError"),
    ("nan_text", "nan", None, "not a number"),
]
for _name, _text, _expected, _why in NUMERIC_CASES:
    CASES.append(
        Case(
            f"numeric_{_name}", EXTRACTION, _why, lambda _root, t=_text: parse_number(t), parses_to(_expected)
        )
    )
CASES.append(
    Case(
        "integer_huge",
        EXTRACTION,
        "400 digits: None, no OverflowError",
        lambda _root: parse_integer("9" * 400),
        parses_to(None),
    )
)


# ---------------------------------------------------------------- math-verify time limit
MATH = "math-verify"


def _check_timed_out(value: tuple[bool, int, float, bool, float]) -> None:
    equal, timeouts, elapsed, recovered, scale = value
    assert equal is False, "a timed-out comparison falls back to strings: wrong, not right"
    assert timeouts == 1, "the time limit must have been hit and counted"
    assert elapsed < 1.0 + 4.0 * scale, f"took {elapsed:.1f} s for a 1 s limit (contention {scale:.1f})"
    assert recovered, "the restarted worker still decides a valid pair"


def _math_timeout(prediction: str) -> tuple[bool, int, float, bool, float]:
    checker = MathEquivalenceChecker(time_limit_s=1.0)
    try:
        assert checker.equal("1/2", "\\frac{1}{2}")  # starts the worker outside the timed call
        scale = contention()
        start = time.perf_counter()  # a timeout that must fire: wall-clock time, scaled by the contention
        equal = checker.equal("1", prediction)
        elapsed = time.perf_counter() - start
        scale = max(scale, contention())
        return equal, checker.timeouts, elapsed, checker.equal("2", "\\sqrt{4}"), scale
    finally:
        checker.close()


@case(
    "power_tower",
    MATH,
    "9^{9^{9^9}} makes sympy compute forever: killed at the limit, 'wrong'",
    Returns(_check_timed_out),
    time_limit_s=60,
)
def _(root: Path) -> Any:
    return _math_timeout("9^{9^{9^{9}}}")


@case(
    "huge_polynomial",
    MATH,
    "(x+1)^2000-(x-1)^2000 makes simplify crawl: killed at the limit, 'wrong'",
    Returns(_check_timed_out),
    time_limit_s=60,
)
def _(root: Path) -> Any:
    return _math_timeout("(x+1)^{2000}-(x-1)^{2000}")


# ---------------------------------------------------------------- metrics
METRICS = "metrics"
CONFIDENCE_TARGET_METRICS = [
    "adaptive_calibration_error",
    "area_under_risk_coverage_curve",
    "brier_score",
    "expected_calibration_error",
    "maximum_calibration_error",
    "pearson_correlation",
    "prediction_rejection_ratio",
    "reliability_diagram",
    "risk_coverage_curve",
    "soft_label_auroc",
    "spearman_correlation",
]
LABEL_METRICS = ["auroc", "average_precision"]


def _every_metric_rejects(confidence: list[float], target: list[float], names: tuple[str, ...]) -> list[str]:
    """Runs every metric; returns those that did NOT raise a ValueError naming one of ``names``."""
    missing = []
    labels = [min(1.0, round(t)) if math.isfinite(t) else t for t in target]
    calls: list[tuple[str, tuple]] = [(name, (confidence, target)) for name in CONFIDENCE_TARGET_METRICS]
    calls += [(name, (confidence, labels)) for name in LABEL_METRICS]
    calls.append(("corrected_capability_brier_score", (confidence, target, [4] * len(target))))
    for name, arguments in calls:
        try:
            getattr(capcal_metrics, name)(*arguments)
        except ValueError as error:
            if not any(name in str(error) for name in names):
                missing.append(f"{name}: {error}")
            continue
        missing.append(f"{name}: returned without an error")
    return missing


OK_CONFIDENCE = [0.2, 0.4, 0.6, 0.8]
OK_TARGET = [0.0, 0.25, 1.0, 1.0]
for _label, _bad in [("nan", math.nan), ("inf", math.inf), ("minus_0_1", -0.1), ("1_5", 1.5)]:
    CASES.append(
        Case(
            f"confidence_{_label}_into_every_metric",
            METRICS,
            f"confidence {_bad} must be a ValueError naming 'confidence' in every metric, never a number",
            lambda _root, b=_bad: _every_metric_rejects([*OK_CONFIDENCE[:3], b], OK_TARGET, ("confidence",)),
            Returns(lambda missing: assert_equal(missing, [])),
        )
    )
CASES.append(
    Case(
        "target_nan_into_every_metric",
        METRICS,
        "a NaN mu_hat must be named as target/labels/mu_hat",
        lambda _root: _every_metric_rejects(
            OK_CONFIDENCE, [*OK_TARGET[:3], math.nan], ("target", "labels", "mu_hat")
        ),
        Returns(lambda missing: assert_equal(missing, [])),
    )
)


# ---------------------------------------------------------------- HTML report
REPORT = "report"
REPORT_OPTIONS = {"n_resamples": 20, "consistency_ks": (2,), "max_examples": 4}


def build_hostile_report(runs: Path, report: Path):
    """The report of ``runs``."""
    from analysis.report import ReportOptions, build_report

    return build_report([runs], report, options=ReportOptions(**REPORT_OPTIONS))


def write_hostile_run(root: Path, question_id_prefix: str = "toy/") -> Path:
    """A run whose model name, questions and responses hold HTML/script and path separators."""
    lines = []
    for doc_id in range(12):
        responses = [
            f"{HOSTILE_HTML} \\boxed{{{a}}}" for a in (["4", "4", "5", "4"] if doc_id % 2 else ["4"] * 4)
        ]
        lines.append(
            sampling_line(
                doc_id,
                [],
                question=f"{HOSTILE_HTML} q{doc_id}",
                responses=responses,
                question_id=f"{question_id_prefix}../../../escape/{doc_id}",
            )
        )
    write_run(root / "runs", lines, results=results_json(model="../../evil/<i>model"))
    return root / "runs"


def _check_escaped(value: tuple[str, list[Path], list[Path]]) -> None:
    page, figures, outside = value
    assert "<script>window" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__capcal_pwned = 1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=" in page and "&lt;i&gt;model" in page
    assert figures and outside == []


@case(
    "script_and_paths_in_model_text",
    REPORT,
    "model text is HTML-escaped; ids and names with ../ cannot place files outside the report folder",
    Returns(_check_escaped),
    time_limit_s=90,
)
def _(root: Path) -> Any:
    runs = write_hostile_run(root)
    report = root / "report"
    files = build_hostile_report(runs, report)
    written = [p for p in root.rglob("*") if p.is_file()]
    outside = [p for p in written if report not in p.parents and runs not in p.parents]
    figures = [p.resolve() for p in files.figures]
    assert all(report.resolve() in p.parents for p in figures)
    return files.html.read_text(encoding="utf-8"), figures, outside


def assert_equal(actual: object, expected: object) -> None:
    assert actual == expected, f"got {actual!r}, expected {expected!r}"


# register the strict-record, folder and join cases, and the cases of analyze's, check's and report's inputs
from . import input_cases, strict_cases  # noqa: E402, F401

CATEGORIES = sorted({c.category for c in CASES})
_DUPLICATES = [name for name, count in Counter(c.name for c in CASES).items() if count > 1]
assert not _DUPLICATES, f"case names must be unique: {_DUPLICATES}"
