"""Judge-vs-rule agreement, read from a rescored run alone.

A run written by ``capcal rescore`` keeps, per response, the source run's label (``source_correctness``, the
rule-based checker's), the new label (``correctness``) and the checker's raw output (``checker_outputs``;
null for a response the judge was not asked about: no extracted answer); its results JSON's
``capcal_rescore`` names the checker and counts the verdicts that could not be read (their questions are left
out of the samples file). ``rescore_agreement`` tabulates, for one task of such a run, the confusion counts of
rule label x new label over the responses kept, Cohen's kappa between them
(``capcal_metrics.agreement``) with a 95% percentile bootstrap interval that resamples questions (a
question's k responses share verdicts, so they are not independent: ``kappa_interval``), the judge's grades
(A/B/C or Yes/No, "not sent") per rule label, and the unparseable verdicts and questions left out. Nothing
is guessed: a record whose lists disagree in length or hold a label other than 0/1 is an error naming the
file and line.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.judge.checker import JUDGE_VERSION, judge_prompt
from analysis.judge.verdicts import parse_verdict
from analysis.runs import iter_sample_records
from capcal_metrics.agreement import kappa_from_counts, pooled_kappa
from capcal_metrics.bootstrap import BootstrapCI, bootstrap_ci
from capcal_metrics.validation import UndefinedMetricWarning

__all__ = ["NOT_SENT", "UNPARSEABLE", "RescoreAgreement", "rescore_agreement"]

NOT_SENT, UNPARSEABLE = "not sent (no extracted answer)", "unparseable"


@dataclass
class RescoreAgreement:
    """Agreement of a rescored run's labels with its source run's, for one task."""

    task: str
    checker: str
    checker_version: str
    judge_model: str | None
    source: str  # the source run (path or id) as capcal_rescore records it
    confusion: np.ndarray  # [source label, new label] -> responses (2 x 2)
    question_confusions: np.ndarray | None = None  # (questions, 2, 2): each question's share of confusion
    grades: Counter = field(default_factory=Counter)  # (source label, judge grade) -> responses
    questions: int = 0
    unparseable_verdicts: int | None = None  # from capcal_rescore.counts (None: not recorded)
    questions_left_out: int | None = None
    left_out_ids: list[str] = field(default_factory=list)

    @property
    def responses(self) -> int:
        return int(self.confusion.sum())

    @property
    def kappa(self) -> float:
        """Cohen's kappa of source vs new labels (NaN when undefined: no responses, or one label only)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return kappa_from_counts(self.confusion)

    @property
    def is_judge(self) -> bool:
        return self.checker == "judge"

    def kappa_interval(self, n_resamples: int = 1000, seed: int = 0) -> BootstrapCI:
        """Kappa with its 95% percentile bootstrap interval over questions (``capcal_metrics.bootstrap_ci``
        of ``pooled_kappa``; resamples where kappa is undefined are left out). Its coverage is checked by
        simulation in tests/capcal_metrics/test_agreement.py (0.91 at 30 questions, 0.93 at 100)."""
        if self.question_confusions is None or not len(self.question_confusions):
            nan = float("nan")
            return BootstrapCI(self.kappa, nan, nan)
        counts = np.asarray(self.question_confusions).reshape(-1, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            return bootstrap_ci(pooled_kappa, counts, n_resamples=n_resamples, seed=seed)

    def kappa_text(self, n_resamples: int = 1000, seed: int = 0) -> str:
        """Kappa and its interval (``kappa_interval``), or why it is undefined."""
        kappa = self.kappa
        if math.isnan(kappa):
            return "undefined (one label only or no responses)"
        interval = self.kappa_interval(n_resamples, seed)
        if math.isnan(interval.low):
            return f"{kappa:.3f} (no interval: kappa is undefined on every resample of the questions)"
        return f"{kappa:.3f} [{interval.low:.3f}, {interval.high:.3f}] (95% bootstrap over questions)"


def _labels(record: dict, name: str, where: str) -> list[int]:
    values = record.get(name)
    if not isinstance(values, list) or any(v not in (0, 1) or isinstance(v, float) for v in values):
        raise ValueError(f"{where}: {name} must be a list of 0/1 labels, got {str(values)[:80]}")
    return [int(v) for v in values]


def _task_counts(counts: object, task: str) -> dict:
    """The verdict counts of ``task`` in ``capcal_rescore.counts`` (per task, or one dict for the run)."""
    if not isinstance(counts, dict):
        return {}
    if isinstance(counts.get(task), dict):
        return counts[task]
    return counts


def _optional_count(counts: dict, name: str) -> int | None:
    value = counts.get(name)
    if isinstance(value, list):
        return len(value)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def rescore_agreement(samples_path: str | Path, rescore: dict, task: str) -> RescoreAgreement:
    """The agreement table of ``task``'s rescored samples file ``samples_path``; ``rescore`` is its results
    file's ``capcal_rescore`` dict. Judge grades are re-read from the raw outputs with the judge's parser."""
    path = Path(samples_path)
    checker = str(rescore.get("checker", ""))
    prompt = None
    if checker == "judge":
        try:
            prompt = judge_prompt(task)
        except ValueError:
            prompt = None
    per_question: list[np.ndarray] = []
    grades: Counter = Counter()
    questions = 0
    for line, record in iter_sample_records(path):
        where = f"{path}:{line}"
        source = _labels(record, "source_correctness", where)
        new = _labels(record, "correctness", where)
        outputs = record.get("checker_outputs")
        if outputs is None:
            outputs = [None] * len(new)
        if not isinstance(outputs, list) or not len(source) == len(new) == len(outputs):
            raise ValueError(
                f"{where}: source_correctness, correctness and checker_outputs must have one entry per "
                "response"
            )
        questions += 1
        question = np.zeros((2, 2), dtype=np.int64)
        per_question.append(question)
        for rule, label, raw in zip(source, new, outputs, strict=True):
            question[rule, label] += 1
            if prompt is None:
                continue
            if raw is None:
                grades[(rule, NOT_SENT)] += 1
            else:
                grade = parse_verdict(prompt.name, str(raw)).grade
                grades[(rule, grade or UNPARSEABLE)] += 1
    counts = _task_counts(rescore.get("counts"), task)
    source_run = rescore.get("source_run")
    if isinstance(source_run, dict):
        where = source_run.get("samples_file") or source_run.get("path")
        run_id = source_run.get("run_id")
        source_run = f"run {run_id} ({where})" if run_id and where else (where or run_id or "")
    left_out = counts.get("left_out_ids") or []
    question_confusions = np.array(per_question, dtype=np.int64).reshape(-1, 2, 2)
    return RescoreAgreement(
        task=task,
        checker=checker,
        checker_version=str(rescore.get("checker_version", JUDGE_VERSION if prompt else "")),
        judge_model=rescore.get("judge_model"),
        source=str(source_run or ""),
        confusion=question_confusions.sum(axis=0),
        question_confusions=question_confusions,
        grades=grades,
        questions=questions,
        unparseable_verdicts=_optional_count(counts, "unparseable_verdicts"),
        questions_left_out=_optional_count(counts, "questions_left_out"),
        left_out_ids=[str(i) for i in left_out][:10] if isinstance(left_out, list) else [],
    )
