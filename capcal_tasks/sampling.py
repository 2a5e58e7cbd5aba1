"""Per-question outputs of a repeated-sampling task (``repeats: k``).

lm-eval clones each question k times and, by default, keeps only the first response. capcal's sampling tasks
use ``keep_all_responses`` as their filter so that ``process_results`` receives all k responses, and
``score_responses`` turns them into the per-question record that capcal logs (as metric fields, which keep
their JSON types in lm-eval's samples file):

- ``extracted_answers``: the answer extracted from each response (None where none was found),
- ``correctness``: the 0/1 correctness vector z_1..z_k,
- ``n_samples``: k,
- ``expected_accuracy``: mu_hat = (1/k) sum_i z_i, the capability target,
- ``pass_at_{m}`` for m = 1, 2, 4, ... <= k: the unbiased pass@m estimator,
- ``majority_vote_accuracy``: accuracy of the most common extracted answer, ties averaged (see below).

The same module reads the record back: ``parse_sampling_record(record, where, task)`` validates a samples
line strictly (types and ranges of every field; ``n_samples``, ``expected_accuracy``, every ``pass_at_{m}``
and ``majority_vote_accuracy`` equal to what the correctness vector and extracted answers imply; equal
extracted answers judged alike; a ``null`` response never read as text) and raises
``capcal_tasks.records.RunFormatError`` naming ``where`` (file:line) for any violation. A record of an
adaptive run (one with an ``adaptive`` object) holds the unbiased estimates instead of c/k and Chen's pass@m,
and is checked by ``capcal_tasks.adaptive_records.check_adaptive_record``.
"""

from __future__ import annotations

import functools
import importlib
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capcal_metrics.pass_at_k import pass_at_k
from capcal_tasks.adaptive_records import check_adaptive_record
from capcal_tasks.answers.prompt_echo import remove_prompt_text
from capcal_tasks.question_id import fallback_question_id
from capcal_tasks.records import RunFormatError, check_binary, check_count, check_finite

__all__ = [
    "MAX_PASS_AT_K",
    "REQUIRED_SAMPLING_KEYS",
    "extraction_rate",
    "is_sampling_config",
    "is_sampling_record",
    "keep_all_responses",
    "majority_vote_accuracy",
    "parse_sampling_record",
    "task_checker",
    "task_process_results",
    "task_version",
    "pass_at_k_levels",
    "recheck_sampling_record",
    "response_accuracy",
    "sampling_record",
    "score_responses",
]

MAX_PASS_AT_K = 1024
REQUIRED_SAMPLING_KEYS = ("doc_id", "doc", "resps", "correctness", "extracted_answers", "expected_accuracy")
TOLERANCE = 1e-9  # derived fields are recomputed in float64; JSON round-trips floats exactly
_PASS_AT = re.compile(r"^pass_at_(\d+)$")


def is_sampling_config(config: dict) -> bool:
    """Whether a task config (as loaded, or as dumped into lm-eval's results files) is a capcal sampling task:
    its YAML sets ``metadata: {capcal_task: sampling}``."""
    return (config.get("metadata") or {}).get("capcal_task") == "sampling"


def keep_all_responses(resps: list[list[str]], docs: list[dict]) -> list[list[str]]:
    """lm-eval custom filter that keeps every one of the k responses of each question."""
    return resps


def pass_at_k_levels(n_samples: int) -> list[int]:
    """The pass@k levels reported for n samples: powers of two up to n."""
    levels, level = [], 1
    while level <= min(n_samples, MAX_PASS_AT_K):
        levels.append(level)
        level *= 2
    return levels


@functools.lru_cache(maxsize=1 << 16)
def _pass_at_value(n: int, c: int, m: int) -> float:
    """``capcal_metrics.pass_at_k`` for one question (n responses, c correct, level m) as a float, cached:
    a run of k = 100 has at most 101 x 7 distinct values, computed once instead of once per record."""
    return float(pass_at_k(n, c, m))


def majority_vote_accuracy(answer_classes: Sequence[Hashable | None], correctness: Sequence[int]) -> float:
    """Accuracy of majority voting over the extracted answers of one question.

    Responses without an extracted answer (None) do not vote. When several answers tie for the most votes,
    the vote's accuracy is the fraction of the tied answers that are correct (its expectation under a uniform
    tie-break), so the number does not depend on response order. No votes at all gives 0.
    """
    votes = Counter(a for a in answer_classes if a is not None)
    if not votes:
        return 0.0
    top = max(votes.values())
    winners = {answer for answer, count in votes.items() if count == top}
    answer_is_correct = {a: bool(z) for a, z in zip(answer_classes, correctness, strict=True) if a in winners}
    return float(np.mean([answer_is_correct[a] for a in winners]))


def score_responses(
    responses: Sequence[str],
    extract: Callable[[str], str | None],
    judge: Callable[[str | None], bool],
    answer_class: Callable[[str | None], Hashable | None] = lambda answer: answer,
    prompt: str = "",
) -> dict:
    """The per-question record of a sampling task from its k responses.

    Parameters
    ----------
    responses : the k sampled responses of one question.
    extract : response -> extracted answer (None when the response states none).
    judge : extracted answer -> whether it is correct.
    answer_class : extracted answer -> the key under which equal answers are grouped for majority voting
        (for example the parsed number, so "18" and "18.0" vote together); None means "no vote".
    prompt : the prompt the responses answer; the text a response repeats of it is removed before
        extraction (``capcal_tasks.answers.prompt_echo.remove_prompt_text``), so an echo is never an answer.
    """
    if isinstance(responses, str) or len(responses) == 0:
        raise ValueError(
            "score_responses: expected a non-empty list of responses (is the keep-all filter set?)"
        )
    extracted = [extract(remove_prompt_text(response, prompt)) for response in responses]
    correctness = [int(bool(judge(answer))) for answer in extracted]
    return sampling_record(extracted, correctness, [answer_class(a) for a in extracted])


def sampling_record(
    extracted: list[Any], correctness: list[int], answer_classes: list[Any] | None
) -> dict[str, Any]:
    """One question's sampling record from its k extracted answers and their 0/1 correctness:
    ``extracted_answers``, ``correctness``, ``n_samples`` = k, ``expected_accuracy`` = c / k (mu_hat),
    ``pass_at_<m>`` for the levels of ``pass_at_k_levels(k)`` (the unbiased 1 - C(k - c, m) / C(k, m)), and
    ``majority_vote_accuracy`` over ``answer_classes`` (one class per answer, None for no vote), left out when
    ``answer_classes`` is None (a task without answer classes: ``capcal_tasks.sampled_task``)."""
    n, c = len(correctness), sum(correctness)
    record: dict[str, Any] = {
        "extracted_answers": extracted,
        "correctness": correctness,
        "n_samples": n,
        "expected_accuracy": c / n,
    }
    for level in pass_at_k_levels(n):
        record[f"pass_at_{level}"] = _pass_at_value(n, c, level)
    if answer_classes is not None:
        record["majority_vote_accuracy"] = majority_vote_accuracy(answer_classes, correctness)
    return record


def response_accuracy(correctness_vectors: list[list[int]]) -> float:
    """Aggregation of ``correctness``: the accuracy over all sampled responses of all questions."""
    flat = [z for vector in correctness_vectors for z in vector]
    return float(np.mean(flat)) if flat else float("nan")


def extraction_rate(extracted_answers: list[list[str | None]]) -> float:
    """Aggregation of ``extracted_answers``: the share of responses from which an answer was extracted."""
    flat = [a for answers in extracted_answers for a in answers]
    return float(np.mean([a is not None for a in flat])) if flat else float("nan")


def is_sampling_record(record: dict) -> bool:
    """Whether a samples line is a capcal sampling record (it carries a ``correctness`` vector)."""
    return "correctness" in record


def _responses(record: dict, where: str, allow_null: bool) -> list[str | None]:
    resps = record["resps"]
    if not (isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list)):
        raise RunFormatError(f"{where}: 'resps' must hold one list of k responses")
    responses = resps[0]
    for index, response in enumerate(responses, start=1):
        if response is None:
            if not allow_null:
                raise RunFormatError(
                    f"{where}: response {index} is null (a missing response, never read as text); "
                    "the run is incomplete: re-run it or check it with capcal check"
                )
        elif not isinstance(response, str):
            raise RunFormatError(f"{where}: response {index} must be text, got {type(response).__name__}")
    return list(responses)


def _check_majority_vote(value: Any, extracted: list, correctness: list[int], where: str) -> float:
    """``majority_vote_accuracy`` checked against the record.

    Equal to the vote over the extracted answers when the task groups answers by their text. A task may
    group several texts into one class ("18" and "18.0"), or give an unparsable answer no vote; a class
    holds answers judged alike, and a correct answer always votes. So any value must satisfy what every
    such grouping allows: 0 only when there is no correct answer or the incorrect answers together
    outnumber the largest group of equal correct answers; 1 only with a correct answer; a value in between
    only when the incorrect answers together are at least as many as that group (a tie at the top), as a
    fraction j/w of at most as many tied classes as there are distinct answers.
    """
    value = check_finite(value, where, "majority_vote_accuracy")
    if not 0.0 <= value <= 1.0:
        raise RunFormatError(f"{where}: majority_vote_accuracy = {value!r} is not in [0, 1]")
    by_text = majority_vote_accuracy(extracted, correctness)
    if math.isclose(value, by_text, abs_tol=TOLERANCE):
        return value
    correct_groups = Counter(a for a, z in zip(extracted, correctness, strict=True) if a is not None and z)
    incorrect = sum(1 for a, z in zip(extracted, correctness, strict=True) if a is not None and not z)
    distinct = len({a for a in extracted if a is not None})
    if value == 0.0:
        possible = not correct_groups or incorrect > max(correct_groups.values())
    elif value == 1.0:
        possible = bool(correct_groups)
    else:
        possible = (
            bool(correct_groups)
            and incorrect >= max(correct_groups.values())
            and any(math.isclose(value * w, round(value * w), abs_tol=1e-6) for w in range(2, distinct + 1))
        )
    if not possible:
        raise RunFormatError(
            f"{where}: majority_vote_accuracy {value!r} is not what the extracted answers and correctness "
            f"imply ({by_text!r})"
        )
    return value


def parse_sampling_record(record: dict, where: str, task: str, *, allow_null_responses: bool = False) -> dict:
    """The validated fields of one capcal sampling record (a samples line with ``correctness``).

    Returns ``doc_id``, ``doc``, ``question_id``, ``responses`` (None only for a null response, and only with
    ``allow_null_responses``), ``null_responses``, ``extracted_answers``, ``correctness``, ``n``,
    ``expected_accuracy``, ``majority_vote_accuracy`` (None when not logged), ``pass_at`` ({m: value}),
    ``source_correctness`` (a re-scored record's source labels, checked as 0/1 of length k; None otherwise)
    and ``adaptive`` (an adaptive run's ``adaptive`` object, ``capcal_tasks.adaptive_records``; None
    otherwise: there ``expected_accuracy`` and ``pass_at`` hold the unbiased estimates after stopping).
    Raises ``RunFormatError`` naming ``where`` for a missing key, a wrong type or range, lengths that differ,
    a derived field that differs from its recomputation (n_samples = k, expected_accuracy = c/k,
    pass_at_m = 1 - C(k-c, m)/C(k, m), majority vote), or equal extracted answers judged differently.
    """
    missing = [key for key in REQUIRED_SAMPLING_KEYS if key not in record]
    if missing:
        raise RunFormatError(f"{where}: missing key(s) {', '.join(missing)}")
    doc_id = check_count(record["doc_id"], where, "'doc_id'")
    doc, identifier = _doc_and_question_id(record, doc_id, task, where)
    responses = _responses(record, where, allow_null_responses)
    correctness = _correctness(record["correctness"], where)
    extracted = _extracted_answers(record["extracted_answers"], where)
    n = len(correctness)
    if n == 0 or n != len(responses) or n != len(extracted):
        raise RunFormatError(
            f"{where}: {len(responses)} responses, {n} correctness values and {len(extracted)} extracted "
            "answers; they must be equal and non-zero"
        )
    _check_judged_alike(extracted, correctness, where)
    adaptive = None
    if "adaptive" in record:  # an adaptive run's record (capcal_tasks.adaptive_records)
        adaptive = check_adaptive_record(record, correctness, where)
        _check_count_field(record, n, where)
        expected_accuracy = float(record["expected_accuracy"])
        pass_at = {int(key[len("pass_at_") :]): float(record[key]) for key in record if _PASS_AT.match(key)}
    else:
        expected_accuracy = _check_mean(record, correctness, where)
        pass_at = _pass_at_fields(record, correctness, where)
    if "exact_alias_correctness" in record:
        _check_exact_alias(record, correctness, where)
    majority = record.get("majority_vote_accuracy")
    if "majority_vote_accuracy" in record:
        majority = _check_majority_vote(majority, extracted, correctness, where)
    source_correctness = None
    if (
        "source_correctness" in record
    ):  # a re-scored record (analysis.evaluation.rescore): the source run's labels
        source_correctness = _correctness(record["source_correctness"], where, "source_correctness")
        if len(source_correctness) != n:
            raise RunFormatError(f"{where}: source_correctness has {len(source_correctness)} values, not {n}")
    return {
        "doc_id": doc_id,
        "doc": doc,
        "question_id": identifier,
        "responses": responses,
        "null_responses": sum(response is None for response in responses),
        "extracted_answers": extracted,
        "correctness": correctness,
        "n": n,
        "expected_accuracy": expected_accuracy,
        "majority_vote_accuracy": majority,
        "pass_at": dict(sorted(pass_at.items())),
        "source_correctness": source_correctness,
        "adaptive": adaptive,
    }


def _doc_and_question_id(record: dict, doc_id: int, task: str, where: str) -> tuple[dict, str]:
    """The logged doc and its question id: the doc's ``question_id``, else one derived from the task and the
    record's ``doc_hash`` (or its doc_id) by ``fallback_question_id``."""
    doc = record["doc"]
    if not isinstance(doc, dict):
        raise RunFormatError(f"{where}: 'doc' must be a JSON object, got {type(doc).__name__}")
    identifier = doc.get("question_id")
    if identifier is not None and (not isinstance(identifier, str) or not identifier):
        raise RunFormatError(f"{where}: doc question_id must be non-empty text, got {identifier!r}")
    if identifier is None:
        doc_hash = record.get("doc_hash")
        identifier = fallback_question_id(
            task, doc_hash if isinstance(doc_hash, str) and doc_hash else str(doc_id)
        )
    return doc, identifier


def _correctness(value: Any, where: str, name: str = "correctness") -> list[int]:
    """The ``correctness`` field (or another 0/1 vector ``name``): a list of 0/1 integers."""
    if not isinstance(value, list):
        raise RunFormatError(f"{where}: '{name}' must be a list of 0/1 integers")
    if all(type(z) is int and 0 <= z <= 1 for z in value):  # the common case, without a call per entry
        return list(value)
    return [check_binary(z, where, f"'{name}' entries (a list of 0/1 integers)") for z in value]


def _extracted_answers(value: Any, where: str) -> list[str | None]:
    """The ``extracted_answers`` field: a list of texts or nulls (no answer found)."""
    if not isinstance(value, list):
        raise RunFormatError(f"{where}: 'extracted_answers' must be a list")
    for index, answer in enumerate(value, start=1):
        if answer is not None and not isinstance(answer, str):
            raise RunFormatError(
                f"{where}: extracted answer {index} must be text or null, got {type(answer).__name__}"
            )
    return value


def _check_judged_alike(extracted: list[str | None], correctness: list[int], where: str) -> None:
    """A response without an extracted answer is incorrect, and equal extracted answers are judged alike."""
    judged: dict[str, int] = {}
    for index, (answer, z) in enumerate(zip(extracted, correctness, strict=True), start=1):
        if answer is None and z:
            raise RunFormatError(f"{where}: response {index} has no extracted answer but is marked correct")
        if answer is not None and judged.setdefault(answer, z) != z:
            raise RunFormatError(
                f"{where}: the extracted answer {answer!r} is judged both correct and incorrect "
                f"(response {index}); the correctness vector contradicts the extracted answers"
            )


def _check_count_field(record: dict, n: int, where: str) -> None:
    """``n_samples`` (when logged) = the n responses logged."""
    if "n_samples" in record and check_count(record["n_samples"], where, "n_samples", 1) != n:
        raise RunFormatError(f"{where}: n_samples {record['n_samples']} is not the {n} responses logged")


def _check_mean(record: dict, correctness: list[int], where: str) -> float:
    """``n_samples`` (when logged) = k and ``expected_accuracy`` = c/k of the correctness vector; returns the
    latter as a float."""
    n, c = len(correctness), sum(correctness)
    _check_count_field(record, n, where)
    expected_accuracy = record["expected_accuracy"]
    if (
        isinstance(expected_accuracy, bool)
        or not isinstance(expected_accuracy, (int, float))
        or not math.isclose(expected_accuracy, c / n, abs_tol=TOLERANCE)
    ):
        raise RunFormatError(
            f"{where}: expected_accuracy {expected_accuracy!r} is not the mean of its correctness vector "
            f"({c}/{n})"
        )
    return float(expected_accuracy)


def _pass_at_fields(record: dict, correctness: list[int], where: str) -> dict[int, float]:
    """{m: value} of every ``pass_at_{m}`` field, each checked against the unbiased estimator
    1 - C(k-c, m)/C(k, m) of the correctness vector (1 <= m <= k)."""
    n, c = len(correctness), sum(correctness)
    pass_at: dict[int, float] = {}
    for key, value in record.items():
        if not key.startswith("pass_at_"):
            continue
        match = _PASS_AT.match(key)
        if not match or not 1 <= int(match.group(1)) <= n:
            raise RunFormatError(f"{where}: {key} is not a pass@m level for k = {n} samples (1 <= m <= k)")
        m = int(match.group(1))
        value = check_finite(value, where, key)
        implied = _pass_at_value(n, c, m)
        if not math.isclose(value, implied, abs_tol=TOLERANCE):
            raise RunFormatError(
                f"{where}: {key} = {value!r}, but the correctness vector ({c} of {n} correct) implies "
                f"{implied!r}"
            )
        pass_at[m] = value
    return pass_at


def _check_exact_alias(record: dict, correctness: list[int], where: str) -> None:
    """``exact_alias_correctness`` (0/1 per response, an exact match implies correct) and its mean
    ``exact_alias_expected_accuracy``."""
    n = len(correctness)
    exact = record["exact_alias_correctness"]
    if not isinstance(exact, list) or len(exact) != n:
        raise RunFormatError(f"{where}: exact_alias_correctness must be a list of {n} 0/1 values")
    exact = [check_binary(z, where, "exact_alias_correctness entries") for z in exact]
    if any(e > z for e, z in zip(exact, correctness, strict=True)):
        raise RunFormatError(f"{where}: an exact alias match is not marked correct in 'correctness'")
    mean = record.get("exact_alias_expected_accuracy")
    if mean is None or not math.isclose(
        check_finite(mean, where, "exact_alias_expected_accuracy"), sum(exact) / n, abs_tol=TOLERANCE
    ):
        raise RunFormatError(
            f"{where}: exact_alias_expected_accuracy {mean!r} is not the mean of exact_alias_correctness"
        )


_TASK_LINE = re.compile(r"^task:\s*(\S+)\s*$", re.MULTILINE)
_PROCESS_RESULTS_LINE = re.compile(
    r"^process_results:\s*!function\s+(capcal_tasks\.[\w.]+)\s*$", re.MULTILINE
)
_VERSION_LINE = re.compile(r"^\s+version:\s*([0-9.]+)", re.MULTILINE)


@functools.cache
def _sampling_yamls() -> dict[str, str]:
    """task name -> the text of its YAML, for capcal's own sampling tasks that name a ``process_results``."""
    found = {}
    for path in sorted(Path(__file__).resolve().parent.glob("*/*.yaml")):
        text = path.read_text(encoding="utf-8")
        task = _TASK_LINE.search(text)
        if task and _PROCESS_RESULTS_LINE.search(text) and "capcal_task: sampling" in text:
            found[task.group(1)] = text
    return found


@functools.cache
def _checkers() -> dict[str, str]:
    """task name -> dotted path of its ``process_results``, for capcal's own sampling task YAMLs."""
    return {task: _PROCESS_RESULTS_LINE.search(text).group(1) for task, text in _sampling_yamls().items()}


def task_version(task: str) -> float | None:
    """The ``metadata: version`` of capcal's sampling task ``task`` (None for another task). It changes
    whenever the task's checker labels some response differently, so that a run's results file (where
    lm-eval copies the task config) says which checker wrote its labels."""
    text = _sampling_yamls().get(task)
    found = None if text is None else _VERSION_LINE.search(text)
    return None if found is None else float(found.group(1))


def task_process_results(task: str) -> tuple[Callable[[dict, list], dict], Any] | None:
    """(``process_results``, its module) of capcal's sampling task ``task``, or None for another task."""
    dotted = _checkers().get(task)
    if dotted is None:
        return None
    module_name, _, name = dotted.rpartition(".")
    module = importlib.import_module(module_name)
    return getattr(module, name), module


def task_checker(task: str) -> Callable[[dict, list], dict] | None:
    """The ``process_results`` of capcal's sampling task ``task`` (which re-extracts the answers and re-judges
    them against the gold in the logged doc), or None for another task or a checker whose module declares
    ``EXPENSIVE_CHECKER = True`` (too slow to re-run on every read)."""
    found = task_process_results(task)
    if found is None or getattr(found[1], "EXPENSIVE_CHECKER", False):
        return None
    return found[0]


def recheck_sampling_record(fields: dict, checker: Callable[[dict, list], dict], where: str) -> None:
    """Re-run the task's own checker on a parsed record's doc and responses; ``RunFormatError`` naming
    ``where`` when its extracted answers or correctness differ from the logged ones."""
    try:
        again = checker(fields["doc"], [fields["responses"]])
    except Exception as error:  # noqa: BLE001 - any failure on logged data is a format error of that line
        raise RunFormatError(
            f"{where}: the task's checker cannot re-score this record ({type(error).__name__}: {error})"
        ) from None
    for index, (logged, answer) in enumerate(
        zip(fields["extracted_answers"], again["extracted_answers"], strict=True), start=1
    ):
        if logged != answer:
            raise RunFormatError(
                f"{where}: extracted answer {index} is {logged!r}, the task's extractor gives {answer!r}"
            )
    for index, (logged, z) in enumerate(
        zip(fields["correctness"], again["correctness"], strict=True), start=1
    ):
        if logged != z:
            raise RunFormatError(
                f"{where}: response {index} is logged with correctness {logged}, the task's checker gives "
                f"{z} against the gold in the logged doc"
            )
