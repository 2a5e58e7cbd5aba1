"""Routing: exact expected accuracy against simulation with random tie-breaks, baselines and joins."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.applications import pair_models, routing_accuracy, routing_curves


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    n = 400
    mu_cheap = rng.binomial(16, rng.beta(0.5, 1.0, n)) / 16
    mu_strong = np.clip(mu_cheap + rng.binomial(16, rng.uniform(0, 0.5, n)) / 16, 0, 1)
    confidence = np.round(np.clip(mu_cheap + rng.normal(0, 0.2, n), 0, 1), 1)  # coarse: many ties
    return confidence, mu_cheap, mu_strong


def test_exact_equals_simulated_random_tie_breaking(models):
    """Each simulation breaks ties in the confidence by a random permutation and routes the lowest m; the
    mean over 3000 simulations must be within 4 standard errors of the exact value at every fraction."""
    confidence, cheap, strong = models
    n = confidence.size
    fractions = np.arange(0, n + 1, 20) / n
    exact = routing_accuracy(confidence, cheap, strong, fractions)
    rng = np.random.default_rng(1)
    runs = []
    for _ in range(3000):
        order = np.lexsort((rng.random(n), confidence))
        gains = np.concatenate([[0.0], np.cumsum((strong - cheap)[order])])
        runs.append(cheap.mean() + gains[np.round(fractions * n).astype(int)] / n)
    runs = np.array(runs)
    se = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    inside = np.abs(runs.mean(axis=0) - exact) <= 4 * se + 1e-12
    assert inside.all()
    assert (se[1:-1] > 0).any()  # ties do matter here: the simulation varies


def test_without_ties_equals_a_direct_sort():
    rng = np.random.default_rng(2)
    confidence, cheap, strong = rng.uniform(size=50), rng.uniform(size=50), rng.uniform(size=50)
    order = np.argsort(confidence)
    for m in range(51):
        routed = np.zeros(50, dtype=bool)
        routed[order[:m]] = True
        expected = np.mean(np.where(routed, strong, cheap))
        assert routing_accuracy(confidence, cheap, strong, [m / 50])[0] == pytest.approx(expected, abs=1e-14)
    # a fractional count routes the next question with that probability
    half = routing_accuracy(confidence, cheap, strong, [10.5 / 50])[0]
    both = routing_accuracy(confidence, cheap, strong, [10 / 50, 11 / 50])
    assert half == pytest.approx(both.mean(), abs=1e-14)


def test_random_baseline_and_oracles(models):
    confidence, cheap, strong = models
    curves = routing_curves({"conf": confidence}, cheap, strong).pivot(index="fraction", columns="method")
    accuracy = curves["accuracy"]
    np.testing.assert_allclose(accuracy.loc[0.0], cheap.mean())
    np.testing.assert_allclose(accuracy.loc[1.0], strong.mean())
    # random routing: a uniformly random subset, simulated
    rng = np.random.default_rng(3)
    n = cheap.size
    simulated = [np.mean(np.where(rng.permutation(n) < n // 4, strong, cheap)) for _ in range(2000)]
    se = np.std(simulated, ddof=1) / np.sqrt(len(simulated))
    assert abs(np.mean(simulated) - accuracy.loc[0.25, "random"]) < 4 * se
    # the gain oracle is an upper bound for every router at every fraction
    for method in ("conf", "random", "oracle_cheap"):
        assert (accuracy["oracle_gain"] >= accuracy[method] - 1e-12).all()
    assert (accuracy["oracle_cheap"] >= accuracy["random"] - 1e-12).all()  # here gains grow as mu_cheap falls


def test_pair_models_joins_on_question_id():
    cheap = pd.DataFrame(
        {"question_id": ["a", "b", "c"], "expected_accuracy": [0.1, 0.2, 0.3], "n": [4, 4, 4]}
    )
    strong = pd.DataFrame(
        {"question_id": ["c", "a", "d"], "expected_accuracy": [0.9, 0.8, 0.7], "n": [8, 8, 8]}
    )
    paired = pair_models(cheap, strong)
    assert paired.to_dict("list") == {
        "question_id": ["a", "c"], "mu_cheap": [0.1, 0.3], "n_cheap": [4, 4], "mu_strong": [0.8, 0.9],
        "n_strong": [8, 8],
    }  # fmt: skip
    assert list(paired.index) == [0, 1]
    for name, table in (("cheap", cheap), ("strong", strong)):
        with pytest.raises(ValueError, match=f"^{name} table has no column\\(s\\) expected_accuracy, n$"):
            pair_models(
                *[t.drop(columns=["expected_accuracy", "n"]) if t is table else t for t in (cheap, strong)]
            )
        with pytest.raises(ValueError, match=f"^{name} table has several rows per \\('question_id',\\)"):
            pair_models(*[pd.concat([t, t]) if t is table else t for t in (cheap, strong)])
    with pytest.raises(ValueError, match="several rows"):
        pair_models(pd.concat([cheap, cheap]), strong)
    with pytest.raises(ValueError, match="^the cheap and strong tables share no question$"):
        pair_models(cheap, strong.assign(question_id=["x", "y", "z"]))
    with pytest.raises(ValueError, match=r"fractions"):
        routing_accuracy([0.1], [0.1], [0.2], [1.5])


def test_all_equal_confidences_route_like_random(models):
    _, cheap, strong = models
    curves = routing_curves({"flat": np.full(cheap.size, 0.5)}, cheap, strong)
    flat = curves[curves["method"] == "flat"]["accuracy"].to_numpy()
    random = curves[curves["method"] == "random"]["accuracy"].to_numpy()
    np.testing.assert_allclose(flat, random, rtol=0, atol=1e-14)


def test_curves_at_the_fractions_asked_for(models):
    """Every method's curve is evaluated at the caller's fractions (not the default grid), and each
    estimator's points are routing_accuracy's; at 0.3 of 10 questions, 3 of the lowest are routed."""
    _, cheap, strong = models
    cheap, strong = cheap[:10], strong[:10]
    confidence = np.linspace(0.9, 0.0, 10)
    curves = routing_curves({"c": confidence}, cheap, strong, fractions=[0.0, 0.3, 1.0])
    assert curves.groupby("method")["fraction"].apply(list).to_dict() == {
        method: [0.0, 0.3, 1.0] for method in ("c", "random", "oracle_cheap", "oracle_gain")
    }
    points = curves[curves["method"] == "c"]["accuracy"].to_numpy()
    np.testing.assert_allclose(points, routing_accuracy(confidence, cheap, strong, [0.0, 0.3, 1.0]))
    routed = np.argsort(confidence)[:3]  # the three lowest confidences go to the strong model
    np.testing.assert_allclose(points[1], np.where(np.isin(np.arange(10), routed), strong, cheap).mean())


def test_each_bad_input_is_named():
    good = np.array([0.2, 0.5, 0.9])
    for arguments, message in (
        ((good, [0.1, 1.5, 0.2], good), r"^mu_cheap "),
        ((good, good, [0.1, 0.2]), r"^mu_strong "),
        ((good, good, [0.1, 0.2, -0.1]), r"^mu_strong "),
        ((good, good, good, [0.5, 1.5]), r"^fractions "),
        (([0.1, np.nan, 0.3], good, good), r"^priority must be finite with one value per question \(3\)$"),
        (([0.1, 0.2], good, good), r"^priority must be finite with one value per question \(3\)$"),
    ):
        with pytest.raises(ValueError, match=message):
            routing_accuracy(*arguments)
