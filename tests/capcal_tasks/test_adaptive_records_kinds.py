"""Tests by kind (issue 49, point 2) of capcal_tasks.adaptive_records: each documented boundary of
``parse_rule`` and of the looks on both sides, every refusal message whole, the earlier-look check at the
last look before n (a width rule that stops at look 8 but not at 4), and the fields a record copies."""

from __future__ import annotations

import pytest

from capcal_tasks.adaptive_records import (
    adaptive_fields,
    check_adaptive_record,
    parse_rule,
    sequential_plan,
    stop_reason,
)
from capcal_tasks.records import RunFormatError

LOOKS = [4, 8, 16]
# width 0.5 at alpha 0.05 on looks 4, 8, 16 (confidence sequence at (4, 4): [0.34, 1], at (8, 8): [0.56, 1]):
# 4 of 4 does not stop (width 0.66), 8 of 8 does (0.44)
WIDTH = {"name": "confidence_width", "width": 0.5, "alpha": 0.05}


# --- parse_rule -------------------------------------------------------------------------------------------


def test_parse_rule_reads_width_and_alpha_each_from_its_own_place():
    assert parse_rule(" unanimity ") == {"name": "unanimity"}
    assert parse_rule("width:0.25:0.125") == {"name": "confidence_width", "width": 0.25, "alpha": 0.125}
    assert parse_rule("width:0.25") == {"name": "confidence_width", "width": 0.25, "alpha": 0.05}


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("width:1", True),  # W = 1 is in (0, 1]
        ("width:1.0000001", False),
        ("width:0", False),
        ("width:1e-9", True),
        ("width:0.5:1e-9", True),
        ("width:0.5:0", False),
        ("width:0.5:0.999999", True),
        ("width:0.5:1", False),
    ],
)
def test_parse_rule_boundaries_of_width_and_alpha(text, accepted):
    if accepted:
        numbers = [float(part) for part in text.split(":")[1:]]
        assert parse_rule(text) == {
            "name": "confidence_width",
            "width": numbers[0],
            "alpha": numbers[1] if len(numbers) == 2 else 0.05,
        }
    else:
        with pytest.raises(ValueError):
            parse_rule(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("unanimous", "adaptive rule 'unanimous': expected unanimity or width:W (e.g. width:0.2)"),
        ("width:", "adaptive rule 'width:': expected unanimity or width:W (e.g. width:0.2)"),
        ("width:x", "adaptive rule 'width:x': W (and alpha) must be numbers, e.g. width:0.2"),
        ("width:0.2:0.1:3", "adaptive rule 'width:0.2:0.1:3': expected width:W or width:W:ALPHA"),
        ("width:2", "adaptive rule 'width:2': the width W must be in (0, 1]"),
        ("width:0.2:1.5", "adaptive rule 'width:0.2:1.5': alpha must be in (0, 1)"),
    ],
)
def test_parse_rule_messages_whole(text, message):
    with pytest.raises(ValueError) as raised:
        parse_rule(text)
    assert str(raised.value) == message


# --- stop_reason, sequential_plan, adaptive_fields --------------------------------------------------------


def test_stop_reason_is_k_max_only_at_the_last_look_and_prints_the_width_short():
    plan = sequential_plan(LOOKS, WIDTH)
    assert stop_reason(plan, WIDTH, 16, 3) == "k_max"
    assert stop_reason(plan, WIDTH, 8, 8) == "interval narrower than 0.5 at 8"
    quarter = {"name": "confidence_width", "width": 0.25, "alpha": 0.05}
    assert stop_reason(sequential_plan(LOOKS, quarter), quarter, 4, 0) == "interval narrower than 0.25 at 4"
    unanimity = sequential_plan(LOOKS, {"name": "unanimity"})
    assert stop_reason(unanimity, {"name": "unanimity"}, 8, 0) == "unanimous at 8"
    assert stop_reason(unanimity, {"name": "unanimity"}, 16, 16) == "k_max"


def test_a_unanimity_plan_stops_on_all_or_none_at_each_look_before_the_last():
    plan = sequential_plan(LOOKS, {"name": "unanimity", "width": 0.1})  # a stray width is ignored
    assert list(plan.looks) == LOOKS
    for index, look in enumerate(LOOKS[:-1]):
        assert [bool(plan.stop[index, s]) for s in range(look + 1)] == [True] + [False] * (look - 1) + [True]
    assert all(plan.stop[2, s] for s in range(17))


@pytest.mark.parametrize(
    ("looks", "levels"), [([2, 4], [1, 2]), ([3, 6], [1, 2]), ([4, 8], [1, 2, 4]), ([5, 10], [1, 2, 4])]
)
def test_pass_at_levels_are_the_powers_of_two_up_to_and_including_the_first_look(looks, levels):
    correctness = [1, 0] * (looks[1] // 2)  # mixed at the first look: goes on to k_max
    fields = adaptive_fields(looks, {"name": "unanimity"}, correctness)
    assert sorted(int(key[8:]) for key in fields if key.startswith("pass_at_")) == levels


def test_adaptive_fields_copy_n_s_the_looks_and_the_rule():
    rule = {"name": "confidence_width", "width": 0.5, "alpha": 0.05}
    correctness = [1] * 7 + [0] + [1] * 5 + [0] * 3  # n 16, s 12
    adaptive = adaptive_fields(LOOKS, rule, correctness)["adaptive"]
    assert (adaptive["n"], adaptive["s"], adaptive["sample_mean"]) == (16, 12, 0.75)
    assert adaptive["looks"] == [4, 8, 16] and adaptive["rule"] == rule and adaptive["rule"] is not rule
    assert adaptive["alpha"] == 0.05 and adaptive["stopped"] == "k_max"
    low, high = adaptive["interval"]
    assert 0.0 <= low < 0.75 < high <= 1.0  # the interval around s/n, lower bound first


# --- check_adaptive_record --------------------------------------------------------------------------------


def _record(correctness, looks=LOOKS, rule=WIDTH) -> dict:
    record = {"n_samples": len(correctness)}
    record.update(adaptive_fields(looks, rule, correctness))
    return record


def test_the_rule_firing_at_the_last_look_before_n_is_refused():
    accepted = [1] * 7 + [0] + [1] * 5 + [0] * 3  # 7 of 8 at look 8: the width rule goes on
    assert check_adaptive_record(_record(accepted), accepted, "x:1")["n"] == 16
    stopped_at_8 = [1] * 8 + [0] * 8  # 8 of 8 at look 8 (not 4 of 4 at 4): the rule stops at 8
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(_record(stopped_at_8), stopped_at_8, "x:2")
    assert str(raised.value) == "x:2: the rule stops at look 8 on the first 8 responses, yet 16 were drawn"
    not_stopping = [1, 0, 1, 0, 1, 0, 1, 0]  # 4 of 8: the rule does not stop at 8
    with pytest.raises(RunFormatError) as raised:
        record = _record([1] * 8)  # (8, 4) is no stop of the plan: adaptive_fields refuses to write it
        record["adaptive"]["s"] = 4
        check_adaptive_record(record, not_stopping, "x:3")
    assert str(raised.value) == "x:3: the rule does not stop at 4 of 8, yet sampling stopped"
    # 8 of 8 at look 8 is a valid stop there
    assert (
        check_adaptive_record(_record([1] * 8), [1] * 8, "x:4")["stopped"]
        == "interval narrower than 0.5 at 8"
    )


def _changed(change, correctness=None) -> tuple[dict, list[int]]:
    correctness = correctness or [1] * 7 + [0] + [1] * 5 + [0] * 3
    record = _record(correctness)
    change(record)
    return record, correctness


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda r: r["adaptive"].pop("alpha"),
            "'adaptive' must be an object with keys alpha, interval, looks, mu_hat, mu_squared_hat, n, rule, "
            "s, sample_mean, stopped",
        ),
        (
            lambda r: r["adaptive"].update(looks=[1, 8, 16]),
            "adaptive.looks must start at 2 or more (mu^2 needs two draws)",
        ),
        (
            lambda r: r["adaptive"].update(looks=[4, 8, 8, 16]),
            "adaptive.looks must be strictly increasing whole numbers >= 1",
        ),
        (
            lambda r: r["adaptive"].update(looks=[4, 8.0, 16]),
            "adaptive.looks must be strictly increasing whole numbers >= 1",
        ),
        (
            lambda r: r["adaptive"].update(rule={"name": "unanimity", "width": 0.5}),
            "adaptive.rule unanimity takes no parameters, got {'name': 'unanimity', 'width': 0.5}",
        ),
        (
            lambda r: r["adaptive"].update(rule={"name": "confidence_width", "width": 0.5}),
            "adaptive.rule confidence_width needs exactly width and alpha",
        ),
        (
            lambda r: r["adaptive"].update(rule={"name": "confidence_width", "width": 0.5, "alpha": 1.0}),
            "adaptive rule 'width:0.5:1.0': alpha must be in (0, 1)",
        ),
        (lambda r: r["adaptive"].update(n=16.0), "adaptive.n 16.0 is not the 16 responses logged"),
        (lambda r: r["adaptive"].update(s=11), "adaptive.s 11 is not the 12 correct responses logged"),
        (lambda r: r["adaptive"].update(s=12.0), "adaptive.s 12.0 is not the 12 correct responses logged"),
        (
            lambda r: r["adaptive"].update(stopped="interval narrower than 0.5 at 16"),
            "adaptive.stopped 'interval narrower than 0.5 at 16' is not 'k_max'",
        ),
        (lambda r: r["adaptive"].update(alpha=0.1), "adaptive.alpha 0.1 is not 0.05"),
        (lambda r: r.pop("pass_at_1"), "an adaptive record logs pass@m for m <= the first look 4 only "
         "(pass_at_1, pass_at_2, pass_at_4), got pass_at_2, pass_at_4"),
        (
            lambda r: [r.pop(key) for key in ("pass_at_1", "pass_at_2", "pass_at_4")],
            "an adaptive record logs pass@m for m <= the first look 4 only (pass_at_1, pass_at_2, "
            "pass_at_4), got none",
        ),
    ],
)  # fmt: skip
def test_check_adaptive_record_messages_whole(change, message):
    record, correctness = _changed(change)
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "run.jsonl:9")
    assert str(raised.value) == f"run.jsonl:9: {message}"


def test_each_estimate_is_compared_with_its_own_recomputation():
    """mu_hat, mu_squared_hat and sample_mean each refused when changed alone, naming (n, s) and the value the
    plan gives; the interval named with both bounds; expected_accuracy against mu_hat."""
    correctness = [1] * 7 + [0] + [1] * 5 + [0] * 3
    good = _record(correctness)["adaptive"]
    for key in ("mu_hat", "mu_squared_hat", "sample_mean"):
        record, _ = _changed(lambda r, key=key: r["adaptive"].update({key: good[key] + 0.01}))
        with pytest.raises(RunFormatError) as raised:
            check_adaptive_record(record, correctness, "f:1")
        assert str(raised.value) == (
            f"f:1: adaptive.{key} {good[key] + 0.01!r} is not the value of (16, 12) under the plan "
            f"({good[key]!r})"
        )
    record, _ = _changed(lambda r: r["adaptive"].update(interval=[good["interval"][0], 0.99]))
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "f:2")
    assert str(raised.value) == (
        f"f:2: adaptive.interval {[good['interval'][0], 0.99]!r} is not the confidence sequence at (16, 12) "
        f"({good['interval']!r})"
    )
    record, _ = _changed(lambda r: r.update(expected_accuracy=0.75))
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "f:3")
    assert str(raised.value) == (
        f"f:3: expected_accuracy 0.75 of an adaptive record must be the unbiased estimate {good['mu_hat']!r} "
        "(adaptive.mu_hat)"
    )
    record, _ = _changed(lambda r: r.update(pass_at_2=r["pass_at_2"] + 0.01))
    want = _record(correctness)["pass_at_2"]
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "f:4")
    assert (
        str(raised.value) == f"f:4: pass_at_2 = {want + 0.01!r}, the unbiased value at (16, 12) is {want!r}"
    )


def test_a_record_with_n_not_a_look_names_the_looks():
    correctness = [1, 0] * 5  # 10 draws
    record = _record([1, 0] * 8)
    record["adaptive"].update(n=10, s=5)
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "f:5")
    assert str(raised.value) == "f:5: 10 responses, not one of the looks [4, 8, 16]"


def test_looks_starting_at_exactly_two_are_accepted_and_at_one_refused():
    """Catches the first look's bound moved off 2 (``< 2`` as ``<= 2`` refuses the smallest valid plan)."""
    correctness = [1, 0, 1, 1]  # mixed at look 2: unanimity goes on to k_max 4
    record = _record(correctness, looks=[2, 4], rule={"name": "unanimity"})
    adaptive = check_adaptive_record(record, correctness, "x:1")
    assert (adaptive["looks"], adaptive["n"], adaptive["s"], adaptive["stopped"]) == ([2, 4], 4, 3, "k_max")
    record["adaptive"]["looks"] = [1, 4]
    with pytest.raises(RunFormatError) as raised:
        check_adaptive_record(record, correctness, "x:2")
    assert str(raised.value) == "x:2: adaptive.looks must start at 2 or more (mu^2 needs two draws)"
