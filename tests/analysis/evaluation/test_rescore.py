"""``capcal rescore`` (``analysis.evaluation.rescore``): a run's logged responses judged again by another
checker.

The slow tests re-score the real SmolLM2 GSM8K run of ``tiny_run`` (tests/analysis/conftest.py): the run's own
checker reproduces its labels exactly. The fast tests use a run on real TriviaQA questions (the first 32 of
../shared/data/triviaqa/triviaqa_small.jsonl) whose responses are written here, a stand-in for a model's (a
135M model rarely states an answer with extra words, which is where the exact and alias labels differ); its
records are the TriviaQA task's own ``process_results`` output in lm-eval's samples layout. The checker that
returns unreadable verdicts is a stand-in for the LLM judge (tested against a real server in test_judge.py).
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import datasets
import pytest

from analysis.cli import main
from analysis.evaluation.rescore import CHECKERS, get_checker, rescore, rescore_notes
from analysis.runs import load_runs
from analysis.runs.completeness import check_run
from capcal_tasks.answers.aliases import normalize_answer
from capcal_tasks.checkers import CheckItem, Verdict, rule_checker
from capcal_tasks.triviaqa import task as triviaqa

TASK, K, RUN_ID = "capcal_triviaqa", 3, "2026-01-02T03-04-05.000006"
MODEL_FOLDER = "stand-in-responses"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _responses(doc: dict, other: dict, doc_id: int) -> list[str]:
    """The gold stated; the gold with a word added (alias label only); another question's gold (the gold
    itself for every third question)."""
    third = doc if doc_id % 3 == 0 else other
    return [
        f"The answer is {doc['gold_answer']}.",
        f"The answer is {doc['gold_answer']} indeed",
        f"The answer is {third['gold_answer']}.",
    ]


def write_trivia_run(folder: Path, shared_data: Path) -> Path:
    """An lm-eval output folder with one capcal_triviaqa run (results + samples file) on real questions."""
    rows = triviaqa.read_triviaqa_jsonl(shared_data / "triviaqa" / "triviaqa_small.jsonl")
    docs = list(triviaqa.process_docs(datasets.Dataset.from_list(rows)))
    run = folder / MODEL_FOLDER
    run.mkdir(parents=True)
    lines = []
    for doc_id, doc in enumerate(docs):
        responses = _responses(doc, docs[(doc_id + 1) % len(docs)], doc_id)
        scored = triviaqa.process_results(doc, [responses])
        lines.append(
            {
                "doc_id": doc_id,
                "doc": doc,
                "target": doc["gold_answer"],
                "arguments": {
                    "gen_args_0": {"arg_0": triviaqa.doc_to_text(doc), "arg_1": {"do_sample": True}}
                },
                "resps": [responses],
                "filtered_resps": [responses],
                "filter": "all_responses",
                "metrics": list(scored),
                "doc_hash": f"{doc_id:064x}",
                **scored,
            }
        )
    (run / f"samples_{TASK}_{RUN_ID}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    metrics = list(lines[0]["metrics"])
    results = {
        "results": {TASK: {"alias": TASK}},
        "configs": {TASK: {"task": TASK, "repeats": K, "metadata": {"capcal_task": "sampling"}}},
        "versions": {TASK: 1.0},
        "n-shot": {TASK: 0},
        "higher_is_better": {TASK: dict.fromkeys(metrics, True)},
        "n-samples": {TASK: {"original": len(lines), "effective": len(lines)}},
        "config": {"model": "stand-in"},
        "model_name": MODEL_FOLDER,
    }
    (run / f"results_{RUN_ID}.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def trivia_run(tmp_path_factory, shared_data) -> Path:
    return write_trivia_run(tmp_path_factory.mktemp("trivia_run"), shared_data)


@pytest.fixture
def trivia_copy(trivia_run, tmp_path) -> Path:
    """A copy of the TriviaQA run that a test may write re-scored runs into."""
    return Path(shutil.copytree(trivia_run, tmp_path / "run"))


@pytest.fixture(scope="module")
def exact_and_alias(trivia_run, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("rescored")
    return {name: rescore(trivia_run, name, output_dir_out=out / name) for name in ("exact", "alias")}


def test_exact_and_alias_differ_where_they_should_on_real_triviaqa_questions(trivia_run, exact_and_alias):
    source = _lines(next(trivia_run.rglob("samples_*.jsonl")))
    exact_run, alias_run = exact_and_alias["exact"].runs[0], exact_and_alias["alias"].runs[0]
    exact, alias = _lines(exact_run.samples_path), _lines(alias_run.samples_path)
    assert len(exact) == len(alias) == len(source) == 32
    for old, e, a in zip(source, exact, alias, strict=True):
        assert a["correctness"] == old["correctness"]  # alias: the paper's label, the task's own
        assert e["correctness"] == old["exact_alias_correctness"]  # exact: the label logged beside it
        assert e["source_correctness"] == a["source_correctness"] == old["correctness"]
        aliases = {normalize_answer(alias) for alias in old["doc"]["gold_aliases"]}
        with_word = normalize_answer(e["extracted_answers"][1])
        assert a["correctness"][1] == 1
        assert e["correctness"][1] == int(with_word in aliases)  # "<gold> indeed": contained, not equal
        assert "exact_alias_correctness" not in e  # a re-scored record holds its checker's labels only
        assert e["checker_outputs"] == [None] * K  # rule checkers have no raw output
    changed = sum(
        z != old_z
        for e, old in zip(exact, source, strict=True)
        for z, old_z in zip(e["correctness"], old["correctness"], strict=True)
    )
    assert changed >= 30 and exact_run.labels_changed == changed and alias_run.labels_changed == 0
    table = json.loads(exact_run.results_path.read_text())["results"][TASK]
    assert table["expected_accuracy,all_responses"] == pytest.approx(
        sum(line["expected_accuracy"] for line in exact) / len(exact)
    )
    accuracies = [line["expected_accuracy"] for line in exact]  # varies across questions (the third response)
    mean = sum(accuracies) / len(accuracies)
    stderr = math.sqrt(sum((a - mean) ** 2 for a in accuracies) / (len(accuracies) - 1) / len(accuracies))
    assert stderr > 0.01 and table["expected_accuracy_stderr,all_responses"] == pytest.approx(
        stderr, rel=1e-9
    )
    assert table["correctness_stderr,all_responses"] == "N/A"  # as lm-eval reports a custom aggregation


def test_provenance_is_recorded(trivia_run, exact_and_alias):
    run = exact_and_alias["exact"].runs[0]
    results = json.loads(run.results_path.read_text())
    provenance = results["capcal_rescore"]
    assert set(provenance) == {"source_run", "checker", "checker_version", "judge_model", "created", "counts"}
    assert provenance["checker"] == "exact" and provenance["checker_version"].startswith("capcal ")
    assert provenance["judge_model"] is None
    source = provenance["source_run"]
    assert source["samples_file"] == str(next(trivia_run.rglob("samples_*.jsonl")))
    assert source["results_file"] == str(next(trivia_run.rglob("results_*.json")))
    assert source["run_id"] == RUN_ID and len(source["run_key"]) == 64
    assert source["labels"] == "task checker" and source["capcal_rescore"] is None
    assert provenance["counts"] == {
        "questions": 32,
        "responses": 32 * K,
        "unparseable_verdicts": 0,
        "contradictory_questions": 0,
        "questions_left_out": 0,
        "left_out_ids": [],
        "labels_changed": run.labels_changed,
    }
    assert results["n-samples"][TASK] == {"original": 32, "effective": 32}
    assert results["configs"][TASK]["repeats"] == K and results["model_name"] == MODEL_FOLDER
    assert run.samples_path.parent.name == MODEL_FOLDER and run.samples_path.name.startswith(
        f"samples_{TASK}_"
    )


def test_rescoring_is_deterministic(trivia_run, tmp_path):
    first, second = (rescore(trivia_run, "exact", output_dir_out=tmp_path / name).runs[0] for name in "ab")
    assert first.samples_path.read_bytes() == second.samples_path.read_bytes()
    one, two = (json.loads(run.results_path.read_text()) for run in (first, second))
    for results in (one, two):
        del results["date"], results["capcal_rescore"]["created"]
    assert one == two


def test_a_rescored_folder_is_read_as_a_run_with_its_labels(trivia_copy, capsys):
    result = rescore(trivia_copy, "exact")  # default: OUTPUT_DIR/rescored/exact/<model folder>/
    assert result.output_dir == trivia_copy / "rescored" / "exact"
    collection = load_runs([trivia_copy])
    runs = collection.runs.set_index("labels")
    assert list(collection.runs["task"]) == [TASK, TASK]  # two runs of the same (model, task)
    rescored = runs.loc[f"rescored: exact ({result.checker_version})"]
    assert rescored["used"] and rescored["reason"] == "latest run"
    assert not runs.loc["task checker", "used"]
    questions = collection.questions
    exact = _lines(result.runs[0].samples_path)
    assert list(questions["correctness"]) == [line["correctness"] for line in exact]
    assert list(questions["source_correctness"]) == [line["source_correctness"] for line in exact]
    # the original run chosen instead, as capcal report --run does
    original = load_runs([trivia_copy], select=[RUN_ID])
    assert "source_correctness" not in original.questions.columns
    # capcal check: both runs complete, and it says which labels the re-scored one holds
    checks = check_run(trivia_copy)
    assert list(checks["complete"]) == [True, True]
    assert main(["check", str(trivia_copy)]) == 0
    printed = capsys.readouterr().out
    assert f"labels: {MODEL_FOLDER} {TASK} {result.runs[0].samples_path.name[len(f'samples_{TASK}_'):-6]}: " \
        f"rescored: exact" in printed  # fmt: skip
    assert rescore_notes(collection.files) == [
        f"{TASK} run {rescored['run_id']}: rescored: exact ({result.checker_version}), re-scored from run "
        f"{RUN_ID} (task checker)"
    ]


def test_a_rescored_run_is_rechecked_with_its_own_checker(trivia_copy):
    """Reading an exact-rescored run does not re-check it against the task's alias labels (they differ), but
    with the exact rule: a changed extracted answer is caught, naming the file and line."""
    path = rescore(trivia_copy, "exact").runs[0].samples_path
    lines = _lines(path)
    lines[4]["extracted_answers"][2] = "something else"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(
        ValueError, match=f"^{path}:5: extracted answer 3 is 'something else', the task's extractor"
    ):
        load_runs([trivia_copy])


def test_rescoring_a_rescored_run_records_the_chain(trivia_copy):
    exact = rescore(trivia_copy, "exact").runs[0]
    # the original is re-scored by default; the exact run when it is selected
    assert rescore(trivia_copy, "alias").runs[0].source_samples.parent.name == MODEL_FOLDER
    chained = rescore(trivia_copy, "alias", run=str(exact.samples_path), output_dir_out=trivia_copy / "chain")
    run = chained.runs[0]
    assert run.source_samples == exact.samples_path
    provenance = json.loads(run.results_path.read_text())["capcal_rescore"]
    source = provenance["source_run"]
    assert source["labels"].startswith("rescored: exact") and source["capcal_rescore"]["checker"] == "exact"
    assert source["capcal_rescore"]["source_run"]["run_id"] == RUN_ID  # the chain back to the model's run
    exact_lines, alias_lines = _lines(exact.samples_path), _lines(run.samples_path)
    original = _lines(next((trivia_copy / MODEL_FOLDER).glob("samples_*.jsonl")))
    for e, a, o in zip(exact_lines, alias_lines, original, strict=True):
        assert a["source_correctness"] == e["correctness"] and a["correctness"] == o["correctness"]


@pytest.mark.parametrize(
    "checker, options, message",
    [
        (
            "exactt",
            {},
            "unknown checker 'exactt' (known: task, alias, exact, math-verify, math-string, judge)",
        ),
        ("math-verify", {}, f"checker math-verify does not apply to task {TASK} ("),
        ("exact", {"model": "m"}, "checker exact takes no options, got model"),
        ("judge", {"colour": 0}, "checker judge: unknown option(s) colour"),
        ("judge", {"model": "m"}, "checker judge needs base_url (an OpenAI-compatible server, --base_url)"),
    ],
)
def test_a_checker_that_cannot_work_is_one_line(trivia_run, tmp_path, checker, options, message):
    with pytest.raises(ValueError) as error:
        rescore(trivia_run, checker, output_dir_out=tmp_path, **options)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)
    assert not any(tmp_path.iterdir())  # nothing written


def test_cli_errors_are_one_line(trivia_run, tmp_path, capsys):
    error = "capcal rescore: error:"
    cases = [
        (["--checker", "nope"], f"{error} unknown checker 'nope' (known: task, alias, exact"),
        (["--checker", "math-string"], f"{error} checker math-string does not apply to task {TASK}"),
        (["--checker", "exact", "--tasks", "capcal_gsm8k"], f"{error} no sampling run of capcal_gsm8k"),
    ]
    for flags, message in cases:
        assert main(["rescore", str(trivia_run), "--output", str(tmp_path), *flags]) == 2
        error = capsys.readouterr().err
        assert error.startswith(message) and error.count("\n") == 1, error
    assert main(["rescore", str(trivia_run), "--output", str(tmp_path), "--checker", "exact"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("checker exact (capcal ")
    assert (
        printed[1].startswith(f"{TASK}: 32 questions, 96 responses, ")
        and "0 unreadable verdict(s)" in printed[1]
    )


def test_empty_folder_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="^no capcal sampling run to re-score under .*found no lm-eval"):
        rescore(tmp_path, "task")


class StandInJudge:
    """A stand-in for the LLM judge: grades a response A when it states the gold answer, with a raw output per
    response and the extracted answer it compared; 'unreadable' for the third response of every fifth
    question. ``by_position``: grades by the response's position instead (A, A, B), which contradicts itself
    where two responses are equal."""

    name, version, judge_model = "judge", "stand-in 1", "stand-in-model"

    def __init__(self, by_position: bool = False, names_answer: bool = True) -> None:
        self.by_position, self.names_answer = by_position, names_answer

    def supports(self, task: str) -> bool:
        return task == TASK

    def check(self, items: Sequence[CheckItem]) -> list[Verdict]:
        verdicts = []
        for item in items:
            if item.response_index == 2 and _fifth(item.question_id):
                verdicts.append(Verdict(None, "I cannot tell"))
                continue
            if self.by_position:
                correct = item.response_index < 2
            else:
                correct = f"is {item.gold}." in item.response or f"is {item.gold} " in item.response
            grade = f"GRADE: {'A' if correct else 'B'}"
            named = item.extracted_answer if self.names_answer else None  # the answer it compared, or none
            verdicts.append(Verdict(int(correct), grade, named))
        return verdicts


def _fifth(question_id: str) -> bool:
    return int(question_id[-1], 16) % 5 == 0


def test_unreadable_verdicts_leave_the_question_out_counted_and_listed(trivia_copy, monkeypatch):
    import analysis.evaluation.rescore as module

    monkeypatch.setattr(module, "get_checker", lambda name, **options: StandInJudge())
    result = rescore(trivia_copy, "judge")
    run = result.runs[0]
    source = _lines(next((trivia_copy / MODEL_FOLDER).glob("samples_*.jsonl")))
    expected_out = [line["doc"]["question_id"] for line in source if _fifth(line["doc"]["question_id"])]
    assert expected_out and run.questions_left_out == expected_out and run.contradictory_questions == 0
    assert run.unparseable_verdicts == len(expected_out) and run.questions == 32 - len(expected_out)
    lines = _lines(run.samples_path)
    kept = [line for line in source if line["doc"]["question_id"] not in expected_out]
    assert [line["doc"]["question_id"] for line in lines] == [line["doc"]["question_id"] for line in kept]
    for line, old in zip(lines, kept, strict=True):
        third = int(old["resps"][0][2] == old["resps"][0][0])  # the gold stated again
        assert line["correctness"] == [1, 1, third] and line["source_correctness"] == old["correctness"]
        assert line["checker_outputs"] == ["GRADE: A", "GRADE: A", "GRADE: A" if third else "GRADE: B"]
        assert line["expected_accuracy"] == pytest.approx((2 + third) / 3)
        assert line["extracted_answers"] == old["extracted_answers"]  # the answers the judge compared
        assert line["majority_vote_accuracy"] == pytest.approx(1.0 if third else 2 / 3)  # ties averaged
    results = json.loads(run.results_path.read_text())
    assert results["capcal_rescore"]["judge_model"] == "stand-in-model"
    assert results["capcal_rescore"]["counts"]["left_out_ids"] == expected_out
    assert results["n-samples"][TASK]["effective"] == run.questions
    collection = load_runs([trivia_copy])  # read without re-checking (a model's labels)
    labels = collection.runs.set_index("used").loc[True, "labels"]
    assert labels == "rescored: judge (stand-in 1), judge stand-in-model"
    (note,) = rescore_notes(collection.files)
    assert f"{len(expected_out)} question(s) left out" in note and expected_out[0] in note
    assert check_run(trivia_copy)["complete"].all()


def test_contradictory_verdicts_leave_the_question_out(trivia_copy, monkeypatch):
    """Equal responses judged differently are never resolved by a guess: the question is left out."""
    import analysis.evaluation.rescore as module

    monkeypatch.setattr(module, "get_checker", lambda name, **options: StandInJudge(by_position=True))
    (run,) = rescore(trivia_copy, "judge").runs
    source = _lines(next((trivia_copy / MODEL_FOLDER).glob("samples_*.jsonl")))
    repeated = [
        line["doc"]["question_id"]
        for line in source
        if line["resps"][0][2] == line["resps"][0][0] and not _fifth(line["doc"]["question_id"])
    ]
    assert repeated and run.contradictory_questions == len(repeated)
    assert set(repeated) <= set(run.questions_left_out)
    counts = json.loads(run.results_path.read_text())["capcal_rescore"]["counts"]
    assert counts["contradictory_questions"] == len(repeated)
    assert counts["questions_left_out"] == len(repeated) + run.unparseable_verdicts


def test_get_checker_names():
    assert CHECKERS == ("task", "alias", "exact", "math-verify", "math-string", "judge")
    assert get_checker("exact").name == "exact"


# ---------------------------------------------------------------- a real run (SmolLM2, GSM8K)


@pytest.fixture(scope="module")
def arithmetic_run(tmp_path_factory, smollm2_path) -> Path:
    """A real run with labels of both kinds: SmolLM2 on graded arithmetic (4 questions x k = 4), capcal-hf.
    (tiny_run's 8-token GSM8K responses state no answer: all its labels are 0.)"""
    from analysis.evaluation import evaluate

    output = tmp_path_factory.mktemp("arithmetic_run")
    evaluate(
        "capcal-hf",
        "capcal_arithmetic",
        model_args={"pretrained": str(smollm2_path), "sample_cache": False},
        repeats=4,
        limit=4,
        metadata={"arithmetic_per_level": 2},
        output_path=output,
        log_samples=True,
        apply_chat_template=True,
        gen_kwargs={"max_gen_toks": 12},
        batch_size=16,
        random_seed=7,
        numpy_random_seed=7,
        torch_random_seed=7,
        fewshot_random_seed=7,
    )
    return output


def assert_reproduced(output: Path, task: str, rescored_dir: Path) -> None:
    """Re-scoring with ``task`` reproduced every scoring field of every line and the metric table."""
    (run,) = rescore(output, "task", output_dir_out=rescored_dir).runs
    source_samples = next(output.rglob(f"samples_{task}_*.jsonl"))
    assert run.source_samples == source_samples and run.labels_changed == 0
    source, rescored = _lines(source_samples), _lines(run.samples_path)
    assert len(source) == len(rescored) > 0
    for old, new in zip(source, rescored, strict=True):
        assert new["source_correctness"] == old["correctness"] and new["checker_outputs"] == [None] * len(
            old["correctness"]
        )
        assert {k: v for k, v in new.items() if k not in ("source_correctness", "checker_outputs")} == old
    old_table = json.loads(next(output.rglob("results_*.json")).read_text())["results"][task]
    new_table = json.loads(run.results_path.read_text())["results"][task]
    assert set(new_table) == set(old_table)
    for key, value in old_table.items():
        if isinstance(value, float):
            assert math.isclose(new_table[key], value, rel_tol=1e-12, abs_tol=1e-12), key
        else:
            assert new_table[key] == value, key
    original, again = load_runs([output]), load_runs([rescored_dir])
    assert list(original.questions["correctness"]) == list(again.questions["correctness"])
    assert list(again.questions["model_id"]) == list(original.questions["model_id"])  # the same model
    assert again.runs["labels"].tolist() == [f"rescored: task ({rule_checker('task').version})"]


@pytest.mark.slow
def test_the_task_checker_reproduces_a_real_runs_labels_exactly(arithmetic_run, tmp_path):
    labels = [
        z for line in _lines(next(arithmetic_run.rglob("samples_*.jsonl"))) for z in line["correctness"]
    ]
    assert 0 < sum(labels) < len(labels), "the run must hold correct and incorrect responses"
    assert_reproduced(arithmetic_run, "capcal_arithmetic", tmp_path)


@pytest.mark.slow
def test_the_task_checker_reproduces_the_tiny_gsm8k_run(tiny_run, tmp_path):
    assert_reproduced(tiny_run[0], "capcal_gsm8k", tmp_path)


@pytest.mark.slow
def test_math_verify_rescores_a_real_gsm8k_run(tiny_run, tmp_path):
    output, _ = tiny_run
    (run,) = rescore(output, "math-verify", output_dir_out=tmp_path).runs
    provenance = json.loads(run.results_path.read_text())["capcal_rescore"]
    assert "math-verify 0." in provenance["checker_version"]
    collection = load_runs([tmp_path])
    assert collection.runs["labels"].str.startswith("rescored: math-verify").all()
    assert len(collection.questions) == 2


def test_the_report_says_which_labels_each_run_holds(trivia_copy):
    from analysis.report.analyze import load_report_data
    from analysis.report.build import overview_section
    from analysis.runs.versions import run_versions
    from capcal_tasks.relations import task_relations

    result = rescore(trivia_copy, "exact")
    data = load_report_data([trivia_copy])
    section = overview_section(data, task_relations(data.configs, None), run_versions(data.collection.files))
    runs = dict(section.tables)["Runs: used and left out"].set_index("labels")
    assert runs.loc[f"rescored: exact ({result.checker_version})", "used"]
    assert not runs.loc["task checker", "used"]
    assert any(note.startswith(f"{TASK} run ") and "rescored: exact" in note for note in section.notes)


def test_a_verdict_naming_no_answer_records_the_response_as_judged(trivia_copy, monkeypatch):
    import analysis.evaluation.rescore as module

    monkeypatch.setattr(module, "get_checker", lambda name, **options: StandInJudge(names_answer=False))
    (run,) = rescore(trivia_copy, "judge").runs
    source = {
        line["doc"]["question_id"]: line for line in _lines(next((trivia_copy / MODEL_FOLDER).glob("s*")))
    }
    for line in _lines(run.samples_path):
        old = source[line["doc"]["question_id"]]
        for z, answer, response, old_answer in zip(
            line["correctness"],
            line["extracted_answers"],
            line["resps"][0],
            old["extracted_answers"],
            strict=True,
        ):
            assert answer == (response if z else old_answer)


@pytest.mark.slow
def test_runs_of_tasks_a_checker_does_not_apply_to_are_skipped_and_listed(tiny_run, shared_data, tmp_path):
    """A folder with a GSM8K run (real) and a TriviaQA run: ``exact`` re-scores TriviaQA and lists GSM8K as
    skipped; naming GSM8K is an error."""
    folder = Path(shutil.copytree(tiny_run[0], tmp_path / "runs"))
    write_trivia_run(folder, shared_data)
    result = rescore(folder, "exact", output_dir_out=tmp_path / "out")
    assert [run.task for run in result.runs] == [TASK]
    ((path, reason),) = result.skipped
    assert (
        path.name.startswith("samples_capcal_gsm8k_")
        and reason == "checker exact does not apply to task capcal_gsm8k"
    )
    with pytest.raises(ValueError, match="^checker exact does not apply to task capcal_gsm8k \\("):
        rescore(folder, "exact", output_dir_out=tmp_path / "out2", tasks=["capcal_gsm8k", TASK])
