r"""``<task>_calibration`` on a stock lm-eval task (capcal_tasks.sampled_calibration): lm-eval's real gsm8k,
gsm8k_cot_llama, bbh and aime25 tasks with their rows from ../shared/data, no model: the requests of each
question are those of the separate wrapped, ``<task>_ptrue`` and ``<task>_verbalized`` tasks (with and
without SmolLM2's chat template); the task's regex pipeline reaches the sampling responses only; the columns
equal a hand computation from hand-scored labels and P(True); a prompt that does not allow the verbalized
confidence gets P(True) only, and a pipeline without answer classes no consistency, each with its reason;
``<stock>_calibration`` names resolve through the task index (and the text screen) and only there."""

from __future__ import annotations

import math

import pytest
from lm_eval.api.task import ConfigurableTask

from capcal_tasks.calibration_columns import COLUMNS, STATISTICS
from capcal_tasks.calibration_task import RequestIndex
from capcal_tasks.sampled_calibration import SampledCalibrationTask
from capcal_tasks.sampled_confidence import ptrue_task, verbalized_task
from capcal_tasks.sampled_task import SampledTask
from capcal_tasks.task_manager import CapcalTaskManager
from capcal_tasks.task_names import unknown_task_names

LIMIT = 2


@pytest.fixture(scope="module")
def gsm8k(unmodified_task) -> ConfigurableTask:
    return unmodified_task("gsm8k/gsm8k.yaml")


def _requests(task, template=None, limit: int = LIMIT) -> list:
    task.build_all_requests(
        limit=limit, rank=0, world_size=1, apply_chat_template=template is not None, chat_template=template
    )
    return sorted(task.instances, key=lambda instance: (instance.doc_id, instance.idx))


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat_template"])
def test_requests_are_those_of_the_separate_tasks(unmodified_task, smollm2_chat_template, chat):
    """bbh's description and three few-shot examples reach the sampling prompt only: the confidence prompts
    are the separate <task>_ptrue / <task>_verbalized tasks' own, request by request."""
    template = smollm2_chat_template if chat else None
    base = unmodified_task("bbh/cot_fewshot/boolean_expressions.yaml")
    name = "bbh_cot_fewshot_boolean_expressions_calibration"
    k = 3
    task = SampledCalibrationTask(base=base, k=k)
    assert task.config.task == name and task.config.metadata["capcal_task"] == "leaderboard"
    protocol = task.config.metadata["capcal_sampled"]
    assert protocol["base_task"] == "bbh_cot_fewshot_boolean_expressions" and protocol["k"] == k
    instances = _requests(task, template)
    sampling = _requests(SampledTask(base=base, k=k), template)
    ptrue, verbalized = (_requests(built(base, name), template) for built in (ptrue_task, verbalized_task))
    assert len(instances) == 4 * LIMIT
    for doc_id in range(LIMIT):
        mine = [i for i in instances if i.doc_id == doc_id]
        assert [i.idx for i in mine] == [0, 1, 2, 3]
        assert [(i.request_type, i.repeats) for i in mine] == [
            ("generate_until", k), ("loglikelihood", 1), ("loglikelihood", 1), ("generate_until", 1)
        ]  # fmt: skip
        theirs = [sampling[doc_id], *ptrue[2 * doc_id : 2 * doc_id + 2], verbalized[doc_id]]
        assert [i.arguments for i in mine] == [i.arguments for i in theirs]
        assert mine[RequestIndex.PTRUE_YES].arguments[1] == ("Yes" if chat else " Yes")
        description = "Evaluate the result of a random Boolean expression."
        assert description in mine[0].arguments[0] and "A: Let's think step by step." in mine[0].arguments[0]
        for confidence in mine[1:]:
            assert description not in confidence.arguments[0]
            assert "Let's think step by step" not in confidence.arguments[0]  # neither few-shot nor cue


# hand-scored gsm8k responses of its first three test questions (gold 18, 3, 70000) under strict-match
# ("#### <number>", then exact_match ignoring ",", "$", a final "." and the text up to "#### ")
RESPONSES = [
    ["#### 18", "#### 17", "So 18.\n#### 18", "no answer"],
    ["#### 3", "#### 3", "#### 3", "#### 3."],
    ["#### 5", "nothing", "#### 70,000", "#### 1"],
]
LABELS = [[1, 0, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0]]
CLASSES = [["18", "17", "18", None], ["3", "3", "3", "3."], ["5", None, "70,000", "1"]]
LOGPROBS = [(math.log(0.6), math.log(0.4)), (-0.1, -2.0), (-3.0, -0.5)]
VERBALIZED = ["I think \\boxed{0.7}", "\\boxed{0.9}", "no idea"]


def _answered(task) -> list[dict]:
    """The task's instances answered with the hand-written responses, filtered by the task and scored as
    lm-eval's evaluator scores them (one ``process_results`` per question, its requests in idx order)."""
    instances = _requests(task, limit=len(RESPONSES))
    for instance in instances:
        if instance.idx == RequestIndex.SAMPLING:
            instance.resps = list(RESPONSES[instance.doc_id])
        elif instance.idx == RequestIndex.VERBALIZED:
            instance.resps = [VERBALIZED[instance.doc_id]]
        else:
            instance.resps = [(LOGPROBS[instance.doc_id][instance.idx - RequestIndex.PTRUE_YES], False)]
    task.apply_filters()
    (pipeline,) = [ensemble.name for ensemble in task._filters]
    rows = []
    for doc_id in range(len(RESPONSES)):
        mine = [i for i in instances if i.doc_id == doc_id]
        rows.append(task.process_results(mine[0].doc, [i.filtered_resps[pipeline] for i in mine]))
    return rows


def test_the_pipeline_reaches_sampling_only_and_the_columns_are_a_hand_computation(gsm8k):
    task = SampledCalibrationTask(base=gsm8k, k=4)
    rows = _answered(task)  # the regex pipeline on P(True)'s pairs would make them "[invalid]" (and raise)
    assert [row["correctness"] for row in rows] == LABELS
    assert [row["extracted_answers"] for row in rows] == [
        [answer or None for answer in CLASSES[0]],
        CLASSES[1],
        CLASSES[2],
    ]
    mu = [sum(labels) / 4 for labels in LABELS]
    p = [math.exp(yes) / (math.exp(yes) + math.exp(no)) for yes, no in LOGPROBS]
    assert [row["expected_accuracy"] for row in rows] == pytest.approx(mu)
    # the Brier's items are its per-question terms
    assert [row["ptrue_brier"] for row in rows] == pytest.approx(
        [(c - m) ** 2 for c, m in zip(p, mu, strict=True)]
    )
    # the soft-label AUROC, by its pairwise formula over all ordered pairs
    weights = [[mu[i] * (1 - mu[j]) for j in range(3)] for i in range(3)]
    wins = sum(
        weights[i][j] * ((p[i] > p[j]) + 0.5 * (p[i] == p[j])) for i in range(3) for j in range(3)
    ) / sum(map(sum, weights))
    assert sum(row["ptrue_auroc"] for row in rows) / 3 == pytest.approx(wins)
    assert [row["verbalized_parse_failure_rate"] for row in rows] == [0.0, 0.0, 1.0]
    verbalized_brier = [row["verbalized_brier"] for row in rows if "verbalized_brier" in row]
    assert verbalized_brier == pytest.approx([(0.7 - mu[0]) ** 2, (0.9 - mu[1]) ** 2])
    config = task.dump_config()
    bookkeeping = config["capcal_calibration"]
    # every column is in the row, but those left out (here: no variance of mu beyond its noise), with reason
    assert {column.name for column in COLUMNS} == set(rows[0]) - {"correctness", "extracted_answers"} | set(
        bookkeeping["left_out_columns"]
    )
    assert bookkeeping["samples_per_question"] == 4 and bookkeeping["ptrue_requested"] is True
    assert bookkeeping["verbalized_requested"] is True
    assert config["metadata"]["capcal_sampled"]["pipeline"] == "strict-match"
    aggregation = task.aggregation()
    assert aggregation["correctness"]([row["correctness"] for row in rows]) == pytest.approx(7 / 12)


def test_a_prompt_without_the_verbalized_confidence_gets_ptrue_only(unmodified_task):
    """gsm8k_cot_llama's prompt ends in its instructions for the answer: no verbalized request, and its
    columns NaN with that reason (nothing asked, so no parse failure either)."""
    task = SampledCalibrationTask(base=unmodified_task("gsm8k/gsm8k-cot-llama.yaml"), k=4)
    instances = _requests(task)
    assert [i.idx for i in instances if i.doc_id == 0] == [0, 1, 2]
    assert "verbalized_generation_kwargs" not in task.dump_config()
    for instance in instances:
        instance.resps = (
            ["The final answer is 18"] * 4
            if instance.idx == RequestIndex.SAMPLING
            else [(-0.5 * (instance.idx + instance.doc_id), False)]
        )
    task.apply_filters()
    rows = [
        task.process_results(
            instances[3 * doc_id].doc, [i.filtered_resps["strict-match"] for i in instances[3 * doc_id :][:3]]
        )
        for doc_id in range(LIMIT)
    ]
    assert all(math.isnan(row["verbalized_parse_failure_rate"]) for row in rows)
    assert all(math.isnan(row[f"verbalized_{name}"]) for row in rows for name in STATISTICS)
    assert not math.isnan(rows[0]["ptrue_brier"])
    reason = task.dump_config()["capcal_calibration"]["undefined_columns"]["verbalized_brier"]
    assert reason.startswith("not asked: the prompt of gsm8k_cot_llama does not allow the verbalized")
    assert "not in an answer cue" in reason


def test_a_pipeline_without_answer_classes_leaves_consistency_out(unmodified_task):
    """aime25's responses reach its metric whole: no answer classes, so no consistency (at k = 4, where it
    would be computed), with the reason."""
    task = SampledCalibrationTask(base=unmodified_task("aime/aime25.yaml"), k=4)
    instances = _requests(task)
    for instance in instances:
        instance.resps = (
            ["The answer is \\boxed{70}", "\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]
            if instance.idx == RequestIndex.SAMPLING
            else ["\\boxed{0.5}"]
            if instance.idx == RequestIndex.VERBALIZED
            else [(-1.0 - instance.doc_id, False)]
        )
    task.apply_filters()
    (pipeline,) = [ensemble.name for ensemble in task._filters]
    by_doc = [[i for i in instances if i.doc_id == doc_id] for doc_id in range(LIMIT)]
    rows = [task.process_results(mine[0].doc, [i.filtered_resps[pipeline] for i in mine]) for mine in by_doc]
    assert all(math.isnan(row[f"consistency_{name}"]) for row in rows for name in STATISTICS)
    reason = task.dump_config()["capcal_calibration"]["undefined_columns"]["consistency_brier"]
    assert reason.startswith("the pipeline none of aime25 extracts no answer")


def test_calibration_names_resolve_to_stock_leaf_tasks_only(tmp_path):
    """``<stock>_calibration`` is a name where ``<stock>`` is a stock leaf task and no task has the name
    itself: not for a group, not for capcal's own tasks, not for a name in no YAML (the text screen)."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "alpha.yaml").write_text("task: stock_alpha\ndataset_path: json\n")
    (folder / "beta.yaml").write_text("task: stock_beta\ndataset_path: json\n")
    (folder / "beta_own.yaml").write_text("task: stock_beta_calibration\ndataset_path: json\n")
    (folder / "group.yaml").write_text("group: stock_group\ntask: [stock_alpha]\n")
    manager = CapcalTaskManager(include_path=folder, include_defaults=False)
    assert manager.calibration_base("stock_alpha_calibration") == "stock_alpha"
    for name in (
        "stock_beta_calibration",  # a task of its own
        "stock_group_calibration",  # a group
        "capcal_arithmetic_calibration",  # capcal's own
        "capcal_arithmetic_ptrue_calibration",  # capcal's own task's
        "stock_gamma_calibration",  # no such stock task
        "_calibration",
        "stock_alpha",
    ):
        assert manager.calibration_base(name) is None, name
    assert manager.resolve_task_names(["stock_alpha_calibration"]) == ["stock_alpha_calibration"]
    configs = manager.stock_task_configs(["stock_alpha_calibration"])
    assert configs == {"stock_alpha_calibration": {"task": "stock_alpha_calibration", "dataset_path": "json"}}
    unknown, _ = unknown_task_names(["stock_alpha_calibration", "stock_gamma_calibration"], folder)
    assert unknown == ["stock_gamma_calibration"]


@pytest.mark.parametrize(("ptrue", "per_question"), [(None, [3, 1, 1, 1]), (False, [3, 1])])
def test_the_runs_metadata_reaches_a_wrapped_calibration_task(tmp_path, ptrue, per_question):
    """``--metadata ptrue=false`` on ``<stock>_calibration`` drops its P(True) requests: the manager passes
    the run's metadata to the wrapped task (k = 3 sampling clones, then P(True) Yes and No and the
    verbalized request per question; without P(True), the clones and the verbalized one)."""
    data = tmp_path / "data.jsonl"
    data.write_text('{"q": "1+1", "a": "2"}\n{"q": "2+3", "a": "5"}\n')
    (tmp_path / "alpha.yaml").write_text(
        f"task: stock_alpha\ndataset_path: json\ndataset_kwargs:\n  data_files: {data}\ntest_split: train\n"
        'output_type: generate_until\ndoc_to_text: "Q: {{q}}\\nA:"\ndoc_to_target: "{{a}}"\n'
        'generation_kwargs:\n  until: ["\\n"]\nmetric_list:\n  - metric: exact_match\n'
    )
    metadata = {} if ptrue is None else {"ptrue": ptrue}
    manager = CapcalTaskManager(include_path=tmp_path, include_defaults=False, metadata=metadata, repeats=3)
    task = manager.load(["stock_alpha_calibration"])["tasks"]["stock_alpha_calibration"]
    task.build_all_requests(limit=2, rank=0, world_size=1)
    instances = sorted(task.instances, key=lambda instance: (instance.doc_id, instance.idx))
    assert [instance.repeats for instance in instances] == per_question * 2
