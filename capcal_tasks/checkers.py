r"""Named answer checkers: re-judge logged responses without re-running the model (``capcal rescore``).

A checker turns ``CheckItem``\ s (one logged response each, with its question's doc and gold) into
``Verdict``\ s, in batches (``Checker.check``), so that a checker calling a model can run them concurrently.
``Verdict.correct`` is 1, 0, or None for a verdict that could not be read (never guessed).

The rule-based checkers here (``RULE_CHECKERS``) re-extract the answer from the response and judge it against
the gold in the logged doc:

- ``task``: the task's own ``process_results``; re-scoring with it reproduces the run's labels exactly.
- ``alias`` (TriviaQA, SimpleQA): the paper's alias label, the normalised answer equals, contains or is
  contained in a normalised gold alias (``capcal_tasks.answers.aliases.matches_an_alias``).
- ``exact`` (TriviaQA, SimpleQA): the stricter label, the normalised answer equals an alias.
- ``math-verify`` (tasks whose answer is the last ``\boxed{}``: MATH, AIME, GSM8K): math-verify equivalence
  with the gold (``capcal_tasks.answers.math_equivalence``), the default for MATH and an alternative to the
  integer and number checkers of AIME and GSM8K.
- ``math-string`` (MATH): the last ``\boxed{}`` equals the gold as text with whitespace removed, the
  string-match rule math-verify falls back to.

Majority voting groups all correct answers into one class and the others by their normalised text (alias
checkers) or whitespace-free text (math checkers). The LLM judge (``judge``) is an I/O checker and lives in
``analysis.judge``; ``analysis.evaluation.rescore.get_checker`` resolves every name.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from capcal_tasks.answers.aliases import (
    equals_an_alias,
    extract_short_answer,
    matches_an_alias,
    normalize_answer,
)
from capcal_tasks.answers.boxed import last_boxed
from capcal_tasks.answers.prompt_echo import remove_prompt_text
from capcal_tasks.prompts import logged_sampling_prompt
from capcal_tasks.records import RunFormatError
from capcal_tasks.sampling import score_responses, task_checker, task_process_results, task_version

__all__ = [
    "RULE_CHECKERS",
    "TASK_LABELS",
    "CheckItem",
    "Checker",
    "RuleChecker",
    "Verdict",
    "capcal_version",
    "describe_labels",
    "labels_of_an_earlier_version",
    "parse_rescore_provenance",
    "recheck_scorer",
    "rule_checker",
    "task_answer",
]

Scorer = Callable[[dict, list], dict]  # process_results(doc, [responses]) -> per-question record


@dataclass(frozen=True)
class CheckItem:
    """One logged response to be checked.

    ``extracted_answer`` is the answer the source run extracted from ``response`` (None: none found);
    ``gold`` is the doc's ``gold_answer`` (None when the doc has none), ``gold_aliases`` its accepted aliases
    (TriviaQA, SimpleQA; empty otherwise), ``question`` the question text, ``response_index`` the 0-based
    position of the response among the question's k.
    """

    task: str
    question_id: str
    doc: dict
    response: str
    extracted_answer: str | None
    gold: Any
    question: str = ""
    gold_aliases: tuple[str, ...] = ()
    response_index: int = 0


@dataclass(frozen=True)
class Verdict:
    """A checker's verdict on one response: ``correct`` 1 or 0, or None when the verdict could not be read
    (never guessed); ``raw`` the checker's raw output (None for rule checkers); ``extracted_answer`` the
    answer the checker judged (None: none found by a rule checker; for a checker that judges the whole
    response, ``analysis.evaluation.rescore`` records the response text)."""

    correct: int | None
    raw: str | None = None
    extracted_answer: str | None = None


class Checker(Protocol):
    """What ``capcal rescore`` needs of a checker: a name, a version and the judge model (None for rules),
    which tasks it can check, and batched verdicts (one per item, in order)."""

    name: str
    version: str
    judge_model: str | None

    def supports(self, task: str) -> bool: ...

    def check(self, items: Sequence[CheckItem]) -> list[Verdict]: ...


@functools.cache
def capcal_version() -> str:
    """The installed capcal version ("unknown" when capcal is not installed as a package)."""
    try:
        return importlib.metadata.version("capcal")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class RuleChecker:
    """A rule-based checker: ``scorer(task)`` gives the per-question scoring function for a task it applies
    to (None otherwise); ``cheap``: fast and deterministic enough to re-run on every read of a log."""

    name: str
    version: str
    description: str
    scorer: Callable[[str], Scorer | None]
    cheap: bool = True
    judge_model: str | None = None

    def supports(self, task: str) -> bool:
        return self.scorer(task) is not None

    def score(self, task: str, doc: dict, responses: Sequence[str]) -> dict:
        """The per-question sampling record of ``responses`` under this checker (``score_responses``)."""
        scorer = self.scorer(task)
        if scorer is None:
            raise ValueError(f"checker {self.name} does not apply to task {task}")
        return scorer(doc, [list(responses)])

    def check(self, items: Sequence[CheckItem]) -> list[Verdict]:
        verdicts = []
        for item in items:
            record = self.score(item.task, item.doc, [item.response])
            verdicts.append(Verdict(record["correctness"][0], None, record["extracted_answers"][0]))
        return verdicts

    def recheck_scorer(self, task: str) -> Scorer | None:
        """The scoring function a reader re-runs on this checker's records of ``task`` (None: too slow)."""
        if self.name == "task":
            return task_checker(task)
        return self.scorer(task) if self.cheap else None


# ---------------------------------------------------------------- the task checkers the rules apply to


def _task_module(task: str) -> Any:
    found = task_process_results(task)
    return None if found is None else found[1]


def _is_alias_task(task: str) -> bool:
    module = _task_module(task)
    return module is not None and getattr(module, "extract_answer", None) is extract_short_answer


def _is_boxed_task(task: str) -> bool:
    module = _task_module(task)
    return module is not None and getattr(module, "extract_answer", None) is last_boxed


def _is_math_task(task: str) -> bool:
    module = _task_module(task)
    return module is not None and module.__name__ == "capcal_tasks.math.task"


def _own_scorer(task: str) -> Scorer | None:
    found = task_process_results(task)
    return None if found is None else found[0]


def _scorer(
    extract: Callable[[str], str | None],
    judge: Callable[[str | None, dict], bool],
    key: Callable[[str], Hashable],
    task: str,
) -> Scorer:
    """process_results of a rule on ``task``: the text a response repeats of the task's prompt
    (``logged_sampling_prompt``) is not read as its answer, as in the task's own checker; majority voting
    groups correct answers into one class, others by ``key``."""
    instruction = _task_module(task).INSTRUCTION

    def process_results(doc: dict, results: list) -> dict:
        def judged(answer: str | None) -> bool:
            return judge(answer, doc)

        def answer_class(answer: str | None) -> tuple | None:
            if answer is None or not key(answer):
                return None
            return ("correct",) if judged(answer) else ("answer", key(answer))

        return score_responses(
            results[0],
            extract=extract,
            judge=judged,
            answer_class=answer_class,
            prompt=logged_sampling_prompt(doc, instruction),
        )

    return process_results


def _math_verify_equal(answer: str | None, doc: dict) -> bool:
    from capcal_tasks.answers.math_equivalence import math_answers_equal

    return math_answers_equal(str(doc["gold_answer"]), answer)


def _strings_equal(answer: str | None, doc: dict) -> bool:
    return answer is not None and "".join(answer.split()) == "".join(str(doc["gold_answer"]).split())


def _whitespace_free(answer: str) -> str:
    return "".join(answer.split())


def _alias_matched(answer: str | None, doc: dict) -> bool:
    return matches_an_alias(answer, doc["gold_aliases"], doc.get("question_text", ""))


def _alias_equal(answer: str | None, doc: dict) -> bool:
    return equals_an_alias(answer, doc["gold_aliases"])


_ALIAS_SCORER = functools.partial(_scorer, extract_short_answer, _alias_matched, normalize_answer)
_EXACT_SCORER = functools.partial(_scorer, extract_short_answer, _alias_equal, normalize_answer)
_MATH_VERIFY_SCORER = functools.partial(_scorer, last_boxed, _math_verify_equal, _whitespace_free)
_MATH_STRING_SCORER = functools.partial(_scorer, last_boxed, _strings_equal, _whitespace_free)


def _math_verify_version() -> str:
    try:
        return importlib.metadata.version("math-verify")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _when(applies: Callable[[str], bool], scorer: Callable[[str], Scorer]) -> Callable[[str], Scorer | None]:
    """The scorer of each task the rule applies to, built once per task."""
    return functools.cache(lambda task: scorer(task) if applies(task) else None)


@functools.cache
def _rule_checkers() -> dict[str, RuleChecker]:
    version = f"capcal {capcal_version()}"
    return {
        "task": RuleChecker("task", version, "the task's own checker (process_results)", _own_scorer),
        "alias": RuleChecker(
            "alias", version, "alias match: equals, contains or is in an alias (TriviaQA, SimpleQA)",
            _when(_is_alias_task, _ALIAS_SCORER),
        ),
        "exact": RuleChecker(
            "exact", version, "exact alias match: the normalised answer equals an alias (TriviaQA, SimpleQA)",
            _when(_is_alias_task, _EXACT_SCORER),
        ),
        "math-verify": RuleChecker(
            "math-verify", f"{version}, math-verify {_math_verify_version()}",
            "math-verify equivalence of the last \\boxed{} with the gold (MATH, AIME, GSM8K)",
            _when(_is_boxed_task, _MATH_VERIFY_SCORER), cheap=False,
        ),
        "math-string": RuleChecker(
            "math-string", version, "the last \\boxed{} equals the gold without whitespace (MATH)",
            _when(_is_math_task, _MATH_STRING_SCORER),
        ),
    }  # fmt: skip


RULE_CHECKERS = ("task", "alias", "exact", "math-verify", "math-string")


def rule_checker(name: str) -> RuleChecker:
    """The rule-based checker ``name`` (one of ``RULE_CHECKERS``); ``ValueError`` for another name."""
    checkers = _rule_checkers()
    if name not in checkers:
        raise ValueError(f"unknown rule checker {name!r} (known: {', '.join(RULE_CHECKERS)})")
    return checkers[name]


def task_answer(task: str, doc: dict, response: str) -> str | None:
    """The answer the installed checker of ``task`` extracts from ``response``: its ``extract_answer`` on
    the response without the text it repeats of the task's prompt (``logged_sampling_prompt``); None when
    it states none, or when ``task`` is not one of capcal's sampling tasks."""
    module = _task_module(task)
    if module is None:
        return None
    return module.extract_answer(
        remove_prompt_text(response, logged_sampling_prompt(doc, module.INSTRUCTION))
    )


# ---------------------------------------------------------------- provenance of a re-scored run

TASK_LABELS = "task checker"


def parse_rescore_provenance(value: Any, where: str) -> dict | None:
    """The ``capcal_rescore`` object of a results file, checked (``checker`` and ``checker_version`` text,
    ``judge_model`` text or null, ``source_run`` an object); None when absent. ``RunFormatError`` naming
    ``where`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RunFormatError(f"{where}: 'capcal_rescore' must be a JSON object")
    for key in ("checker", "checker_version"):
        if not isinstance(value.get(key), str) or not value[key]:
            raise RunFormatError(f"{where}: capcal_rescore.{key} must be non-empty text")
    if not isinstance(value.get("judge_model"), (str, type(None))):
        raise RunFormatError(f"{where}: capcal_rescore.judge_model must be text or null")
    if not isinstance(value.get("source_run"), dict):
        raise RunFormatError(f"{where}: capcal_rescore.source_run must be a JSON object")
    return value


def describe_labels(rescore: dict | None, task: str = "", run_version: Any = None) -> str:
    """Which labels a run holds: "task checker" (its task's own; with the task version that wrote them when
    it is an earlier one, ``labels_of_an_earlier_version``), or "rescored: <checker> <version>" with
    ", judge <model>" for a model-based checker."""
    if rescore is None:
        if labels_of_an_earlier_version(task, run_version):
            return f"{TASK_LABELS} of version {run_version} (installed: {task_version(task)})"
        return TASK_LABELS
    judge = f", judge {rescore['judge_model']}" if rescore.get("judge_model") else ""
    return f"rescored: {rescore['checker']} ({rescore['checker_version']}){judge}"


def labels_of_an_earlier_version(task: str, run_version: Any) -> bool:
    """Whether a run's labels were written by an earlier version of its task's checker: the task version
    logged in its results file (``configs[task].metadata.version``) differs from the installed task's
    (``task_version``). Such labels are read as written; ``capcal rescore --checker task`` relabels them."""
    current = task_version(task)
    if current is None or run_version is None:
        return False
    try:
        return float(run_version) != current
    except (TypeError, ValueError):
        return True


def recheck_scorer(task: str, rescore: dict | None, run_version: Any = None) -> Scorer | None:
    """The scoring function a reader re-runs on a run's records: the task's own (``task_checker``) for a run
    with its task's labels (unless they are of an earlier task version, ``labels_of_an_earlier_version``),
    the recorded rule checker's for a re-scored run when it is cheap; None when there is none (a model-based
    checker such as the LLM judge, or a slow rule such as math-verify)."""
    if rescore is None:
        return None if labels_of_an_earlier_version(task, run_version) else task_checker(task)
    if rescore["checker"] not in RULE_CHECKERS:
        return None
    return rule_checker(rescore["checker"]).recheck_scorer(task)
