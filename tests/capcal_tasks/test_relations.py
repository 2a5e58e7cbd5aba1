"""The declared task relations: every capcal task declares its role in its YAML, the declarations are the
paper's, consistent with what each task loads, and malformed or contradictory declarations are errors that
name where they were declared."""

from __future__ import annotations

import pytest
from lm_eval.tasks import TaskManager

from capcal_tasks import tasks_dir
from capcal_tasks.relations import (
    CALIBRATION,
    CONFIDENCE,
    EVALUATION,
    RelationError,
    capcal_task_declarations,
    parse_calibration_overrides,
    parse_declaration,
    read_task_yaml,
    task_relations,
)

INDEX = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
DECLARATIONS = capcal_task_declarations()
RELATIONS = task_relations()

# The calibration split(s) of each evaluation task (the paper's protocol; GPQA and SimpleQA have none).
EXPECTED_CALIBRATION = {
    "capcal_gsm8k": ("capcal_gsm8k_train",),
    "capcal_math500": ("capcal_math_train",),
    "capcal_aime25": ("capcal_math_train",),
    "capcal_mmlu": ("capcal_mmlu_validation",),
    "capcal_triviaqa": ("capcal_triviaqa_train",),
    "capcal_simpleqa_verified": ("capcal_simpleqa",),
    "capcal_arithmetic": ("capcal_arithmetic_train",),
    "capcal_simpleqa": (),
    "capcal_gpqa": (),
}
CALIBRATION_ONLY = {
    "capcal_gsm8k_train",
    "capcal_math_train",
    "capcal_mmlu_validation",
    "capcal_triviaqa_train",
    "capcal_arithmetic_train",
}
# What a capability-form confidence task must share with the sampling task it scores: the same questions.
SAME_QUESTIONS = ("custom_dataset", "test_split", "process_docs")


def test_every_indexed_task_declares_its_role():
    tasks = set(INDEX.all_subtasks)
    assert tasks == set(DECLARATIONS), sorted(tasks ^ set(DECLARATIONS))
    for name, relation in DECLARATIONS.items():
        assert relation.roles <= {EVALUATION, CALIBRATION, CONFIDENCE} and relation.roles, name
        assert relation.source.startswith("capcal_tasks/") and relation.source.endswith(".yaml"), name


def test_evaluation_tasks_declare_the_papers_calibration_splits():
    evaluation = {name for name, r in DECLARATIONS.items() if r.has(EVALUATION)}
    assert set(EXPECTED_CALIBRATION) <= evaluation
    for name, expected in EXPECTED_CALIBRATION.items():
        assert RELATIONS.calibration_tasks(name) == expected, name
    assert {name for name, r in DECLARATIONS.items() if r.roles == {CALIBRATION}} == CALIBRATION_ONLY
    assert DECLARATIONS["capcal_simpleqa"].roles == {EVALUATION, CALIBRATION}


def test_every_declared_calibration_task_exists_and_is_a_calibration_task():
    for name, relation in DECLARATIONS.items():
        for calibration in relation.calibration_tasks:
            assert calibration in DECLARATIONS, (name, calibration)
            assert DECLARATIONS[calibration].has(CALIBRATION), (name, calibration)
            assert DECLARATIONS[calibration].kind == "sampling", (name, calibration)
            assert calibration != name


def test_calibration_splits_are_never_evaluation_tasks_in_the_report():
    assert RELATIONS.evaluation_tasks(sorted(CALIBRATION_ONLY)) == []
    assert RELATIONS.evaluation_tasks(["capcal_math500", "capcal_math_train", "capcal_aime25"]) == [
        "capcal_math500",
        "capcal_aime25",
    ]


def test_confidence_tasks_score_the_questions_of_their_target():
    sampling = {name for name, r in DECLARATIONS.items() if r.kind == "sampling"}
    confidence = {name for name, r in DECLARATIONS.items() if r.has(CONFIDENCE)}
    assert not sampling & confidence and set(EXPECTED_CALIBRATION) | CALIBRATION_ONLY <= sampling
    for name in sorted(confidence):
        relation = DECLARATIONS[name]
        assert relation.roles == {CONFIDENCE} and relation.target_task in sampling, name
        config = read_task_yaml(tasks_dir().parent / relation.source)
        target = read_task_yaml(tasks_dir().parent / DECLARATIONS[relation.target_task].source)
        if relation.kind in ("verbalized", "ptrue"):  # capability form: the target's own questions
            for key in SAME_QUESTIONS:
                assert config.get(key) == target.get(key), (name, key)
        else:  # response form: the earlier run's responses, of the target's dataset
            dataset = config["metadata"]["capcal_dataset"]
            assert str(target["custom_dataset"]).startswith(f"capcal_tasks.{dataset}.task."), name


def test_results_file_declarations_win_over_capcal_yamls():
    configs = {
        "capcal_aime25": (
            {"metadata": {"capcal_role": "evaluation", "capcal_calibration_tasks": ["capcal_gsm8k_train"]}},
            "out/results_x.json",
        ),
        "my_eval": (
            {
                "metadata": {
                    "capcal_task": "sampling",
                    "capcal_role": "evaluation",
                    "capcal_calibration_tasks": [],
                }
            },
            "out/results_x.json",
        ),
        "undeclared": ({"metadata": {"capcal_task": "sampling"}}, "out/results_x.json"),
    }
    relations = task_relations(configs)
    assert relations.calibration_tasks("capcal_aime25") == ("capcal_gsm8k_train",)
    assert relations.get("capcal_aime25").source == "out/results_x.json"
    assert relations.calibration_tasks("my_eval") == ()
    assert relations.is_evaluation("undeclared") and not relations.get("undeclared").declared
    assert relations.calibration_tasks("capcal_math500") == ("capcal_math_train",)  # from the YAML


def test_domains_come_from_the_declared_datasets():
    assert RELATIONS.domain("capcal_math500", ["capcal_math_train"]) == "in-domain"
    assert RELATIONS.domain("capcal_aime25", ["capcal_math_train"]) == "cross-domain"  # Probe-MATH on AIME
    assert RELATIONS.domain("capcal_simpleqa_verified", ["capcal_simpleqa"]) == "in-domain"
    assert RELATIONS.domain("capcal_aime25", ["capcal_math_train", "capcal_gsm8k_train"]) == "mixed-domain"
    sampling = [name for name, r in DECLARATIONS.items() if r.kind == "sampling"]
    assert all(DECLARATIONS[name].dataset for name in sampling)


def test_overrides_in_domain_cross_domain_and_mixed():
    relations = task_relations(calibration={"capcal_aime25": ["capcal_math_train", "capcal_gsm8k_train"]})
    assert relations.calibration_tasks("capcal_aime25") == ("capcal_math_train", "capcal_gsm8k_train")
    assert relations.get("capcal_aime25").source == "override" and "capcal_aime25" in relations.overridden
    assert relations.calibration_tasks("capcal_math500") == ("capcal_math_train",)
    assert parse_calibration_overrides(["capcal_aime25=capcal_math_train,capcal_gsm8k_train"]) == {
        "capcal_aime25": ["capcal_math_train", "capcal_gsm8k_train"]
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"capcal_aime25": ["capcal_math500"]}, "capcal_math500 is not a calibration task"),
        ({"capcal_aime25": ["capcal_aime25_ptrue"]}, "capcal_aime25_ptrue is not a calibration task"),
        ({"capcal_aime25": ["capcal_aime25"]}, "cannot be its own calibration split"),
        ({"capcal_aime25": ["capcal_math_trian"]}, "calibration task capcal_math_trian is not a known task"),
        ({"capcal_aime26": ["capcal_math_train"]}, "unknown task capcal_aime26"),
    ],
)
def test_bad_overrides_are_errors(overrides, message):
    with pytest.raises(RelationError, match=message):
        task_relations(calibration=overrides)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"capcal_role": "test"}, "unknown capcal_role 'test'"),
        ({"capcal_role": 3}, "capcal_role must be one of"),
        ({"capcal_role": "evaluation"}, "an evaluation task declares capcal_calibration_tasks"),
        (
            {"capcal_role": "evaluation", "capcal_calibration_tasks": "x_train"},
            "must be a list of task names",
        ),
        ({"capcal_role": "evaluation", "capcal_calibration_tasks": ["a", "a"]}, "names a task twice"),
        ({"capcal_role": "calibration", "capcal_calibration_tasks": []}, "not an evaluation task"),
        ({"capcal_role": "confidence"}, "declares capcal_target_task"),
        (
            {"capcal_role": "evaluation", "capcal_calibration_tasks": [], "capcal_target_task": "t"},
            "not a conf",
        ),
        ({"capcal_role": ["confidence", "evaluation"]}, "cannot also be a sampling task"),
    ],
)
def test_malformed_declarations_name_their_source(metadata, message):
    with pytest.raises(RelationError, match=f"^out/results_1.json: task t: .*{message}"):
        parse_declaration("t", metadata, "out/results_1.json")


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {
                "e": (
                    {"metadata": {"capcal_role": "evaluation", "capcal_calibration_tasks": ["nope"]}},
                    "r.json",
                )
            },
            "r.json: task e: calibration task nope is not a known task",
        ),
        (
            {
                "e": (
                    {"metadata": {"capcal_role": "evaluation", "capcal_calibration_tasks": ["capcal_gsm8k"]}},
                    "r.json",
                )
            },
            "r.json: task e: capcal_gsm8k is not a calibration task",
        ),
        (
            {"c": ({"metadata": {"capcal_role": "confidence", "capcal_target_task": "nope"}}, "r.json")},
            "r.json: task c: target task nope is not a known task",
        ),
        (
            {
                "c": (
                    {"metadata": {"capcal_role": "confidence", "capcal_target_task": "capcal_gsm8k_ptrue"}},
                    "r.json",
                )
            },
            "target task capcal_gsm8k_ptrue is a confidence task",
        ),
    ],
)
def test_contradictory_relations_are_errors(configs, message):
    with pytest.raises(RelationError, match=message):
        task_relations(configs)


@pytest.mark.parametrize(
    "value", ["capcal_aime25", "=capcal_math_train", "capcal_aime25=", "capcal_aime25= , "]
)
def test_bad_override_syntax(value):
    with pytest.raises(ValueError, match="expected TASK=CALIBRATION_TASK"):
        parse_calibration_overrides([value])


def test_a_prompt_variant_asks_the_questions_of_its_task():
    """capcal_arithmetic_qa (the base-model "Question: ... Answer:" format) declares the questions of
    capcal_arithmetic: the report pairs models run on either for routing."""
    assert RELATIONS.question_set("capcal_arithmetic_qa") == "capcal_arithmetic"
    assert RELATIONS.question_set("capcal_arithmetic") == "capcal_arithmetic"
    assert RELATIONS.prompt_variants("capcal_arithmetic") == ["capcal_arithmetic_qa"]
    assert RELATIONS.is_evaluation("capcal_arithmetic_qa")
    declared = {"capcal_role": "evaluation", "capcal_calibration_tasks": []}
    for target in ("nope", "capcal_gsm8k_train"):  # unknown; not an evaluation task
        configs = {"v": ({"metadata": {**declared, "capcal_questions_of": target}}, "r.json")}
        with pytest.raises(
            RelationError, match=f"r.json: task v: capcal_questions_of {target} is not a known"
        ):
            task_relations(configs)
    with pytest.raises(RelationError, match="must name a task, on an evaluation task"):
        parse_declaration(
            "c", {"capcal_role": "calibration", "capcal_questions_of": "capcal_gsm8k"}, "r.json"
        )
