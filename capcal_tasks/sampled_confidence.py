r"""Capability confidences on the questions of a stock lm-eval task that capcal samples
(``capcal_tasks.sampled_task``): P(True) and the verbalized confidence, each in capcal's capability form.

capcal's own confidence tasks ask about the question text (``capcal_tasks.prompts``:
``ptrue_capability_prompt``, "Are you able to answer the question correctly?", and
``verbalized_capability_prompt``, "How likely are you to answer the question correctly? ... \boxed{P}"). A
stock task has no question-text field; its question is what its own ``doc_to_text`` shows zero-shot, so that
text stands in for the question (``question_text``), with a leading question label (``Question:``, ``Q:``,
``Problem:``) and a final answer cue (a last line that starts with ``Answer:``, ``A:`` or ``Solution:``,
e.g. ``A: Let's think step by step.``) removed: the model is asked about the question, not invited to answer
it.

``ptrue_task(base, target)`` and ``verbalized_task(base, target)`` are lm-eval tasks built from capcal's own
templates (``capcal_tasks/_ptrue_template_yaml``, ``_verbalized_template_yaml``: prompt builder, parser,
record, metrics and generation settings, unchanged) over the base task's evaluation docs, each doc with
``question_id`` (the id the wrapped task's samples are keyed under: ``capcal_tasks.question_id
.doc_question_id`` of the unmodified doc under the wrapped task's name) and ``question_text``; their records
join the sampling records as capcal's own do (``metadata.capcal_target_task``). ``capcal eval --repeats k
--metadata capcal_confidences=ptrue,verbalized`` adds ``<task>_ptrue`` and ``<task>_verbalized`` for every
wrapped task (``requested_confidences`` reads the setting).

**When a task's prompt allows the verbalized confidence** (``verbalized_problem``, on the task's YAML as
lm-eval's index holds it, before any model loads). The verbalized prompt is answered by a generated text in
which capcal reads ``\boxed{P}``, so the question text must be the question alone, without the task's own
instructions for its answer. The prompt allows it when

1. it is text only (no ``doc_to_image`` / ``doc_to_audio``: the confidence prompt cannot show the media);
2. it does not ask for a ``\boxed{}`` answer (a boxed answer in [0, 1] would be read as the confidence);
3. the question can be told apart from what follows it: the prompt template ends in an answer cue, which
   marks where the question ends, or is one field of the doc (``{{question}}`` or a field name: the whole
   prompt is the question). A prompt that ends in anything else (arc_challenge_chat's 'Your response should
   end with "The best answer is [the_answer_letter]" ...') mixes the question with instructions that would
   compete with the confidence prompt's own, and is refused. A prompt made by a Python function
   (``!function``) cannot be read before its rows are loaded: each of its questions is checked for the
   answer cue when the task is built (``RefusedTask`` naming the first that has none).

P(True) is a log-likelihood of "Yes" / "No", read whatever the model would go on to write, and is asked on
every wrapped task.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePath
from typing import Any

import datasets
from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks._yaml_loader import load_yaml

from capcal_tasks import tasks_dir
from capcal_tasks.question_id import doc_question_id
from capcal_tasks.settings import CONFIDENCES, CONFIDENCES_KEY
from capcal_tasks.task_admission import RefusedTask

__all__ = [
    "CONFIDENCES",
    "CONFIDENCES_KEY",
    "confidence_tasks",
    "ptrue_task",
    "question_row",
    "question_text",
    "requested_confidences",
    "verbalized_problem",
    "verbalized_task",
]

_LEADING_LABEL = re.compile(r"^\s*(?:Question|Q|Problem)\s*:\s*", re.IGNORECASE)
_ANSWER_CUE = re.compile(r"\n[ \t]*(?:Answer|A|Solution)[ \t]*:[^\n]*\s*$", re.IGNORECASE)
# a template that is one field of the doc: {{question}}, {{ question.strip() }}, or a bare field name
_ONE_FIELD = re.compile(r"^\s*(?:\{\{\s*[\w.\[\]'\"]+(?:\(\))?\s*\}\}|\w+)\s*$")
_CLOSING = re.compile(r"(?:\{%-?[^%]*-?%\}|\}\}|[\"'])$")
_MEDIA_KEYS = ("doc_to_image", "doc_to_audio")
_NO_VERBALIZED = f"{CONFIDENCES_KEY} asks for the verbalized confidence, which its prompt does not allow"


def requested_confidences(metadata: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The confidences ``metadata[CONFIDENCES_KEY]`` asks for, in ``CONFIDENCES`` order: a list of names or
    a text of names separated by commas (``capcal_confidences=ptrue,verbalized``); () when unset.
    ``ValueError`` in one line for a name that is not one of ``CONFIDENCES`` or a value of another type."""
    value = (metadata or {}).get(CONFIDENCES_KEY)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        names = [name.strip() for name in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value):
        names = [name.strip() for name in value]
    else:
        raise ValueError(
            f"{CONFIDENCES_KEY} must be names separated by commas or a list of names, got {value!r}"
        )
    unknown = [name for name in names if name and name not in CONFIDENCES]
    if unknown:
        raise ValueError(
            f"{CONFIDENCES_KEY}: unknown confidence {unknown[0]!r}; choose from {', '.join(CONFIDENCES)} "
            f"(e.g. {CONFIDENCES_KEY}=ptrue,verbalized)"
        )
    return tuple(name for name in CONFIDENCES if name in names)


def question_text(prompt: str) -> str:
    """A stock task's zero-shot prompt as a question: its leading question label and final answer-cue line
    removed (module docstring); the prompt stripped when it has neither."""
    text = _ANSWER_CUE.sub("", prompt.rstrip())
    return _LEADING_LABEL.sub("", text).strip()


def _is_function(value: Any) -> bool:
    """Whether a raw ``doc_to_text`` is a ``!function`` (imported: callable; from lm-eval's index: the
    absolute path of ``module.function``)."""
    if callable(value):
        return True
    return isinstance(value, str) and "\n" not in value and PurePath(value).is_absolute()


def verbalized_problem(config: Mapping[str, Any]) -> str | None:
    """Why the prompt of a stock task (its YAML config, includes merged) does not allow the verbalized
    confidence (module docstring, rules 1-3), in one line; None when it does (a ``!function`` prompt is
    checked per question by ``verbalized_task``)."""
    reason = _verbalized_reason(config)
    return None if reason is None else f"{_NO_VERBALIZED}: {reason}"


def _verbalized_reason(config: Mapping[str, Any]) -> str | None:
    media = [key for key in _MEDIA_KEYS if config.get(key) is not None]
    if media:
        return (
            f"its questions show {'an image' if media[0] == 'doc_to_image' else 'audio'} ({media[0]}), "
            "which the verbalized-confidence prompt, text only, cannot show"
        )
    template = config.get("doc_to_text")
    if _is_function(template):
        return None
    if not isinstance(template, str) or not template.strip():
        return f"its prompt (doc_to_text: {template!r}) is not a text template"
    if "boxed" in template:
        return (
            "its prompt asks for the answer in \\boxed{}, where the verbalized confidence is read from "
            "(\\boxed{P}): a boxed answer in [0, 1] would be read as the confidence"
        )
    if _ONE_FIELD.match(template) or _ANSWER_CUE.search(_rendered_ending(template)):
        return None
    ending = template.rstrip().rsplit("\n", 1)[-1].strip()
    return (
        f"its prompt ends in {ending[-60:]!r}, not in an answer cue (Answer:, A:, Solution:): its question "
        "cannot be told apart from its instructions for the answer; ask for ptrue only"
    )


def _rendered_ending(template: str) -> str:
    r"""A Jinja template's text as its end renders: escaped newlines read as newlines, and the closing
    ``{% ... %}`` tags, ``}}`` and quotes at its end removed (mgsm's ``{{"Question: "+question+"\nAnswer:"}}
    {% endif %}`` ends in its answer cue)."""
    text = template.replace("\\n", "\n").rstrip()
    while (shorter := _CLOSING.sub("", text).rstrip()) != text:
        text = shorter
    return text


def question_row(base: ConfigurableTask, target: str, doc: dict) -> dict[str, Any]:
    """``doc`` of ``base`` as a confidence task's row: with ``question_id`` (under the wrapped task
    ``target``) and ``question_text`` (``question_text`` of ``base``'s zero-shot prompt)."""
    return {
        **doc,
        "question_id": doc_question_id(target, doc),
        "question_text": question_text(_prompt(base, doc)),
    }


def _prompt(base: ConfigurableTask, doc: dict) -> str:
    prompt = base.doc_to_text(doc)
    return prompt if isinstance(prompt, str) else str(prompt)


def _question_rows(base: ConfigurableTask, target: str, check_cue: bool) -> datasets.Dataset:
    """``base``'s evaluation docs as confidence-task rows (``question_row``), in one pass; with ``check_cue``,
    ``RefusedTask`` for the first prompt without an answer cue."""
    docs: list[dict[str, Any]] = []
    for index, doc in enumerate(base.eval_docs):
        if check_cue and not _ANSWER_CUE.search(_prompt(base, doc).rstrip()):
            raise RefusedTask(
                f"task {base.config.task}: {_NO_VERBALIZED}: the prompt its doc_to_text function gives "
                f"question {index} does not end in an answer cue (Answer:, A:, Solution:): its question "
                "cannot be told apart from its instructions for the answer; ask for ptrue only"
            )
        docs.append(question_row(base, target, doc))
    return datasets.Dataset.from_list(docs)


def _refuse_verbalized(base: ConfigurableTask) -> None:
    """``RefusedTask`` where ``base``'s prompt template does not allow the verbalized confidence
    (``verbalized_problem``); a ``!function`` prompt is checked per question when its rows are built."""
    config = {key: getattr(base.config, key, None) for key in ("doc_to_text", *_MEDIA_KEYS)}
    problem = verbalized_problem(config)
    if problem is not None:
        raise RefusedTask(problem)


def _confidence_task(
    base: ConfigurableTask, target: str, kind: str, rows: datasets.Dataset, **overrides: Any
) -> ConfigurableTask:
    """capcal's capability-form ``kind`` task (its template ``_<kind>_template_yaml``, unchanged but for the
    rows, the name and ``overrides``) on ``rows``, named ``<target>_<kind>``."""
    config = load_yaml(tasks_dir() / f"_{kind}_template_yaml", resolve_func=True)
    config.pop("tag", None)
    config.update(overrides)
    config.update(
        {
            "task": f"{target}_{kind}",
            "custom_dataset": lambda **_: datasets.DatasetDict({"test": rows}),
            "test_split": "test",
            "num_fewshot": 0,
        }
    )
    config["metadata"] = {
        **(config.get("metadata") or {}),
        "capcal_role": "confidence",
        "capcal_target_task": target,
        "capcal_dataset": f"lm_eval/{base.config.task}",
        "capcal_question_text": "the task's zero-shot prompt, its question label and answer cue removed",
        "base_version": (base.config.metadata or {}).get("version"),
    }
    return ConfigurableTask(config=config)


def _verbalized(base: ConfigurableTask, target: str, rows: datasets.Dataset) -> ConfigurableTask:
    return _confidence_task(base, target, "verbalized", rows, doc_to_target=base.config.doc_to_target)


def ptrue_task(base: ConfigurableTask, target: str) -> ConfigurableTask:
    """The capability-form P(True) task on ``base``'s evaluation docs, for the wrapped task named ``target``
    (its samples' question ids), named ``<target>_ptrue``."""
    return _confidence_task(base, target, "ptrue", _question_rows(base, target, check_cue=False))


def verbalized_task(base: ConfigurableTask, target: str) -> ConfigurableTask:
    """The capability-form verbalized-confidence task on ``base``'s evaluation docs, for the wrapped task
    named ``target``, named ``<target>_verbalized``; its samples' ``target`` is the base task's. Raises
    ``RefusedTask`` where ``base``'s prompt does not allow it (``verbalized_problem``; a ``!function``
    prompt: per question)."""
    _refuse_verbalized(base)
    return _verbalized(base, target, _question_rows(base, target, _is_function(base.config.doc_to_text)))


def confidence_tasks(
    base: ConfigurableTask, target: str, confidences: Sequence[str]
) -> list[ConfigurableTask]:
    """The tasks of ``confidences`` (``requested_confidences``) on the wrapped task ``target``'s questions,
    as ``ptrue_task`` and ``verbalized_task`` build them, their rows built once for all (each row hashes its
    doc and renders its prompt) and the verbalized confidence's refusal, if any, raised before any row."""
    if not confidences:
        return []
    verbalized = "verbalized" in confidences
    if verbalized:
        _refuse_verbalized(base)
    rows = _question_rows(base, target, verbalized and _is_function(base.config.doc_to_text))
    builders: dict[str, Callable[[], ConfigurableTask]] = {
        "ptrue": lambda: _confidence_task(base, target, "ptrue", rows),
        "verbalized": lambda: _verbalized(base, target, rows),
    }
    return [builders[name]() for name in confidences]
