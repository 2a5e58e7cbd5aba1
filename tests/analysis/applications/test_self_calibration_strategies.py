"""Self-Calibration strategies: hand-computed tiny cases and a per-question loop reference on random data."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from analysis.applications import (
    adaptive_self_consistency,
    early_stopping,
    prepare_strategy_inputs,
    self_calibration_curves,
    soft_self_consistency,
    vote_accuracy_by_n,
)
from analysis.estimators import encode_answer_classes

# One question, hand-computed below: answers A B B A, A correct, confidences .9 .3 .4 .2
TINY_ANSWERS = [["A", "B", "B", "A"]]
TINY_Z = [[1, 0, 0, 1]]
TINY_C = [[0.9, 0.3, 0.4, 0.2]]


def _tiny():
    return prepare_strategy_inputs(encode_answer_classes(TINY_ANSWERS), TINY_Z, TINY_C)


def test_hand_computed_votes():
    inputs = _tiny()
    # plain SC: N=1 A; N=2 A/B tie -> 0.5; N=3 B wins -> 0; N=4 tie -> 0.5
    np.testing.assert_allclose(vote_accuracy_by_n(inputs, weighted=False), [1, 0.5, 0, 0.5])
    # weighted: A .9 beats B .3, .7, .7 (A 1.1 at N=4)
    np.testing.assert_allclose(vote_accuracy_by_n(inputs, weighted=True), [1, 1, 1, 1])
    np.testing.assert_allclose(soft_self_consistency(inputs), [1.1 / 1.8])


def test_hand_computed_stopping_rules():
    inputs = _tiny()
    assert early_stopping(inputs, 0.5) == ([1.0], [1.0])  # c_1 = .9 >= .5
    assert early_stopping(inputs, 0.35) == ([1.0], [1.0])
    correct, used = early_stopping(inputs, 0.95)  # none: fall back to the last response (A, correct)
    assert (correct.tolist(), used.tolist()) == ([1.0], [4.0])
    # adaptive weighted: ratios after 2, 3, 4 samples are .75, .5625, .6111
    assert adaptive_self_consistency(inputs, 0.7) == ([1.0], [2.0])
    correct, used = adaptive_self_consistency(inputs, 0.8)
    assert (correct.tolist(), used.tolist()) == ([1.0], [4.0])
    # adaptive plain: ratios 1/2, 2/3 (B leads), 1/2
    correct, used = adaptive_self_consistency(inputs, 0.6, weighted=False)
    assert (correct.tolist(), used.tolist()) == ([0.0], [3.0])


def test_unparseable_responses_do_not_vote_and_fallbacks_differ():
    answers = encode_answer_classes([[None, "B", "A", "B", None]])
    inputs = prepare_strategy_inputs(answers, [[0, 0, 1, 0, 0]], [[0.99, 0.1, 0.8, 0.2, 0.1]])
    # weighted vote at N=1: no parseable answer -> wrong; N=3: A .8 vs B .1 -> right
    np.testing.assert_allclose(vote_accuracy_by_n(inputs, weighted=True), [0, 0, 1, 1, 1])
    assert early_stopping(inputs, 0.95) == ([0.0], [1.0])  # stops on the unparseable response
    assert early_stopping(inputs, 0.995)[0].tolist() == [0.0]  # fallback: last response (unparseable)
    assert early_stopping(inputs, 0.995, fallback="weighted_vote")[0].tolist() == [1.0]
    # ratio undefined (no votes) at i = 1; at i = 2 only B voted -> ratio 1 -> stop, B is wrong
    assert adaptive_self_consistency(inputs, 0.9) == ([0.0], [2.0])


def _reference(answers, z, c, m, tau, fallback):
    """Straightforward per-question loops for every strategy (independent of the vectorised code)."""

    def vote(pairs):  # pairs of (answer, weight); returns expected correctness of the argmax (ties averaged)
        weights, truth = defaultdict(float), {}
        for (answer, correct), weight in pairs:
            if answer is not None:
                weights[answer] += weight
                truth[answer] = correct
        if not weights or max(weights.values()) <= 0:
            return 0.0, None
        top = max(weights.values())
        tied = [a for a, w in weights.items() if w >= top - 1e-12 * max(top, 1.0) and w > 0]
        return float(np.mean([truth[a] for a in tied])), top / sum(weights.values())

    out = {"early": [], "adaptive_w": [], "adaptive": [], "sc": [], "wsc": []}
    for a, zi, ci in zip(answers, z, c, strict=True):
        items = list(zip(a[:m], zi[:m], strict=True))
        hit = next((i for i in range(m) if ci[i] >= tau), None)
        if hit is not None:
            out["early"].append((zi[hit], hit + 1))
        elif fallback == "last":
            out["early"].append((zi[m - 1], m))
        else:
            out["early"].append((vote(zip(items, ci[:m], strict=True))[0], m))
        for key, weights in (("adaptive_w", ci), ("adaptive", [1.0] * m)):
            for i in range(1, m + 1):
                accuracy, ratio = vote(zip(items[:i], weights[:i], strict=True))
                if i == m or (i >= 2 and ratio is not None and ratio >= tau):
                    out[key].append((accuracy, i))
                    break
        out["sc"].append([vote(zip(items[:i], [1.0] * i, strict=True))[0] for i in range(1, m + 1)])
        out["wsc"].append([vote(zip(items[:i], ci[:i], strict=True))[0] for i in range(1, m + 1)])
    return out


@pytest.mark.parametrize("fallback", ["last", "weighted_vote"])
def test_vectorised_strategies_equal_a_loop_reference(fallback):
    rng = np.random.default_rng(0)
    n_questions, n = 150, 10
    answers = [
        [rng.choice(["1", "2", "3", None], p=[0.5, 0.25, 0.15, 0.1]) for _ in range(n)]
        for _ in range(n_questions)
    ]
    z = [[int(a == "1") for a in row] for row in answers]
    c = np.round(rng.uniform(size=(n_questions, n)), 1)  # coarse: exact ties among weighted votes too
    inputs = prepare_strategy_inputs(encode_answer_classes(answers), z, c, max_samples=8)
    np.testing.assert_allclose(
        vote_accuracy_by_n(inputs, weighted=False),
        np.mean(_reference(answers, z, c, 8, 0.5, fallback)["sc"], axis=0),
    )
    np.testing.assert_allclose(
        vote_accuracy_by_n(inputs, weighted=True),
        np.mean(_reference(answers, z, c, 8, 0.5, fallback)["wsc"], axis=0),
    )
    for tau in (0.0, 0.3, 0.55, 0.8, 1.0):
        reference = _reference(answers, z, c, 8, tau, fallback)
        correct, used = early_stopping(inputs, tau, fallback=fallback)
        np.testing.assert_allclose(np.c_[correct, used], reference["early"])
        np.testing.assert_allclose(
            np.column_stack(adaptive_self_consistency(inputs, tau)), reference["adaptive_w"]
        )
        np.testing.assert_allclose(
            np.column_stack(adaptive_self_consistency(inputs, tau, weighted=False)), reference["adaptive"]
        )


def test_curves_table_and_permutations():
    rng = np.random.default_rng(1)
    answers = [[rng.choice(["1", "2"]) for _ in range(6)] for _ in range(40)]
    z = [[int(a == "1") for a in row] for row in answers]
    c = rng.uniform(size=(40, 6))
    curves = self_calibration_curves(encode_answer_classes(answers), z, c, taus=(0.2, 0.9))
    assert set(curves["strategy"]) == {
        "self_consistency", "weighted_self_consistency", "early_stopping",
        "adaptive_weighted_self_consistency", "adaptive_self_consistency",
    }  # fmt: skip
    sc = curves[curves["strategy"] == "self_consistency"]
    assert sc["max_samples"].tolist() == [1, 2, 3, 4, 5, 6] and sc["tau"].isna().all()
    # the mean over permuted orders at N = M equals the sampling-order value (order does not matter at M)
    permuted = self_calibration_curves(encode_answer_classes(answers), z, c, taus=(0.5,), permutations=5)
    at_m = lambda frame: frame.query("strategy == 'self_consistency' and max_samples == 6")["accuracy"].item()  # noqa: E731
    assert at_m(permuted) == pytest.approx(at_m(curves), abs=1e-12)
    with pytest.raises(ValueError, match="finite"):
        self_calibration_curves(encode_answer_classes(answers), z, np.full((40, 6), np.nan))
    with pytest.raises(ValueError, match="exceeds"):
        self_calibration_curves(encode_answer_classes(answers), z, c, max_samples=7)


def test_prepare_strategy_inputs_names_each_bad_input():
    """Each refused input gets its own exact message (the type check names the encoder to use)."""
    answers = encode_answer_classes([["A", "B", "A"], ["B", "B", "C"]])
    z, c = [[1, 0, 1], [0, 0, 1]], [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    for arguments, message in (
        (([["A"]], z, c), "answers must be an AnswerClasses (analysis.estimators.encode_answer_classes)"),
        (
            (answers, np.zeros((2, 4)), c),
            "correctness (2, 4) and confidences (2, 3) must match answers (2, 3)",
        ),
        ((answers, z, c, 4), "max_samples=4 exceeds the smallest number of responses (3)"),
        ((answers, [[1, 0, 2], [0, 0, 1]], c), "correctness must be 0/1"),
        (
            (answers, z, [[0.5, 0.5, 0.5], [0.5, np.nan, 0.5]]),
            "confidences must be finite for the first 3 responses (question 1); "
            "drop or impute parse failures first",
        ),
        ((answers, z, [[0.5, 1.5, 0.5], [0.5, 0.5, 0.5]]), "confidences must lie in [0, 1]"),
        (
            (answers, [[1, 0], [0, 0, 1]], c),
            "correctness: row lengths differ from the number of samples (first at row 0)",
        ),
        (
            (answers, z, [[0.5, 0.5, 0.5], [0.5, 0.5]]),
            "confidences: row lengths differ from the number of samples (first at row 1)",
        ),
    ):
        with pytest.raises(ValueError) as error:
            prepare_strategy_inputs(*arguments)
        assert str(error.value) == message
