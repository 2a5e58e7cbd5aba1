"""SampledTask (capcal_tasks.sampled_task) and the P(True) and verbalized-confidence tasks on its questions
(capcal_tasks.sampled_confidence), on lm-eval's real gsm8k, triviaqa, bbh, minerva_math500 and aime25 tasks
with their rows from ../shared/data, scored on hand-written responses (no model, no task index); which
prompts allow the verbalized confidence, and how ``capcal_confidences`` is read."""

from __future__ import annotations

import json

import pytest
from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks._yaml_loader import load_yaml
from lm_eval.utils import handle_non_serializable, hash_string

from analysis.cli.eval_command import eval_request
from analysis.cli.main import build_parser
from capcal_models.model_identity import parse_model_args
from capcal_tasks import sampled_confidence, tasks_dir
from capcal_tasks.confidence import verbalized
from capcal_tasks.sampled_confidence import (
    confidence_tasks,
    ptrue_task,
    question_text,
    requested_confidences,
    verbalized_problem,
    verbalized_task,
)
from capcal_tasks.sampled_task import SampledPTrueTask, SampledTask, sampling_generation_kwargs
from capcal_tasks.task_admission import RefusedTask
from capcal_tasks.task_names import lm_eval_tasks_dir


@pytest.fixture(scope="module")
def gsm8k(unmodified_task) -> ConfigurableTask:
    return unmodified_task("gsm8k/gsm8k.yaml")


def _scored(task: SampledTask, doc: dict, responses: list[str]) -> dict:
    """The record of one question, the responses passed through the wrapped task's own pipeline."""
    task.build_all_requests(limit=1, rank=0, world_size=1)
    (instance,) = [i for i in task.instances if i.doc_id == 0]
    instance.resps = list(responses)
    task.apply_filters()
    (filtered,) = instance.filtered_resps.values()
    return task.process_results(doc, [filtered])


def test_each_response_is_scored_by_the_tasks_own_metric(gsm8k):
    wrapped = SampledTask(base=gsm8k, k=4)
    doc = gsm8k.eval_docs[0]  # Janet's ducks: 18
    assert doc["answer"].endswith("#### 18")
    record = _scored(wrapped, doc, ["so #### 18", "it is #### 18.", "#### 7", "no idea"])
    assert record["extracted_answers"] == ["18", "18.", "7", None]  # regex's [invalid] is no answer
    assert record["correctness"] == [1, 1, 0, 0]  # gsm8k's exact_match drops a final "."
    assert record["n_samples"] == 4 and record["expected_accuracy"] == 0.5
    assert record["exact_match"] == 0.5  # the task's own metric, averaged over the k responses
    assert record["pass_at_1"] == pytest.approx(0.5) and record["pass_at_2"] == pytest.approx(1 - 1 / 6)
    # "18" and "18." are one class (the metric cannot tell them apart): 2 votes against 1
    assert record["majority_vote_accuracy"] == 1.0
    assert wrapped.config.repeats == 4 and wrapped.config.task == "gsm8k"
    assert wrapped.config.metadata["capcal_task"] == "sampling"
    assert gsm8k.config.repeats == 1 and gsm8k.config.generation_kwargs["do_sample"] is False  # untouched


def test_the_chosen_pipeline_is_kept(gsm8k):
    wrapped = SampledTask(base=gsm8k, k=2, metadata={"filter": "flexible-extract"})
    record = _scored(wrapped, gsm8k.eval_docs[0], ["She makes 9 * 2 = 18 dollars", "maybe 16 - 3 = 13"])
    assert record["extracted_answers"] == ["18", "13"]  # the last number of each response
    assert record["correctness"] == [1, 0]
    with pytest.raises(RefusedTask, match="no filter pipeline named 'x'"):
        SampledTask(base=gsm8k, k=2, metadata={"filter": "x"})


def test_whole_responses_have_no_answer_classes(unmodified_task):
    aime = unmodified_task("aime/aime25.yaml")
    wrapped = SampledTask(base=aime, k=2)
    doc = aime.eval_docs[0]
    record = _scored(wrapped, doc, [f"so \\boxed{{{doc['answer']}}}", "\\boxed{1}"])
    assert record["correctness"] == [1, 0]
    assert "majority_vote_accuracy" not in record
    assert wrapped.config.metadata["capcal_sampled"]["answer_classes"] is None


def test_greedy_settings_become_sampling_and_say_so():
    settings, changed = sampling_generation_kwargs({"until": ["Q:"], "do_sample": False, "temperature": 0.0})
    assert settings == {"until": ["Q:"], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    assert changed == {
        "do_sample": [False, True],
        "temperature": [0.0, 1.0],
        "top_p": [None, 1.0],
        "top_k": [None, 0],
    }
    kept, none = sampling_generation_kwargs(
        {"until": [], "do_sample": True, "temperature": 0.6, "top_p": 0.95}
    )
    assert kept == {"until": [], "do_sample": True, "temperature": 0.6, "top_p": 0.95} and none == {}
    assert sampling_generation_kwargs({"until": []}, temperature=0.7)[0]["temperature"] == 0.7


def test_question_text_of_a_stock_prompt():
    assert question_text("Question: How many eggs?\nAnswer:") == "How many eggs?"
    assert question_text("Q: not ( True )\nA: Let's think step by step.\n") == "not ( True )"
    assert question_text("Problem:\nFind x.\n\nSolution:") == "Find x."
    assert question_text("A plain prompt with Answer: inside") == "A plain prompt with Answer: inside"


def test_ptrue_records_join_the_wrapped_samples(gsm8k):
    task = ptrue_task(gsm8k, "gsm8k")
    assert task.config.task == "gsm8k_ptrue"
    assert task.config.metadata["capcal_target_task"] == "gsm8k"
    doc = task.eval_docs[0]
    original = gsm8k.eval_docs[0]
    # lm-eval's doc_hash of the wrapped task's logged doc (evaluator.py: hash of the JSON-dumped doc)
    logged = hash_string(json.dumps(original, indent=2, default=handle_non_serializable, ensure_ascii=False))
    assert doc["question_id"] == f"gsm8k/doc-{logged}"
    assert doc["question_text"] == original["question"]
    prompt = task.doc_to_text(doc)
    assert prompt.startswith(f"Question: {original['question']}\n\nAre you able to answer")
    assert task.doc_to_choice(doc) == ["Yes", "No"]


def test_both_confidences_ask_about_one_set_of_rows_built_once(gsm8k, monkeypatch):
    """``confidence_tasks`` makes each doc's row once for P(True) and the verbalized task (each row hashes the
    doc and renders its prompt: seconds on TriviaQA's 17,944 questions); the two tasks' rows are the ones
    each builder makes alone."""
    made = []
    question_row = sampled_confidence.question_row

    def counted(base, target, doc):
        made.append(doc)
        return question_row(base, target, doc)

    monkeypatch.setattr(sampled_confidence, "question_row", counted)
    ptrue, verbalized = confidence_tasks(gsm8k, "gsm8k", ["ptrue", "verbalized"])
    assert len(made) == len(gsm8k.eval_docs)
    alone = {"ptrue": ptrue_task(gsm8k, "gsm8k"), "verbalized": verbalized_task(gsm8k, "gsm8k")}
    for task in (ptrue, verbalized):
        kind = task.config.task.removeprefix("gsm8k_")
        assert list(task.eval_docs) == list(alone[kind].eval_docs)
        assert task.config.metadata["capcal_role"] == "confidence"
    assert [task.config.task for task in (ptrue, verbalized)] == ["gsm8k_ptrue", "gsm8k_verbalized"]
    assert confidence_tasks(gsm8k, "gsm8k", []) == []
    made.clear()  # a prompt the verbalized confidence refuses: refused before any row is built
    monkeypatch.setattr(
        gsm8k.config, "doc_to_text", "{{question}}\nEnd your response with 'The answer is N'."
    )
    with pytest.raises(RefusedTask, match="not in an answer cue"):
        confidence_tasks(gsm8k, "gsm8k", ["ptrue", "verbalized"])
    assert made == []


def test_a_ptrue_yaml_task_without_its_wrapped_task_is_refused_before_any_task_loads():
    """lm-eval's ``class:`` route to P(True): the wrapped task whose questions it asks about is named by
    ``metadata.target_task`` or by the task's own name (``<target>_ptrue``); with neither, one line."""
    with pytest.raises(
        RefusedTask, match=r"^task gsm8k_confidence: metadata.target_task must name the wrapped"
    ):
        SampledPTrueTask(config={"task": "gsm8k_confidence", "metadata": {"base_task": "gsm8k"}})


SCALE_START = (
    "How likely are you to answer the question correctly? You may refer to the following probabilities P:"
)
SCALE_END = "provide a probability P between 0.0 and 1.0 in the format of \\boxed{P}."


def _raw(relative: str) -> dict:
    """A stock task's YAML as lm-eval's task index holds it (includes merged, functions not imported)."""
    return load_yaml(lm_eval_tasks_dir() / relative, resolve_func=False, recursive=True)


@pytest.mark.parametrize(
    ("relative", "question"),
    [
        ("gsm8k/gsm8k.yaml", lambda doc: doc["question"]),  # "Question: {{question}}\nAnswer:"
        ("triviaqa/default.yaml", lambda doc: doc["question"] + "?"),  # "Question: {{question}}?\nAnswer:"
        ("bbh/cot_fewshot/date_understanding.yaml", lambda doc: doc["input"]),  # "Q: {{input}}\nA: Let's ..."
    ],
)
def test_verbalized_prompt_asks_about_the_tasks_own_question(unmodified_task, relative, question):
    base = unmodified_task(relative)
    name = f"{base.config.task}_k2"  # the wrapped task's name (a YAML task of lm-eval's class: form)
    task = verbalized_task(base, name)
    assert task.config.task == f"{name}_verbalized" and task.config.output_type == "generate_until"
    assert task.config.metadata["capcal_target_task"] == name
    assert task.config.metadata["capcal_task"] == "verbalized"
    for index in (0, 1):
        original = base.eval_docs[index]
        doc = task.eval_docs[index]
        prompt = task.doc_to_text(doc)
        assert prompt.startswith(f"Question: {question(original).strip()}\n\n{SCALE_START}\n- 0.0-0.1: ")
        assert prompt.endswith(SCALE_END)
        assert "Answer:" not in prompt and "step by step" not in prompt  # the task's answer cue is gone
        # keyed as the wrapped task's samples are (lm-eval's doc_hash of the unmodified doc)
        logged = hash_string(
            json.dumps(original, indent=2, default=handle_non_serializable, ensure_ascii=False)
        )
        assert doc["question_id"] == f"{name}/doc-{logged}"
        assert task.doc_to_target(doc) == base.doc_to_target(original)  # the base task's gold, logged


def test_verbalized_task_is_capcals_own_template(gsm8k):
    """Prompt builder, parser, record, metrics and generation settings are those of capcal's own
    capcal_gsm8k_verbalized (one copy), on the same question text."""
    task = verbalized_task(gsm8k, "gsm8k")
    own = load_yaml(tasks_dir() / "gsm8k" / "capcal_gsm8k_verbalized.yaml", resolve_func=True)
    assert task.config.generation_kwargs == own["generation_kwargs"]
    assert [entry["metric"] for entry in task.config.metric_list] == [m["metric"] for m in own["metric_list"]]
    assert task.config.process_results is verbalized.process_results
    doc = task.eval_docs[0]
    assert task.doc_to_text(doc) == own["doc_to_text"]({"question_text": gsm8k.eval_docs[0]["question"]})
    record = task.process_results(doc, ["I think it is likely. \\boxed{0.7}"])
    assert record == {"verbalized_confidence": 0.7, "parse_success": 1, "parse_failures": 0}
    record = task.process_results(doc, ["The answer is \\boxed{18}."])  # no P in [0, 1]: a parse failure
    assert record == {"verbalized_confidence": None, "parse_success": 0, "parse_failures": 1}


@pytest.mark.parametrize(
    "relative",
    [
        "gsm8k/gsm8k.yaml",
        "gsm8k/gsm8k-cot.yaml",
        "triviaqa/default.yaml",
        "nq_open/nq_open.yaml",
        "bbh/cot_fewshot/boolean_expressions.yaml",
        "bbh/cot_fewshot/date_understanding.yaml",
        "minerva_math/minerva_math500.yaml",  # a !function prompt: checked per question when built
        "aime/aime25.yaml",
        "mmlu/generative/mmlu_anatomy.yaml",
        "mgsm/direct/mgsm_direct_en.yaml",  # {% if ... %}{{question+"\\nAnswer:"}}{% else %}...{% endif %}
    ],
)
def test_the_wrapped_tasks_of_the_run_tests_allow_the_verbalized_confidence(relative):
    assert verbalized_problem(_raw(relative)) is None


def test_prompts_that_do_not_allow_the_verbalized_confidence_are_refused(unmodified_task):
    arc = verbalized_problem(_raw("arc/arc_challenge_chat.yaml"))  # ends in instructions for the answer
    assert arc.startswith("capcal_confidences asks for the verbalized confidence, which its prompt does not")
    assert "is one of A, B, C or D.', not in an answer cue (Answer:, A:, Solution:)" in arc
    assert arc.endswith("ask for ptrue only") and "\n" not in arc
    # its cue, "Antwort:", is not one question_text removes (it would stay in the question text)
    assert "not in an answer cue" in verbalized_problem(_raw("mgsm/direct/mgsm_direct_de.yaml"))
    # putnam_axiom_original asks for \\boxed{} in its description, which the question text leaves out
    assert verbalized_problem(_raw("putnam_axiom/putnam_axiom_original.yaml")) is None
    boxed = verbalized_problem({"doc_to_text": "{{problem}} Put the final answer in \\boxed{}.\nAnswer:"})
    assert "asks for the answer in \\boxed{}" in boxed
    image = {"doc_to_text": "Question: {{question}}\nAnswer:", "doc_to_image": ["image_1"]}
    assert "show an image (doc_to_image)" in verbalized_problem(image)
    assert verbalized_problem({"doc_to_text": "{{ question.strip() }}"}) is None  # one field: the question
    assert verbalized_problem({"doc_to_text": "question"}) is None  # a field name
    assert "ends in 'Translate it:'" in verbalized_problem({"doc_to_text": "{{en}}\nTranslate it:"})
    assert "is not a text template" in verbalized_problem({"doc_to_text": None})
    # a !function prompt: each question is checked when the task is built
    math500 = unmodified_task("minerva_math/minerva_math500.yaml")  # "Problem:\n...\n\nSolution:"
    task = verbalized_task(math500, "minerva_math500")
    assert task.eval_docs[0]["question_text"] == math500.eval_docs[0]["problem"].strip()
    math500.config.doc_to_text = lambda doc: f"Solve: {doc['problem']}\nPut your answer in a box."
    with pytest.raises(
        RefusedTask,
        match="^task minerva_math500: capcal_confidences asks .* function gives question 0 does not end",
    ):
        verbalized_task(math500, "minerva_math500")
    gsm8k = unmodified_task("gsm8k/gsm8k.yaml")
    gsm8k.config.doc_to_text = "{{question}}\nEnd your response with 'The answer is N'."
    with pytest.raises(RefusedTask, match="not in an answer cue"):
        verbalized_task(gsm8k, "gsm8k")
    assert ptrue_task(gsm8k, "gsm8k").eval_docs[0]["question_id"].startswith("gsm8k/doc-")  # P(True) is asked


def test_capcal_confidences_is_read_as_a_list_of_known_names():
    assert requested_confidences(None) == () and requested_confidences({}) == ()
    assert requested_confidences({"capcal_confidences": "ptrue"}) == ("ptrue",)
    assert requested_confidences({"capcal_confidences": "verbalized, ptrue"}) == ("ptrue", "verbalized")
    assert requested_confidences({"capcal_confidences": ["verbalized"]}) == ("verbalized",)
    with pytest.raises(ValueError, match="unknown confidence 'verbalised'; choose from ptrue, verbalized"):
        requested_confidences({"capcal_confidences": "ptrue,verbalised"})
    with pytest.raises(ValueError, match="must be names separated by commas or a list of names, got 3"):
        requested_confidences({"capcal_confidences": 3})


def test_capcal_confidences_takes_a_comma_separated_list_on_the_command_line():
    arguments = ["eval", "--model", "hf", "--tasks", "gsm8k", "--repeats", "8"]
    parser = build_parser()
    for given in (
        ["capcal_confidences=ptrue,verbalized,temperature=0.7"],
        ["temperature=0.7,capcal_confidences=ptrue,verbalized"],
        ['{"capcal_confidences": ["ptrue", "verbalized"], "temperature": 0.7}'],
    ):
        metadata = eval_request(parser.parse_args([*arguments, "--metadata", *given]))["metadata"]
        assert requested_confidences(metadata) == ("ptrue", "verbalized"), given
        assert metadata["temperature"] == 0.7, given
    # only a list key goes on over items without "=": elsewhere such an item is still an error
    with pytest.raises(ValueError, match="expected key=value or a JSON object, got 'verbalized'"):
        parse_model_args("filter=strict-match,verbalized", typed=True, what="--metadata")
    with pytest.raises(ValueError, match="got 'float16'"):
        eval_request(parser.parse_args([*arguments, "--model_args", "pretrained=x,float16"]))


def test_a_ptrue_yaml_task_takes_its_own_name_and_asks_about_its_target(local_data, monkeypatch):
    """lm-eval builds a ``class:`` task from its YAML config: the task keeps the YAML's name (not the
    ``<target>_ptrue`` that ``ptrue_task`` gives), asks about the questions of ``metadata.target_task``, and
    joins that task's samples (its ``capcal_target_task``)."""
    monkeypatch.setenv("CAPCAL_DATA_DIR", str(local_data))
    task = SampledPTrueTask(
        config={"task": "gsm8k_confidence", "metadata": {"base_task": "gsm8k", "target_task": "gsm8k_k8"}}
    )
    assert task.config.task == "gsm8k_confidence"
    assert task.config.metadata["capcal_target_task"] == "gsm8k_k8"
    doc = task.eval_docs[0]
    assert doc["question_id"].startswith("gsm8k_k8/doc-")
    assert task.doc_to_choice(doc) == ["Yes", "No"]
