"""The report's sections, figures and notices, called directly on small hand-built inputs (fast; the whole
report built from runs is tests/analysis/test_report.py)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib import pyplot as plt
from matplotlib.colors import to_hex

from analysis.judge.agreement import NOT_SENT, UNPARSEABLE, RescoreAgreement
from analysis.report import figures
from analysis.report.analyze import ReportOptions, _activation_joins, analyze_runs, load_report_data
from analysis.report.build import overview_section
from analysis.report.calibration_table import (
    CAPABILITY_METRICS,
    INTERVAL_NOTES,
    RESPONSE_METRICS,
    calibration_table,
    intervals_note,
)
from analysis.report.figures import Interval, forest_figure
from analysis.report.input_notices import NothingToScoreError, report_notices
from analysis.report.metric_ranges import marked_interval, range_footnotes, range_marks
from analysis.report.paper_table import ROW_COLUMNS, _latex_grid, paper_table
from analysis.report.registry import ESTIMATORS, LEAKY, ComputedEstimators
from analysis.report.sections import (
    RANDOM_ROW_NOTE,
    SectionInputs,
    SectionPart,
    budget_part,
    capability_facts,
    capability_section,
    display_name,
    examples_table,
    judge_agreement_section,
    leakage_free_part,
    metric_header,
    metric_tables_part,
    pass_at_k_curves,
    pass_at_k_part,
    reliability_part,
    routing_guide,
    routing_lines,
    routing_section,
    sampling_facts,
    section_inputs,
    self_calibration_part,
)
from analysis.report.self_calibration import self_calibration_sections
from analysis.report.summary import Measured, Ranking, _candidates, _forest, _target_note, summary_sections
from analysis.runs.versions import run_versions
from capcal_tasks.relations import task_relations

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the hostile corpus' log writers
from hostile.logs import DATE, confidence_line, sampling_line, write_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = "toy-model"
RESULTS = f"{MODEL}/results_{DATE}.json"  # where a task of a run of MODEL is declared, as the report names it


# ------------------------------------------------------------------ run folders written for the tests


def _results(task: str, metadata: dict, model: str = MODEL) -> dict:
    """A results file whose config declares ``metadata`` for ``task``."""
    return {"results": {task: {}}, "configs": {task: {"metadata": metadata}}, "model_name": model}


def _sampling_run(root: Path, task: str, count: int, metadata: dict, model: str = MODEL, k: int = 8) -> None:
    """``count`` questions ``task/i`` of a sampling task with k responses (the first i % (k + 1) correct)."""
    lines = [
        sampling_line(i, ["4"] * (i % (k + 1)) + ["5"] * (k - i % (k + 1)), question_id=f"{task}/{i}")
        for i in range(count)
    ]
    metadata = {"capcal_task": "sampling", **metadata}
    write_run(root, lines, task=task, folder=f"{model}_{task}", results=_results(task, metadata, model))


def _ptrue_run(root: Path, task: str, target: str, count: int, metadata: dict | None = None) -> None:
    """A P(True) confidence run of MODEL scoring the questions ``target/i`` (declared by ``metadata``)."""
    declared = {"capcal_task": "ptrue", "capcal_role": "confidence", "capcal_target_task": target}
    metadata = declared if metadata is None else metadata
    chances = [0.1 + 0.8 * i / count for i in range(count)]
    logprobs = [{"logprob_yes": float(np.log(p)), "logprob_no": float(np.log(1 - p))} for p in chances]
    lines = [
        confidence_line(i, "ptrue", doc={"question_id": f"{target}/{i}"}, p_true=p, **logprobs[i])
        for i, p in enumerate(chances)
    ]
    write_run(root, lines, task=task, folder=f"{MODEL}_{task}", results=_results(task, metadata))


CALIBRATION = {"capcal_role": "calibration"}


def _evaluation(*calibration: str) -> dict:
    """An evaluation task's declaration with its calibration split(s) (none: ``[]``)."""
    return {"capcal_role": "evaluation", "capcal_calibration_tasks": list(calibration)}


# ------------------------------------------------------------------ input notices


def test_a_folder_of_leaderboard_runs_alone_is_something_to_score():
    """The stored leaderboard runs (results files, no samples) have nothing to warn of: not an error, as
    when the folder held no run at all."""
    assert report_notices([REPO / "benchmarks" / "results" / "leaderboard_board"]) == []


def test_confidence_runs_without_their_sampling_run_are_named_in_the_error(tmp_path):
    """Nothing to score, and the error names the confidence tasks found, sorted, and what to run."""
    _ptrue_run(tmp_path, "toy_ptrue_b", "toy_eval", 3)
    _ptrue_run(tmp_path, "toy_ptrue_a", "toy_eval", 3)
    with pytest.raises(NothingToScoreError) as error:
        report_notices([tmp_path])
    assert str(error.value) == (
        f"nothing to score under {tmp_path}: no capcal sampling run; found confidence runs of toy_ptrue_a, "
        "toy_ptrue_b (they score a sampling run's questions: run the sampling task with --log_samples into "
        "these folders)"
    )


def test_calibration_notices_name_each_split_in_task_order(tmp_path):
    """Per evaluation task in sorted order (the folders list b_eval first): a split with no run of this model
    (its only run is another model's) and a split cut below the isotonic minimum, whose probe (activations
    given) is fitted on three quarters of its 4 questions."""
    first, second = tmp_path / "first", tmp_path / "second"
    _sampling_run(first, "b_eval", 12, _evaluation("b_calib"))
    _sampling_run(first, "b_calib", 12, CALIBRATION, model="other-model")
    _sampling_run(second, "a_eval", 12, _evaluation("a_calib"))
    _sampling_run(second, "a_calib", 4, CALIBRATION)
    order = load_report_data([first, second]).questions["task"].drop_duplicates().tolist()
    assert order.index("b_eval") < order.index("a_eval")  # the sorted order below is not the order found
    assert report_notices([first, second], activations_dir=tmp_path) == [
        "a_eval (toy-model): its calibration split a_calib has 4 questions (was it run with --limit?); "
        "isotonic recalibration needs 10 and is left out, and a probe fitted on 3 of them (a quarter "
        "validates it) is weak; run a_calib without --limit",
        "b_eval (toy-model): its calibration split b_calib has no sampling run here; the probe and isotonic "
        "recalibration are left out",
    ]


# ------------------------------------------------------------------ the appendix: runs and task relations


def test_overview_lists_every_task_with_its_declared_relations(tmp_path):
    """The task relations table: an evaluation task with its two splits (joined by ", "), one with none, the
    splits, a confidence task with the task it scores, and a confidence task that declares no role
    (undeclared, declared nowhere)."""
    _sampling_run(tmp_path, "toy_eval", 4, _evaluation("toy_calib", "toy_calib_more"))
    _sampling_run(tmp_path, "toy_solo", 4, _evaluation())
    _sampling_run(tmp_path, "toy_calib_more", 4, CALIBRATION)
    _sampling_run(tmp_path, "toy_calib", 4, CALIBRATION)
    _ptrue_run(tmp_path, "toy_eval_ptrue", "toy_eval", 4)
    _ptrue_run(tmp_path, "toy_loose_ptrue", "toy_eval", 4, metadata={"capcal_task": "ptrue"})
    data = load_report_data([tmp_path])
    relations = task_relations(data.configs)
    versions = run_versions(data.collection.files)
    section = overview_section(data, relations, versions, [tmp_path])
    assert section.title == "Appendix: runs and task relations"
    assert section.facts == {
        "runs found": 6,
        "runs used": 6,
        "files read once (same content)": 0,
        "entries skipped": 0,
    }
    caption, table = section.tables[0]
    assert caption == "Task relations"
    assert table.to_dict("records") == [
        {"task": "toy_calib", "role": "calibration", "calibration split(s)": "", "scores": "",
         "declared in": RESULTS},
        {"task": "toy_calib_more", "role": "calibration", "calibration split(s)": "", "scores": "",
         "declared in": RESULTS},
        {"task": "toy_eval", "role": "evaluation", "calibration split(s)": "toy_calib, toy_calib_more",
         "scores": "", "declared in": RESULTS},
        {"task": "toy_eval_ptrue", "role": "confidence", "calibration split(s)": "", "scores": "toy_eval",
         "declared in": RESULTS},
        {"task": "toy_loose_ptrue", "role": "undeclared", "calibration split(s)": "", "scores": "",
         "declared in": ""},
        {"task": "toy_solo", "role": "evaluation", "calibration split(s)": "no calibration split declared",
         "scores": "", "declared in": RESULTS},
    ]  # fmt: skip


# ------------------------------------------------------------------ activation joins


def test_activation_joins_say_why_a_folder_without_an_index_joins_nothing(tmp_path):
    joins: list[dict] = []
    frame = pd.DataFrame({"task": ["toy_eval"], "question_id": ["toy_eval/0"]})
    _activation_joins(tmp_path, [frame], joins)
    assert joins == [
        {
            "join": "activations",
            "summary": f"{tmp_path / 'index.json'}: no activations index "
            "(run capcal-hf with activations=DIR)",
        }
    ]


def test_activation_joins_match_each_task_of_each_frame_with_its_entries(tmp_path):
    """One join row per task of each frame, in the frames' order, against that task's index entries."""
    entry = {"shard": "activations-00000.safetensors", "last_token": 0, "prompt_mean": 0, "prompt_tokens": 3,
             "prompt_sha256": "0" * 64}  # fmt: skip
    index = {
        "format": "capcal-activations",
        "version": 1,
        "model": MODEL,
        "model_fingerprint": None,
        "dtype": "float32",
        "entries": {"toy_eval": {"e0": entry, "e1": entry}, "toy_calib": {"c0": entry, "c9": entry}},
    }
    (tmp_path / "index.json").write_text(json.dumps(index))
    evaluation = pd.DataFrame({"task": ["toy_eval"] * 3, "question_id": ["e0", "e1", "e2"]})
    calibration = pd.DataFrame({"task": ["toy_calib", "toy_calib"], "question_id": ["c0", "c1"]})
    joins: list[dict] = []
    _activation_joins(tmp_path, [evaluation, calibration], joins)
    assert joins == [
        {
            "join": "toy_eval <-> activations",
            "matched": 2,
            "left": 3,
            "right": 2,
            "summary": "toy_eval <-> activations: matched 2 of 3 toy_eval questions and 2 activations; "
            "1 toy_eval questions without activations (first: e2)",
        },
        {
            "join": "toy_calib <-> activations",
            "matched": 1,
            "left": 2,
            "right": 2,
            "summary": "toy_calib <-> activations: matched 1 of 2 toy_calib questions and 2 activations; "
            "1 toy_calib questions without activations (first: c1); "
            "1 activations without toy_calib questions (first: c9)",
        },
    ]


# ------------------------------------------------------------------ the paper table


def test_paper_table_rows_are_numbered_afresh_with_only_the_row_columns(tmp_path):
    """The rows of one metric keep only ROW_COLUMNS (no leftover index column) and a fresh 0..n-1 index."""
    _sampling_run(tmp_path, "toy_eval", 12, _evaluation())
    _ptrue_run(tmp_path, "toy_eval_ptrue", "toy_eval", 12)
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    rows = paper_table([tmp_path], ["soft_auroc"], options=options)
    assert list(rows.columns) == ROW_COLUMNS
    assert list(rows.index) == list(range(len(rows))) and len(rows) > 1
    assert set(rows["metric"]) == {"soft_auroc"} and set(rows["task"]) == {"toy_eval"}


def test_latex_grid_is_a_booktabs_table_with_escaped_cells():
    grid = pd.DataFrame(
        {
            "estimator": ["p_true", "consistency_k2 (leaky)"],
            "toy_eval": ["0.7 [0.5, 0.9]", ""],
            "b & c": ["50%", "‡"],
        }
    )
    assert _latex_grid(grid, "soft_auroc ↑", ["sampling: toy_eval: fixed k"]) == "\n".join(
        [
            r"\begin{table}[t]",
            r"\centering",
            r"\caption{soft\_auroc $\uparrow$}",
            r"\begin{tabular}{lcc}",
            r"\toprule",
            r"estimator & toy\_eval & b \& c \\",
            r"\midrule",
            r"p\_true & 0.7 [0.5, 0.9] & 50\% \\",
            r"consistency\_k2 (leaky) &  & \ddag{} \\",
            r"\bottomrule",
            r"\end{tabular}",
            r"\par\footnotesize sampling: toy\_eval: fixed k",
            r"\end{table}",
        ]
    )


# ------------------------------------------------------------------ judge agreement


def test_judge_agreement_section_states_every_fact_and_the_reading_note():
    """Kappa by hand: observed 7/10, expected (4 * 5 + 6 * 5) / 100 = 0.5, so (0.7 - 0.5) / 0.5 = 0.4."""
    agreement = RescoreAgreement(
        task="capcal_triviaqa",
        checker="judge",
        checker_version="simpleqa-1",
        judge_model="judge-m",
        source="run 1",
        confusion=np.array([[3, 1], [2, 4]]),  # [source label, judge label]
        questions=5,
        unparseable_verdicts=1,
        questions_left_out=1,
        left_out_ids=["q9"],
    )
    section = judge_agreement_section(agreement, "/models/toy-model")
    assert section.title == "Judge vs rule agreement · toy-model · capcal_triviaqa"
    assert section.facts == {
        "model": "/models/toy-model",
        "task": "capcal_triviaqa",
        "checker": "judge (simpleqa-1)",
        "judge model": "judge-m",
        "source run": "run 1",
        "questions kept": 5,
        "responses kept": 10,
        "observed agreement": "0.700",
        "Cohen's kappa": "0.400 (no interval: kappa is undefined on every resample of the questions)",
        "unparseable verdicts": 1,
        "questions left out (unparseable verdict)": 1,
    }
    assert section.notes == [
        "Rows: the source run's labels (its task checker); columns: the rescored labels. A verdict that "
        "could not be read is never guessed: its question is left out of the rescored run and counted above.",
        "questions left out (first ids): q9",
    ]
    caption, confusion = section.tables[0]
    assert caption == "Confusion counts over responses (rule x judge)"
    assert confusion.to_dict("list") == {
        "rule label (source run)": ["correct", "incorrect", "total"],
        "judge: correct": [4, 1, 5],
        "judge: incorrect": [2, 3, 5],
        "total": [6, 4, 10],
    }


def test_agreement_over_no_responses_is_not_available():
    agreement = RescoreAgreement("capcal_triviaqa", "exact", "1", None, "", np.zeros((2, 2), dtype=int))
    section = judge_agreement_section(agreement, "m")
    assert section.title == "Rescored vs source labels · m · capcal_triviaqa"
    assert {key: section.facts[key] for key in ("judge model", "source run", "responses kept")} == {
        "judge model": "none (rule-based)",
        "source run": "not recorded",
        "responses kept": 0,
    }
    assert section.facts["observed agreement"] == "n/a"
    assert section.facts["unparseable verdicts"] == "not recorded"


def test_judge_grades_are_tabulated_per_rule_label_in_the_grade_order():
    """The grades table lists the grades seen, in the fixed order A, B, C, Yes, No, not sent, unparseable
    (not the order met), each with its responses per rule label (0 where a label has none of it)."""
    grades = Counter(
        {(0, UNPARSEABLE): 1, (1, "C"): 2, (0, "A"): 1, (1, "A"): 4, (0, "C"): 3, (1, NOT_SENT): 1}
    )
    agreement = RescoreAgreement(
        "capcal_triviaqa",
        "judge",
        "simpleqa-1",
        "judge-m",
        "run 1",
        np.array([[3, 1], [2, 4]]),
        grades=grades,
    )
    section = judge_agreement_section(agreement, "m")
    assert [caption for caption, _ in section.tables] == [
        "Confusion counts over responses (rule x judge)",
        "Judge grades per rule label (only A, or Yes, counts as correct)",
    ]
    assert section.tables[1][1].to_dict("list") == {
        "rule label (source run)": ["correct", "incorrect"],
        "A": [4, 1],
        "C": [2, 3],
        "not sent (no extracted answer)": [1, 0],
        "unparseable": [0, 1],
    }


def test_rescored_labels_name_the_checker_and_leave_no_ids_note():
    """A rule-based rescoring names its checker in the confusion caption and columns, its facts say so,
    and without left-out ids the notes are the reading note alone."""
    agreement = RescoreAgreement(
        "capcal_math",
        "numeric",
        "2",
        None,
        "",
        np.array([[5, 0], [1, 2]]),
        questions=4,
        unparseable_verdicts=0,
    )
    section = judge_agreement_section(agreement, "/ckpt/toy-model")
    assert section.title == "Rescored vs source labels · toy-model · capcal_math"
    ((caption, confusion),) = section.tables
    assert caption == "Confusion counts over responses (rule x rescored (numeric))"
    assert confusion.to_dict("list") == {
        "rule label (source run)": ["correct", "incorrect", "total"],
        "rescored (numeric): correct": [2, 0, 2],
        "rescored (numeric): incorrect": [1, 5, 6],
        "total": [3, 5, 8],
    }
    assert section.facts["checker"] == "numeric (2)" and section.facts["observed agreement"] == "0.875"
    assert section.facts["unparseable verdicts"] == 0
    assert section.facts["questions left out (unparseable verdict)"] == "not recorded"
    assert len(section.notes) == 1 and section.notes[0].startswith("Rows: the source run's labels")


# ------------------------------------------------------------------ self-calibration loops


def _loop_side(side: Path) -> None:
    """One side of a ``capcal selfcal run`` folder: a sampling run of 6 questions x 3 responses
    (``eval_sample``) and a self-check run of those responses (``eval_selfcheck``), written by hand."""
    samples, checks = [], []
    for i in range(6):
        line = sampling_line(i, ["4"] * (i % 4) + ["5"] * (3 - i % 4), question_id=f"q{i}")
        doc = {
            "question_id": f"q{i}",
            "question_text": line["doc"]["question"],
            "responses": line["resps"][0],
        }
        chances = [0.2 + 0.1 * i] * 3
        checks.append(
            confidence_line(
                i,
                "selfcheck",
                doc=doc,
                p_yes=chances,
                p_yes_normalized=chances,
                response_correctness=line["correctness"],
            )
        )
        samples.append(line)
    write_run(
        side / "eval_sample",
        samples,
        task="toy_eval",
        results=_results("toy_eval", {"capcal_task": "sampling"}),
    )
    write_run(
        side / "eval_selfcheck", checks, task="toy_eval_selfcheck", results=_results("toy_eval_selfcheck", {})
    )


def test_a_compared_self_calibration_loop_opens_with_how_to_read_it(tmp_path):
    """A loop folder whose two sides can be compared gets a section opening with how to read it (and only
    that sentence: the comparison itself sets none); its differences are 0 (the same runs on both sides)."""
    loop = tmp_path / "loop"
    for side in ("before", "after"):
        _loop_side(loop / side)
    (loop / "loop.json").write_text(json.dumps({"settings": {"confidence": "p_yes"}}))
    (section,) = self_calibration_sections([tmp_path], n_resamples=20)
    assert section.title == "Self-Calibration training: before vs after (loop)" and not section.warnings
    assert section.sentences == [
        "Did training help? Read the difference column: an interval below 0 for ECE or Brier (above 0 for "
        "AUROC) is an improvement; the accuracy change must stay within the tolerance."
    ]
    differences = [str(v) for v in section.tables[0][1]["after - before"] if str(v) != "n/a"]
    assert differences and all(v.startswith(("0.000", "-0.000")) for v in differences)


def test_a_self_calibration_section_draws_1000_resamples_by_default(tmp_path, monkeypatch):
    """The documented default of ``self_calibration_sections`` and of the ``read_comparisons`` under it is
    1,000 bootstrap resamples from seed 0, and given values reach the comparison, with each loop's sides in
    their places, its confidence and its training record from ``loop.json``, the loops in path order (a unit
    swap 1000 -> 1024 of a default, a value not passed on, the sides swapped, are the bugs this catches).
    What reaches ``compare_checked_runs`` is recorded there and the comparison stopped (a refused comparison
    becomes the section's warning): the bootstrap itself, 1,000 resamples, would take seconds, and its
    settings are all this test reads."""
    from analysis.self_calibration import results

    training = {"settings": {"lora_r": 8}, "data": "train.jsonl"}
    for name, confidence in (("b_loop", "p_yes_normalized"), ("a_loop", "p_yes")):
        for side in ("before", "after"):
            _loop_side(tmp_path / name / side)
        record = {"settings": {"confidence": confidence}, "training": training}
        (tmp_path / name / "loop.json").write_text(json.dumps(record))
    received: list[tuple] = []

    def recorded(before, after, **options):
        (folder, first), (_, second) = (
            run.sampling.path.relative_to(tmp_path).parts[:2] for run in (before, after)
        )
        sides = (first, second)
        received.append((folder, sides, options["n_resamples"], options["seed"], options["confidence"]))
        assert options["training"] == training and tuple(options["training_question_ids"]) == ()
        raise ValueError("recorded")

    monkeypatch.setattr(results, "compare_checked_runs", recorded)
    sections = self_calibration_sections([tmp_path])
    assert [section.warnings for section in sections] == [["not compared: recorded"]] * 2
    assert not any(section.sentences for section in sections)  # no "how to read" without a comparison
    assert [section.title[-8:] for section in sections] == ["(a_loop)", "(b_loop)"]
    results.read_comparisons([tmp_path / "a_loop"])
    self_calibration_sections([tmp_path / "b_loop"], n_resamples=7, seed=5)
    assert received == [
        ("a_loop", ("before", "after"), 1000, 0, "p_yes"),
        ("b_loop", ("before", "after"), 1000, 0, "p_yes_normalized"),
        ("a_loop", ("before", "after"), 1000, 0, "p_yes"),
        ("b_loop", ("before", "after"), 7, 5, "p_yes_normalized"),
    ]


# ------------------------------------------------------------------ routing guide


def test_routing_guide_names_the_drawn_lines_the_ties_and_the_leaky_line():
    methods = ["p_true", "consistency_k4", "random", "oracle_cheap", "oracle_gain"]
    curves = pd.DataFrame(
        [{"method": m, "fraction": f, "accuracy": 0.5 + f / 4} for m in methods for f in (0.0, 0.5, 1.0)]
    )
    mu_cheap = np.array([0.5, 0.5, 0.5, 1.0, 0.0])
    assert routing_guide(routing_lines(curves), mu_cheap, "small") == (
        "An estimator helps when its line lies above the grey dotted line with squares (random routing). "
        "Two oracles: the black dashed line with triangles is oracle_cheap, routing by small's own mu_hat "
        "(the best any confidence of small can do); the dark grey dash-dot line with down-pointing triangles "
        "is oracle_gain, routing by the gain mu_strong - mu_cheap (the best any router can do, knowing both "
        "models). 3 of the 5 questions have mu_hat = 0.5 for small: routing by mu_hat picks among them at "
        "random, so oracle_cheap runs close to random routing over that range. consistency_k4 (leaky): the "
        "paper-form consistency draws from the samples that define mu_hat, which scores the routing, so its "
        "line is optimistic."
    )


def _routing_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A cheap model (checkpoint /ckpt/small, mean mu_hat 0.4375) with p_true and a probe that misses one
    question, and a strong one (/ckpt/big, 0.8125 on the shared questions) that also answered q4."""
    cheap = pd.DataFrame(
        {
            "model": "/ckpt/small",
            "question_id": ["q0", "q1", "q2", "q3"],
            "expected_accuracy": [0.25, 0.5, 0.0, 1.0],
            "n": 4,
            "p_true": [0.2, 0.6, 0.1, 0.9],
            "probe": [0.5, np.nan, 0.5, 0.5],
        }
    )
    strong = pd.DataFrame(
        {
            "model": "/ckpt/big",
            "question_id": ["q1", "q0", "q2", "q3", "q4"],
            "expected_accuracy": [1.0, 0.75, 0.5, 1.0, 0.0],
            "n": 4,
        }
    )
    return cheap, strong


JOIN = (
    "join: small <-> big: matched 4 of 4 small questions and 5 big questions; 1 big questions without small "
    "questions (first: q4)"
)


def test_routing_section_routes_from_the_model_with_more_estimators_to_the_other(drawn):
    """The model listed second has more routing estimators, so it is the routed-from one; the probe (NaN on
    q1) draws no line; p_true routes q2 first (lowest confidence, gain 0.5): 0.4375 + 0.5 / 4 at 25%."""
    cheap, strong = _routing_tables()
    evaluations = {("big-id", "t"): (strong, ["p_true"]), ("small-id", "t"): (cheap, ["p_true", "probe"])}
    section = routing_section(evaluations, "t")
    assert section is not None
    assert section.title == "Routing · t: small -> big"
    assert section.facts == {"questions": 4, "accuracy of small": "0.438", "accuracy of big": "0.812"}
    assert section.notes == [
        "Route the questions with the lowest confidence of the cheap model to the strong one; accuracy is "
        "the exact expected accuracy (mean mu_hat of whichever model answers).",
        JOIN,
    ]
    (figure,) = section.figures
    assert figure.caption == "Routing: accuracy against the fraction of questions sent to the strong model"
    assert figure.guide == (
        "An estimator helps when its line lies above the grey dotted line with squares (random routing). Two "
        "oracles: the black dashed line with triangles is oracle_cheap, routing by small's own mu_hat (the "
        "best any confidence of small can do); the dark grey dash-dot line with down-pointing triangles is "
        "oracle_gain, routing by the gain mu_strong - mu_cheap (the best any router can do, knowing both "
        "models)."
    )
    (drawing,) = drawn
    axis = drawing.axes[0]
    assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) == (
        "routing",
        "fraction routed",
        "accuracy",
    )
    lines = {line.get_label(): line for line in axis.get_lines()}
    assert list(lines) == [
        "p_true",
        "random routing",
        "oracle_cheap (routes by the cheap model's mu_hat)",
        "oracle_gain (routes by the gain mu_strong - mu_cheap)",
    ]
    p_true = lines["p_true"]
    assert [float(x) for x in p_true.get_xdata()[[0, 5, -1]]] == pytest.approx([0.0, 0.25, 1.0])
    assert [float(y) for y in p_true.get_ydata()[[0, 5, -1]]] == pytest.approx([0.4375, 0.5625, 0.8125])
    assert float(lines["random routing"].get_ydata()[10]) == pytest.approx((0.4375 + 0.8125) / 2)


def test_routing_section_to_a_model_no_more_accurate_routes_nothing():
    """The other model is less accurate on the shared questions: the section says so with both means."""
    cheap, strong = _routing_tables()
    evaluations = {
        ("small-id", "t"): (cheap, ["p_true"]),
        ("big-id", "t"): (strong.assign(expected_accuracy=0.1), []),
    }
    section = routing_section(evaluations, "t")
    assert section is not None
    assert section.title == "Routing · t: no stronger model"
    assert section.facts == {"questions": 4, "accuracy of small": "0.438", "accuracy of big": "0.100"}
    assert section.notes == [
        "Not routed: big is not more accurate than small on these questions (0.100 <= 0.438), so routing "
        "questions from small to it could only lose accuracy.",
        JOIN,
    ]
    assert section.figures == [] and section.tables == []


def test_routing_pair_of_equally_equipped_models_routes_from_the_less_accurate():
    """Tied on routing estimators, the less accurate model is the routed-from one whatever the order given;
    a task with one model has no routing section."""
    cheap, strong = _routing_tables()
    evaluations = {("big-id", "t"): (strong, ["p_true"]), ("small-id", "t"): (cheap, ["p_true"])}
    section = routing_section(evaluations, "t")
    assert section is not None and section.title == "Routing · t: small -> big"
    assert (
        routing_section({("small-id", "t"): (cheap, ["p_true"]), ("big-id", "u"): (strong, [])}, "t") is None
    )


# ------------------------------------------------------------------ the forest plot


def _axis_of(monkeypatch, *args, **kwargs):
    """forest_figure's PNG and the Axes it drew (kept as the figure is rendered)."""
    drawn = []
    render = figures._png

    def keep(figure) -> bytes:
        drawn.append(figure.axes[0])
        return render(figure)

    monkeypatch.setattr(figures, "_png", keep)
    png = forest_figure(*args, **kwargs)
    assert png.startswith(b"\x89PNG") and len(drawn) == 1
    return drawn[0]


def _lines(axis) -> list[tuple]:
    """Each drawn line: x data, y data, colour, width, marker, marker face colour, label."""
    return [
        (
            [float(x) for x in line.get_xdata()],
            [float(y) for y in line.get_ydata()],
            to_hex(line.get_color()),
            line.get_linewidth(),
            line.get_marker(),
            to_hex(line.get_markerfacecolor()),
            line.get_label(),
        )
        for line in axis.get_lines()
    ]


RED, BLUE, WHITE = "#c44e52", "#4c72b0", "#ffffff"
FLOOR = "0: the lowest possible population value"


def test_forest_figure_draws_the_best_in_red_the_others_in_blue_and_the_floor(monkeypatch):
    """Rows top down; the best's interval thicker, in red, its tick "(best)" in bold; a row without an
    interval only its (hollow) dot; the base rate grey dotted; an interval below 0 adds the black floor."""
    rows = [
        Interval("probe", 0.10, 0.05, 0.15, highlight=True),
        Interval("p_true", 0.20, -0.01, 0.40),
        Interval("consistency_lf_k2 (vs mu_hat_lf)", 0.30, np.nan, np.nan, hollow=True),
    ]
    axis = _axis_of(monkeypatch, rows, "Brier", ("base rate", 0.25), zero_floor=True)
    width = 1.5  # matplotlib's default width of the dots' (unused) line
    assert _lines(axis) == [
        ([0.05, 0.15], [2.0, 2.0], RED, 2.4, "None", RED, "_child0"),
        ([0.10], [2.0], RED, width, "o", RED, "_child1"),
        ([-0.01, 0.40], [1.0, 1.0], BLUE, 1.6, "None", BLUE, "_child2"),
        ([0.20], [1.0], BLUE, width, "o", BLUE, "_child3"),
        ([0.30], [0.0], BLUE, width, "o", WHITE, "_child4"),
        ([0.25, 0.25], [0.0, 1.0], "#737373", 1.4, "None", "#737373", "base rate"),
        ([0.0, 0.0], [0.0, 1.0], "#000000", 0.8, "None", "#000000", FLOOR),
    ]
    ticks = axis.get_yticklabels()
    assert [tick.get_text() for tick in ticks] == ["probe (best)", "p_true", rows[2].label]
    assert [tick.get_fontweight() for tick in ticks] == ["bold", "normal", "normal"]
    # the labels smaller than matplotlib's default 10 points, so that long estimator names fit
    assert [tick.get_fontsize() for tick in ticks] == [8.0, 8.0, 8.0]
    assert {tick.get_fontsize() for tick in axis.get_xticklabels()} == {8.0}
    assert axis.xaxis.label.get_fontsize() == 9.0
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["base rate", FLOOR]
    assert list(axis.figure.get_size_inches()) == pytest.approx([6.4, 0.75 + 0.26 * 3])
    assert axis.get_ylim() == pytest.approx((-0.7, 2.7)) and axis.get_xlabel() == "Brier"
    assert {line.get_alpha() for line in axis.xaxis.get_gridlines()} == {0.3}
    assert not any(line.get_visible() for line in axis.yaxis.get_gridlines())


def _overlaps(box, other) -> bool:
    """Whether two display-space boxes share any area."""
    return box.x0 < other.x1 and other.x0 < box.x1 and box.y0 < other.y1 and other.y0 < box.y1


@pytest.mark.parametrize("best", [0, 1, 2])
def test_forest_figure_legend_lies_beside_the_axes_hiding_no_dot(monkeypatch, best):
    """The legend (base rate, floor) is drawn right of the axes' data area, for whichever row is best (placed
    "best" inside the axes it sat on a row's dot, the first screen's best among them)."""
    rows = [Interval(name, 0.1 * (i + 1), -0.05, 0.3, highlight=i == best) for i, name in enumerate("abc")]
    axis = _axis_of(monkeypatch, rows, "Brier", ("base rate", 0.25), zero_floor=True)
    legend, data_area = axis.get_legend().get_window_extent(), axis.get_window_extent()
    assert legend.x0 >= data_area.x1 and not _overlaps(legend, data_area)


def test_target_scatter_legend_lies_outside_every_panel(drawn):
    """The scatter's legend sits above the panels, on none of them (inside the first it covered points)."""
    confidence = np.array([0.05, 0.1, 0.5, 0.95])
    figures.target_scatter_figure({"p_true": confidence, "probe": confidence}, confidence, np.ones(4))
    (figure,) = drawn
    (legend,) = figure.legends
    box = legend.get_window_extent()
    for axis in figure.axes:
        if axis.get_visible():
            assert not _overlaps(box, axis.get_window_extent()), axis.get_title()


def test_forest_figure_draws_no_floor_for_an_interval_that_only_reaches_0(monkeypatch):
    rows = [Interval("probe", 0.10, 0.0, 0.2, highlight=True), Interval("p_true", 0.2, 0.05, 0.4)]
    axis = _axis_of(monkeypatch, rows, "Brier", None, zero_floor=True)
    assert [line.get_label() for line in axis.get_lines()] == [f"_child{i}" for i in range(4)]
    assert axis.get_legend() is None


def test_range_marks_mark_a_skill_below_minus_one_but_not_at_it():
    """-1 itself is in range (a Brier twice the base rate's); a skill above 1 and below -1 at once (its
    interval above 1) carries both marks, in the order of MARKS."""
    assert range_marks("capability_brier_skill", -1.0, -1.5, 0.2) == ""
    assert range_marks("capability_brier_skill", -1.2, -1.5, 1.2) == "§¶"
    assert range_marks("corrected_capability_brier", 0.01, -0.02, 0.04) == "‡"
    assert range_marks("capability_brier", -0.5) == ""  # not an unclipped metric
    assert marked_interval("capability_brier_skill", -1.2, -1.5, 1.2) == "-1.200 [-1.500, 1.200] §¶"
    assert marked_interval("capability_brier_skill", 0.5, 0.2, 0.8, digits=2) == "0.50 [0.20, 0.80]"


def test_range_footnotes_give_each_mark_and_metric_once_in_mark_order():
    """Footnotes of a frame: ‡ (the corrected Brier before the debiased ECE, as NON_NEGATIVE lists them), then
    § and ¶, each (mark, metric) once however many rows carry it; each with its whole reason."""
    rows = pd.DataFrame(
        {
            "metric": ["capability_brier_skill", "capability_ece_debiased", "corrected_capability_brier",
                       "capability_brier_skill", "corrected_capability_brier"],
            "estimate": [-3.0, 0.01, -0.01, 1.5, 0.02],
            "low": [-4.0, -0.02, -0.03, 1.2, -0.01],
            "high": [-2.0, 0.05, 0.02, 1.8, 0.05],
        }
    )  # fmt: skip
    assert range_footnotes(rows) == [
        "‡ corrected_capability_brier: below 0, which a Brier score cannot be: the corrected Brier subtracts "
        "an estimate of mu_hat's sampling noise and is unbiased rather than clipped, so where the true value "
        "is near 0 the estimate or its interval falls below 0 at small N or k; read it as 0",
        "‡ capability_ece_debiased: below 0: the debiased ECE subtracts the binning noise and is not "
        "clipped; a value or endpoint below 0 means that no miscalibration is detectable at this N (read it "
        "as 0)",
        "§ capability_brier_skill: above 1, the skill of a perfect forecast: skill = 1 - CB / S with the "
        "corrected Brier CB below 0 (see ‡), which happens at small N or k; read it as 'no error "
        "detectable', not as better than perfect",
        "¶ capability_brier_skill: below -1: the Brier is more than twice the base rate's (the skill is "
        "unbounded below); its size is large when the base rate's Brier S, the spread of mu_hat over the "
        "questions, is small (few questions, or most of them at one mu_hat)",
    ]
    assert range_footnotes([("capability_brier", -1.0, -2.0, 0.0)]) == []


# ------------------------------------------------------------------ the summary


def _ranking(targets: list[str], lows: list[float], metric: str = "corrected_capability_brier") -> Ranking:
    """A ranking of estimators e1, e2, ... scored against ``targets``, estimates 0.1, 0.2, ..."""
    count = len(targets)
    long = pd.DataFrame(
        {
            "rank": range(1, count + 1),
            "estimator": [f"e{i}" for i in range(1, count + 1)],
            "target": targets,
            "estimate": [0.1 * i for i in range(1, count + 1)],
            "low": lows,
            "high": [0.1 * i + 0.05 for i in range(1, count + 1)],
            "questions": 40,
            "metric": metric,
        }
    )
    return Ranking("toy-model", "toy_eval", 40, "8", long.drop(columns="metric"), "sentence", long=long,
                   verdict="Use e1.", base_rate=0.25)  # fmt: skip


GUIDE = (
    "Dot: corrected capability Brier; line: its 95% bootstrap interval; the best on top, in red; left is "
    "better. Grey dotted: the base rate (the mean mu_hat for every question), itself an estimate: the Brier "
    "skill's interval in the table says whether an estimator beats it. Compare estimators by the table's "
    "paired differences, not by overlapping intervals."
)


def test_forest_guide_speaks_of_the_floor_only_when_an_interval_reaches_below_it():
    figure = _forest(_ranking(["mu_hat", "mu_hat_lf"], [0.05, 0.0]))
    assert figure.caption == "Corrected capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.guide == GUIDE + " Hollow dots: scored against mu_hat_lf."
    below = _forest(_ranking(["mu_hat", "mu_hat"], [0.05, -0.01]))
    assert below.guide == GUIDE + (
        " Black line: 0, the lowest value a Brier can take; an interval below it is noise (‡)."
    )


def test_forest_of_a_single_ranked_estimator_is_drawn():
    """One ranked estimator is still a forest of one row (None is only for no ranked estimator)."""
    figure = _forest(_ranking(["mu_hat"], [0.05], metric="capability_brier"))
    assert figure.caption == "Capability Brier of each estimator (toy-model · toy_eval)"
    assert figure.png.startswith(b"\x89PNG")


def test_target_note_without_a_leakage_free_target():
    assert _target_note(_ranking(["mu_hat", "mu_hat"], [0.05, 0.1])) == (
        "Every ranked estimator is scored against mu_hat, the expected accuracy from all k samples."
    )


def test_summary_says_what_was_measured_from_the_rankings_when_not_told():
    (head, detail) = summary_sections([_ranking(["mu_hat", "mu_hat"], [0.05, 0.1])], n_resamples=20)
    assert head.facts == {
        "models": "toy-model",
        "evaluation tasks": "toy_eval",
        "questions (N) and samples per question (k)": "toy-model · toy_eval: N = 40, k = 8",
        "primary metric": "corrected capability Brier (lower is better): a proper score, unbiased for the "
        "Brier against the true expected accuracy, whose bootstrap intervals cover it",
        "intervals": "95% percentile bootstrap over questions (20 resamples); differences paired",
    }
    assert head.sentences == ["toy-model · toy_eval: Use e1."]
    assert detail.title == "Summary · toy-model · toy_eval"


def test_summary_without_any_evaluation_task_says_so():
    (head,) = summary_sections([])
    assert head.sentences == ["No evaluation task with a confidence estimator was found."]
    assert head.facts["models"] == "none" and head.figures == []
    unranked = summary_sections([], what=[Measured("toy-model", "toy_eval", 4, "8", False)])
    assert unranked[0].sentences == [
        "toy-model · toy_eval: no confidence estimator could be computed, so there is nothing to rank."
    ]


# ------------------------------------------------------------------ figures, tables and a section's parts


def _computed(evaluation: pd.DataFrame, *estimators: str) -> ComputedEstimators:
    """Estimators already computed (their columns in ``evaluation``), each with its registry entry."""
    entries = {entry.name: entry for entry in ESTIMATORS}
    columns = {name: entries["consistency" if LEAKY.match(name) else name] for name in estimators}
    return ComputedEstimators(evaluation, columns, [], {}, {})


def test_grid_of_five_panels_is_two_rows_of_four_square_cells_with_the_spare_cells_hidden():
    """A 3-inch square per panel, four to a row: 5 panels need 2 rows, so the figure is 12 x 6 inches."""
    figure, axes = figures._grid(5)
    try:
        assert list(figure.get_size_inches()) == [12.0, 6.0]
        assert [axis.get_visible() for axis in axes] == [True] * 5 + [False] * 3
    finally:
        plt.close(figure)


def test_reliability_figure_draws_each_bins_mean_target_with_its_count(drawn):
    """Two bins: [0, 0.5) holds 3 questions (mean target 1/3), [0.5, 1] one (mean 1); bars 90% of a bin wide,
    blue at alpha 0.8, the count above each bar (capped at 0.97), the dashed diagonal, the subtitle line."""
    confidence = np.array([0.1, 0.2, 0.3, 0.9, np.nan])  # the NaN is left out
    target = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    png = figures.reliability_figure(
        {"p_true": confidence}, target, "mu_hat", {"p_true": "ECE 0.1"}, n_bins=2
    )
    assert png.startswith(b"\x89PNG")
    (figure,) = drawn
    axis = figure.axes[0]
    bars = axis.patches
    assert [p.get_x() for p in bars] == pytest.approx([0.025, 0.525])
    assert [p.get_width() for p in bars] == pytest.approx([0.45, 0.45])
    assert [p.get_height() for p in bars] == pytest.approx([1 / 3, 1.0])
    assert [(to_hex(p.get_facecolor(), keep_alpha=True), p.get_alpha()) for p in bars] == [
        ("#4c72b0cc", 0.8)
    ] * 2
    assert [t.get_text() for t in axis.texts] == ["3", "1"]
    assert [t.get_position() for t in axis.texts] == [pytest.approx((0.25, 1 / 3 + 0.02)), (0.75, 0.97)]
    (diagonal,) = axis.get_lines()
    assert (list(diagonal.get_xdata()), list(diagonal.get_ydata()), diagonal.get_linestyle()) == (
        [0, 1],
        [0, 1],
        "--",
    )
    assert axis.get_title() == "p_true\nECE 0.1" and axis.get_ylabel() == "mean mu_hat"
    assert figure._suptitle.get_text() == "Reliability (mu_hat)"


def test_target_scatter_jitters_each_response_target_cross_on_its_own(drawn):
    """The z crosses are spread vertically, each by its own offset within +-0.03 (one shared offset would
    stack the crosses at 0 and 1 again), the same on every draw; the mu_hat dots are not jittered."""
    confidence = np.array([0.2, 0.4, 0.6, 0.8, 0.9])
    mu_hat = np.array([0.25, 0.5, 0.5, 0.75, 1.0])
    z = np.array([0.0, 1.0, 0.0, 1.0, 1.0])
    figures.target_scatter_figure({"p_true": confidence, "probe": confidence}, mu_hat, z)
    figures.target_scatter_figure({"p_true": confidence}, mu_hat, z)
    offsets = []
    for figure in drawn:
        crosses, dots = figure.axes[0].collections
        assert crosses.get_label() == "z (response)" and dots.get_label() == "mu_hat (capability)"
        assert list(crosses.get_offsets()[:, 0]) == list(confidence)
        assert np.array_equal(dots.get_offsets(), np.column_stack([confidence, mu_hat]))
        offsets.append(crosses.get_offsets()[:, 1] - z)
    jitter = offsets[0]
    assert len(set(np.round(jitter, 12))) == len(z) and np.all(np.abs(jitter) <= 0.03)
    assert np.array_equal(offsets[1], jitter)
    assert np.array_equal(drawn[0].axes[1].collections[0].get_offsets()[:, 1] - z, jitter)


def test_target_scatter_draws_orange_crosses_blue_dots_and_the_diagonal_in_each_panel(drawn):
    """Each panel: orange crosses (z, size 10, alpha 0.5) under blue dots (mu_hat, size 12, alpha 0.7), the
    dashed diagonal from (0, 0) to (1, 1), margins around the unit square, the estimator as title and both
    axis labels; the legend is on the first panel only."""
    confidence = np.array([0.2, 0.8])
    figures.target_scatter_figure(
        {"p_true": confidence, "probe": confidence}, np.array([0.25, 0.75]), np.ones(2)
    )
    (figure,) = drawn
    first, second = figure.axes[:2]
    for axis, name in ((first, "p_true"), (second, "probe")):
        crosses, dots = axis.collections
        assert [to_hex(c.get_facecolor()[0]) for c in (crosses, dots)] == ["#dd8452", "#4c72b0"]
        assert [c.get_alpha() for c in (crosses, dots)] == [0.5, 0.7]
        assert [list(c.get_sizes()) for c in (crosses, dots)] == [[10], [12]]
        (diagonal,) = axis.get_lines()
        assert (list(diagonal.get_xdata()), list(diagonal.get_ydata())) == ([0, 1], [0, 1])
        assert (diagonal.get_linestyle(), to_hex(diagonal.get_color()), diagonal.get_linewidth()) == (
            "--",
            "#000000",
            0.8,
        )
        assert axis.get_xlim() == (-0.02, 1.02) and axis.get_ylim() == (-0.06, 1.06)
        assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) == (name, "confidence", "target")
    (legend,) = figure.legends  # one legend for the figure, on no panel
    assert [t.get_text() for t in legend.get_texts()] == ["z (response)", "mu_hat (capability)"]
    assert [t.get_fontsize() for t in legend.get_texts()] == [7.0, 7.0]
    assert first.get_legend() is None and second.get_legend() is None


def test_curves_figure_draws_each_line_band_and_axis_as_asked(drawn):
    """An estimator line (thin, below, the cycle's first colour) with its band; a reference line (its own
    colour and style, thicker, above); a line with half a band gets none; log2 x axis, fixed y limits,
    titles, a light grid and the legend beside the axis."""
    curves = [
        figures.Curve(
            "p_true", [1, 2, 4], [0.2, 0.4, 0.5], band_low=[0.1, 0.3, 0.4], band_high=[0.3, 0.5, 0.6]
        ),
        figures.Curve("actual", [1, 2, 4], [0.3, 0.5, 0.7], style="--", marker="^", color="black"),
        figures.Curve("probe", [1, 2, 4], [0.1, 0.2, 0.3], band_low=[0.0, 0.1, 0.2]),
    ]
    png = figures.curves_figure(curves, "pass@k", "k", "pass@k", log_x=True, y_limits=(0, 1))
    assert png.startswith(b"\x89PNG")
    (figure,) = drawn
    assert list(figure.get_size_inches()) == [5.5, 3.8]
    axis = figure.axes[0]
    lines = [
        (
            line.get_label(),
            [float(x) for x in line.get_xdata()],
            [float(y) for y in line.get_ydata()],
            line.get_linestyle(),
            line.get_marker(),
            line.get_markersize(),
            to_hex(line.get_color()),
            line.get_linewidth(),
            line.get_zorder(),
        )
        for line in axis.get_lines()
    ]
    assert lines == [
        ("p_true", [1, 2, 4], [0.2, 0.4, 0.5], "-", "o", 3, "#1f77b4", 1.2, 2),
        ("actual", [1, 2, 4], [0.3, 0.5, 0.7], "--", "^", 4, "#000000", 1.8, 3),
        ("probe", [1, 2, 4], [0.1, 0.2, 0.3], "-", "o", 3, "#ff7f0e", 1.2, 2),
    ]
    (band,) = axis.collections
    assert to_hex(band.get_facecolor()[0], keep_alpha=True) == "#1f77b426" and band.get_alpha() == 0.15
    outline = band.get_paths()[0].vertices
    assert {(float(x), float(y)) for x, y in outline} >= {(1, 0.1), (4, 0.4), (4, 0.6), (1, 0.3)}
    assert axis.get_xscale() == "log" and axis.xaxis.get_transform().base == 2
    assert axis.get_ylim() == (0, 1)
    assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) == ("pass@k", "k", "pass@k")
    assert {line.get_alpha() for line in axis.xaxis.get_gridlines() + axis.yaxis.get_gridlines()} == {0.3}
    legend = axis.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == ["p_true", "actual", "probe"]
    assert legend.get_texts()[0].get_fontsize() == 7


def test_curves_figure_keeps_a_linear_x_axis_and_free_y_limits_by_default(drawn):
    figures.curves_figure([figures.Curve("a", [0, 1], [2, 3])], "t", "x", "y")
    axis = drawn[0].axes[0]
    assert axis.get_xscale() == "linear" and axis.get_ylim()[1] > 3 and len(axis.collections) == 0


def test_line_description_names_a_line_without_a_grey_level_as_coloured():
    """A line without a named colour is "coloured"; a colour letter in the style is not part of its style."""
    curve = figures.Curve("x", [0], [0], style="k-.", marker="v")
    assert figures.line_description(curve) == "coloured dash-dot line with down-pointing triangles"
    grey = figures.Curve("x", [0], [0], style=":", marker="s", color="0.25")
    assert figures.line_description(grey) == "dark grey dotted line with squares"


def test_calibration_table_says_how_each_interval_was_made_and_where_it_does_not_cover():
    """Per row: the questions it was computed on (the NaN confidence counted missing), the sampling, the
    interval method (jackknife for the debiased ECE) and the note of the binned ECEs; the random rows
    (expectations) have neither."""
    correctness = [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]]
    table = pd.DataFrame(
        {
            "correctness": correctness,
            "n": 4,
            "expected_accuracy": [sum(v) / 4 for v in correctness],
            "c": [0.5, 0.3, 0.7, np.nan, 0.9, 0.4],
        }
    )
    rows = calibration_table(table, ["c"], n_resamples=20)
    capability_ece, response_ece = INTERVAL_NOTES["capability_ece"], INTERVAL_NOTES["response_ece"]
    assert capability_ece.startswith("interval does not cover") and response_ece.startswith(
        "interval does not"
    )
    notes = {"capability_ece": capability_ece, "response_ece": response_ece}
    methods = {"capability_ece_debiased": "jackknife normal"}
    own = [
        ("c", metric, 5, 1, "fixed k", methods.get(metric, "bootstrap percentile"), notes.get(metric, ""))
        for metric in (*CAPABILITY_METRICS, *RESPONSE_METRICS)
    ]
    random = [
        ("random (expected)", metric, 6, 0, "fixed k", "", "")
        for metric in ("capability_brier", "capability_brier_skill", "response_brier", "soft_auroc",
                       "response_auroc", "spearman")
    ]  # fmt: skip
    columns = ["estimator", "metric", "questions", "questions_missing", "sampling", "interval_method"]
    assert list(rows[[*columns, "interval_note"]].itertuples(index=False, name=None)) == own + random


def _fixed_k(correctness: list[list[int]], confidence: list[float]) -> pd.DataFrame:
    """A fixed-k evaluation table with one estimator, p_true."""
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [sum(v) / len(v) for v in correctness],
            "p_true": confidence,
        }
    )


def test_budget_part_draws_every_line_at_each_power_of_two_budget_up_to_the_smallest_n(drawn):
    """n = 8 and 10: budgets 1, 2, 4, 8 (16 > 8); at budget 1 the uniform allocation's accuracy is the mean
    pass@1, the mean mu_hat."""
    correctness = [[1] * i + [0] * (8 - i) for i in range(8)] + [[1] * 9 + [0]]
    evaluation = _fixed_k(correctness, [0.1 * i for i in range(9)])
    inputs = SectionInputs(_computed(evaluation, "p_true"), ["p_true"], 20, 0)
    part = budget_part(inputs)
    assert [figure.caption for figure in part.figures] == [
        "Inference-budget allocation: exact accuracy (mean unbiased pass@b_i) at each average budget"
    ]
    (figure,) = drawn
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    uniform = "uniform (the same budget for every question)"
    assert set(lines) == {uniform, "oracle (allocates by mu_hat itself)", "p_true"}
    assert all(list(line.get_xdata()) == [1, 2, 4, 8] for line in lines.values())
    mean_pass_at_1 = np.mean([sum(v) / len(v) for v in correctness])
    assert lines[uniform].get_ydata()[0] == pytest.approx(mean_pass_at_1)


SIX = [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1]]  # mu_hat below
SIX_P_TRUE = [0.5, 0.3, 0.7, 0.2, 0.9, 0.4]  # against mu_hat 0.5, 0.25, 0.75, 0, 1, 0.5: Brier 0.065 / 6


def _six_inputs(**extra: pd.DataFrame) -> SectionInputs:
    """Six fixed-k questions (k = 4) with p_true, and ``extra`` side tables (the leakage-free one)."""
    computed = _computed(_fixed_k(SIX, SIX_P_TRUE), "p_true")
    computed.extra.update(extra)
    return SectionInputs(computed, ["p_true"], 20, 0)


def _estimates(table: pd.DataFrame) -> dict[str, list[str]]:
    """Each column's cells without their intervals: ``0.011 [0.002, 0.020] ‡`` -> ``0.011 ‡``."""
    return {
        column: [" ".join(w for w in str(cell).split(" ") if not w.startswith("[") and not w.endswith("]"))
                 for cell in table[column]]
        for column in table.columns
    }  # fmt: skip


def test_metric_tables_part_captions_each_target_with_its_intervals_and_notes():
    """Two tables, capability then response metrics, each captioned with its target, how its intervals
    were made and the † notes; the p_true row then the random row; marks and footnotes where a value
    leaves its range (the random row's skill below -1, p_true's corrected Brier below 0)."""
    part = metric_tables_part(_six_inputs())
    capability = (
        f"Capability calibration (target: mu_hat); {intervals_note(CAPABILITY_METRICS, 20)}; "
        f"† capability_ece: {INTERVAL_NOTES['capability_ece']}"
    )
    response = (
        "Response calibration (target: the first response's correctness z); "
        f"{intervals_note(RESPONSE_METRICS, 20)}; † response_ece: {INTERVAL_NOTES['response_ece']}"
    )
    assert "20 resamples" in capability and "20 resamples" in response
    assert [caption for caption, _ in part.tables] == [capability, response]
    (_, first), (_, second) = part.tables
    assert list(first.columns) == [
        "estimator", "questions", "capability_ece ↓ †", "capability_ece_debiased ↓", "capability_brier ↓",
        "corrected_capability_brier ↓", "capability_brier_skill ↑", "soft_auroc ↑", "spearman ↑",
    ]  # fmt: skip
    assert list(second.columns) == ["estimator", "questions", "response_ece ↓ †", "response_brier ↓",
                                    "response_auroc ↑"]  # fmt: skip
    capability_estimates = _estimates(first)
    assert capability_estimates["estimator"] == ["p_true", "random (expected)"]
    assert capability_estimates["questions"] == ["6", "6"]
    assert capability_estimates["capability_brier ↓"] == ["0.011", "0.187"]  # E(U - mu)^2 = 1/3 - mu + mu^2
    assert capability_estimates["capability_ece ↓ †"] == ["0.083", ""]
    assert capability_estimates["corrected_capability_brier ↓"][0].endswith(" ‡")
    assert capability_estimates["capability_brier_skill ↑"][1].endswith(" ¶")
    assert _estimates(second)["response_brier ↓"] == ["0.173", "0.333"]  # z = 1, 1, 1, 0, 1, 0
    footnotes = part.footnotes
    assert list(footnotes) == [capability, response]
    assert [line[:2] for line in footnotes[capability]] == ["ra", "‡ ", "§ ", "¶ "]
    assert footnotes[capability][0] == RANDOM_ROW_NOTE and footnotes[response] == [RANDOM_ROW_NOTE]


def test_leakage_free_part_scores_the_leakage_free_consistency_against_its_own_target():
    """The leakage-free consistency equals its target mu_hat_lf (Brier 0); the corrected Brier subtracts
    mu_hat_lf (1 - mu_hat_lf) / (n_lf - 1) = 0.25 on two questions of six: -0.083, marked ‡ with its
    footnote; no leakage-free table, no part."""
    lf = pd.DataFrame(
        {
            "consistency_lf_k2": [0.5, 0.0, 1.0, 0.0, 1.0, 0.5],
            "mu_hat_lf": [0.5, 0.0, 1.0, 0.0, 1.0, 0.5],
            "n_lf": 2,
        }
    )
    part = leakage_free_part(_six_inputs(leakage_free=lf))
    caption = "Leakage-free consistency (drawn from a pool disjoint from the samples defining its target)"
    ((shown, table),) = part.tables
    assert shown == caption
    estimates = _estimates(table)
    assert estimates["estimator"] == ["consistency_lf_k2"]
    assert "spearman ↑" not in estimates and "soft_auroc ↑" in estimates
    assert estimates["capability_brier ↓"] == ["0.000"]
    assert estimates["corrected_capability_brier ↓"] == ["-0.083 ‡"]
    assert list(part.footnotes) == [caption]
    assert [line[:30] for line in part.footnotes[caption]] == [
        "‡ corrected_capability_brier: ",
        "§ capability_brier_skill: abov",
    ]
    assert leakage_free_part(_six_inputs()) == SectionPart()


def test_reliability_part_titles_each_panel_with_its_ece_of_the_panels_target(drawn):
    """Three figures (capability and response reliability, the target scatter), with their captions and
    guides; each reliability panel's title carries the ECE of its own target (0.083 against mu_hat, 0.367
    against z, both binned: †)."""
    part = reliability_part(_six_inputs())
    assert [(figure.caption, figure.guide) for figure in part.figures] == [
        (
            "Capability reliability: mean mu_hat per confidence bin",
            "Bars on the dashed diagonal are calibrated; bars below it are over-confident, above it "
            "under-confident; the number over a bar is its question count. † the binned ECE's interval is a "
            "resampling spread, not a confidence interval (biased upward; see the debiased ECE).",
        ),
        (
            "Response reliability: accuracy of the first response per confidence bin",
            "As above, against the 0/1 correctness of each question's first response.",
        ),
        (
            "Confidence against the capability target (dots) and the response target (crosses)",
            "Dots close to the diagonal mean the confidence tracks mu_hat; the crosses at 0 and 1 show how "
            "far a single response's correctness scatters around it.",
        ),
    ]
    capability, response, scatter = drawn
    titles = [figure.axes[0].get_title().split("\n") for figure in (capability, response)]
    assert [title[0] for title in titles] == ["p_true", "p_true"]
    assert [title[1].split(" [")[0] for title in titles] == ["ECE 0.083", "ECE 0.367"]
    assert all(title[1].endswith("] †") for title in titles)
    # one question per confidence bin (p_true 0.2, 0.3, 0.4, 0.5, 0.7, 0.9): each bar is that question's
    # mu_hat (0, 0.25, 0.5, 0.5, 0.75, 1) in the capability panel, its first response's 0/1 in the other
    heights = [
        [round(bar.get_height(), 9) for bar in figure.axes[0].patches] for figure in (capability, response)
    ]
    assert heights == [[0, 0.25, 0.5, 0.5, 0.75, 1], [0, 1, 0, 1, 1, 1]]
    assert [figure._suptitle.get_text() for figure in (capability, response)] == [
        "Reliability (mu_hat)",
        "Reliability (z)",
    ]
    assert scatter.axes[0].get_title() == "p_true"


def test_pass_at_k_part_tables_the_mse_per_k_and_draws_each_predicted_curve(drawn):
    """k = 1 and 4 (k = n): p_true's MSE at k = 1 is its Brier against mu_hat (0.065 / 6), the oracle's 0;
    the figure's lines are p_true (with its band) and the black dashed actual pass@k on a log2 axis."""
    part = pass_at_k_part(_six_inputs())
    ((caption, table),) = part.tables
    assert caption == (
        "pass@k prediction: instance-level MSE against the unbiased pass@k; 20 bootstrap resamples over "
        "questions, 95% intervals"
    )
    assert list(table.columns) == ["estimator", "MSE pass@1 ↓", "MSE pass@4 ↓"]
    estimates = _estimates(table)
    assert estimates["estimator"] == ["p_true", "oracle (p = mu_hat)"]
    assert estimates["MSE pass@1 ↓"] == ["0.0108", "0.0000"]
    (figure,) = part.figures
    assert figure.caption == "Dataset-level pass@k predicted from each estimator (95% band) vs actual"
    assert figure.guide == (
        "The closer an estimator's line runs to the black dashed line with circles (actual (unbiased "
        "pass@k)), the better it predicts how often k attempts succeed; bands are 95%, clipped to [0, 1]."
    )
    axis = drawn[0].axes[0]
    assert [line.get_label() for line in axis.get_lines()] == ["p_true", "actual (unbiased pass@k)"]
    assert [list(line.get_xdata()) for line in axis.get_lines()] == [[1, 2, 3, 4]] * 2
    actual = axis.get_lines()[1]
    assert (to_hex(actual.get_color()), actual.get_linestyle()) == ("#000000", "--")
    assert float(actual.get_ydata()[0]) == pytest.approx(0.5)  # pass@1 = mean mu_hat
    assert float(actual.get_ydata()[-1]) == pytest.approx(5 / 6)  # pass@4: 5 of 6 questions solved at all
    assert len(axis.collections) == 1 and axis.get_ylim() == (0, 1) and axis.get_xscale() == "log"
    assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) == ("pass@k", "k", "pass@k")


def test_pass_at_k_curves_carry_each_estimators_k_prediction_and_band():
    curves = pass_at_k_curves(
        {"p_true": np.array(SIX_P_TRUE)}, np.full(6, 4), np.array([sum(v) for v in SIX])
    )
    predicted, actual = curves
    assert (predicted.label, list(predicted.x)) == ("p_true", [1, 2, 3, 4])
    assert predicted.y[0] == pytest.approx(np.mean(SIX_P_TRUE))  # predicted pass@1: the mean confidence
    assert predicted.band_low is not None and predicted.band_high is not None
    assert all(
        lo <= y <= hi for lo, y, hi in zip(predicted.band_low, predicted.y, predicted.band_high, strict=True)
    )
    assert (predicted.style, predicted.color) == ("-", None)
    assert (actual.label, list(actual.x), actual.style, actual.color) == (
        "actual (unbiased pass@k)",
        [1, 2, 3, 4],
        "--",
        "black",
    )


def _adaptive(correctness: list[list[int]], looks: list[int]) -> pd.DataFrame:
    """An adaptive run's table: each question stopped at one of ``looks``; p_true 0.1, 0.2, ..."""
    return pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [sum(v) / len(v) for v in correctness],
            "mu_squared_hat": [0.2] * len(correctness),
            "sampling": "adaptive (looks 4, 6, 8, rule unanimity)",
            "looks": [looks] * len(correctness),
            "p_true": [0.1 * (i + 1) for i in range(len(correctness))],
        }
    )


ADAPTIVE = [[1, 1, 1, 1], [1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 1, 1, 1, 0, 1]]


def test_adaptive_run_facts_count_the_samples_saved_against_its_last_look():
    """4 + 8 + 4 + 8 = 24 samples drawn against 4 x 8 = 32 at the last look k_max = 8 (not the middle one)."""
    facts = sampling_facts(_adaptive(ADAPTIVE, [4, 6, 8]))
    assert facts == {
        "sampling": "adaptive (looks 4, 6, 8, rule unanimity)",
        "samples drawn": "24 of 32 (fixed k), 8 saved (25%)",
    }
    assert sampling_facts(_fixed_k(SIX, SIX_P_TRUE)) == {"sampling": "fixed k"}


def test_capability_facts_of_an_adaptive_run_give_the_range_of_samples_and_what_was_saved():
    """n of 4 to 8 samples; mu_hat 1, 1/8, 0, 5/8: mean 0.4375, two of four strictly between 0 and 1."""
    computed = _computed(_adaptive(ADAPTIVE, [4, 6, 8]), "p_true")
    assert capability_facts(computed, {"model": "m", "task": "t"}, ["p_true"]) == {
        "model": "m",
        "task": "t",
        "sampling": "adaptive (looks 4, 6, 8, rule unanimity)",
        "samples drawn": "24 of 32 (fixed k), 8 saved (25%)",
        "questions": 4,
        "samples per question": "4-8",
        "mean expected accuracy": "0.438",
        "questions with 0 < mu_hat < 1": "50.0%",
        "estimators": "p_true (capability)",
    }


def test_first_look_counts_of_an_adaptive_run_are_its_first_four_samples():
    """The samples before any stopping decision (l_1 = 4); a fixed-k run's counts are all its samples."""
    inputs = SectionInputs(_computed(_adaptive(ADAPTIVE, [4, 6, 8]), "p_true"), ["p_true"], 20, 0)
    n, c = inputs.first_look_counts
    assert (list(n), list(c)) == ([4, 4, 4, 4], [4, 1, 0, 2])
    assert [list(v) for v in inputs.counts] == [[4, 8, 4, 8], [4, 1, 0, 5]]
    fixed = _six_inputs()
    assert [list(v) for v in fixed.first_look_counts] == [[4] * 6, [2, 1, 3, 0, 4, 2]]


def test_leakage_free_target_of_an_adaptive_run_keeps_its_sampling_and_mu_squared():
    """With mu_squared_hat_lf (an adaptive run's leakage-free table) the target keeps the run's sampling and
    looks and takes mu_squared_hat_lf; without, it is a fixed-k target of the first look's sampling; both
    take mu_hat_lf and n_lf as mu_hat and n."""
    lf = pd.DataFrame(
        {
            "consistency_lf_k2": [1.0, 0.0, 0.5, 0.5],
            "mu_hat_lf": [1.0, 0.0, 0.5, 0.75],
            "n_lf": [2, 6, 2, 6],
            "mu_squared_hat_lf": [1.0, 0.0, 0.0, 0.5],
        }
    )
    computed = _computed(_adaptive(ADAPTIVE, [4, 6, 8]), "p_true")
    computed.extra["leakage_free"] = lf
    table = SectionInputs(computed, ["p_true"], 20, 0).leakage_free
    assert table is not None
    assert list(table["expected_accuracy"]) == [1.0, 0.0, 0.5, 0.75] and list(table["n"]) == [2, 6, 2, 6]
    assert list(table["mu_squared_hat"]) == [1.0, 0.0, 0.0, 0.5]
    assert set(table["sampling"]) == {"adaptive (looks 4, 6, 8, rule unanimity)"}
    assert list(table["looks"]) == [[4, 6, 8]] * 4 and list(table["correctness"]) == ADAPTIVE
    computed.extra["leakage_free"] = lf.drop(columns="mu_squared_hat_lf")
    fixed = SectionInputs(computed, ["p_true"], 20, 0).leakage_free
    assert fixed is not None and "mu_squared_hat" not in fixed.columns and "looks" not in fixed.columns
    assert set(fixed["sampling"]) == {"fixed k (first look 4 of adaptive (looks 4, 6, 8, rule unanimity))"}
    assert _six_inputs().leakage_free is None and _six_inputs().leakage_free_metrics is None


def test_metric_headers_show_the_direction_and_display_names_the_checkpoint_folder():
    assert [metric_header(m) for m in ("soft_auroc", "capability_ece", "spearman", "response_brier")] == [
        "soft_auroc ↑",
        "capability_ece ↓",
        "spearman ↑",
        "response_brier ↓",
    ]
    assert [display_name(m) for m in ("/ckpt/run-1/", "toy-model", "/")] == ["run-1", "toy-model", "/"]


def test_pass_at_k_part_of_an_adaptive_run_stops_at_its_first_look():
    """pass@k only up to the first look l_1 = 4, and the caption says why."""
    inputs = SectionInputs(_computed(_adaptive(ADAPTIVE, [4, 6, 8]), "p_true"), ["p_true"], 20, 0)
    ((caption, table),) = pass_at_k_part(inputs).tables
    assert caption.endswith(
        "95% intervals; adaptive run: from each question's first 4 samples, pass@k for k > 4 not available "
        "(no unbiased estimate after stopping: k exceeds the first look l_1 = 4)"
    )
    assert list(table.columns) == ["estimator", "MSE pass@1 ↓", "MSE pass@4 ↓"]


def test_parts_of_an_estimator_with_a_missing_confidence_leave_out_pass_at_k_and_budget():
    """A confidence missing on one question is not complete: no pass@k, budget part."""
    inputs = SectionInputs(_computed(_fixed_k(SIX, [*SIX_P_TRUE[:5], np.nan]), "p_true"), ["p_true"], 20, 0)
    assert inputs.complete == {}
    assert pass_at_k_part(inputs) == SectionPart() and budget_part(inputs) == SectionPart()


def test_budget_part_goes_up_to_a_budget_of_16_for_16_samples_each(drawn):
    """n = 16: budgets 1, 2, 4, 8, 16; the axis is log2, titled, the guide names uniform and oracle."""
    correctness = [[1] * i + [0] * (16 - i) for i in (0, 3, 8, 16)]
    inputs = SectionInputs(
        _computed(_fixed_k(correctness, [0.1, 0.2, 0.5, 0.9]), "p_true"), ["p_true"], 20, 0
    )
    (figure,) = budget_part(inputs).figures
    assert figure.guide == (
        "An estimator is useful when its line rises above the grey dotted line with squares (uniform "
        "allocation); the black dashed line with triangles (the oracle, allocating by mu_hat itself) is the "
        "ceiling."
    )
    axis = drawn[0].axes[0]
    assert all(list(line.get_xdata()) == [1, 2, 4, 8, 16] for line in axis.get_lines())
    assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel()) == (
        "budget allocation",
        "samples per question (average)",
        "accuracy",
    )
    assert axis.get_xscale() == "log"


def _self_checked(checks: list) -> SectionInputs:
    """Three questions of three samples with their extracted answers and one self-check per response."""
    correctness = [[1, 1, 0], [0, 0, 1], [1, 0, 1]]
    evaluation = _fixed_k(correctness, [0.5, 0.3, 0.7]).assign(
        extracted_answers=[["4", "4", "5"], ["1", "2", "3"], ["7", "8", "7"]],
        selfcheck_p_yes_normalized=checks,
    )
    return SectionInputs(_computed(evaluation, "p_true"), ["p_true"], 20, 0)


def test_self_calibration_part_draws_each_strategy_against_the_samples_used(drawn):
    """One line per strategy; self-consistency at N = 3 votes 4 (right), a three-way tie (1/3) and 7
    (right): 7/9; at N = 1 the first responses, 2 of 3 right."""
    part = _self_checked([[0.9, 0.8, 0.1], [0.2, 0.3, 0.9], [0.7, 0.4, 0.6]])
    (figure,) = self_calibration_part(part).figures
    assert figure.caption == (
        "Self-Calibration test-time strategies on the per-response self-checks: accuracy vs average samples "
        "used"
    )
    assert figure.guide == "Higher and further left is better: more accuracy for fewer samples."
    axis = drawn[0].axes[0]
    lines = {line.get_label(): line for line in axis.get_lines()}
    assert list(lines) == [
        "self_consistency",
        "weighted_self_consistency",
        "early_stopping",
        "adaptive_weighted_self_consistency",
        "adaptive_self_consistency",
    ]
    consistency = lines["self_consistency"]
    assert list(consistency.get_xdata()) == [1, 2, 3]
    assert [float(y) for y in consistency.get_ydata()[[0, 2]]] == pytest.approx([2 / 3, 7 / 9])
    assert (axis.get_title(), axis.get_xlabel(), axis.get_ylabel(), axis.get_xscale()) == (
        "test-time scaling",
        "samples used (average)",
        "accuracy",
        "linear",
    )


def test_self_calibration_part_needs_one_self_check_per_response():
    """A question with two self-checks for three responses, or no self-check column: no figure."""
    assert (
        self_calibration_part(_self_checked([[0.9, 0.8, 0.1], [0.2, 0.3], [0.7, 0.4, 0.6]])) == SectionPart()
    )
    assert self_calibration_part(_six_inputs()) == SectionPart()


def test_capability_section_without_an_estimator_keeps_its_facts_and_says_so():
    """No calibration-table estimator: no inputs, the facts, the fitted estimators' table and one note."""
    computed = _computed(_fixed_k(SIX, SIX_P_TRUE))
    assert section_inputs(computed, 20, 0) is None
    computed.trained_on["isotonic_p_true"] = "toy_calib (12 questions, in-domain, declared)"
    section = capability_section("toy", computed, {"model": "m"}, None)
    assert section.title == "toy"
    assert section.facts == {
        "model": "m",
        "sampling": "fixed k",
        "questions": 6,
        "samples per question": "4",
        "mean expected accuracy": "0.500",
        "questions with 0 < mu_hat < 1": "66.7%",
        "estimators": "none",
    }
    assert [(caption, table.to_dict("list")) for caption, table in section.tables] == [
        (
            "Fitted estimators: what each was trained on",
            {
                "estimator": ["isotonic_p_true"],
                "trained on": ["toy_calib (12 questions, in-domain, declared)"],
            },
        )
    ]
    assert section.notes == ["no confidence estimator is available for this run"] and section.figures == []


def test_capability_section_with_an_estimator_has_every_parts_tables_and_figures():
    """section_inputs keeps the registered estimator; the section: the two metric tables, then pass@k's,
    the three reliability figures, pass@k's and budget's; the facts name p_true's target."""
    computed = _computed(_fixed_k(SIX, SIX_P_TRUE), "p_true")
    inputs = section_inputs(computed, 20, 0)
    assert (
        inputs is not None
        and inputs.estimators == ["p_true"]
        and (inputs.n_resamples, inputs.seed) == (20, 0)
    )
    section = capability_section("toy", computed, {}, inputs)
    assert section.facts["estimators"] == "p_true (capability)"
    assert [caption.split(" (")[0].split(";")[0] for caption, _ in section.tables] == [
        "Capability calibration",
        "Response calibration",
        "pass@k prediction: instance-level MSE against the unbiased pass@k",
    ]
    assert [figure.caption for figure in section.figures] == [
        "Capability reliability: mean mu_hat per confidence bin",
        "Response reliability: accuracy of the first response per confidence bin",
        "Confidence against the capability target (dots) and the response target (crosses)",
        "Dataset-level pass@k predicted from each estimator (95% band) vs actual",
        "Inference-budget allocation: exact accuracy (mean unbiased pass@b_i) at each average budget",
    ]
    assert section.notes == [] and len(section.footnotes) == 2


def test_examples_table_cuts_text_to_300_characters_and_formats_each_confidence():
    evaluation = _fixed_k(SIX[:3], [0.5, np.nan, 0.25]).assign(
        question_id=["a", "b", "c"], question=["q" * 301, "Q2", "Q3"], first_response=["r1", 7, "r3"]
    )
    table = examples_table(evaluation, ["p_true"], 2)
    assert table.to_dict("list") == {
        "question_id": ["a", "b"],
        "question": ["q" * 300, "Q2"],
        "first response": ["r1", "7"],
        "mu_hat": ["0.500", "0.250"],
        "p_true": ["0.500", "n/a"],
    }


def test_candidates_of_an_adaptive_run_are_scored_with_its_unbiased_mu_squared():
    """An adaptive run's candidates carry the run's mu^2 estimates (the moment forms of the corrected Brier,
    unbiased after stopping); the leaky paper-form consistency is left out; a fixed-k run carries none."""
    looks = [4, 8]
    correctness = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 0, 0, 0]]
    evaluation = pd.DataFrame(
        {
            "correctness": correctness,
            "n": [len(v) for v in correctness],
            "expected_accuracy": [1.0, 0.0, 0.6, 0.3],
            "mu_squared_hat": [1.0, 0.0, 0.35, 0.08],
            "sampling": "adaptive (looks 4, 8, rule unanimity)",
            "looks": [looks] * 4,
            "p_true": [0.9, 0.2, 0.6, 0.4],
            "consistency_k2": [1.0, 0.0, 0.5, 0.5],
        }
    )
    computed = _computed(evaluation, "p_true", "consistency_k2")
    candidates, leaky = _candidates(SectionInputs(computed, ["p_true", "consistency_k2"], 20, 0))
    assert leaky == ["consistency_k2"]
    (candidate,) = candidates
    assert (candidate.name, candidate.target) == ("p_true", "mu_hat")
    assert list(candidate.confidence) == [0.9, 0.2, 0.6, 0.4]
    assert list(candidate.mu_hat) == [1.0, 0.0, 0.6, 0.3] and list(candidate.n) == [4, 4, 8, 8]
    assert candidate.mu_square_hat is not None and list(candidate.mu_square_hat) == [1.0, 0.0, 0.35, 0.08]
    fixed = _fixed_k([[1, 0], [1, 1]], [0.5, 0.9])
    ((plain,), _) = _candidates(SectionInputs(_computed(fixed, "p_true"), ["p_true"], 20, 0))
    assert plain.mu_square_hat is None


def test_routing_guide_names_every_leaky_line_in_one_list():
    methods = ["consistency_k2", "consistency_k4", "random", "oracle_cheap", "oracle_gain"]
    curves = pd.DataFrame(
        [{"method": m, "fraction": f, "accuracy": 0.5 + f / 4} for m in methods for f in (0.0, 0.5, 1.0)]
    )
    guide = routing_guide(routing_lines(curves), np.array([0.1, 0.2, 0.3, 0.4]), "small")
    assert guide.endswith(
        "knowing both models). consistency_k2 (leaky), consistency_k4 (leaky): the paper-form consistency "
        "draws from the samples that define mu_hat, which scores the routing, so its line is optimistic."
    )


def test_paper_table_of_folders_without_an_evaluation_task_names_them(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError) as error:
        paper_table([tmp_path / "empty", tmp_path])
    assert str(error.value) == (
        f"no evaluation task with a confidence estimator in {tmp_path / 'empty'}, {tmp_path}: "
        "nothing to tabulate"
    )


def test_section_joins_an_undeclared_confidence_task_on_question_ids_and_says_so(tmp_path):
    """A P(True) task declaring no capcal_target_task is joined on question ids, the join's row says so;
    the section's tables end with the examples."""
    _sampling_run(tmp_path, "toy_eval", 6, _evaluation())
    _ptrue_run(tmp_path, "toy_loose_ptrue", "toy_eval", 6, metadata={"capcal_task": "ptrue"})
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    (result,) = analyze_runs([tmp_path], options=options).results
    assert "p_true" in result.computed.evaluation.columns
    caption, joins = result.bookkeeping.tables[-1]
    assert caption == "Joins: matched and unmatched question ids"
    assert joins.to_dict("records") == [
        {
            "join": "toy_eval <-> toy_loose_ptrue",
            "matched": 6,
            "left": 6,
            "right": 6,
            "summary": "toy_eval <-> toy_loose_ptrue: matched 6 of 6 toy_eval questions and 6 "
            "toy_loose_ptrue records; toy_loose_ptrue declares no capcal_target_task: joined on question ids",
        }
    ]
    caption, examples = result.section.tables[-1]
    assert caption == "Examples (model text shown as text)" and len(examples) == 2


def test_activations_folder_recorded_in_a_run_is_resolved_against_its_results_file(tmp_path):
    """The ``activations`` folder a run's metadata records is the recorded path resolved against the run's
    results file (a relative one from the run's folder, with a note saying so; an absolute one that is
    missing is noted and left out), not the results file itself."""
    _sampling_run(tmp_path, "toy_eval", 3, {"activations": "acts"})
    missing = tmp_path / "nowhere"
    _sampling_run(tmp_path, "toy_other", 3, {"activations": str(missing)})
    run_folder = (tmp_path / f"{MODEL}_toy_eval").resolve()
    (run_folder / "acts").mkdir()
    data = load_report_data([tmp_path])
    (model_id,) = set(data.questions["model_id"])
    assert data.activations == {(model_id, "toy_eval"): run_folder / "acts"}
    assert sorted(data.path_notes) == sorted(
        [
            f"activations acts (relative) recorded in results_{DATE}.json: read from {run_folder / 'acts'}, "
            f"relative to the run's folder {run_folder}",
            f"activations {missing} recorded in {tmp_path / f'{MODEL}_toy_other' / f'results_{DATE}.json'}: "
            f"no such file or folder, nor any tail of it (down to nowhere) next to the run's folders "
            f"({tmp_path / f'{MODEL}_toy_other'} and above); the probe is left out: pass the folder with "
            "--activations DIR",
        ]
    )
    assert data.lost_activations == {(model_id, "toy_other"): str(missing)}


def test_bookkeeping_states_the_model_identity_and_why_it_is_not_a_checkpoint(tmp_path):
    """The appendix's "model identity" is the checkpoint fingerprint alone for a checkpoint identity, and the
    unresolved id with the reason otherwise (here: the results file records no model arguments)."""
    _sampling_run(tmp_path, "toy_eval", 6, _evaluation())
    results = _results("fp_eval", {"capcal_task": "sampling", **_evaluation()}, model="fp-model")
    results["capcal_model"] = {"fingerprint": "0123abcd", "label": "fp-model"}
    lines = [sampling_line(i, ["4"] * i + ["5"] * (8 - i), question_id=f"fp_eval/{i}") for i in range(6)]
    write_run(tmp_path, lines, task="fp_eval", folder="fp-model_fp_eval", results=results)
    options = ReportOptions(n_resamples=20, consistency_ks=(2,), max_examples=2)
    sections = analyze_runs([tmp_path], options=options).results
    assert {result.model_id: result.bookkeeping.facts for result in sections} == {
        "0123abcd": {
            "model": "fp-model",
            "model identity": "0123abcd",
            "declared relations": f"fp-model/results_{DATE}.json",
        },
        f"unresolved:{MODEL}": {
            "model": MODEL,
            "model identity": f"unresolved:{MODEL} (no model arguments in the results file)",
            "declared relations": RESULTS,
        },
    }
