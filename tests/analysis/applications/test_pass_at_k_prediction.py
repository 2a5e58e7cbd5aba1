"""pass@k prediction: MSE and dataset curves against direct math.comb computations; Oracle-RC exact against
its Monte-Carlo protocol."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis.applications import dataset_curve, instance_mse, oracle_rc_mse, pass_at_k_prediction


def _unbiased(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = rng.integers(64, 101, 600)
    mu = rng.beta(0.5, 0.7, n.size)
    c = rng.binomial(n, mu)
    confidence = np.clip(mu + rng.normal(0, 0.15, n.size), 0, 1)
    return n, c, confidence


def test_oracle_cc_and_estimator_mse_match_a_direct_computation(data):
    n, c, confidence = data
    table = pass_at_k_prediction({"probe": confidence}, n, c, rc_seeds=0).set_index(["estimator", "k"])
    for k in (1, 4, 16, 64):
        for name, p in (("probe", confidence), ("oracle_cc", c / n)):
            direct = np.mean(
                [(1 - (1 - pi) ** k - _unbiased(ni, ci, k)) ** 2 for pi, ni, ci in zip(p, n, c, strict=True)]
            )
            assert table.loc[(name, k), "mse"] == pytest.approx(direct, rel=1e-10, abs=1e-15)
    # Oracle-CC is exact at k = 1 (pass@1 = c/n) and the probe is not
    assert table.loc[("oracle_cc", 1), "mse"] == pytest.approx(0.0, abs=1e-20)
    assert table.loc[("probe", 1), "mse"] > 1e-3


def test_oracle_rc_exact_expectation_equals_its_monte_carlo_mean(data):
    n, c, _ = data
    rc = oracle_rc_mse(n, c, seeds=300).set_index("k")
    for _, row in rc.iterrows():
        assert abs(row["mse_mc"] - row["mse"]) < 4 * row["mse_mc_se"]
    # and the exact form against a literal pick of one of the real samples
    rng = np.random.default_rng(5)
    literal = []
    for _ in range(200):
        z = np.array([rng.permutation([1] * ci + [0] * (ni - ci))[0] for ni, ci in zip(n, c, strict=True)])
        literal.append(
            np.mean([(zi - _unbiased(ni, ci, 16)) ** 2 for zi, ni, ci in zip(z, n, c, strict=True)])
        )
    assert abs(np.mean(literal) - rc.loc[16, "mse"]) < 4 * np.std(literal, ddof=1) / math.sqrt(len(literal))


def test_dataset_curve_band_and_observed(data):
    n, c, confidence = data
    curve = dataset_curve(confidence, n, c, ks=[1, 8, 64]).set_index("k")
    for k in (1, 8, 64):
        s = 1 - (1 - confidence) ** k
        half = 1.96 * math.sqrt(float(np.sum(s * (1 - s)))) / n.size
        assert curve.loc[k, "predicted"] == pytest.approx(s.mean(), rel=1e-12)
        assert curve.loc[k, "band_high"] - curve.loc[k, "predicted"] == pytest.approx(half, rel=1e-9)
        observed = np.mean([_unbiased(ni, ci, k) for ni, ci in zip(n, c, strict=True)])
        assert curve.loc[k, "observed"] == pytest.approx(observed, rel=1e-10)
    full = dataset_curve(confidence, n, c)
    assert full["k"].tolist() == list(range(1, int(n.min()) + 1))


def test_k_above_n_is_left_out_and_n_equal_one():
    n, c = np.array([3, 5]), np.array([1, 5])
    assert instance_mse([0.5, 0.9], n, c, ks=(1, 4, 16)).k.tolist() == [1]
    with pytest.raises(ValueError, match="smallest number of samples"):
        instance_mse([0.5, 0.9], n, c, ks=(4, 16))
    # n = 1: pass@1 = z; Oracle-CC is perfect, Oracle-RC too (its one pick is the only sample)
    z = np.array([0, 1, 1, 0])
    ones = np.ones(4, dtype=int)
    assert instance_mse(z.astype(float), ones, z, ks=(1,)).mse[0] == 0.0
    assert oracle_rc_mse(ones, z, ks=(1,)).mse[0] == 0.0
    # without seeds the documented columns are all there, the Monte-Carlo ones NaN
    exact_only = oracle_rc_mse(ones, z, ks=(1,))
    assert exact_only.columns.tolist() == ["k", "mse", "mse_mc", "mse_mc_se"]
    assert exact_only[["mse_mc", "mse_mc_se"]].isna().all().all()
    with pytest.raises(ValueError, match="n_correct must be <= n_samples"):
        instance_mse([0.5], [2], [3])


@pytest.mark.parametrize(
    ("ks", "message"),
    [
        ((0, 1), "ks must be a positive integer (an integer >= 1), got 0"),
        ((), "ks is empty"),
        ("1", "ks must be a sequence of positive integers, got '1'"),
    ],
)
def test_a_bad_ks_grid_is_refused_by_name(ks: object, message: str) -> None:
    """Every function's ``ks`` error names the argument ``ks``: catches a grid checked under another name."""
    n, c = np.array([3, 5]), np.array([1, 5])
    for function, arguments in (
        (instance_mse, ([0.5, 0.9], n, c)),
        (dataset_curve, ([0.5, 0.9], n, c)),
        (oracle_rc_mse, (n, c)),
    ):
        with pytest.raises(ValueError) as raised:
            function(*arguments, ks=ks)
        assert str(raised.value) == message, function.__name__


def test_monte_carlo_oracle_rc_rows_carry_their_mse_and_standard_error(data):
    """With rc_seeds > 0 the ``oracle_rc_mc`` rows hold oracle_rc_mse's Monte-Carlo mean as ``mse`` and its
    standard error as ``mse_se`` (the renamed columns must not come out empty)."""
    n, c, confidence = data
    table = pass_at_k_prediction({"probe": confidence}, n, c, ks=(1, 4), rc_seeds=7)
    assert table.columns.tolist() == ["estimator", "k", "mse", "mse_se"]
    estimators = ("probe", "oracle_cc", "oracle_rc", "oracle_rc_mc")
    assert table["estimator"].tolist() == [name for name in estimators for _ in (1, 4)]
    rc = oracle_rc_mse(n, c, ks=(1, 4), seeds=7)
    mc = table[table["estimator"] == "oracle_rc_mc"]
    np.testing.assert_array_equal(mc["k"], [1, 4])
    np.testing.assert_allclose(mc["mse"], rc["mse_mc"], rtol=0, atol=0)
    np.testing.assert_allclose(mc["mse_se"], rc["mse_mc_se"], rtol=0, atol=0)
    assert mc["mse"].notna().all() and mc["mse_se"].notna().all()
    exact = table[table["estimator"] == "oracle_rc"]
    np.testing.assert_allclose(exact["mse"], rc["mse"], rtol=0, atol=0)
    assert exact["mse_se"].isna().all()
