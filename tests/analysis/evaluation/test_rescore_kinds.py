"""``analysis.evaluation.rescore`` tested by kind (issue 49, point 2): every count of a re-scored run from its
own source, every field of the items a checker is given, the options passed through, the order runs are
chosen and written in, the metric table against a formula written here, and whole messages.

Small hand-written lm-eval folders (``tests/hostile/logs.py``) and a scripted checker (a stand-in for the LLM
judge, which answers by question id and response position): no model, no lm-eval run. The clock of the module
is fixed, so file names and the results' date are known constants.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

import analysis.evaluation.rescore as module
from analysis.evaluation.rescore import RescoredRun, get_checker, rescore, rescore_notes
from capcal_tasks.checkers import CheckItem, Verdict
from tests.hostile.logs import results_json, sampling_line, write_run

TASK = "capcal_toy"
STAMP = datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=timezone.utc)
RUN_0, RUN_1 = "2026-03-04T05-06-07.000008", "2026-03-04T05-06-07.000009"  # one microsecond per run


class FixedClock(datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: ANN001, ANN206
        return STAMP


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch) -> None:
    monkeypatch.setattr(module, "datetime", FixedClock)


class ScriptedJudge:
    """Verdicts by question id: one ``(correct, raw, named answer)`` per response; records the items."""

    name, version, judge_model = "judge", "scripted 7", "judge-model-x"

    def __init__(self, script: dict[str, list[tuple[int | None, str, str | None]]], task: str = TASK) -> None:
        self.script, self.task, self.items = script, task, []

    def supports(self, task: str) -> bool:
        return task == self.task

    def check(self, items: Sequence[CheckItem]) -> list[Verdict]:
        self.items.extend(items)
        return [Verdict(*self.script[item.question_id][item.response_index]) for item in items]


def _use(monkeypatch, judge: object) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []

    def fake(name: str, **options: object) -> object:
        calls.append((name, options))
        return judge

    monkeypatch.setattr(module, "get_checker", fake)
    return calls


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# question id: (answers of the source run, its correctness against gold "4", the judge's verdicts)
CASES: dict[str, tuple[list[str | None], list[int], list[tuple[int | None, str, str | None]]]] = {
    "q/0": (["4", "4", "5"], [1, 1, 0], [(0, "r0a", "4"), (0, "r0b", "4"), (1, "r0c", "5")]),
    "q/1": (["4", "6", "7"], [1, 0, 0], [(1, "r1a", "4"), (None, "r1b", None), (0, "r1c", "7")]),
    "q/2": (["8", "8", "9"], [0, 0, 0], [(1, "r2a", "8"), (0, "r2b", "8"), (0, "r2c", "9")]),  # contradictory
    "q/3": (["4", "5", "6"], [1, 0, 0], [(None, "r3a", None), (None, "r3b", None), (None, "r3c", None)]),
    "q/4": (["4", "4", "4"], [1, 1, 1], [(1, "r4a", "4"), (1, "r4b", "4"), (1, "r4c", "4")]),
    "q/5": ([None, "3", "4"], [0, 0, 1], [(0, "r5a", None), (1, "r5b", "3"), (0, "r5c", "4")]),
    "q/6": (["4", "5", "6"], [1, 0, 0], [(1, "r6a", "4"), (1, "r6b", "5"), (0, "r6c", "6")]),
    "q/7": (["2", "2", "4"], [0, 0, 1], [(0, "r7a", "2"), (0, "r7b", "2"), (1, "r7c", "4")]),
}
# the judge's labels of the questions written (q/1, q/3: unreadable verdicts; q/2: contradictory ones)
JUDGED = {"q/0": [0, 0, 1], "q/4": [1, 1, 1], "q/5": [0, 1, 0], "q/6": [1, 1, 0], "q/7": [0, 0, 1]}


def _case_run(root: Path, folder: str = "model__x", date: str = "2026-01-02T03-04-05.123456") -> Path:
    lines = [
        sampling_line(i, answers, question_id=qid) for i, (qid, (answers, _, _)) in enumerate(CASES.items())
    ]
    for line, (answers, correctness, _) in zip(lines, CASES.values(), strict=True):
        assert (
            line["correctness"] == correctness and line["extracted_answers"] == answers
        )  # the case as meant
    return write_run(root, lines, folder=folder, date=date)


def test_every_count_of_a_rescored_run_comes_from_its_own_source(tmp_path, monkeypatch):
    """questions 5, responses 24, unreadable verdicts 4, contradictory questions 1, left out 3, changed 6:
    all different, so a count read from a sibling shows."""
    source = _case_run(tmp_path / "in")
    _use(monkeypatch, ScriptedJudge({qid: verdicts for qid, (_, _, verdicts) in CASES.items()}))
    result = rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out")
    folder = tmp_path / "out" / "model__x"
    assert result.output_dir == tmp_path / "out" and result.skipped == []
    assert (result.checker, result.checker_version, result.judge_model) == (
        "judge",
        "scripted 7",
        "judge-model-x",
    )
    assert result.runs == [
        RescoredRun(
            task=TASK,
            source_samples=source,
            source_results=source.parent / "results_2026-01-02T03-04-05.123456.json",
            results_path=folder / f"results_{RUN_0}.json",
            samples_path=folder / f"samples_{TASK}_{RUN_0}.jsonl",
            questions=5,
            responses=24,
            unparseable_verdicts=4,
            questions_left_out=["q/1", "q/2", "q/3"],
            labels_changed=6,
            contradictory_questions=1,
        )
    ]
    assert sorted(path.name for path in folder.iterdir()) == [
        f"results_{RUN_0}.json",
        f"samples_{TASK}_{RUN_0}.jsonl",
    ]
    lines = _lines(folder / f"samples_{TASK}_{RUN_0}.jsonl")
    assert [line["doc"]["question_id"] for line in lines] == list(JUDGED)
    for line in lines:
        qid = line["doc"]["question_id"]
        answers, correctness, verdicts = CASES[qid]
        assert line["correctness"] == JUDGED[qid]
        assert line["source_correctness"] == correctness
        assert line["checker_outputs"] == [raw for _, raw, _ in verdicts]
        assert line["extracted_answers"] == [named for _, _, named in verdicts]
        assert line["expected_accuracy"] == pytest.approx(sum(JUDGED[qid]) / 3)
        assert (
            line["n_samples"] == 3 and line["doc_hash"] == f"hash{int(qid[-1])}"
        )  # the source's fields kept
    counts = json.loads((folder / f"results_{RUN_0}.json").read_text())["capcal_rescore"]["counts"]
    assert counts == {
        "questions": 5,
        "responses": 24,
        "unparseable_verdicts": 4,
        "contradictory_questions": 1,
        "questions_left_out": 3,
        "left_out_ids": ["q/1", "q/2", "q/3"],
        "labels_changed": 6,
    }


def test_the_items_a_checker_is_given_carry_each_field_from_its_own_key(tmp_path, monkeypatch):
    """question_text before question before problem before Question; gold and aliases from their own keys."""
    docs = [
        {"question_text": "QT0", "question": "QQ0", "problem": "QP0", "Question": "QC0", "gold_answer": "G0"},
        {
            "question": "QQ1",
            "problem": "QP1",
            "Question": "QC1",
            "gold_answer": "G1",
            "gold_aliases": ["a", "b"],
        },
        {"problem": "QP2", "Question": "QC2", "gold_aliases": "not a list"},
        {"Question": "QC3", "gold_answer": 3},
        {"question_text": 5},
    ]
    lines = []
    for number, doc in enumerate(docs):
        line = sampling_line(number, [f"x{number}", None], question_id=f"d/{number}")
        line["doc"].pop("question")
        line["doc"].update(doc)
        lines.append(line)
    write_run(tmp_path / "in", lines)
    script = {f"d/{n}": [(1, f"raw{n}a", f"x{n}"), (0, f"raw{n}b", None)] for n in range(len(docs))}
    judge = ScriptedJudge(script)
    _use(monkeypatch, judge)
    rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out")
    questions = ["QT0", "QQ1", "QP2", "QC3", ""]
    golds = ["G0", "G1", None, 3, None]
    aliases = [(), ("a", "b"), (), (), ()]
    expected = [
        CheckItem(
            task=TASK,
            question_id=f"d/{n}",
            doc={"question_id": f"d/{n}", **docs[n]},
            response=response,
            extracted_answer=answer,
            gold=golds[n],
            question=questions[n],
            gold_aliases=aliases[n],
            response_index=index,
        )
        for n in range(len(docs))
        for index, (response, answer) in enumerate([(f"... \\boxed{{x{n}}}", f"x{n}"), ("no idea", None)])
    ]
    assert judge.items == expected


def test_the_options_and_selection_are_passed_through(tmp_path, monkeypatch):
    _case_run(tmp_path / "in")
    calls = _use(monkeypatch, ScriptedJudge({qid: verdicts for qid, (_, _, verdicts) in CASES.items()}))
    rescore(
        tmp_path / "in", "judge", output_dir_out=tmp_path / "out", base_url="http://u", seed=11, top_p=0.3
    )
    assert calls == [("judge", {"base_url": "http://u", "seed": 11, "top_p": 0.3})]


def test_the_default_output_folder_is_rescored_slash_checker(tmp_path, monkeypatch):
    _case_run(tmp_path / "in")
    _use(monkeypatch, ScriptedJudge({qid: verdicts for qid, (_, _, verdicts) in CASES.items()}))
    (run,) = rescore(tmp_path / "in", "judge").runs
    assert (
        run.samples_path
        == tmp_path / "in" / "rescored" / "judge" / "model__x" / f"samples_{TASK}_{RUN_0}.jsonl"
    )


def _agreeing(n: int, prefix: str = "p") -> dict[str, list[tuple[int | None, str, str | None]]]:
    return {f"{prefix}/{i}": [(1, "a", "4"), (0, "b", "5")] for i in range(n)}


def _two_answer_run(root: Path, n: int, prefix: str = "p", **where: str) -> Path:
    """``n`` questions answered "4" and "5" (gold "4"); the question text names the run (a distinct run)."""
    tag = f"{where.get('folder')} {where.get('task')} {where.get('date')}"
    lines = [
        sampling_line(i, ["4", "5"], question=f"{tag} {i}?", question_id=f"{prefix}/{i}") for i in range(n)
    ]
    return write_run(root, lines, **where)


def test_runs_are_chosen_latest_own_labels_first_and_written_in_model_order(tmp_path, monkeypatch):
    """Two models (folders written in reverse order of their labels), each with an earlier and a later run,
    and a re-scored run later than both: the later own-labels run of each model is re-scored, models in
    order, one microsecond apart."""
    root = tmp_path / "in"
    for folder, model in (("m_b", "model-b"), ("m_a", "model-a")):
        for date in (
            "2026-01-02T00-00-00.000000",
            "2026-01-03T00-00-00.000000",
            "2026-01-01T00-00-00.000000",
        ):
            _two_answer_run(root, 2, folder=folder, date=date, results=results_json(model=model))
    judge = ScriptedJudge(_agreeing(2))
    _use(monkeypatch, judge)
    first = rescore(root, "judge", output_dir_out=root / "m_a" / "rescored")  # a re-scored run of model-a
    assert first.runs[0].source_samples == root / "m_a" / f"samples_{TASK}_2026-01-03T00-00-00.000000.jsonl"
    monkeypatch.setattr(FixedClock, "now", classmethod(lambda cls, tz=None: STAMP.replace(year=2027)))
    second = rescore(root, "judge", output_dir_out=tmp_path / "out")
    assert [run.source_samples for run in second.runs] == [
        root / "m_a" / f"samples_{TASK}_2026-01-03T00-00-00.000000.jsonl",
        root / "m_b" / f"samples_{TASK}_2026-01-03T00-00-00.000000.jsonl",
    ]
    assert [run.samples_path.name for run in second.runs] == [
        f"samples_{TASK}_2027-03-04T05-06-07.000008.jsonl",
        f"samples_{TASK}_2027-03-04T05-06-07.000009.jsonl",
    ]
    assert [run.samples_path.parent for run in second.runs] == [
        tmp_path / "out" / "m_a",
        tmp_path / "out" / "m_b",
    ]


def test_tasks_and_run_select_what_is_rescored(tmp_path, monkeypatch):
    root = tmp_path / "in"
    _two_answer_run(
        root, 2, task="capcal_one", date="2026-01-02T00-00-00.000000", results=results_json("capcal_one")
    )
    _two_answer_run(
        root, 2, task="capcal_two", date="2026-01-03T00-00-00.000000", results=results_json("capcal_two")
    )
    early = _two_answer_run(
        root, 2, task="capcal_two", date="2026-01-01T00-00-00.000000", results=results_json("capcal_two")
    )

    class Both(ScriptedJudge):
        def supports(self, task: str) -> bool:
            return task in ("capcal_one", "capcal_two")

    _use(monkeypatch, Both(_agreeing(2)))
    everything = rescore(root, "judge", output_dir_out=tmp_path / "all")
    assert [run.task for run in everything.runs] == ["capcal_one", "capcal_two"]
    (only,) = rescore(root, "judge", output_dir_out=tmp_path / "two", tasks=["capcal_two"]).runs
    assert only.source_samples.name == "samples_capcal_two_2026-01-03T00-00-00.000000.jsonl"
    (chosen,) = rescore(root, "judge", output_dir_out=tmp_path / "early", run=str(early)).runs
    assert chosen.source_samples == early


def test_runs_of_tasks_the_checker_does_not_check_are_skipped_or_refused_whole(tmp_path, monkeypatch):
    root = tmp_path / "in"
    kept = _two_answer_run(root, 2)
    other = _two_answer_run(root, 2, task="capcal_other", results=results_json("capcal_other"))
    _use(monkeypatch, ScriptedJudge(_agreeing(2)))
    result = rescore(root, "judge", output_dir_out=tmp_path / "out")
    assert [run.source_samples for run in result.runs] == [kept]
    assert result.skipped == [(other, "checker judge does not apply to task capcal_other")]
    with pytest.raises(ValueError) as error:
        rescore(root, "judge", output_dir_out=tmp_path / "out2", tasks=["capcal_other", TASK])
    assert (
        str(error.value)
        == f"checker judge does not apply to task capcal_other ({other}); it checks other tasks"
    )
    assert not (tmp_path / "out2").exists()


def test_a_rule_checker_refused_names_what_it_checks(tmp_path):
    other = _two_answer_run(tmp_path, 2)
    with pytest.raises(ValueError) as error:
        rescore(tmp_path, "exact", output_dir_out=tmp_path / "out")
    assert str(error.value) == (
        f"checker exact does not apply to task {TASK} ({other}); exact checks: exact alias match: the "
        "normalised answer equals an alias (TriviaQA, SimpleQA)"
    )


def test_the_ids_left_out_are_listed_up_to_twenty(tmp_path, monkeypatch):
    for n, listed in ((20, 20), (21, 20)):
        root = tmp_path / f"in{n}"
        _two_answer_run(root, n + 1)
        script = {f"p/{i}": [(None, "?", None), (0, "b", "5")] for i in range(n)}
        script[f"p/{n}"] = [(1, "a", "4"), (0, "b", "5")]
        _use(monkeypatch, ScriptedJudge(script))
        (run,) = rescore(root, "judge", output_dir_out=root / "out").runs
        assert run.questions_left_out == [f"p/{i}" for i in range(n)]
        counts = json.loads(run.results_path.read_text())["capcal_rescore"]["counts"]
        assert (
            counts["left_out_ids"] == [f"p/{i}" for i in range(listed)] and counts["questions_left_out"] == n
        )


def test_the_metric_table_is_lm_evals_mean_and_stderr(tmp_path, monkeypatch):
    """Three questions with expected accuracy 1, 1/2, 0 (mean 1/2, sample sd 1/2, stderr 1/(2 sqrt 3)); one
    question: no standard error (n = 1); the table's name and alias copied, the other source keys not."""
    for n in (3, 1):
        root = tmp_path / f"in{n}"
        results = results_json()
        results["results"][TASK] = {
            "alias": "the alias",
            "name": "the name",
            "expected_accuracy,all_responses": 9,
        }
        _two_answer_run(root, 3, results=results)
        script = {"p/0": [(1, "a", "4"), (1, "b", "5")], "p/1": [(1, "a", "4"), (0, "b", "5")]}
        script["p/2"] = [(0, "a", "4"), (0, "b", "5")]
        for qid in list(script)[n:]:
            script[qid] = [(None, "?", None), (0, "b", "5")]
        _use(monkeypatch, ScriptedJudge(script))
        (run,) = rescore(root, "judge", output_dir_out=root / "out").runs
        table = json.loads(run.results_path.read_text())["results"][TASK]
        assert (table["alias"], table["name"], table["sample_len"]) == ("the alias", "the name", n)
        if n == 3:
            assert table["expected_accuracy,all_responses"] == pytest.approx(0.5, abs=1e-15)
            assert table["expected_accuracy_stderr,all_responses"] == pytest.approx(
                0.5 / math.sqrt(3), rel=1e-12
            )
            assert table["correctness,all_responses"] == pytest.approx(3 / 6)  # responses correct of all
            assert table["extracted_answers,all_responses"] == 1.0
        else:
            assert table["expected_accuracy,all_responses"] == 1.0
            assert table["expected_accuracy_stderr,all_responses"] == "N/A"
        assert table["correctness_stderr,all_responses"] == "N/A"
        assert table["extracted_answers_stderr,all_responses"] == "N/A"


def test_the_results_file_keeps_the_tasks_own_entries(tmp_path, monkeypatch):
    root = tmp_path / "in"
    results = results_json()
    results.update(
        {
            "configs": {
                TASK: {"metadata": {"capcal_task": "sampling"}, "repeats": 2},
                "capcal_else": {"x": 1},
            },
            "versions": {TASK: 3.0, "capcal_else": 4.0},
            "n-shot": {"capcal_else": 5},
            "higher_is_better": {TASK: {"expected_accuracy": False, "pass_at_1": True}, "capcal_else": {}},
            "n-samples": {TASK: {"original": 11, "effective": 7}, "capcal_else": {"original": 1}},
            "groups": {"g": {}},
            "group_subtasks": {"g": [TASK]},
            "config": {"model": "hf"},
        }
    )
    _two_answer_run(root, 2, results=results)
    _use(monkeypatch, ScriptedJudge({"p/0": [(1, "a", "4"), (0, "b", "5")], "p/1": [(None, "?", None)] * 2}))
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # the date is UTC's, whatever the machine's zone
    time.tzset()
    try:
        (run,) = rescore(root, "judge", output_dir_out=root / "out").runs
    finally:
        monkeypatch.undo()
        time.tzset()
    written = json.loads(run.results_path.read_text())
    assert written["configs"] == {TASK: {"metadata": {"capcal_task": "sampling"}, "repeats": 2}}
    assert written["versions"] == {TASK: 3.0} and written["n-shot"] == {}
    assert written["n-samples"] == {TASK: {"original": 11, "effective": 1}}
    assert written["higher_is_better"] == {
        TASK: {
            "extracted_answers": True,
            "correctness": True,
            "n_samples": True,
            "expected_accuracy": False,
            "pass_at_1": True,
            "pass_at_2": True,
            "majority_vote_accuracy": True,
        }
    }
    assert "groups" not in written and "group_subtasks" not in written and "capcal_model" not in written
    assert written["config"] == {"model": "hf"} and written["model_name"] == "toy-model"
    assert written["date"] == STAMP.timestamp() and list(written)[0] == "results"
    assert written["capcal_rescore"]["created"] == "2026-03-04T05:06:07+00:00"


def test_a_second_rescore_into_the_same_folder_is_refused_whole(tmp_path, monkeypatch):
    _two_answer_run(tmp_path / "in", 2)
    _use(monkeypatch, ScriptedJudge(_agreeing(2)))
    (run,) = rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out").runs
    before = run.samples_path.read_bytes()
    with pytest.raises(ValueError) as error:
        rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out")
    assert str(error.value) == f"{run.samples_path} exists already; choose another output folder"
    assert run.samples_path.read_bytes() == before


def test_a_checker_giving_too_few_verdicts_or_none_readable_is_one_whole_line(tmp_path, monkeypatch):
    source = _two_answer_run(tmp_path / "in", 2)

    class Short(ScriptedJudge):
        def check(self, items: Sequence[CheckItem]) -> list[Verdict]:
            return super().check(items)[:-1]

    _use(monkeypatch, Short(_agreeing(2)))
    with pytest.raises(ValueError) as error:
        rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out")
    assert str(error.value) == "checker judge gave 3 verdicts for 4 responses"
    _use(
        monkeypatch,
        ScriptedJudge({"p/0": [(None, "?", None), (0, "b", "5")], "p/1": [(1, "a", "4"), (0, "b", "4")]}),
    )
    with pytest.raises(ValueError) as error:
        rescore(tmp_path / "in", "judge", output_dir_out=tmp_path / "out")
    assert str(error.value) == (
        f"{source}: no question left to write (2 left out for unreadable or contradictory verdicts)"
    )


# ---------------------------------------------------------------- get_checker


def test_get_checker_passes_every_judge_option_and_drops_none(monkeypatch):
    import analysis.judge

    class Recording:
        def __init__(self, **options: object) -> None:
            self.options = options

    monkeypatch.setattr(analysis.judge, "JudgeChecker", Recording)
    options = dict(zip(module.JUDGE_OPTIONS, range(100, 200), strict=False))
    options["base_url"] = "http://judge"
    options["temperature"] = None  # an option not given on the command line
    checker = get_checker("judge", **options)
    assert checker.options == {key: value for key, value in options.items() if key != "temperature"}
    assert set(options) == {
        "base_url", "model", "api_key_env", "num_concurrent", "cache_path", "max_retries", "timeout",
        "max_tokens", "temperature", "top_p", "seed",
    }  # fmt: skip


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("judge", {"zeta": 1, "alpha": 2, "model": "m"}, "checker judge: unknown option(s) alpha, zeta"),
        (
            "judge",
            {"model": "m", "base_url": ""},
            "checker judge needs base_url (an OpenAI-compatible server, --base_url)",
        ),
        (
            "exact",
            {"seed": 1, "model": "m", "colour": None},
            "checker exact takes no options, got model, seed",
        ),
        ("nope", {}, "unknown checker 'nope' (known: task, alias, exact, math-verify, math-string, judge)"),
    ],
)
def test_get_checker_refusals_are_whole_messages(name, options, message):
    with pytest.raises(ValueError) as error:
        get_checker(name, **options)
    assert str(error.value) == message


def test_get_checker_with_none_options_is_the_rule():
    assert get_checker("alias", model=None, seed=None).name == "alias"


# ---------------------------------------------------------------- rescore_notes


def _file(task: str, run_id: str, rescore: dict | None) -> SimpleNamespace:
    return SimpleNamespace(task=task, run_id=run_id, rescore=rescore)


def test_rescore_notes_are_whole_lines_with_the_listing_boundary():
    judge = {"checker": "judge", "checker_version": "v2", "judge_model": "jm"}
    files = [
        _file("t_plain", "r0", None),
        _file("t_a", "r1", {"checker": "exact", "checker_version": "v1", "source_run": {"run_id": "s1"}}),
        _file(
            "t_b",
            "r2",
            {
                **judge,
                "source_run": {"run_id": "s2", "labels": "rescored: exact (v1)"},
                "counts": {
                    "questions_left_out": 2,
                    "left_out_ids": ["x", "y"],
                    "unparseable_verdicts": 5,
                    "contradictory_questions": 1,
                },
            },
        ),
        _file(
            "t_c",
            "r3",
            {
                **judge,
                "source_run": {"run_id": "s3"},
                "counts": {"questions_left_out": 3, "left_out_ids": ["x", "y"], "unparseable_verdicts": 7},
            },
        ),
    ]
    assert rescore_notes(files) == [
        "t_a run r1: rescored: exact (v1), re-scored from run s1 (task checker)",
        "t_b run r2: rescored: judge (v2), judge jm, re-scored from run s2 (rescored: exact (v1)); "
        "2 question(s) left out for unreadable or contradictory verdicts (5 unreadable verdicts, "
        "1 questions with contradictory ones): x, y",
        "t_c run r3: rescored: judge (v2), judge jm, re-scored from run s3 (task checker); "
        "3 question(s) left out for unreadable or contradictory verdicts (7 unreadable verdicts, "
        "0 questions with contradictory ones): x, y, ...",
    ]
