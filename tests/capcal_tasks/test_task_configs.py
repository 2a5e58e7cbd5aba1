"""Config checks for every capcal task, modelled on lm-eval's own task tests: docs load, prompts render
without trailing whitespace, requests build (with repeats), offline against ../shared/data (GPQA on a fixture,
the response-level tasks on samples files built from the real questions). Tasks whose split is not in
../shared/data are checked to point at the right hub dataset, config and split, and at the documented local
path."""

from __future__ import annotations

import json
import math
from itertools import islice
from pathlib import Path

import pytest
from lm_eval.tasks import TaskManager

from capcal_tasks import tasks_dir
from capcal_tasks.confidence.ptrue import p_true
from capcal_tasks.confidence.selfcheck import process_results as selfcheck_results
from capcal_tasks.confidence.verbalized import mean_of_parsed
from capcal_tasks.prompts import (
    CHOICE_INSTRUCTION,
    MATH_INSTRUCTION,
    NUMBER_INSTRUCTION,
    SELF_CHECK_QUESTION,
    SHORT_ANSWER_INSTRUCTION,
)
from capcal_tasks.relations import task_relations
from capcal_tasks.task_manager import CapcalTaskManager, is_sampling_task

# family (question-id prefix) -> (evaluation sampling task, its paper instruction)
FAMILIES = {
    "gsm8k": ("capcal_gsm8k", NUMBER_INSTRUCTION),
    "math": ("capcal_math500", MATH_INSTRUCTION),
    "aime": ("capcal_aime25", NUMBER_INSTRUCTION),
    "triviaqa": ("capcal_triviaqa", SHORT_ANSWER_INSTRUCTION),
    "simpleqa": ("capcal_simpleqa", SHORT_ANSWER_INSTRUCTION),
    "mmlu": ("capcal_mmlu", CHOICE_INSTRUCTION),
    "gpqa": ("capcal_gpqa", CHOICE_INSTRUCTION),
}
# sampling tasks beside the seven families' evaluation tasks: calibration splits, and SimpleQA-Verified
OTHER_SAMPLING_TASKS = [
    "capcal_gsm8k_train",
    "capcal_math_train",
    "capcal_triviaqa_train",
    "capcal_mmlu_validation",
    "capcal_simpleqa_verified",
]
SAMPLING_TASKS = [task for task, _ in FAMILIES.values()] + OTHER_SAMPLING_TASKS
CAPABILITY_CONFIDENCE_TASKS = [
    f"{task}_{kind}" for task in SAMPLING_TASKS for kind in ("verbalized", "ptrue")
]
RESPONSE_KINDS = ("verbalized_rc", "ptrue_rc", "selfcheck")
RESPONSE_TASKS = [f"{task}_{kind}" for task, _ in FAMILIES.values() for kind in RESPONSE_KINDS]
GROUPS = ["capcal_core", *(f"{task}_all" for task, _ in FAMILIES.values())]

# Hub sources (as named in the loaders' errors) and local paths of each sampling task's split.
HUB_SOURCES = {
    "capcal_gsm8k": ("openai/gsm8k (main), split 'test'", "gsm8k/test.jsonl"),
    "capcal_gsm8k_train": ("openai/gsm8k (main), split 'train'", "gsm8k/train.jsonl"),
    "capcal_math500": ("HuggingFaceH4/MATH-500, split 'test'", "math500/test.jsonl"),
    "capcal_math_train": ("EleutherAI/hendrycks_math (algebra), split 'train'", "math/train.jsonl"),
    "capcal_aime25": ("math-ai/aime25, split 'test'", "aime2025"),
    "capcal_triviaqa": (
        "mandarjoshi/trivia_qa (rc.nocontext), split 'validation'",
        "triviaqa/triviaqa_sm_sub.jsonl",
    ),
    "capcal_triviaqa_train": ("mandarjoshi/trivia_qa (rc.nocontext), split 'train'", "triviaqa/train.jsonl"),
    "capcal_simpleqa": ("basicv8vc/SimpleQA, split 'test'", "simpleqa/simple_qa_test_set.csv"),
    "capcal_simpleqa_verified": ("google/simpleqa-verified, split 'eval'", "simpleqa/simpleqa_verified.csv"),
    "capcal_mmlu": ("cais/mmlu (all), split 'test'", "mmlu/test"),
    "capcal_mmlu_validation": ("cais/mmlu (all), split 'validation'", "mmlu/val"),
    "capcal_gpqa": ("Idavidrein/gpqa (gpqa_diamond), split 'train'", "gpqa/gpqa_diamond.csv"),
}
NOT_IN_SHARED_DATA = {
    "capcal_math_train",
    "capcal_triviaqa_train",
    "capcal_simpleqa_verified",
}

INDEX = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
CAPCAL_TASKS = sorted(INDEX.all_subtasks)


RELATIONS = task_relations()


def _sampling_task_of(name: str) -> str:
    """The sampling task whose questions (and data source) a task uses: its declared target, or itself."""
    relation = RELATIONS.get(name)
    return relation.target_task or name


def _earlier_sampling_task(name: str) -> str | None:
    """The sampling task whose earlier run a response-level task reads, or None for other tasks."""
    relation = RELATIONS.get(name)
    return relation.target_task if relation.kind in RESPONSE_KINDS else None


@pytest.fixture(autouse=True)
def local_data_dir(local_data, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))


def _write_earlier_run(task, path: Path) -> Path:
    """A samples file as lm-eval logs it for a capcal sampling run: the task's first three real questions with
    two responses each (the target in a box, and no answer), scored by the task itself."""
    lines = []
    for doc_id, doc in enumerate(list(task.eval_docs)[:3]):
        responses = [f"So the answer is \\boxed{{{task.doc_to_target(doc)}}}.", "I do not know."]
        metrics = task.process_results(doc, [responses])
        lines.append(
            {
                "doc_id": doc_id,
                "doc": doc,
                "target": str(task.doc_to_target(doc)),
                "resps": [responses],
                "filtered_resps": [responses],
                "filter": "all_responses",
                "metrics": list(metrics),
                **metrics,
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def earlier_samples_file(loaded_task, tmp_path_factory):
    """Sampling task name -> the path of a samples file of an earlier run of it (built once, on first use)."""
    folder = tmp_path_factory.mktemp("earlier_runs")
    files: dict[str, str] = {}

    def samples_file(sampling_task: str) -> str:
        if sampling_task not in files:
            path = folder / f"samples_{sampling_task}_2025-01-01T00-00-00.jsonl"
            files[sampling_task] = str(_write_earlier_run(loaded_task(sampling_task), path))
        return files[sampling_task]

    return samples_file


@pytest.fixture(scope="session")
def earlier_samples_files(earlier_samples_file) -> dict[str, str]:
    """The ``samples_file`` metadata mapping of capcal's seven datasets."""
    return {family: earlier_samples_file(task) for family, (task, _) in FAMILIES.items()}


def _load(name: str, metadata: dict | None = None):
    return CapcalTaskManager(include_defaults=False, metadata=metadata).load([name])["tasks"][name]


def _task(name: str, earlier_samples_file, loaded_task) -> object:
    """Task ``name`` as lm-eval loads it (a response-level task given an earlier run's samples file), loaded
    once for the per-task tests (``loaded_task``: each builds its own requests; none changes the config)."""
    if _sampling_task_of(name) in NOT_IN_SHARED_DATA:
        pytest.skip("split not in ../shared/data: see test_hub_and_local_sources")
    earlier_task = _earlier_sampling_task(name)
    return loaded_task(name, {"samples_file": earlier_samples_file(earlier_task)} if earlier_task else None)


def test_every_capcal_task_and_group_is_indexed():
    # lm-eval skips a YAML it cannot parse without an error: check that none went missing.
    expected = SAMPLING_TASKS + CAPABILITY_CONFIDENCE_TASKS + RESPONSE_TASKS
    assert set(expected) <= set(CAPCAL_TASKS), sorted(set(expected) - set(CAPCAL_TASKS))
    assert set(GROUPS) <= set(INDEX.all_groups)


@pytest.mark.parametrize("name", CAPCAL_TASKS)
def test_task_config(name, earlier_samples_file, loaded_task):
    task = _task(name, earlier_samples_file, loaded_task)
    docs = list(task.eval_docs)
    assert len(docs) > 0
    for doc in docs[:20]:
        prompt = task.doc_to_text(doc)
        assert isinstance(prompt, str) and prompt.strip()
        assert prompt == prompt.rstrip(), "prompt ends in whitespace"
        assert str(task.doc_to_target(doc)).strip()
        assert isinstance(doc["question_id"], str)
    if RELATIONS.get(name).kind == "leaderboard":
        # capcal_<dataset>_calibration: per question k sampling clones, P(True) Yes / No and one verbalized
        # request (test_calibration_task.py compares them with the separate tasks' requests)
        task.build_all_requests(limit=3, rank=0, world_size=1)
        instances = sorted(task.instances, key=lambda instance: (instance.doc_id, instance.idx))
        assert [instance.repeats for instance in instances] == [task.config.repeats, 1, 1, 1] * 3
        return
    if is_sampling_task(task):
        assert task.config.generation_kwargs["do_sample"] is True, "sampling tasks must set do_sample: true"
        assert "until" in task.config.generation_kwargs, "an unset `until` stops at the first blank line"
        assert task.config.repeats >= 2
    else:
        assert task.config.repeats == 1
    assert len({doc["question_id"] for doc in docs}) == len(docs), "question ids must be unique"
    task.build_all_requests(limit=3, rank=0, world_size=1)
    per_doc = {"generate_until": 1, "multiple_choice": 2}[task.config.output_type]
    if RELATIONS.get(name).kind == "selfcheck":
        per_doc = 2 * 2  # two earlier responses, Yes and No for each
    assert len(task.instances) == 3 * per_doc
    assert all(instance.repeats == task.config.repeats for instance in task.instances)


LM_EVAL_LIMIT = 10  # the ``limit`` fixture of lm-eval's tests/test_tasks.py


def _first_docs(task) -> list:
    """The documents lm-eval's task tests read: the first ``LM_EVAL_LIMIT`` test docs, else validation."""
    docs = task.test_docs() if task.has_test_docs() else task.validation_docs()
    return list(islice(docs, LM_EVAL_LIMIT))


@pytest.mark.parametrize("name", CAPCAL_TASKS)
def test_lm_eval_task_tests_and_write_out(name, earlier_samples_file, loaded_task):
    """Mirrors lm-eval 0.4.13's own task tests (``tests/test_tasks.py``, class ``BaseTasks``, not in the
    installed wheel) on every capcal task, check by check: test_download, test_has_training_docs,
    test_check_training_docs, test_has_validation_docs, test_check_validation_docs, test_has_test_docs,
    test_check_test_docs, test_should_decontaminate, test_doc_to_text, test_create_choices,
    test_doc_to_target, test_build_all_requests (rank 1, limit 10, world size 1) and test_construct_requests
    (``ctx`` from ``doc_to_text``, no ``metadata``); then ``construct_requests`` as lm-eval's evaluator calls
    it (``ctx`` from ``fewshot_context``, with ``metadata``), and lm-eval's ``scripts/write_out.py``'s use:
    ``ctx = task.fewshot_context(doc=doc, num_fewshot=0)``, then ``ctx + task.doc_to_target(doc)``. The
    capcal_*_calibration tasks failed the last three (their ``fewshot_context`` returned a dict)."""
    task = _task(name, earlier_samples_file, loaded_task)
    config = task._config
    # test_download
    task.download()
    assert task.dataset is not None
    # test_has_/test_check_training_docs, validation docs, test docs
    for has, split in (
        (task.has_training_docs, "training_split"),
        (task.has_validation_docs, "validation_split"),
        (task.has_test_docs, "test_split"),
    ):
        assert has() in [True, False]
        if has():
            assert config[split] is not None
    # test_should_decontaminate
    assert task.should_decontaminate() in [True, False]
    if task.should_decontaminate():
        assert config["doc_to_decontamination_query"] is not None
    docs = _first_docs(task)
    assert docs
    # test_doc_to_text: a str, not ending in white space when the target delimiter is white space
    delimiter: str = task.config.target_delimiter
    if not task.multiple_input:
        for text in (task.doc_to_text(doc) for doc in docs):
            assert isinstance(text, str)
            assert (text[-1].isspace() is False if len(text) > 0 else True) if delimiter.isspace() else True
    # test_create_choices
    if "multiple_choice" in config.output_type:
        choices = [task.doc_to_choice(doc) for doc in docs]
        assert all(isinstance(x, list) for x in choices) and all(isinstance(x[0], str) for x in choices)
    # test_doc_to_target
    targets = [task.doc_to_target(doc) for doc in docs]
    if config.output_type == "multiple_choice":
        assert all(isinstance(label, (int, str)) for label in targets)
    # test_build_all_requests
    task.build_all_requests(rank=1, limit=LM_EVAL_LIMIT, world_size=1)
    assert task.instances is not None
    # test_construct_requests
    requests = [
        task.construct_requests(doc=doc, ctx="" if task.multiple_input else task.doc_to_text(doc))
        for doc in docs
    ]
    assert len(requests) == len(docs)
    # as the evaluator's build_all_requests calls it, and scripts/write_out.py
    several = RELATIONS.get(name).kind == "selfcheck"  # one context per earlier response
    for doc_id, doc in enumerate(docs):
        ctx = task.fewshot_context(doc=doc, num_fewshot=0)
        if several:  # a list of contexts, as lm-eval's own multiple-input tasks give (write_out cannot)
            assert isinstance(ctx, list) and all(isinstance(c, str) for c in ctx)
            assert len(ctx) == len(doc["responses"])
        else:
            assert isinstance(ctx, str), type(ctx)
            written = ctx + "\n"  # what write_out.py writes
            target = task.doc_to_target(doc)
            if isinstance(target, str):  # a float target (gsm8k's) is not a str to add (issue 47 item 3)
                written = ctx + target
            assert written.startswith(ctx)
        requests = task.construct_requests(doc=doc, ctx=ctx, metadata=(name, doc_id, task.config.repeats))
        first = requests[0] if isinstance(requests, list) else requests
        assert first.doc_id == doc_id and first.task_name == name
        if config.output_type == "generate_until":
            assert first.arguments[0] == ctx


@pytest.mark.parametrize("name", sorted(HUB_SOURCES))
def test_hub_and_local_sources(name, local_data, monkeypatch):
    """Offline, a task names the hub dataset, config and split it loads, and the local path it would read."""
    hub_source, local_path = HUB_SOURCES[name]
    monkeypatch.delenv("CAPCAL_DATA_DIR")
    try:
        _load(name)
    except RuntimeError as error:
        assert hub_source in str(error) and local_path in str(error) and "CAPCAL_DATA_DIR" in str(error)
    else:  # the hub dataset is in the local Hugging Face cache
        pass
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))
    if name in NOT_IN_SHARED_DATA:
        with pytest.raises(FileNotFoundError, match=local_path):
            _load(name)
        for confidence_task in (f"{name}_verbalized", f"{name}_ptrue"):
            with pytest.raises(FileNotFoundError, match=local_path):
                _load(confidence_task)
    else:
        assert (local_data / local_path).exists()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sampling_prompt_is_the_paper_prompt(family, loaded_task):
    task_name, instruction = FAMILIES[family]
    task = loaded_task(task_name)
    for doc in list(task.eval_docs)[:5]:
        assert task.doc_to_text(doc) == f"{doc['question_text']}\n\n{instruction}"
        assert doc["question_id"].startswith(f"{family}/")


def test_gsm8k_doc_fields(loaded_task):
    doc = next(iter(loaded_task("capcal_gsm8k").eval_docs))
    assert doc["question_text"] == doc["question"].strip()
    assert doc["gold_answer"] == 18.0


def test_multiple_choice_questions_show_lettered_choices(loaded_task):
    mmlu = next(iter(loaded_task("capcal_mmlu").eval_docs))
    assert mmlu["question_text"].endswith("\nA. 0\nB. 4\nC. 2\nD. 6") and mmlu["gold_answer"] == "B"
    gpqa_docs = list(loaded_task("capcal_gpqa").eval_docs)
    positions = set()
    for doc in gpqa_docs:
        lines = doc["question_text"].splitlines()
        assert [line[:3] for line in lines[-4:]] == ["A. ", "B. ", "C. ", "D. "]
        correct_line = lines[-4:]["ABCD".index(doc["gold_answer"])]
        positions.add(doc["gold_answer"])
        assert correct_line[3:] == doc["choices"]["ABCD".index(doc["gold_answer"])]
    assert len(positions) > 1, "the correct answer should not always be in the same position"


def test_confidence_prompts_are_the_paper_prompts(earlier_samples_files, loaded_task):
    doc = next(iter(loaded_task("capcal_gsm8k_verbalized").eval_docs))
    question = doc["question_text"]
    verbalized = loaded_task("capcal_gsm8k_verbalized").doc_to_text(doc)
    assert verbalized.startswith(
        f"Question: {question}\n\nHow likely are you to answer the question correctly? "
    )
    assert '- 0.9-1.0: "Almost certain"\nReason about your uncertainty and confidence' in verbalized
    assert verbalized.endswith("provide a probability P between 0.0 and 1.0 in the format of \\boxed{P}.")
    assert loaded_task("capcal_gsm8k_ptrue").doc_to_text(doc) == (
        f"Question: {question}\n\nAre you able to answer the question correctly?\n"
        "Answer with only a single word: Yes or No."
    )
    metadata = {"samples_file": earlier_samples_files}
    rc_doc = next(iter(loaded_task("capcal_gsm8k_ptrue_rc", metadata).eval_docs))
    response = rc_doc["responses"][0]
    assert loaded_task("capcal_gsm8k_ptrue_rc", metadata).doc_to_text(rc_doc) == (
        f"Question: {rc_doc['question_text']}\nYour response: {response}\n\nIs your response correct?\n"
        "Answer with only a single word: Yes or No."
    )
    verbalized_rc = loaded_task("capcal_gsm8k_verbalized_rc", metadata).doc_to_text(rc_doc)
    assert verbalized_rc.startswith(
        f"Question: {rc_doc['question_text']}\nYour response: {response}\n\n"
        "How likely is your response to be correct? You may refer to the following probabilities P:"
    )


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat_template"])
def test_ptrue_requests_in_both_modes(chat, smollm2_chat_template, earlier_samples_files, loaded_task):
    """Plain prompts score " Yes"/" No"; after a chat template's generation prompt, "Yes"/"No"."""
    for name, metadata in (("capcal_mmlu_ptrue", None), ("capcal_mmlu_ptrue_rc", earlier_samples_files)):
        task = loaded_task(name, {"samples_file": metadata} if metadata else None)
        task.build_all_requests(
            limit=2, rank=0, world_size=1, apply_chat_template=chat,
            chat_template=smollm2_chat_template if chat else None,
        )  # fmt: skip
        assert len(task.instances) == 4
        for instance in task.instances:
            context, continuation = instance.arguments
            prompt = task.doc_to_text(instance.doc)
            assert continuation == (("Yes", "No") if chat else (" Yes", " No"))[instance.idx]
            if chat:
                assert context.endswith(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
            else:
                assert context == prompt


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat_template"])
def test_selfcheck_requests_in_both_modes(chat, smollm2_chat_template, earlier_samples_files, loaded_task):
    """Each response becomes its own conversation (prompt, response, check question), scored Yes/No."""
    task = loaded_task("capcal_gsm8k_selfcheck", {"samples_file": earlier_samples_files})
    task.build_all_requests(
        limit=1, rank=0, world_size=1, apply_chat_template=chat,
        chat_template=smollm2_chat_template if chat else None,
    )  # fmt: skip
    instances = sorted(task.instances, key=lambda instance: instance.idx)
    doc = instances[0].doc
    prompt, responses = task.doc_to_text(doc), doc["responses"]
    assert len(instances) == 2 * len(responses)
    for instance in instances:
        context, continuation = instance.arguments
        response = responses[instance.idx // 2]
        assert continuation == (("Yes", "No") if chat else (" Yes", " No"))[instance.idx % 2]
        if chat:
            assert context.endswith(
                f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n{response.strip()}<|im_end|>\n"
                f"<|im_start|>user\n{SELF_CHECK_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
            )
        else:
            assert context == f"{prompt}\n\n{response.strip()}\n\n{SELF_CHECK_QUESTION}"


def test_selfcheck_results_follow_request_order():
    doc = {"responses": ["a", "b"], "response_correctness": [1, 0]}
    record = selfcheck_results(doc, [(-0.1, True), (-2.0, False), (-3.0, False), (-0.5, True)])
    assert record["logprob_yes"] == [-0.1, -3.0] and record["logprob_no"] == [-2.0, -0.5]
    assert record["p_yes"] == pytest.approx([math.exp(-0.1), math.exp(-3.0)])
    assert record["p_yes_normalized"][0] == pytest.approx(math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.0)))
    assert record["response_correctness"] == [1, 0]
    with pytest.raises(ValueError, match="expected 4 log-likelihoods"):
        selfcheck_results(doc, [(-0.1, True)])


def test_p_true_formula_is_stable():
    assert p_true(-1.0, -1.0) == 0.5
    assert p_true(math.log(0.3), math.log(0.1)) == pytest.approx(0.75)
    assert p_true(-1000.0, -1.0) == pytest.approx(0.0) and p_true(-1.0, -1000.0) == pytest.approx(1.0)


def test_verbalized_aggregation_ignores_failures():
    assert mean_of_parsed([0.2, None, 0.4]) == pytest.approx(0.3)
    assert math.isnan(mean_of_parsed([None, None]))


def test_repeats_override_applies_to_sampling_tasks_only():
    manager = CapcalTaskManager(repeats=3, include_defaults=False)
    loaded = manager.load(["capcal_gsm8k", "capcal_gsm8k_verbalized"])["tasks"]
    assert loaded["capcal_gsm8k"].config.repeats == 3
    assert loaded["capcal_gsm8k_verbalized"].config.repeats == 1
    assert _load("capcal_gsm8k").config.repeats == 16
    with pytest.raises(ValueError, match="positive integer"):
        CapcalTaskManager(repeats=0)


def test_groups():
    loaded = CapcalTaskManager(include_defaults=False, repeats=2).load(["capcal_core"])
    assert sorted(loaded["tasks"]) == sorted(task for task, _ in FAMILIES.values())
    assert all(task.config.repeats == 2 for task in loaded["tasks"].values())
    all_gsm8k = CapcalTaskManager(include_defaults=False).load(["capcal_gsm8k_all"])["tasks"]
    assert sorted(all_gsm8k) == ["capcal_gsm8k", "capcal_gsm8k_ptrue", "capcal_gsm8k_verbalized"]


def test_bundled_data_has_licenses():
    from capcal_tasks.data_sources import BUNDLED_DATA_DIR

    folders = sorted(path.name for path in BUNDLED_DATA_DIR.iterdir() if path.is_dir())
    assert folders == ["gsm8k", "math500", "mmlu", "simpleqa", "triviaqa"]  # no AIME, no GPQA
    for folder in folders:
        assert (BUNDLED_DATA_DIR / folder / "LICENSE").is_file()


@pytest.mark.parametrize("family", ["gsm8k", "math", "triviaqa", "simpleqa", "mmlu"])
def test_bundled_data_loads(family, monkeypatch):
    monkeypatch.setenv("CAPCAL_DATA_DIR", "bundled")
    task_name = FAMILIES[family][0]
    assert len(list(_load(task_name).eval_docs)) == {
        "gsm8k": 1319, "math": 500, "triviaqa": 3000, "simpleqa": 4326, "mmlu": 13937,
    }[family]  # fmt: skip


def test_local_files_match_the_bundled_copies(shared_data):
    from capcal_tasks.data_sources import BUNDLED_DATA_DIR

    for relative in (
        "math500/test.jsonl",
        "simpleqa/simple_qa_test_set.csv",
        "triviaqa/triviaqa_sm_sub.jsonl",
    ):
        assert (BUNDLED_DATA_DIR / relative).read_bytes() == (shared_data / relative).read_bytes()
    for split in ("test", "val"):
        for path in (shared_data / "mmlu" / split).glob("*.csv"):
            assert (BUNDLED_DATA_DIR / "mmlu" / split / path.name).read_bytes() == path.read_bytes()


def test_response_tasks_need_a_samples_file():
    with pytest.raises(ValueError, match="samples_file"):
        _load("capcal_gsm8k_ptrue_rc")
    assert Path(tasks_dir(), "capcal_core.yaml").is_file()
