"""The records of an adaptive run (capcal_tasks.adaptive_records) and their strict check in
``parse_sampling_record``: the estimates are capcal_metrics.sequential's, and every field that disagrees
with the correctness vector or the plan is one ``RunFormatError`` naming the line. No model."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from capcal_metrics.sequential import (
    confidence_sequence,
    confidence_width_rule,
    unanimity_rule,
    unbiased_mean,
    unbiased_mean_square,
    unbiased_pass_at_k,
)
from capcal_tasks.adaptive_records import adaptive_fields, parse_rule, stop_reason
from capcal_tasks.records import RunFormatError
from capcal_tasks.sampling import parse_sampling_record

LOOKS = [4, 8, 16]
MIXED = [1, 0] + [1] * 14  # 15 of 16: goes on to k_max under unanimity


def _record(correctness: list[int], looks=LOOKS, rule=None) -> dict:
    """A samples line as an adaptive run logs it: answers "7" (correct) and "3" (incorrect)."""
    rule = rule or {"name": "unanimity"}
    n = len(correctness)
    record = {
        "doc_id": 0,
        "doc": {"question_id": "q0"},
        "resps": [[f"answer {7 if z else 3}" for z in correctness]],
        "correctness": list(correctness),
        "extracted_answers": ["7" if z else "3" for z in correctness],
        "n_samples": n,
        "majority_vote_accuracy": float(sum(correctness) * 2 > n) + 0.5 * (sum(correctness) * 2 == n),
    }
    record.update(adaptive_fields(looks, rule, correctness))
    return record


def test_parse_rule_accepts_the_two_rules_and_refuses_typos() -> None:
    assert parse_rule("unanimity") == {"name": "unanimity"}
    assert parse_rule("width:0.2") == {"name": "confidence_width", "width": 0.2, "alpha": 0.05}
    assert parse_rule("width:0.3:0.1") == {"name": "confidence_width", "width": 0.3, "alpha": 0.1}
    for typo in ("unanimous", "widht:0.2", "width:", "width:abc", "width:0", "width:1.5", "width:0.2:1"):
        with pytest.raises(ValueError, match="adaptive rule"):
            parse_rule(typo)


@pytest.mark.parametrize("correctness", [[1] * 4, [0] * 4, MIXED, [0, 1] * 8])
def test_fields_are_capcal_metrics_sequential_estimates(correctness: list[int]) -> None:
    plan = unanimity_rule(LOOKS)
    n, s = np.array([len(correctness)]), np.array([sum(correctness)])
    fields = adaptive_fields(LOOKS, {"name": "unanimity"}, correctness)
    adaptive = fields["adaptive"]
    assert (adaptive["n"], adaptive["s"]) == (n[0], s[0])
    assert adaptive["mu_hat"] == fields["expected_accuracy"] == unbiased_mean(plan, n, s)[0]
    assert adaptive["mu_squared_hat"] == unbiased_mean_square(plan, n, s)[0]
    bounds = confidence_sequence(n, s)
    assert adaptive["interval"] == [bounds.lower[0], bounds.upper[0]]
    assert sorted(key for key in fields if key.startswith("pass_at_")) == [
        "pass_at_1",
        "pass_at_2",
        "pass_at_4",
    ]
    assert fields["pass_at_4"] == unbiased_pass_at_k(plan, n, s, 4)[0]
    assert adaptive["sample_mean"] == s[0] / n[0]
    parsed = parse_sampling_record(_record(correctness), "run.jsonl:1", "capcal_arithmetic")
    assert parsed["adaptive"]["n"] == n[0] and parsed["expected_accuracy"] == adaptive["mu_hat"]


def test_the_unbiased_estimate_differs_from_s_over_n_after_a_stop() -> None:
    """At (16, 15) under unanimity at 4 and 8: paths unanimous at a look are excluded, so E[X_1 | n, s] is
    not 15/16 (the record must not hold s/n)."""
    fields = adaptive_fields(LOOKS, {"name": "unanimity"}, MIXED)
    assert fields["adaptive"]["sample_mean"] == 15 / 16
    assert abs(fields["expected_accuracy"] - 15 / 16) > 1e-3


def test_stop_reasons() -> None:
    plan = confidence_width_rule(LOOKS, 0.5)
    width = {"name": "confidence_width", "width": 0.5, "alpha": 0.05}
    assert stop_reason(unanimity_rule(LOOKS), {"name": "unanimity"}, 4, 0) == "unanimous at 4"
    assert stop_reason(plan, width, 8, 8) == "interval narrower than 0.5 at 8"
    assert stop_reason(plan, width, 16, 8) == "k_max"


def _tampered(change) -> dict:
    record = _record(MIXED)
    change(record)
    return record


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(expected_accuracy=15 / 16), "must be the unbiased estimate"),
        (lambda r: r["adaptive"].update(mu_hat=0.5), "adaptive.mu_hat"),
        (lambda r: r["adaptive"].update(n=8), "adaptive.n"),
        (lambda r: r["adaptive"].update(stopped="unanimous at 16"), "adaptive.stopped"),
        (lambda r: r["adaptive"].update(interval=[0.0, 1.0]), "adaptive.interval"),
        (
            lambda r: r["adaptive"].update(rule={"name": "unanimous"}),
            re.escape("adaptive.rule must be {'name': one of unanimity, confidence_width, ...}"),
        ),
        (lambda r: r["adaptive"].update(looks=[8, 4, 16]), "strictly increasing"),
        (lambda r: r.update(pass_at_8=0.9), "pass@m for m <= the first look"),
        (lambda r: r.update(pass_at_4=0.5), "pass_at_4"),
        (lambda r: r["adaptive"].pop("s"), "'adaptive' must be an object"),
    ],
)
def test_a_record_that_disagrees_is_refused_naming_the_line(change, message) -> None:
    with pytest.raises(RunFormatError, match=message) as raised:
        parse_sampling_record(_tampered(change), "run.jsonl:3", "capcal_arithmetic")
    assert str(raised.value).startswith("run.jsonl:3: ")


def test_a_stop_the_rule_would_not_make_is_refused() -> None:
    """Unanimous over the first 4 yet 16 drawn; and 16 drawn where 16 is not a look."""
    with pytest.raises(RunFormatError, match="stops at look 4"):
        parse_sampling_record(_record([1, 1, 1, 1, 0] + [1] * 11), "x:1", "capcal_arithmetic")
    not_stopping = _record(MIXED)
    not_stopping["adaptive"]["looks"] = [4, 8, 12]
    with pytest.raises(RunFormatError, match="not one of the looks"):
        parse_sampling_record(not_stopping, "x:2", "capcal_arithmetic")


def _paths(looks: list[int], n: int, s: int) -> list[tuple[int, ...]]:
    """Every 0/1 sequence of n draws with s successes that unanimity lets reach n: at each look before n the
    first l draws are mixed (neither all 0 nor all 1). Brute force, independent of capcal_metrics."""
    paths = []
    for ones in itertools.combinations(range(n), s):
        path = tuple(int(j in ones) for j in range(n))
        if all(0 < sum(path[:look]) < look for look in looks if look < n):
            paths.append(path)
    return paths


@pytest.mark.parametrize(
    "correctness",
    [[1] * 4, [0] * 4, MIXED, [0, 1] * 8, [0, 0, 1, 0] + [0] * 4 + [1] * 8, [0, 1, 1, 1] + [0] * 12],
)
def test_a_record_holds_the_brute_force_estimates_over_every_path(correctness: list[int]) -> None:
    """Given (n, s) under unanimity, each path that reaches n is equally likely, so E[X_1 | n, s] is the
    share of those paths whose first draw succeeds, E[X_1 X_2 | n, s] the share whose first two do, and
    pass@m the share with a success in the first m: counted here over every path (not from the module or
    capcal_metrics). The record's fields equal the counts, and a record written from the counts by hand is
    accepted by the strict check."""
    n, s = len(correctness), sum(correctness)
    paths = _paths(LOOKS, n, s)
    assert paths and tuple(correctness) in paths
    mu_hat = sum(path[0] for path in paths) / len(paths)
    mu_squared_hat = sum(path[0] * path[1] for path in paths) / len(paths)
    fields = adaptive_fields(LOOKS, {"name": "unanimity"}, correctness)
    assert fields["expected_accuracy"] == pytest.approx(mu_hat, abs=1e-12)
    assert fields["adaptive"]["mu_hat"] == pytest.approx(mu_hat, abs=1e-12)
    assert fields["adaptive"]["mu_squared_hat"] == pytest.approx(mu_squared_hat, abs=1e-12)
    for m in (1, 2, 4):  # the powers of two up to the first look, 4
        share = sum(max(path[:m]) for path in paths) / len(paths)
        assert fields[f"pass_at_{m}"] == pytest.approx(share, abs=1e-12), m
    assert not any(key.startswith("pass_at_") and int(key[8:]) > 4 for key in fields)
    stopped = "k_max" if n == 16 else f"unanimous at {n}"
    assert (fields["adaptive"]["n"], fields["adaptive"]["s"], fields["adaptive"]["stopped"]) == (
        n,
        s,
        stopped,
    )
    assert fields["adaptive"]["sample_mean"] == s / n and fields["adaptive"]["alpha"] == 0.05
    by_hand = _record(correctness)
    by_hand["expected_accuracy"] = by_hand["adaptive"]["mu_hat"] = mu_hat
    by_hand["adaptive"]["mu_squared_hat"] = mu_squared_hat
    for m in (1, 2, 4):
        by_hand[f"pass_at_{m}"] = sum(max(path[:m]) for path in paths) / len(paths)
    parsed = parse_sampling_record(by_hand, "run.jsonl:1", "capcal_arithmetic")
    assert parsed["expected_accuracy"] == mu_hat


def test_mixed_under_unanimity_is_three_quarters() -> None:
    """(16, 15) at looks 4, 8, 16: the one failure must lie in the first 4 draws (else the first 4 are
    unanimous), 4 paths, 3 of them start with a success: mu_hat = 3/4; X_1 X_2 = 1 on 2 of them: 1/2."""
    fields = adaptive_fields(LOOKS, {"name": "unanimity"}, MIXED)
    assert fields["expected_accuracy"] == pytest.approx(0.75, abs=1e-12)
    assert fields["adaptive"]["mu_squared_hat"] == pytest.approx(0.5, abs=1e-12)


def test_the_width_rules_interval_is_at_the_rules_own_alpha() -> None:
    """A confidence_width rule at alpha 0.2: the record's interval is the confidence sequence at 0.2 (not at
    the default 0.05, a setting not passed through), its alpha field 0.2; a record holding the default
    level's interval is refused."""
    rule = {"name": "confidence_width", "width": 0.9, "alpha": 0.2}
    correctness = [1, 0, 1, 1]  # 4 draws, s = 3, at the first look
    plan = confidence_width_rule(LOOKS, 0.9, 0.2)
    assert plan.stop[0, 3]  # (so this rule stops here)
    fields = adaptive_fields(LOOKS, rule, correctness)
    at_rule = confidence_sequence(np.array([4]), np.array([3]), alpha=0.2)
    at_default = confidence_sequence(np.array([4]), np.array([3]), alpha=0.05)
    assert at_rule.lower[0] > at_default.lower[0]  # the two levels are told apart
    assert fields["adaptive"]["interval"] == [at_rule.lower[0], at_rule.upper[0]]
    assert fields["adaptive"]["alpha"] == 0.2 and fields["adaptive"]["rule"] == rule
    assert fields["adaptive"]["stopped"] == "interval narrower than 0.9 at 4"
    record = _record(correctness, rule=rule)
    assert parse_sampling_record(record, "x:1", "capcal_arithmetic")["adaptive"]["alpha"] == 0.2
    record["adaptive"]["interval"] = [float(at_default.lower[0]), float(at_default.upper[0])]
    with pytest.raises(RunFormatError, match="adaptive.interval"):
        parse_sampling_record(record, "x:1", "capcal_arithmetic")


def test_the_plan_of_a_width_rule_takes_its_width_and_its_alpha() -> None:
    """``sequential_plan`` passes the rule's width and alpha through, each to its own parameter: its stop
    table equals ``confidence_width_rule(looks, width, alpha)``'s and differs from the tables with the two
    swapped or with one read for the other (checked to differ here)."""
    from capcal_tasks.adaptive_records import sequential_plan

    looks = [4, 8, 16, 32]
    plan = sequential_plan(looks, {"name": "confidence_width", "width": 0.4, "alpha": 0.2})
    np.testing.assert_array_equal(plan.stop, confidence_width_rule(looks, 0.4, 0.2).stop)
    for width, alpha in ((0.2, 0.4), (0.4, 0.4), (0.2, 0.2)):
        assert not np.array_equal(plan.stop, confidence_width_rule(looks, width, alpha).stop), (width, alpha)
