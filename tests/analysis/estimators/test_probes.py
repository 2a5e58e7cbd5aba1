"""Linear probes: split guards, the SGD against torch, ridge against scikit-learn, recovery of a planted
linear signal, save/load without pickle."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis.estimators import (
    LinearProbe,
    ProbeConfig,
    QuestionSplits,
    SplitLeakageError,
    fit_probe,
    load_probe,
)
from analysis.estimators import probes as probes_module

N_QUESTIONS, N_LAYERS, HIDDEN = 900, 4, 16


@pytest.fixture(scope="module")
def planted():
    """Activations (N, 4, 16) whose layer mean carries a linear signal: logit mu = x.w; mu_hat from 10
    Bernoulli(mu) samples; each layer = x + independent noise (sd 0.5)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_QUESTIONS, HIDDEN))
    w = rng.normal(size=HIDDEN) * 2.0 / np.sqrt(HIDDEN)
    mu = 1.0 / (1.0 + np.exp(-(x @ w)))
    mu_hat = rng.binomial(10, mu) / 10
    features = (x[:, None, :] + rng.normal(scale=0.5, size=(N_QUESTIONS, N_LAYERS, HIDDEN))).astype(
        np.float32
    )
    ids = [f"toy/{i:04d}" for i in range(N_QUESTIONS)]
    splits = QuestionSplits.random(ids, validation_fraction=0.2, test_fraction=0.2, seed=0)
    test_rows = np.array([ids.index(q) for q in splits.test])
    return features, mu, mu_hat, ids, splits, test_rows


def _brier(p, y):
    return float(np.mean((np.asarray(p) - np.asarray(y)) ** 2))


def test_splits_refuse_overlap_and_are_stable():
    with pytest.raises(SplitLeakageError, match="train and validation"):
        QuestionSplits(train=("a", "b"), validation=("b", "c"))
    with pytest.raises(SplitLeakageError, match="validation and test"):
        QuestionSplits(train=("a",), validation=("b",), test=("b",))
    with pytest.raises(ValueError, match="duplicates"):
        QuestionSplits(train=("a", "a"), validation=("b",))
    with pytest.raises(ValueError, match="non-empty"):
        QuestionSplits(train=(), validation=("b",))
    ids = [f"q{i}" for i in range(100)]
    first = QuestionSplits.random(ids, seed=3)
    shuffled = QuestionSplits.random(list(reversed(ids)), seed=3)
    assert set(first.train) == set(shuffled.train) and set(first.test) == set(shuffled.test)
    assert (len(first.train), len(first.validation), len(first.test)) == (60, 20, 20)
    assert set(first.train) | set(first.validation) | set(first.test) == set(ids)


@pytest.mark.parametrize("kind", ["paper", "ridge", "per_layer"])
def test_probe_recovers_a_planted_signal(planted, kind):
    """On held-out questions the probe must beat the constant predictor (train mean of mu_hat) by a wide
    margin: Brier against the true mu below 30% of the constant's, and correlation with mu above 0.8."""
    features, mu, mu_hat, ids, splits, test_rows = planted
    probe = fit_probe(features, mu_hat, ids, splits, kind=kind)
    predicted = probe.predict(features[test_rows], list(splits.test))
    train_rows = np.array([ids.index(q) for q in splits.train])
    constant = np.full(test_rows.size, mu_hat[train_rows].mean())
    assert _brier(predicted, mu[test_rows]) < 0.3 * _brier(constant, mu[test_rows])
    assert np.corrcoef(predicted, mu[test_rows])[0, 1] > 0.8
    assert ((predicted >= 0) & (predicted <= 1)).all()
    assert probe.n_train == len(splits.train) and probe.n_validation == len(splits.validation)


def test_paper_probe_selection_covers_the_grid(planted):
    features, _, mu_hat, ids, splits, _ = planted
    config = ProbeConfig(learning_rates=(1e-5, 5e-4), max_epochs=30)
    probe = fit_probe(features, mu_hat, ids, splits, kind="paper", config=config)
    grid = {(row["learning_rate"], row["standardize"]) for row in probe.selection}
    assert grid == {(1e-5, False), (1e-5, True), (5e-4, False), (5e-4, True)}
    best = min(probe.selection, key=lambda row: row["validation_bce"])
    assert probe.hyperparameters["validation_bce"] == best["validation_bce"]
    assert probe.hyperparameters["learning_rate"] in (1e-5, 5e-4)
    assert probe.hyperparameters == {  # the record in full: catches a renamed or dropped key
        "learning_rate": best["learning_rate"],
        "standardize": best["standardize"],
        "epochs": best["epochs"],
        "momentum": 0.9,
        "weight_decay": 1e-2,
        "batch_size": 32,
        "max_epochs": 30,
        "patience": 10,
        "seed": 0,
        "loss": "binary cross-entropy against the soft target mu_hat",
        "selected_by": "validation_bce",
        "validation_bce": best["validation_bce"],
    }


def test_per_layer_probe_finds_the_informative_layer():
    rng = np.random.default_rng(1)
    n, layers, d = 600, 5, 12
    x = rng.normal(size=(n, d))
    mu = 1.0 / (1.0 + np.exp(-(x @ rng.normal(size=d))))
    features = rng.normal(size=(n, layers, d))
    features[:, 3] = x + rng.normal(scale=0.3, size=(n, d))  # only layer 3 carries the signal
    ids = [f"q{i}" for i in range(n)]
    splits = QuestionSplits.random(ids, seed=1)
    probe = fit_probe(features, rng.binomial(10, mu) / 10, ids, splits, kind="per_layer")
    assert probe.layer == 3 and probe.hyperparameters["layer"] == 3
    assert {row["layer"] for row in probe.selection} == set(range(layers))


def test_numpy_sgd_equals_torch_sgd_step_for_step():
    """The vectorised SGD (all learning rates at once) against torch.optim.SGD + BCEWithLogits, one
    learning rate at a time, same init and batches: weights agree to float32 precision after 3 epochs."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    n, d = 100, 6
    x, y = rng.normal(size=(n, d)), rng.uniform(size=n)
    init = (rng.uniform(-0.4, 0.4, d), 0.1)
    orders = [rng.permutation(n) for _ in range(3)]
    rates = (1e-3, 5e-2)
    feed = iter(orders)
    ours = probes_module._sgd_bce(
        x, y, x, y, rates, init=init, epoch_orders=lambda: next(feed),
        momentum=0.9, weight_decay=1e-2, batch_size=32, max_epochs=3, patience=100,
    )  # fmt: skip
    for column, lr in enumerate(rates):
        model = torch.nn.Linear(d, 1, dtype=torch.float64)
        with torch.no_grad():
            model.weight.copy_(torch.as_tensor(init[0])[None, :])
            model.bias.fill_(init[1])
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-2)
        xt, yt = torch.as_tensor(x), torch.as_tensor(y)
        for order in orders:
            for start in range(0, n, 32):
                batch = torch.as_tensor(order[start : start + 32])
                optimizer.zero_grad()
                torch.nn.functional.binary_cross_entropy_with_logits(
                    model(xt[batch])[:, 0], yt[batch]
                ).backward()
                optimizer.step()
        # the validation loss decreases here on every epoch, so the kept weights are the last ones
        assert ours.epochs[column] == 3
        np.testing.assert_allclose(
            ours.weight[:, column], model.weight.detach().numpy()[0], rtol=1e-9, atol=1e-12
        )
        assert ours.bias[column] == pytest.approx(float(model.bias.detach()[0]), rel=1e-9, abs=1e-12)


def test_ridge_weights_equal_scikit_learn(planted):
    from sklearn.linear_model import Ridge

    features, _, mu_hat, ids, splits, _ = planted
    config = ProbeConfig(ridge_alphas=(3.0,), ridge_target="mu")
    probe = fit_probe(features, mu_hat, ids, splits, kind="ridge", config=config)
    rows = np.array([ids.index(q) for q in splits.train])
    x = features[rows].mean(axis=1, dtype=np.float64)
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    reference = Ridge(alpha=3.0).fit(x, mu_hat[rows])
    np.testing.assert_allclose(probe.weight, reference.coef_, rtol=1e-8, atol=1e-10)
    assert probe.bias == pytest.approx(reference.intercept_, abs=1e-10)
    # with fewer questions than dimensions the kernel form is used: same solution as scikit-learn
    xs, ys = x[:10], mu_hat[rows[:10]]
    kernel_form = probes_module._ridge_path(xs - xs.mean(axis=0), ys - ys.mean(), [2.0])[0]
    np.testing.assert_allclose(kernel_form, Ridge(alpha=2.0).fit(xs, ys).coef_, rtol=1e-7, atol=1e-9)


def test_probe_refuses_training_and_validation_questions(planted, tmp_path):
    features, _, mu_hat, ids, splits, test_rows = planted
    probe = fit_probe(features, mu_hat, ids, splits, kind="ridge")
    train_rows = [ids.index(q) for q in splits.train[:5]]
    with pytest.raises(SplitLeakageError, match="fitted or tuned on 5"):
        probe.predict(features[train_rows], list(splits.train[:5]))
    mixed = [splits.test[0], splits.validation[0]]
    with pytest.raises(SplitLeakageError, match="fitted or tuned on 1"):
        probe.predict(features[[ids.index(q) for q in mixed]], mixed)
    with pytest.raises(ValueError, match="one per row"):
        probe.predict(features[test_rows], list(splits.test[:3]))
    # the guard survives save/load, and so do the predictions
    loaded = load_probe(probe.save(tmp_path / "probe"))
    with pytest.raises(SplitLeakageError):
        loaded.predict(features[train_rows], list(splits.train[:5]))
    np.testing.assert_array_equal(
        loaded.predict(features[test_rows], list(splits.test)),
        probe.predict(features[test_rows], list(splits.test)),
    )


def test_fit_refuses_missing_ids_and_bad_targets(planted):
    features, _, mu_hat, ids, splits, _ = planted
    outsider = QuestionSplits(train=("nowhere/1",), validation=(ids[0],))
    with pytest.raises(ValueError, match="train question"):
        fit_probe(features, mu_hat, ids, outsider, kind="ridge")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_probe(features, mu_hat * 2, ids, splits, kind="ridge")
    with pytest.raises(ValueError, match="duplicates"):
        fit_probe(features, mu_hat, [ids[0]] * len(ids), splits, kind="ridge")
    with pytest.raises(ValueError, match="layer"):
        fit_probe(features, mu_hat, ids, splits, kind="ridge", config=ProbeConfig(layer=N_LAYERS))
    with pytest.raises(ValueError, match="expects"):
        fit_probe(features, mu_hat, ids, splits, kind="ridge").predict(features[:2, :2], ["x1", "x2"])


@pytest.mark.parametrize("kind", ["paper", "per_layer"])
def test_save_load_round_trip_is_safetensors_and_json(planted, tmp_path, kind):
    features, _, mu_hat, ids, splits, test_rows = planted
    config = ProbeConfig(learning_rates=(5e-4,), max_epochs=20)
    probe = fit_probe(features, mu_hat, ids, splits, kind=kind, config=config)
    folder = probe.save(tmp_path / kind)
    assert sorted(p.name for p in folder.iterdir()) == ["probe.json", "probe.safetensors"]
    saved = json.loads((folder / "probe.json").read_text())
    assert saved["kind"] == kind and saved["hyperparameters"] == probe.hyperparameters
    assert saved["training"]["n_train"] == len(splits.train)
    assert len(saved["training"]["seen_question_hashes"]) == len(splits.train) + len(splits.validation)
    assert len(saved["training"]["train_ids_sha256"]) == 64
    loaded = load_probe(folder)
    assert isinstance(loaded, LinearProbe) and loaded.layer == probe.layer
    np.testing.assert_array_equal(
        loaded.predict(features[test_rows], list(splits.test)),
        probe.predict(features[test_rows], list(splits.test)),
    )
    # weights swapped behind the JSON's back are refused
    other = fit_probe(features, mu_hat, ids, splits, kind="ridge").save(tmp_path / "other")
    (folder / "probe.safetensors").write_bytes((other / "probe.safetensors").read_bytes())
    with pytest.raises(ValueError, match="does not match"):
        load_probe(folder)


def test_pooled_two_dimensional_features(planted):
    features, mu, mu_hat, ids, splits, test_rows = planted
    pooled = features.mean(axis=1)
    probe = fit_probe(pooled, mu_hat, ids, splits, kind="ridge")
    assert probe.n_layers == 0
    predicted = probe.predict(pooled[test_rows], list(splits.test))
    assert np.corrcoef(predicted, mu[test_rows])[0, 1] > 0.8
    with pytest.raises(ValueError, match="layer axis"):
        fit_probe(pooled, mu_hat, ids, splits, kind="per_layer")


def test_split_and_config_validation_messages():
    """Pins the messages (and the half-open [0, 1) range) of QuestionSplits.random and ProbeConfig checks: a
    fraction of 1 would leave no train questions, so it is refused with the name of the argument at fault."""
    ids = [f"q{i}" for i in range(10)]
    for name in ("validation_fraction", "test_fraction"):
        for bad in (1.0, -0.1):
            with pytest.raises(ValueError) as error:
                QuestionSplits.random(ids, **{name: bad})
            assert str(error.value) == f"{name} must be in [0, 1), got {bad!r}"
    cases = {
        "learning_rates must be a non-empty tuple of positive numbers": {"learning_rates": (1e-3, 0.0)},
        "standardize must be a non-empty tuple of booleans": {"standardize": (1,)},
        "ridge_alphas must be a non-empty tuple of positive numbers": {"ridge_alphas": (1.0, 0.0)},
        "ridge_target must be 'logit' or 'mu', got 'probit'": {"ridge_target": "probit"},
        "logit_clip must be in (0, 0.5), got 0.5": {"logit_clip": 0.5},
        "momentum must be in [0, 1) and weight_decay >= 0": {"momentum": 1.0},
    }
    for message, kwargs in cases.items():
        with pytest.raises(ValueError) as error:
            ProbeConfig(**kwargs)
        assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        ProbeConfig(ridge_alphas=())
    assert str(error.value) == "ridge_alphas must be a non-empty tuple of positive numbers"
    with pytest.raises(ValueError) as error:  # empty: no learning rate to select from
        ProbeConfig(learning_rates=())
    assert str(error.value) == "learning_rates must be a non-empty tuple of positive numbers"


def test_paper_probe_reports_divergence_on_every_learning_rate():
    """Unscaled huge features with a huge learning rate overflow every column: the fit must stop with the
    documented RuntimeError (and its advice) instead of returning a probe."""
    rng = np.random.default_rng(3)
    features = rng.normal(size=(40, 3)) * 1e300
    ids = [f"q{i}" for i in range(40)]
    splits = QuestionSplits(train=tuple(ids[:30]), validation=tuple(ids[30:]))
    config = ProbeConfig(learning_rates=(1.0, 10.0), standardize=(False,), max_epochs=3)
    with pytest.raises(RuntimeError) as error, np.errstate(over="ignore"):  # z-score statistics overflow
        fit_probe(features, rng.uniform(size=40), ids, splits, kind="paper", config=config)
    assert str(error.value) == (
        "paper probe: training diverged for every learning rate; z-score the features or lower the rates"
    )


def test_ridge_probe_hyperparameters_and_clip_link(planted, tmp_path):
    """The mu-target ridge probe: its hyperparameter record in full, and predictions of the 'clip' link are
    the linear score clipped to [0, 1] on both sides (scores far outside are produced by scaled features)."""
    features, _, mu_hat, ids, splits, test_rows = planted
    config = ProbeConfig(ridge_alphas=(0.5, 3.0), ridge_target="mu")
    probe = fit_probe(features, mu_hat, ids, splits, kind="ridge", config=config)
    best = min(probe.selection, key=lambda row: row["validation_brier"])
    assert probe.link == "clip"
    assert probe.hyperparameters == {
        "alpha": best["alpha"],
        "layer": None,
        "target": "mu",
        "logit_clip": None,
        "standardize": True,
        "selected_by": "validation_brier",
        "validation_brier": best["validation_brier"],
    }
    scaled = features[test_rows] * 5.0
    pooled = scaled.mean(axis=1, dtype=np.float64)
    raw = (pooled - probe.feature_mean) / probe.feature_scale @ probe.weight + probe.bias
    assert raw.max() > 1.5 and raw.min() < -0.5  # the clip matters on both sides
    predicted = probe.predict(scaled, list(splits.test))
    np.testing.assert_allclose(predicted, np.clip(raw, 0.0, 1.0), rtol=1e-12, atol=1e-12)
    assert predicted.max() == 1.0 and predicted.min() == 0.0


def test_ridge_probe_logit_target_scores_validation_through_the_sigmoid(planted):
    """The logit-target ridge probe: its hyperparameter record in full (logit_clip kept), the 'sigmoid' link,
    and the validation Brier computed on sigmoid(score) (not on the score clipped to [0, 1])."""
    features, _, mu_hat, ids, splits, _ = planted
    config = ProbeConfig(ridge_alphas=(3.0,), ridge_target="logit", logit_clip=0.02)
    probe = fit_probe(features, mu_hat, ids, splits, kind="ridge", config=config)
    rows = np.array([ids.index(q) for q in splits.validation])
    pooled = features[rows].mean(axis=1, dtype=np.float64)
    raw = (pooled - probe.feature_mean) / probe.feature_scale @ probe.weight + probe.bias
    brier = _brier(1.0 / (1.0 + np.exp(-raw)), mu_hat[rows])
    assert abs(brier - _brier(np.clip(raw, 0.0, 1.0), mu_hat[rows])) > 1e-3  # the link matters here
    assert probe.link == "sigmoid"
    assert probe.selection == [
        {"layer": None, "alpha": 3.0, "validation_brier": pytest.approx(brier, rel=1e-9)}
    ]
    assert probe.hyperparameters == {
        "alpha": 3.0,
        "layer": None,
        "target": "logit",
        "logit_clip": 0.02,
        "standardize": True,
        "selected_by": "validation_brier",
        "validation_brier": pytest.approx(brier, rel=1e-9),
    }


@pytest.mark.parametrize("kind", ["ridge", "paper"])
def test_load_probe_restores_every_field(planted, tmp_path, kind):
    """Every field of the loaded probe equals the saved one (kind, link, layer, normalisation, split data)."""
    features, _, mu_hat, ids, splits, _ = planted
    config = ProbeConfig(learning_rates=(5e-4,), standardize=(False,), max_epochs=5, ridge_alphas=(1.0,))
    probe = fit_probe(features, mu_hat, ids, splits, kind=kind, config=config)
    loaded = load_probe(probe.save(tmp_path / kind))
    for name in probe.__dataclass_fields__:
        original, restored = getattr(probe, name), getattr(loaded, name)
        if isinstance(original, np.ndarray):
            np.testing.assert_array_equal(restored, original)
        else:
            assert restored == original, name
    assert loaded.kind == kind
    assert (loaded.feature_mean is None) == (kind == "paper")
