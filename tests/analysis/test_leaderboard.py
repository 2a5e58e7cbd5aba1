"""``capcal leaderboard``: the export the Hugging Face leaderboard template reads, displayed by the template's
own logic (``leaderboard_template``: its read_evals.py and populate.py re-implemented independently of capcal,
failing where they fail).

The board tests read the stored results of two real stock ``lm_eval`` runs of ``capcal_calibration_open``
(SmolLM2-135M-Instruct and Qwen2.5-Coder-0.5B-Instruct, 8 questions per task, k = 4, 32 new tokens; the
commands are in docs/leaderboards.md, the files in benchmarks/results/leaderboard_board/); the degenerate
boards of issue 48 are built from the same files (a per-task board where no model solves a question, one
such model alone, two benchmarks on one board, lm-eval's own file beside the export). The live run of the
group is tests/capcal_tasks/test_calibration_leaderboard.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from analysis.cli import main
from analysis.leaderboard import (
    BOARD_COLUMNS,
    leaderboard_board,
    leaderboard_rows,
    template_tasks,
    write_leaderboard_results,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leaderboard_template import (  # noqa: E402  (this folder)
    AVERAGE,
    MODEL,
    PRECISION,
    REVISION,
    TemplateTask,
    board,
)

REPO = Path(__file__).resolve().parents[2]
STORED = REPO / "benchmarks" / "results" / "leaderboard_board"
GROUP = "capcal_calibration_open"
FILTER = "all_responses"
# metric -> higher is better, for every board column: written out here, not read from the module under test
BOUNDED_METRICS = {
    "expected_accuracy": True,
    "ptrue_corrected_brier": False,
    "ptrue_ece_debiased": False,
    "ptrue_auroc": True,
    "consistency_corrected_brier": False,
    "consistency_ece_debiased": False,
    "consistency_auroc": True,
    "verbalized_parse_failure_rate": False,
}


def _stored_results() -> dict[str, dict]:
    paths = sorted(STORED.glob("*/results_*.json"))
    return {path.parent.name: json.loads(path.read_text()) for path in paths}


def _export(tmp_path: Path, *arguments: str, capsys) -> tuple[list[TemplateTask], str]:
    """``capcal leaderboard`` run as a maintainer does; the Task lines it prints, and its stderr."""
    capsys.readouterr()
    assert main(["leaderboard", *arguments]) == 0
    out = capsys.readouterr()
    entries = re.findall(r'Task\("([^"]+)", "([^"]+)", "([^"]+)"\)', out.out)
    return [TemplateTask(*entry) for entry in entries], out.err


def _independent_board_value(stored: dict[str, dict], model: str, benchmark: str, metric: str) -> float:
    """x 100, oriented higher-is-better: the unweighted mean of ``metric`` over the tasks of ``benchmark``
    where every stored model has a finite value (recomputed from lm-eval's per-task rows)."""
    results = stored[model]
    tasks = results.get("group_subtasks", {}).get(benchmark) or [benchmark]

    def finite(result: dict, task: str) -> bool:
        value = result["results"][task].get(f"{metric},{FILTER}")
        return isinstance(value, float) and math.isfinite(value)

    common = [task for task in tasks if all(finite(other, task) for other in stored.values())]
    values = [results["results"][task][f"{metric},{FILTER}"] for task in common]
    mean = sum(values) / len(values)
    return 100 * (mean if BOUNDED_METRICS[metric] else 1 - mean)


def test_the_template_shows_both_models_every_column_over_the_same_tasks(tmp_path, capsys):
    stored = _stored_results()
    tasks, err = _export(tmp_path, str(STORED), "--output", str(tmp_path / "board"), capsys=capsys)
    assert len(tasks) == 8 and len({task.benchmark for task in tasks}) == 8
    labels = [task.col_name for task in tasks]
    by_label = dict(zip(labels, BOUNDED_METRICS, strict=True))
    for style in ("exact", "substring"):
        shown, read = board(str(tmp_path / "board"), tasks, style)
        assert read == 2 and len(shown) == 2, style  # no model row lost
        assert list(shown.columns) == [MODEL, AVERAGE, *labels, PRECISION, REVISION]
        assert list(shown[AVERAGE]) == sorted(shown[AVERAGE], reverse=True)  # the template's default order
        for _, row in shown.iterrows():
            model = "smollm2" if "SmolLM2" in row[MODEL] else "qwen2.5-coder-0.5b"
            for label, metric in by_label.items():
                expected = _independent_board_value(stored, model, GROUP, metric)
                assert math.isclose(row[label], expected, abs_tol=0.006), (style, model, label)
                assert -25 <= row[label] <= 125, (model, label)  # bounded: no column decides the rank
            assert math.isclose(row[AVERAGE], sum(row[label] for label in labels) / 8, abs_tol=0.01)
            assert row[PRECISION] == "?"  # torch.float32: the template knows float16 and bfloat16
            assert row[REVISION].startswith("gguf-sha256:") and row[REVISION] != "main"
    # the AUROC columns: SmolLM2 has none on TriviaQA, Qwen none on MMLU; both columns are over arithmetic,
    # and the note names each dropped task with the reason its task recorded
    for source in ("P(True)", "Consistency"):
        for task, who in (("triviaqa", "SmolLM2"), ("mmlu", "Qwen2.5")):
            line = next(
                line
                for line in err.splitlines()
                if f"{source} soft AUROC" in line and f"without capcal_{task}" in line
            )
            assert who in line and "nothing to discriminate" in line, line
    assert "not in the results" not in err


def test_a_column_over_every_task_is_lm_evals_group_value_and_standard_error(tmp_path):
    stored = _stored_results()
    board_ = leaderboard_board(leaderboard_rows([STORED]))
    write_leaderboard_results(board_, tmp_path / "board")
    for path in (tmp_path / "board").rglob("*.json"):
        payload = json.loads(path.read_text())
        model = "smollm2" if "SmolLM2" in payload["config"]["model_name"] else "qwen2.5-coder-0.5b"
        group = stored[model]["results"][GROUP]
        full = stored[model]["group_subtasks"][GROUP]
        for key, record in payload["capcal"]["columns"].items():
            entry = payload["results"][f"{GROUP}/{key}"]
            if record["tasks"] != full:  # a task dropped: the record says which, and why
                assert set(record["left_out_tasks"]) == set(full) - set(record["tasks"]), key
                continue
            value, higher = (
                group[f"{entry['source_metric']},{FILTER}"],
                BOUNDED_METRICS[entry["source_metric"]],
            )
            assert math.isclose(entry["score"], value if higher else 1 - value, rel_tol=1e-12), key
            stderr = group[f"{entry['source_metric']}_stderr,{FILTER}"]
            own = payload["results"][f"{GROUP}/stderr/{key}"]["score"]
            assert math.isclose(own, stderr, rel_tol=1e-9), key  # lm-eval's sqrt(sum se^2) / T
        assert payload["capcal"]["missing_columns"] == {}


def test_the_skill_is_not_a_column_and_a_huge_negative_skill_changes_no_rank(tmp_path, capsys):
    assert {column.metric for column in BOARD_COLUMNS} == set(BOUNDED_METRICS)
    runs = tmp_path / "runs"
    shutil.copytree(STORED, runs)
    (smol,) = (runs / "smollm2").glob("results_*.json")
    results = json.loads(smol.read_text())
    for task in ("capcal_mmlu_calibration", GROUP):  # issue 48's SmolLM2: MMLU's skill near S_hat = 0
        results["results"][task][f"ptrue_corrected_brier_skill,{FILTER}"] = -53.04
    smol.write_text(json.dumps(results))
    tasks, _ = _export(tmp_path, str(STORED), "--output", str(tmp_path / "before"), capsys=capsys)
    assert _export(tmp_path, str(runs), "--output", str(tmp_path / "after"), capsys=capsys)[0] == tasks
    before, after = board(str(tmp_path / "before"), tasks)[0], board(str(tmp_path / "after"), tasks)[0]
    assert before.equals(after)


def test_a_per_task_board_where_no_model_solves_a_question_keeps_every_row(tmp_path, capsys):
    """GSM8K in 32 tokens: every AUROC is left out for both models. Before: the export wrote 6 of the 8
    columns the Tasks named and the template raised KeyError 'Average ⬆️'."""
    task = "capcal_gsm8k_calibration"
    tasks, err = _export(
        tmp_path, str(STORED), "--output", str(tmp_path / "b"), "--benchmark", task, capsys=capsys
    )
    keys = [entry.benchmark.rpartition("/")[2] for entry in tasks]
    assert keys == [
        "accuracy", "ptrue_brier", "ptrue_calibration", "consistency_brier", "consistency_calibration",
        "verbalized_parse_rate",
    ]  # fmt: skip
    assert all(f"({task}) ⬆️" in entry.col_name for entry in tasks)  # not the default group: named
    for column in ("ptrue_discrimination", "consistency_discrimination"):
        assert f"({column}) is left off the board" in err and "no question of the 8 is solved" in err
    shown, read = board(str(tmp_path / "b"), tasks)
    assert read == 2 and len(shown) == 2
    payload = json.loads(next((tmp_path / "b").rglob("*.json")).read_text())
    assert set(payload["capcal"]["missing_columns"]) == {"ptrue_discrimination", "consistency_discrimination"}
    # a single degenerate model alone: the same, one row
    tasks, _ = _export(
        tmp_path, str(STORED / "qwen2.5-coder-0.5b"), "--output", str(tmp_path / "q"), "--benchmark", task,
        capsys=capsys,
    )  # fmt: skip
    assert len(board(str(tmp_path / "q"), tasks)[0]) == 1
    # what the template does with the Tasks of every column: no complete row, and it fails whole
    every = [TemplateTask(f"{task}/{column.key}", "score", column.label) for column in BOARD_COLUMNS]
    with pytest.raises(KeyError, match="Average ⬆️"):
        board(str(tmp_path / "q"), every)


def test_two_benchmarks_on_one_board_keep_their_own_columns(tmp_path, capsys):
    root = str(tmp_path / "board")
    group_tasks, _ = _export(tmp_path, str(STORED), "--output", root, capsys=capsys)
    task = "capcal_arithmetic_calibration"
    task_tasks, _ = _export(tmp_path, str(STORED), "--output", root, "--benchmark", task, capsys=capsys)
    tasks = group_tasks + task_tasks
    labels = [entry.col_name for entry in tasks]
    assert len(set(labels)) == len(labels) == 16
    shown, read = board(root, tasks)
    assert read == 2 and len(shown) == 2
    stored = _stored_results()
    for _, row in shown.iterrows():
        model = "smollm2" if "SmolLM2" in row[MODEL] else "qwen2.5-coder-0.5b"
        for entry, metric in zip(task_tasks, BOUNDED_METRICS, strict=True):
            expected = _independent_board_value(stored, model, task, metric)
            assert math.isclose(row[entry.col_name], expected, abs_tol=0.006), (model, entry)
        assert math.isclose(row[AVERAGE], sum(row[label] for label in labels) / 16, abs_tol=0.01)
    # two benchmarks whose labels collide (what the export printed before): one column shows both
    clash = [
        TemplateTask(entry.benchmark, entry.metric, "Expected accuracy")
        for entry in tasks[:1] + task_tasks[:1]
    ]
    both = board(root, clash)[0]
    assert list(both.columns).count("Expected accuracy") == 2
    assert (both.iloc[:, 2] == both.iloc[:, 3]).all()  # the second value shown twice, the first lost


def test_a_standard_error_has_its_own_key(tmp_path, capsys):
    tasks, _ = _export(tmp_path, str(STORED), "--output", str(tmp_path / "b"), capsys=capsys)
    accuracy = tasks[0]
    own = TemplateTask(accuracy.benchmark.replace(f"{GROUP}/", f"{GROUP}/stderr/"), "score", "Accuracy SE")
    shown = board(str(tmp_path / "b"), [accuracy, own])[0]
    stored = _stored_results()
    for _, row in shown.iterrows():
        group = stored["smollm2" if "SmolLM2" in row[MODEL] else "qwen2.5-coder-0.5b"]["results"][GROUP]
        assert math.isclose(row[accuracy.col_name], 100 * group[f"expected_accuracy,{FILTER}"], abs_tol=0.006)
        assert math.isclose(
            row["Accuracy SE"], 100 * group[f"expected_accuracy_stderr,{FILTER}"], abs_tol=0.006
        )
    # the template keeps one value per benchmark key: a stderr Task on the value's key shows the value again
    shared = TemplateTask(accuracy.benchmark, "stderr", "Accuracy SE")
    shown = board(str(tmp_path / "b"), [accuracy, shared])[0]
    assert (shown[accuracy.col_name] == shown["Accuracy SE"]).all()


def test_lm_evals_own_file_in_the_results_root_is_refused_in_one_line(tmp_path, capsys):
    """The template fails whole on it (AttributeError); capcal leaderboard names the file and the fix."""
    (source,) = (STORED / "smollm2").glob("results_*.json")
    raw = tmp_path / "board" / "raw"
    raw.mkdir(parents=True)
    shutil.copy(source, raw / source.name)
    tasks = [TemplateTask(*entry) for entry in template_tasks(leaderboard_board(leaderboard_rows([STORED])))]
    with pytest.raises(AttributeError, match="'dict' object has no attribute 'split'"):
        board(str(tmp_path / "board"), tasks)
    capsys.readouterr()
    assert main(["leaderboard", str(STORED), "--output", str(tmp_path / "board")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert str(raw / source.name) in line and "model_args is a dict" in line and "move it out of" in line
    assert [path.parent.name for path in (tmp_path / "board").rglob("*.json")] == ["raw"]  # nothing written
    # --log_samples: a folder with samples_*.jsonl is skipped; with nothing else the template fails
    samples = tmp_path / "logged" / "model"
    shutil.copytree(STORED / "smollm2", samples)
    (samples / "samples_capcal_mmlu_calibration_2026-11-26T23-04-34.641143.jsonl").write_text("{}\n")
    with pytest.raises(KeyError, match="Average ⬆️"):
        board(str(tmp_path / "logged"), tasks)
    assert main(["leaderboard", str(tmp_path / "logged"), "--output", str(tmp_path / "logged")]) == 0
    err = capsys.readouterr().err
    assert "the template skips this folder (it holds samples_" in err
    assert len(board(str(tmp_path / "logged"), tasks)[0]) == 1  # the export beside it is read


def test_an_earlier_export_over_other_tasks_is_refused_and_a_re_export_is_not(tmp_path, capsys):
    root = tmp_path / "board"
    assert main(["leaderboard", str(STORED / "smollm2"), "--output", str(root)]) == 0
    capsys.readouterr()  # SmolLM2 alone: its AUROC over arithmetic and MMLU; with Qwen over arithmetic only
    assert main(["leaderboard", str(STORED / "qwen2.5-coder-0.5b"), "--output", str(root)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "SmolLM2" in line and "an earlier export of capcal_calibration_open" in line
    assert main(["leaderboard", str(STORED), "--output", str(root)]) == 0  # both at once: replaces it
    assert main(["leaderboard", str(STORED), "--output", str(root)]) == 0  # and again
    # a third model's export over the same columns and tasks stays (read by its capcal record)
    first = sorted(root.rglob("*.json"))[0]
    (root / "third-model").mkdir()
    shutil.copy(first, root / "third-model" / first.name)
    assert main(["leaderboard", str(STORED), "--output", str(root)]) == 0
    (root / "third-model" / first.name).unlink()
    # an export without its capcal record (which names its columns and tasks) is refused the same way
    capsys.readouterr()
    stripped = 0
    for path in root.rglob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "capcal" in data:
            del data["capcal"]
            path.write_text(json.dumps(data))
            stripped += 1
    assert stripped == 2  # the two models' exports
    assert main(["leaderboard", str(STORED / "qwen2.5-coder-0.5b"), "--output", str(root)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "an earlier export of capcal_calibration_open" in line


def test_the_template_reads_precision_nan_and_enum_members_as_it_does(tmp_path):
    """Planted: the replica's own behaviour, on hand-written files."""
    tasks = [TemplateTask("b", "acc", "B"), TemplateTask("c", "acc", "C"), TemplateTask("c", "acc", "C")]
    rows = {
        "half": ("torch.float16", {"b": {"acc": 0.5}, "c": {"acc": 0.25}}),
        "bf": ("bfloat16", {"b": {"acc": 0.5}, "c": {"acc": 0.5}}),
        "nan": ("float32", {"b": {"acc": float("nan")}, "c": {"acc": 0.5}}),
        "none": ("float32", {"b": {"acc": None}, "c": {"acc": 0.5}}),
    }
    for name, (dtype, results) in rows.items():
        folder = tmp_path / name
        folder.mkdir()
        payload = {"config": {"model_name": f"org/{name}", "model_dtype": dtype}, "results": results}
        (folder / "results_x.json").write_text(json.dumps(payload))
    shown, read = board(str(tmp_path), tasks)
    assert read == 3  # "none" left out (a None value), "nan" read and then dropped by the NaN filter
    assert list(shown[MODEL]) == ["org/bf", "org/half"] and list(shown[PRECISION]) == ["bfloat16", "float16"]
    assert list(shown[AVERAGE]) == [50.0, 37.5]  # the Enum keeps one of the identical Tasks: 2 tasks
    with pytest.raises(AttributeError):
        payload = {"config": {"model_args": None}, "results": {}}
        (tmp_path / "half" / "results_y.json").write_text(json.dumps(payload))
        board(str(tmp_path), tasks)


def test_the_docs_board_is_the_templates_display_of_the_stored_runs(tmp_path):
    board_ = leaderboard_board(leaderboard_rows([STORED]))
    write_leaderboard_results(board_, tmp_path / "board")
    tasks = [TemplateTask(*entry) for entry in template_tasks(board_)]
    shown, _ = board(str(tmp_path / "board"), tasks)
    text = (REPO / "docs" / "leaderboards.md").read_text(encoding="utf-8")
    table = text[text.index(f"| {MODEL} |") :].split("\n\n")[0].splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header == [MODEL, AVERAGE, *[task.col_name for task in tasks], PRECISION]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[0] for row in rows] == list(shown[MODEL])
    for row, (_, expected) in zip(rows, shown.iterrows(), strict=True):
        assert [float(cell) for cell in row[1:-1]] == pytest.approx(list(expected.iloc[1:-2]), abs=0.006)
        assert row[-1] == expected[PRECISION]


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        leaderboard_rows([tmp_path / "absent"])
    with pytest.raises(ValueError, match="has capcal_gpqa_calibration among its results"):
        leaderboard_rows([STORED], "capcal_gpqa_calibration")  # gated: not in the open group's runs
    twice = tmp_path / "twice"
    for copy in ("a", "b"):
        shutil.copytree(STORED / "smollm2", twice / copy)
    with pytest.raises(ValueError, match="both capcal_calibration_open of"):
        leaderboard_board(leaderboard_rows([twice]))
    (older,) = (twice / "b").glob("results_*.json")
    results = json.loads(older.read_text())
    results["versions"][GROUP] = "2.0"
    older.write_text(json.dumps(results))
    with pytest.raises(ValueError, match="one board holds one benchmark at one version"):
        leaderboard_board(leaderboard_rows([twice]))
    assert main(["leaderboard", str(tmp_path / "absent"), "--output", str(tmp_path / "out")]) == 2


def test_a_column_undefined_for_one_model_is_left_off_with_its_reason(tmp_path, capsys):
    """P(True) not requested for one model (NaN on every task, the reason in undefined_columns): the column
    leaves the board with that reason, and both rows stay."""
    runs = tmp_path / "runs"
    shutil.copytree(STORED, runs)
    (smol,) = (runs / "smollm2").glob("results_*.json")
    results = json.loads(smol.read_text())
    reason = "P(True) was not requested (planted)"
    for task in [*results["group_subtasks"][GROUP], GROUP]:
        results["results"][task][f"ptrue_auroc,{FILTER}"] = float("nan")
        if task != GROUP:
            bookkeeping = results["configs"][task]["capcal_calibration"]
            bookkeeping["left_out_columns"].pop("ptrue_auroc", None)
            bookkeeping["undefined_columns"]["ptrue_auroc"] = reason
    smol.write_text(json.dumps(results))
    tasks, err = _export(tmp_path, str(runs), "--output", str(tmp_path / "board"), capsys=capsys)
    assert len(tasks) == 7 and not any(task.benchmark.endswith("/ptrue_discrimination") for task in tasks)
    assert "(ptrue_discrimination) is left off the board" in err and reason in err
    assert len(board(str(tmp_path / "board"), tasks)[0]) == 2


def test_the_revision_is_what_the_weights_are_and_an_na_standard_error_has_no_key(tmp_path):
    (source,) = (STORED / "smollm2").glob("results_*.json")
    results = json.loads(source.read_text())
    results["results"]["capcal_mmlu_calibration"][f"expected_accuracy_stderr,{FILTER}"] = "N/A"
    cases = {  # pretrained -> (model_name, model_sha) the export must write
        "/elsewhere/my-finetune": ("my-finetune", ""),  # a local folder: no Hub revision, not "main"
        "org/hub-model": ("org/hub-model", "main"),  # a Hub name: the revision lm-eval asked for
    }
    for pretrained, (name, _) in cases.items():
        results["config"]["model_args"] = {"pretrained": pretrained}
        run = tmp_path / "runs" / name.replace("/", "_")
        run.mkdir(parents=True)
        (run / source.name).write_text(json.dumps(results))
    board_ = leaderboard_board(leaderboard_rows([tmp_path / "runs"]))
    for path in write_leaderboard_results(board_, tmp_path / "board"):
        payload = json.loads(path.read_text())
        name, sha = next(v for k, v in cases.items() if v[0] == payload["config"]["model_name"])
        assert payload["config"]["model_sha"] == sha and payload["capcal"]["model_source"] == ""
        assert (
            f"{GROUP}/stderr/accuracy" not in payload["results"] and f"{GROUP}/accuracy" in payload["results"]
        )
        assert payload["capcal"]["columns"]["accuracy"]["stderr"] is None
    (smol,) = leaderboard_rows(
        [STORED / "smollm2"]
    )  # prepared by capcal: the GGUF, not the repository's main
    assert smol.model_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert smol.model_sha == "gguf-sha256:b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert "GGUF" in smol.model_source
