"""The calibration columns' arithmetic on synthetic per-question data, against capcal_metrics and lm-eval's
own ``mean`` / ``mean_stderr`` (the aggregation the columns go through in lm-eval)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from lm_eval.api.metrics import mean, mean_stderr

from analysis.estimators.consistency import encode_answer_classes, leakage_free_consistency
from capcal_metrics import (
    brier_score,
    brier_skill_score,
    corrected_brier_skill_score,
    corrected_capability_brier_score,
    debiased_expected_calibration_error,
    expected_calibration_error,
    soft_label_auroc,
)
from capcal_tasks import tasks_dir
from capcal_tasks.calibration_columns import (
    COLUMNS,
    CONSISTENCY_SEED,
    STATISTICS,
    STDERR_DOES_NOT_COVER,
    QuestionData,
    calibration_columns,
    value_without_standard_error,
)

K = 8
GROUPS = ("capcal_calibration", "capcal_calibration_open")


def _questions(n_questions: int = 40, seed: int = 3, verbalized_failures: int = 5) -> list[QuestionData]:
    """Questions with a spread of capability; answers "right" / "wrong-j" / None consistent with z."""
    rng = np.random.default_rng(seed)
    questions = []
    for i in range(n_questions):
        mu = rng.uniform()
        z = (rng.uniform(size=K) < mu).astype(int).tolist()
        answers = [
            "right" if zj else (None if rng.uniform() < 0.2 else f"wrong-{rng.integers(3)}") for zj in z
        ]
        p_true = float(np.clip(mu + rng.normal(0, 0.2), 0, 1))
        verbalized = None if i < verbalized_failures else float(rng.choice([0.1, 0.5, 0.8, 1.0]))
        questions.append(QuestionData(z, answers, p_true, verbalized))
    return questions


def _column(rows: list[dict], name: str) -> list[float]:
    return [row[name] for row in rows if name in row]


def _skill(c, target, m, corrected: bool) -> float:
    """Brier skill over the constant at the base rate, written out independently of capcal_metrics."""
    c, target = np.asarray(c, dtype=float), np.asarray(target, dtype=float)
    noise = target * (1 - target) / (np.asarray(m, dtype=float) - 1) if corrected else np.zeros_like(target)
    brier = np.mean((c - target) ** 2 - noise)
    reference = np.mean((target - target.mean()) ** 2) - (1 - 1 / target.size) * np.mean(noise)
    return float(1 - brier / reference)


def _jackknife_se(statistic, *arrays) -> float:
    """The textbook jackknife standard error, computed independently of the module."""
    n = len(arrays[0])
    values = np.array([statistic(*(np.delete(a, i) for a in arrays)) for i in range(n)])
    return math.sqrt((n - 1) / n * np.sum((values - values.mean()) ** 2))


def test_columns_match_capcal_metrics_and_lm_eval_aggregation():
    questions = _questions()
    table = calibration_columns(questions)
    rows = table.rows
    mu = np.array([np.mean(q.correctness) for q in questions])
    n = np.full(len(questions), K)
    p = np.array([q.p_true for q in questions])
    parsed = np.array([q.verbalized is not None for q in questions])
    v = np.array([q.verbalized for q in questions if q.verbalized is not None])

    assert mean(_column(rows, "expected_accuracy")) == pytest.approx(mu.mean())
    assert (table.samples_per_question, table.ptrue_requested, table.undefined) == (K, True, {})
    assert mean(_column(rows, "verbalized_parse_failure_rate")) == pytest.approx(5 / 40)

    expected = {
        "brier": lambda c, t, m: brier_score(c, t),
        "corrected_brier": corrected_capability_brier_score,
        "ece": lambda c, t, m: expected_calibration_error(c, t),
        "ece_debiased": lambda c, t, m: debiased_expected_calibration_error(c, t),
        "auroc": lambda c, t, m: soft_label_auroc(c, t),
        "brier_skill": lambda c, t, m: _skill(c, t, m, corrected=False),
        "corrected_brier_skill": lambda c, t, m: _skill(c, t, m, corrected=True),
    }
    assert set(expected) == set(STATISTICS)
    for name, statistic in expected.items():
        for source, c, t, m in (("ptrue", p, mu, n), ("verbalized", v, mu[parsed], n[parsed])):
            items = _column(rows, f"{source}_{name}")
            assert len(items) == len(c)
            assert mean(items) == pytest.approx(statistic(c, t, m), abs=1e-12), (source, name)
            assert mean_stderr(items) == pytest.approx(_jackknife_se(statistic, c, t, m), rel=1e-9)
    # a mean statistic's items are its per-question terms, so its standard error is the usual one
    assert _column(rows, "ptrue_brier") == pytest.approx(list((p - mu) ** 2), abs=1e-12)
    # and every column of COLUMNS is in the table (bookkeeping such as k is not a column)
    assert set().union(*rows) == {column.name for column in COLUMNS}
    assert not {"n_samples", "ptrue_available"} & {column.name for column in COLUMNS}
    # the binned ECE columns, whose standard errors do not cover, are named as such in the results JSON
    assert set(STDERR_DOES_NOT_COVER) == {
        f"{source}_ece" for source in ("ptrue", "verbalized", "consistency")
    }


def test_consistency_is_the_leakage_free_estimator():
    questions = _questions()
    rows = calibration_columns(questions).rows
    free = leakage_free_consistency(
        encode_answer_classes([q.extracted_answers for q in questions]),
        [q.correctness for q in questions],
        K // 2,
        pool_size=K // 2,
        seed=CONSISTENCY_SEED,
    )
    assert np.all(free.n_target == K - K // 2)
    assert mean(_column(rows, "consistency_brier")) == pytest.approx(
        brier_score(free.confidence, free.mu_hat)
    )
    assert mean(_column(rows, "consistency_corrected_brier")) == pytest.approx(
        corrected_capability_brier_score(free.confidence, free.mu_hat, free.n_target)
    )
    assert mean(_column(rows, "consistency_auroc")) == pytest.approx(
        soft_label_auroc(free.confidence, free.mu_hat)
    )


def test_undefined_columns_are_nan_with_their_reason(caplog):
    questions = [QuestionData(q.correctness, q.extracted_answers, None, None) for q in _questions(10)]
    table = calibration_columns(questions, task="toy")
    nan_columns = {f"{source}_{name}" for source in ("ptrue", "verbalized") for name in STATISTICS}
    assert set(table.undefined) == nan_columns and table.ptrue_requested is False
    for row in table.rows:  # every column in every row: a group mean over tasks cannot skip this task
        assert set(row) == {column.name for column in COLUMNS}
        assert all(math.isnan(row[name]) for name in nan_columns)
        assert math.isfinite(row["consistency_brier"])
    assert "not requested" in table.undefined["ptrue_auroc"]
    assert "at least 2 questions" in table.undefined["verbalized_ece"]
    assert math.isnan(mean(_column(table.rows, "ptrue_ece")))  # lm-eval's mean of the items: NaN
    assert mean(_column(table.rows, "verbalized_parse_failure_rate")) == 1.0
    assert "toy: verbalized_ece is NaN: needs at least 2 questions" in caplog.text
    short = [QuestionData(q.correctness[:3], q.extracted_answers[:3], 0.5, 0.5) for q in _questions(10)]
    short_table = calibration_columns(short)
    assert "k >= 4" in short_table.undefined["consistency_auroc"]
    assert all(math.isnan(row["consistency_brier"]) for row in short_table.rows)
    # every target equal (a model that never solves a question): AUROC and both skills have nothing to
    # measure; they are left out of the row (so a group mean skips this task), never NaN
    zeros = [QuestionData([0] * K, ["w"] * K, 0.1 * (i % 9), None) for i in range(10)]
    degenerate = calibration_columns(zeros)
    measured_nothing = {
        f"{source}_{name}" for source in ("ptrue", "consistency") for name in ("auroc", "brier_skill")
    } | {"ptrue_corrected_brier_skill", "consistency_corrected_brier_skill"}
    assert set(degenerate.left_out) == measured_nothing
    assert not measured_nothing & set(degenerate.undefined)
    assert "no question of the 10 is solved" in degenerate.left_out["ptrue_auroc"]
    assert "mu_hat = 0" in degenerate.left_out["ptrue_corrected_brier_skill"]
    for row in degenerate.rows:
        assert not measured_nothing & set(row)
        assert math.isfinite(row["ptrue_brier"]) and math.isfinite(row["ptrue_ece_debiased"])
    with pytest.raises(ValueError, match="same k >= 2"):
        calibration_columns([QuestionData([1], ["a"], 0.5, 0.5)] * 3)
    with pytest.raises(ValueError, match="some questions only"):
        calibration_columns([QuestionData([1, 0], ["a", "b"], p, 0.5) for p in (0.5, None)])


def test_group_and_templates_agree_with_the_columns():
    root = Path(tasks_dir())
    groups = {name: yaml.safe_load((root / f"{name}.yaml").read_text()) for name in GROUPS}
    for name, group in groups.items():
        assert group["group"] == name
        assert [entry["metric"] for entry in group["aggregate_metric_list"]] == [c.name for c in COLUMNS]
        assert all(entry["weight_by_size"] is False for entry in group["aggregate_metric_list"])
        assert all(next(Path(root).rglob(f"{task}.yaml"), None) for task in group["task"]), name
        assert str(group["metadata"]["version"]) == "3.0"
    assert len(groups["capcal_calibration"]["task"]) == 8
    # the open group: every task but the gated one (GPQA)
    assert groups["capcal_calibration_open"]["task"] == [
        task for task in groups["capcal_calibration"]["task"] if task != "capcal_gpqa_calibration"
    ]
    # version 3.0 of every calibration task (2.0 kept degenerate columns as NaN; 1.0's skill had another
    # reference): results of different versions must never be averaged
    for task in groups["capcal_calibration"]["task"]:
        (path,) = Path(root).rglob(f"{task}.yaml")
        assert str(yaml.safe_load(path.read_text())["metadata"]["version"]) == "3.0", task

    def template(name: str) -> dict:
        text = (root / name).read_text().replace("!function", "")
        return yaml.safe_load(text)

    verbalized = template("_verbalized_template_yaml")["generation_kwargs"]
    assert template("_calibration_template_yaml")["verbalized_generation_kwargs"] == verbalized


def test_a_failing_jackknife_keeps_the_value_and_drops_only_the_standard_error():
    # question 0 is the only one solved at all: without it every mu_hat is 0, so the skill and AUROC are
    # undefined on that leave-one-out subset, while on all 6 questions they exist (the MMLU case:
    # -53.04 computed, NaN reported)
    correctness = [[1, 1, 0, 0]] + [[0, 0, 0, 0]] * 5
    questions = [
        QuestionData(z, [str(j) for j in range(4)], p, None)
        for z, p in zip(correctness, [0.9, 0.2, 0.3, 0.1, 0.6, 0.4], strict=True)
    ]
    table = calibration_columns(questions, task="toy")
    p_true = np.array([q.p_true for q in questions])
    mu_hat = np.array([np.mean(z) for z in correctness])
    for column, expected in (
        ("ptrue_auroc", soft_label_auroc(p_true, mu_hat)),
        ("ptrue_brier_skill", brier_skill_score(p_true, mu_hat)),
        ("ptrue_corrected_brier_skill", corrected_brier_skill_score(p_true, mu_hat, 4)),
    ):
        assert math.isfinite(expected)
        assert column in table.stderr_undefined and column not in table.undefined, column
        assert (
            "without 1 of the 6 (without question 0: no question of the 5" in table.stderr_undefined[column]
            or "without 1 of the 6 (without question 0: every one of the 5" in table.stderr_undefined[column]
        )
        items = _column(table.rows, column)
        assert mean(items) == pytest.approx(expected)  # the value, not NaN
        assert len(set(items)) == 1  # every item is the value: no made-up spread
    assert "ptrue_brier" not in table.stderr_undefined and math.isfinite(
        mean(_column(table.rows, "ptrue_brier"))
    )


def test_value_without_standard_error_has_no_standard_error_in_lm_eval():
    from lm_eval.api.metrics import mean as lm_eval_mean
    from lm_eval.api.metrics import stderr_for_metric

    items = [0.25, 0.25, 0.25]
    assert value_without_standard_error(items) == lm_eval_mean(items)
    assert stderr_for_metric(value_without_standard_error, bootstrap_iters=100000) is None
    assert stderr_for_metric(lm_eval_mean, bootstrap_iters=100000) is not None


def _log_lines(caplog) -> list[str]:
    return [
        record.getMessage() for record in caplog.records if record.name == "capcal_tasks.calibration_columns"
    ]


def test_two_questions_are_enough_and_the_failing_jackknife_names_its_first_subset(caplog):
    """Two questions are the fewest a statistic is computed on (not skipped as if too few); without either
    one the AUROC and the skills are undefined, and the reason names the first such subset only (every one
    solved, in its exact words), logged under the task's name for every source."""
    questions = [
        QuestionData([0] * 4, ["a", "b", "c", "d"], 0.2, 0.3),
        QuestionData([1] * 4, ["a"] * 4, 0.7, 0.9),
    ]
    table = calibration_columns(questions, task="toy")
    assert table.left_out == {} and table.undefined == {}
    skill = (
        "every one of the 1 questions has mu_hat = 1: the base rate explains everything (no variance for a "
        "skill to explain)"
    )
    reasons = {
        "auroc": "every question of the 1 is solved (every mu_hat is 1): nothing to discriminate",
        "brier_skill": skill,
        "corrected_brier_skill": skill,
    }
    expected = {
        f"{source}_{name}": (
            "the jackknife needs the statistic without each question, and it is undefined without 2 of the 2 "
            f"(without question 0: {reason}); the value is kept, its standard error is N/A"
        )
        for source in ("ptrue", "verbalized", "consistency")
        for name, reason in reasons.items()
    }
    assert table.stderr_undefined == dict(sorted(expected.items()))
    assert _log_lines(caplog) == [
        f"toy: {column} has no standard error: {reason}" for column, reason in expected.items()
    ]
    # the value itself is kept: BSS = 1 - mean (c - mu)^2 / mean (mu - mean mu)^2 on the two questions
    assert _column(table.rows, "ptrue_brier_skill") == pytest.approx([1 - (0.2**2 + 0.3**2) / 2 / 0.25] * 2)
    assert _column(table.rows, "verbalized_auroc") == [1.0, 1.0]


def test_a_spread_within_sampling_noise_leaves_out_the_corrected_skill(caplog):
    """Targets that differ (so the uncorrected skill exists) but whose spread is below the sampling noise of
    mu_hat: the corrected skill is left out with the estimated variance of mu in its reason, never NaN; the
    log line is labelled "calibration" when no task is named."""
    correctness = [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0]]
    questions = [
        QuestionData(z, ["a", "b", "c", "d"], p, None)
        for z, p in zip(correctness, [0.2, 0.6, 0.3], strict=True)
    ]
    table = calibration_columns(questions)
    mu = np.array([0.25, 0.5, 0.25])
    variance = np.mean((mu - mu.mean()) ** 2) - (1 - 1 / 3) * np.mean(mu * (1 - mu) / 3)
    assert variance < 0
    reason = (
        f"the estimated variance of mu over the 3 questions is {variance:.3g} <= 0: the spread of mu_hat is "
        "within its sampling noise (no variance for a skill to explain); left out of the task's row and of "
        "group means"
    )
    assert table.left_out["ptrue_corrected_brier_skill"] == reason
    assert "ptrue_corrected_brier_skill" not in table.undefined
    assert "ptrue_brier_skill" in table.stderr_undefined  # defined on all 3, not without question 1
    assert f"calibration: ptrue_corrected_brier_skill is left out: {reason}" in _log_lines(caplog)


@pytest.mark.parametrize("task", ["toy", ""])
def test_whole_sources_that_are_nan_are_logged_with_their_reason(caplog, task):
    """P(True) not requested and k < 4: one warning per source, with the task's name (or "calibration")
    and the reason, as the table gives it."""
    questions = [QuestionData(z, ["a", "b", "c"], None, v) for z, v in (([1, 0, 1], 0.5), ([0, 0, 1], 0.2))]
    table = calibration_columns(questions, task=task)
    label = task or "calibration"
    ptrue = "P(True) was not requested (the model gives no log-likelihoods, or metadata ptrue is false)"
    consistency = "k = 3 samples per question; the leakage-free consistency needs k >= 4"
    assert table.undefined["ptrue_brier"] == ptrue and table.undefined["consistency_auroc"] == consistency
    assert [line for line in _log_lines(caplog) if "_* columns" in line] == [
        f"{label}: the ptrue_* columns are NaN: {ptrue}",
        f"{label}: the consistency_* columns are NaN: {consistency}",
    ]


def test_p_true_for_some_questions_only_is_refused_with_its_message():
    with pytest.raises(
        ValueError, match=r"^calibration_columns: P\(True\) is given for some questions only$"
    ):
        calibration_columns([QuestionData([1, 0], ["a", "b"], p, 0.5) for p in (0.5, None)])


def test_a_source_the_run_cannot_ask_is_nan_with_the_reason_given():
    """``unavailable`` (a wrapped task whose prompt does not allow the verbalized confidence, or whose
    pipeline extracts no answer): that source's columns NaN with the reason given (the verbalized one's
    parse-failure rate too: nothing was asked), the other columns as without it; any other name refused."""
    questions = _questions(n_questions=12)
    reasons = {"verbalized": "not asked: its prompt ends in instructions", "consistency": "no answer classes"}
    table = calibration_columns(questions, unavailable=reasons)
    plain = calibration_columns(questions)
    for source, reason in reasons.items():
        names = [f"{source}_{statistic}" for statistic in STATISTICS]
        names += ["verbalized_parse_failure_rate"] if source == "verbalized" else []
        for name in names:
            assert table.undefined[name] == reason
            assert all(math.isnan(row[name]) for row in table.rows), name
    for name in ("expected_accuracy", *(f"ptrue_{statistic}" for statistic in STATISTICS)):
        assert _column(table.rows, name) == _column(plain.rows, name), name
    with pytest.raises(ValueError, match="unavailable names 'ptrue', not verbalized or consistency"):
        calibration_columns(questions, unavailable={"ptrue": "no"})


def test_the_corrected_skill_is_undefined_at_an_estimated_variance_of_exactly_zero():
    """S_hat = mean (mu_hat - mean mu_hat)^2 - (1 - 1/N) mean mu_hat (1 - mu_hat) / (n - 1) is 0 exactly for
    mu_hat = (0, 1/2) from n = 2 samples each (1/16 - 1/2 x 1/8): the spread is all sampling noise, so the
    corrected Brier skill is left out of the row with its reason; the plain skill (spread 1/16 > 0) stays.
    One question more at mu_hat = 1 makes S_hat positive and the corrected skill defined."""
    from capcal_tasks.calibration_columns import source_statistics

    zero = source_statistics("x", np.array([0.2, 0.7]), np.array([0.0, 0.5]), np.array([2, 2]))
    assert list(zero.left_out) == ["x_corrected_brier_skill"] and "x_corrected_brier_skill" not in zero.items
    assert zero.left_out["x_corrected_brier_skill"].startswith(
        "the estimated variance of mu over the 2 questions is 0 <= 0: the spread of mu_hat is within its "
        "sampling noise"
    )
    assert np.isfinite(zero.items["x_brier_skill"]).all()
    positive = source_statistics(
        "x", np.array([0.2, 0.7, 0.9]), np.array([0.0, 0.5, 1.0]), np.array([2, 2, 2])
    )
    assert positive.left_out == {} and np.isfinite(positive.items["x_corrected_brier_skill"]).all()
