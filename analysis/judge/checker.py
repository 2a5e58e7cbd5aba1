"""``JudgeChecker``: the LLM judge of the paper "On Calibration of LLMs: From Response To Capability" as a
checker for ``capcal rescore`` (the ``capcal_tasks.checkers.Checker`` protocol).

For each logged response of a TriviaQA, SimpleQA or MATH task (the task's declared ``capcal_dataset``), the
judge is asked about the response's **extracted** answer, with the question and the gold answer, in the
prompt of ``analysis.judge.prompts``. A cascade: the rules decide what they can, the judge only the rest.

1. The answer is extracted again by the installed task checker (``capcal_tasks.checkers.task_answer``: the
   text the response repeats of its prompt removed first), not taken from the source run, whose extractor
   may have read an echoed question as the answer.
2. A response without an answer is incorrect and not sent (as in the paper).
3. A non-answer (``is_non_answer``: a verdict word such as "True", "correct.", "yes", or a refusal such as
   "I don't know") that is not the gold answer itself is incorrect and not sent: the judge graded such
   answers CORRECT (capcal's rule; the paper sends them).

The verdict is read by ``analysis.judge.verdicts``: A (or Yes) is correct, B, C (or No) incorrect, anything
else unparseable (``correct`` None, never guessed). The raw output is kept in ``Verdict.raw``. Requests go
through ``analysis.judge.client.JudgeClient`` (concurrency, retries, on-disk cache, resume, no secret in any
output).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from analysis.judge.client import JudgeClient, JudgeRequest
from analysis.judge.prompts import DATASET_PROMPTS, JudgePrompt, prompt_for_dataset
from analysis.judge.verdicts import PARSER_VERSION, parse_verdict
from capcal_tasks.answers.aliases import normalize_answer
from capcal_tasks.checkers import CheckItem, Verdict, task_answer

__all__ = ["JUDGE_VERSION", "NON_ANSWERS", "JudgeChecker", "is_non_answer", "judge_prompt", "task_dataset"]

JUDGE_VERSION = f"simple-evals prompts, verdict parser {PARSER_VERSION}, non-answers refused by rule"

# Normalised (capcal_tasks.answers.aliases.normalize_answer) answers that state no answer: verdict words and
# refusals.
NON_ANSWERS = frozenset(
    {
        "true", "false", "correct", "incorrect", "right", "wrong", "yes", "no", "maybe", "none", "nothing",
        "unknown", "not sure", "n", "na", "x", "answer", "final answer", "correct answer", "i dont know",
        "i do not know", "dont know", "i cannot answer", "i cant answer", "cannot answer", "no answer",
        "not attempted", "a", "b", "c",
    }
)  # fmt: skip


def is_non_answer(answer: str, gold: str) -> bool:
    """Whether ``answer`` states no answer (its normalised text is one of ``NON_ANSWERS``, or empty) while
    the gold answer is something else."""
    normalized = normalize_answer(answer)
    return (not normalized or normalized in NON_ANSWERS) and normalized != normalize_answer(gold)


@functools.cache
def _declarations() -> dict:
    from capcal_tasks.relations import capcal_task_declarations

    return capcal_task_declarations()


def task_dataset(task: str) -> str | None:
    """The ``capcal_dataset`` a capcal task declares (None for an unknown task)."""
    declaration = _declarations().get(task)
    return None if declaration is None else declaration.dataset


def judge_prompt(task: str) -> JudgePrompt:
    """The judge prompt of ``task`` (``ValueError`` for a task the paper does not judge)."""
    return prompt_for_dataset(task_dataset(task), task)


class JudgeChecker:
    """The LLM judge through an OpenAI-compatible server at ``base_url``. ``model`` is the served model's
    name (by default the one model the server lists); the other options are
    ``analysis.judge.client.JudgeClient``'s: ``api_key_env`` (the environment variable holding the key),
    ``num_concurrent``, ``cache_path``, ``max_retries``, ``timeout``, ``temperature``, ``top_p``,
    ``max_tokens``, ``seed``, ...; ``progress`` shows a progress bar."""

    name = "judge"
    version = JUDGE_VERSION

    def __init__(
        self, base_url: str, model: str | None = None, *, progress: bool = False, **client_options: Any
    ) -> None:
        self.client = JudgeClient(base_url, model, **client_options)
        self.progress = progress
        self.counts: Counter = Counter()  # responses: judged, not_sent (no answer), refused, unparseable

    @property
    def judge_model(self) -> str:
        """The judge's model name as the server serves it."""
        return self.client.model

    def supports(self, task: str) -> bool:
        """Whether the paper judges ``task``'s dataset (TriviaQA, SimpleQA, MATH)."""
        return task_dataset(task) in DATASET_PROMPTS

    def check(self, items: Sequence[CheckItem]) -> list[Verdict]:
        """One verdict per item, in order: the judged correctness with the raw output, or incorrect without
        a request when the item has no answer or a non-answer (the cascade of the module docstring)."""
        prompts, asked, answers = [], [], []
        verdicts = [Verdict(0, None, None)] * len(items)
        for position, item in enumerate(items):
            answer = task_answer(item.task, item.doc, item.response)
            answers.append(answer)
            if answer is None or not answer.strip():
                self.counts["not_sent"] += 1
                continue
            question = item.question or item.doc.get("question_text")
            if not question or item.gold is None:
                raise ValueError(
                    f"{item.task} {item.question_id}: the judge needs the question text and the gold answer "
                    "(question_text and gold_answer in the logged doc)"
                )
            if is_non_answer(answer, str(item.gold)):
                self.counts["refused"] += 1
                verdicts[position] = Verdict(0, None, answer)
                continue
            prompt = judge_prompt(item.task)
            prompts.append(JudgeRequest(prompt, str(question), str(item.gold), answer))
            asked.append((position, prompt))
        outputs = self.client.ask(prompts, progress=self.progress) if prompts else []
        for (position, prompt), raw in zip(asked, outputs, strict=True):
            parsed = parse_verdict(prompt.name, raw)
            verdicts[position] = Verdict(parsed.correct, raw, answers[position])
            self.counts["judged"] += 1
            self.counts["unparseable"] += parsed.correct is None
        return verdicts
