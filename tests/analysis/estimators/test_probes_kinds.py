"""Linear probes, tested by kind (issue 49): every ProbeConfig field reaches the fit, each field of a record
is read from its own key, candidates are picked by the lowest validation loss in their given order, boundaries
on both sides, messages whole. Expected values come from a reference written here (a plain-loop SGD, scikit-
learn's Ridge, hashlib), never from the probe module. Small hand-built inputs: each test well under a second.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from analysis.estimators import (
    LinearProbe,
    ProbeConfig,
    QuestionSplits,
    SplitLeakageError,
    fit_probe,
    load_probe,
)

N, LAYERS, HIDDEN = 24, 3, 3
IDS = [f"q{i:02d}" for i in range(N)]
TRAIN, VALIDATION, TEST = tuple(IDS[:16]), tuple(IDS[16:22]), tuple(IDS[22:])


def _data() -> tuple[np.ndarray, np.ndarray]:
    """Features (24, 3, 3) whose layers differ (layer l is shifted by l) and mu_hat (two decimals) driven by
    layer 1."""
    rng = np.random.default_rng(4)
    features = rng.normal(size=(N, LAYERS, HIDDEN)) + np.arange(LAYERS)[None, :, None]
    mu_hat = np.round(1.0 / (1.0 + np.exp(-(features[:, 1] @ np.array([1.5, -1.0, 0.5]) - 1.0))), 2)
    return features, mu_hat


def _splits() -> QuestionSplits:
    return QuestionSplits(train=TRAIN, validation=VALIDATION, test=TEST)


def _rows(ids) -> np.ndarray:
    return np.array([IDS.index(q) for q in ids])


def _bce(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.log1p(np.exp(logits)) - y * logits))


def _reference_sgd(x, y, x_val, y_val, lr, init, orders, *, momentum, weight_decay, batch_size, patience):
    """torch.optim.SGD on BCE(sigmoid(x w + b), y), one learning rate, a plain loop; the weights of the epoch
    with the lowest validation BCE, stopping after ``patience`` epochs without a lower one."""
    w, b = np.array(init[0], dtype=float), float(init[1])
    buf_w, buf_b = np.zeros_like(w), 0.0
    best = (math.inf, w.copy(), b, 0)
    stale = 0
    for epoch, order in enumerate(orders, start=1):
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            p = 1.0 / (1.0 + np.exp(-(x[rows] @ w + b)))
            grad_w = x[rows].T @ (p - y[rows]) / len(rows) + weight_decay * w
            grad_b = float(np.sum(p - y[rows])) / len(rows) + weight_decay * b
            buf_w, buf_b = momentum * buf_w + grad_w, momentum * buf_b + grad_b
            w, b = w - lr * buf_w, b - lr * buf_b
        loss = _bce(x_val @ w + b, y_val)
        if loss < best[0] - 1e-12:
            best, stale = (loss, w.copy(), b, epoch), 0
        else:
            stale += 1
            if stale >= patience:
                break
    return best


PAPER = dict(
    learning_rates=(0.8, 0.02),
    standardize=(False, True),
    momentum=0.5,
    weight_decay=0.03,
    batch_size=5,
    max_epochs=12,
    patience=3,
    seed=11,
    layer=1,
)


def _paper_reference(features, mu_hat, settings):
    """Every (standardize, learning rate) candidate of the paper probe, in the config's order, from the
    reference loop: (standardize, lr, validation BCE, epoch, weight, bias)."""
    train, validation = _rows(TRAIN), _rows(VALIDATION)
    layer = settings["layer"]
    pool = (lambda r: features[r].mean(axis=1)) if layer is None else (lambda r: features[r, layer])
    x_raw, xv_raw = pool(train), pool(validation)
    mean, scale = x_raw.mean(axis=0), x_raw.std(axis=0)
    out = []
    for standardize in settings["standardize"]:
        x = (x_raw - mean) / scale if standardize else x_raw
        xv = (xv_raw - mean) / scale if standardize else xv_raw
        rng = np.random.default_rng(settings["seed"])
        bound = 1.0 / math.sqrt(HIDDEN)
        init = (rng.uniform(-bound, bound, HIDDEN), rng.uniform(-bound, bound))
        orders = [rng.permutation(len(train)) for _ in range(settings["max_epochs"])]
        for lr in settings["learning_rates"]:
            loss, w, b, epoch = _reference_sgd(
                x, mu_hat[train], xv, mu_hat[validation], lr, init, orders,
                momentum=settings["momentum"], weight_decay=settings["weight_decay"],
                batch_size=settings["batch_size"], patience=settings["patience"],
            )  # fmt: skip
            out.append((standardize, lr, loss, epoch, w, b))
    return out, mean, scale


def test_paper_probe_uses_every_config_field_as_the_reference_loop_does():
    """Every setting away from its default (momentum, weight decay, a batch size that does not divide the 16
    train questions, max_epochs binding the small rate, patience stopping the large one, seed, layer):
    each selection row, the chosen candidate (lowest validation BCE) and its hyperparameter record equal a
    plain-loop SGD written here."""
    features, mu_hat = _data()
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="paper", config=ProbeConfig(**PAPER))
    reference, mean, scale = _paper_reference(features, mu_hat, PAPER)
    assert [(r["standardize"], r["learning_rate"], r["epochs"]) for r in probe.selection] == [
        (s, lr, epoch) for s, lr, _, epoch, _, _ in reference
    ]
    assert [e for *_, e, _, _ in reference] == [3, 12, 5, 12]  # patience and max_epochs both bind here
    np.testing.assert_allclose(
        [r["validation_bce"] for r in probe.selection], [r[2] for r in reference], rtol=1e-9
    )
    standardize, lr, loss, epoch, weight, bias = min(reference, key=lambda r: r[2])
    assert (standardize, lr) == (True, 0.8)  # neither the first nor the last candidate
    np.testing.assert_allclose(probe.weight, weight, rtol=1e-9, atol=1e-12)
    assert probe.bias == pytest.approx(bias, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(probe.feature_mean, mean, rtol=1e-12)  # train rows only, layer 1
    np.testing.assert_allclose(probe.feature_scale, scale, rtol=1e-12)
    assert (probe.layer, probe.link, probe.kind) == (1, "sigmoid", "paper")
    assert probe.hyperparameters == {
        "learning_rate": 0.8,
        "standardize": True,
        "epochs": 5,
        "momentum": 0.5,
        "weight_decay": 0.03,
        "batch_size": 5,
        "max_epochs": 12,
        "patience": 3,
        "seed": 11,
        "loss": "binary cross-entropy against the soft target mu_hat",
        "selected_by": "validation_bce",
        "validation_bce": pytest.approx(loss, rel=1e-9),
    }


def test_paper_probe_without_z_scoring_keeps_no_normalisation_and_pools_the_layer_mean():
    """standardize=(False,) and layer None: the probe has no feature mean/scale and its weights are the
    reference's on the mean over layers; predict() is sigmoid(x.w + b) of that mean."""
    features, mu_hat = _data()
    settings = {**PAPER, "standardize": (False,), "layer": None, "learning_rates": (0.3,)}
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="paper", config=ProbeConfig(**settings))
    ((_, _, loss, _, weight, bias),), _, _ = _paper_reference(features, mu_hat, settings)
    assert probe.feature_mean is None and probe.feature_scale is None and probe.layer is None
    np.testing.assert_allclose(probe.weight, weight, rtol=1e-9, atol=1e-12)
    assert probe.hyperparameters["validation_bce"] == pytest.approx(loss, rel=1e-9)
    test = _rows(TEST)
    expected = 1.0 / (1.0 + np.exp(-(features[test].mean(axis=1) @ weight + bias)))
    np.testing.assert_allclose(probe.predict(features[test], list(TEST)), expected, rtol=1e-9)


@pytest.mark.parametrize("order", [(False, True), (True, False)])
def test_paper_probe_tie_between_candidates_goes_to_the_first_in_config_order(order):
    """Train features of +-1, balanced per column, have mean exactly 0 and standard deviation exactly 1: the
    z-scored and raw candidates are the same numbers, so their validation BCE ties exactly, and the first
    candidate of ``config.standardize`` is kept (a strict '<'; a '<=' or a reversed order keeps the other)."""
    signs = np.array([[1, 1, -1], [-1, 1, 1], [1, -1, 1], [-1, -1, -1]] * 4, dtype=float)
    signs[8:] *= -1.0  # 16 rows, each column 8 x (+1) and 8 x (-1)
    rng = np.random.default_rng(5)
    features = np.concatenate([signs, rng.normal(size=(8, HIDDEN))])
    mu_hat = np.round(rng.uniform(size=N), 2)
    config = ProbeConfig(learning_rates=(0.1,), standardize=order, max_epochs=4)
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="paper", config=config)
    first, second = probe.selection
    assert first["validation_bce"] == second["validation_bce"]
    assert probe.hyperparameters["standardize"] is order[0]
    assert (probe.feature_mean is not None) is order[0]


def _ridge_reference(features, mu_hat, layer, alphas, *, target="logit", clip=0.01):
    """(alpha, validation Brier, coef, intercept) per alpha from scikit-learn's Ridge on the z-scored train
    features of ``layer`` (None: mean over layers), with mean and scale."""
    train, validation = _rows(TRAIN), _rows(VALIDATION)
    pool = (lambda r: features[r].mean(axis=1)) if layer is None else (lambda r: features[r, layer])
    x, xv = pool(train), pool(validation)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    x, xv = (x - mean) / scale, (xv - mean) / scale
    if target == "logit":
        y = np.clip(mu_hat[train], clip, 1.0 - clip)
        y = np.log(y / (1.0 - y))
    else:
        y = mu_hat[train]
    out = []
    for alpha in alphas:
        model = Ridge(alpha=alpha).fit(x, y)
        raw = xv @ model.coef_ + model.intercept_
        c = 1.0 / (1.0 + np.exp(-raw)) if target == "logit" else np.clip(raw, 0.0, 1.0)
        out.append((alpha, float(np.mean((c - mu_hat[validation]) ** 2)), model.coef_, model.intercept_))
    return out, mean, scale


def test_ridge_probe_reads_layer_alphas_and_logit_clip_from_the_config():
    """layer=2, an unsorted alpha grid and logit_clip=0.1 on targets that hold 0 and 1: the selection rows in
    grid order, the alpha with the lowest validation Brier (against mu_hat itself), its weights and the
    normalisation of layer 2's train rows all equal scikit-learn's Ridge on logit(clip(mu_hat, 0.1, 0.9))."""
    features, mu_hat = _data()
    mu_hat = mu_hat.copy()
    mu_hat[[0, 3]], mu_hat[[5, 9]] = 0.0, 1.0  # the clip matters
    alphas = (30.0, 0.3, 300.0, 3.0)
    config = ProbeConfig(ridge_alphas=alphas, logit_clip=0.1, layer=2)
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="ridge", config=config)
    reference, mean, scale = _ridge_reference(features, mu_hat, 2, alphas, clip=0.1)
    assert [(r["layer"], r["alpha"]) for r in probe.selection] == [(2, a) for a in alphas]
    np.testing.assert_allclose(
        [r["validation_brier"] for r in probe.selection], [r[1] for r in reference], rtol=1e-9
    )
    alpha, brier, coef, intercept = min(reference, key=lambda r: r[1])
    assert alpha not in (alphas[0], alphas[-1]) and alpha != max(reference, key=lambda r: r[1])[0]
    np.testing.assert_allclose(probe.weight, coef, rtol=1e-8, atol=1e-10)
    assert probe.bias == pytest.approx(intercept, abs=1e-10)
    np.testing.assert_allclose(probe.feature_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(probe.feature_scale, scale, rtol=1e-12)
    assert (probe.layer, probe.link) == (2, "sigmoid")
    assert probe.hyperparameters == {
        "alpha": alpha,
        "layer": 2,
        "target": "logit",
        "logit_clip": 0.1,
        "standardize": True,
        "selected_by": "validation_brier",
        "validation_brier": pytest.approx(brier, rel=1e-9),
    }


def test_ridge_probe_mu_target_fits_mu_hat_itself():
    """ridge_target='mu': the weights are Ridge's on mu_hat (no logit, no clip) and the link clips."""
    features, mu_hat = _data()
    config = ProbeConfig(ridge_alphas=(2.0,), ridge_target="mu", logit_clip=0.3)
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="ridge", config=config)
    ((_, brier, coef, intercept),), _, _ = _ridge_reference(features, mu_hat, None, (2.0,), target="mu")
    np.testing.assert_allclose(probe.weight, coef, rtol=1e-8, atol=1e-10)
    assert probe.bias == pytest.approx(intercept, abs=1e-12)
    assert probe.link == "clip" and probe.hyperparameters["logit_clip"] is None
    assert probe.selection == [
        {"layer": None, "alpha": 2.0, "validation_brier": pytest.approx(brier, rel=1e-9)}
    ]


def test_per_layer_probe_tries_layers_in_order_and_keeps_the_first_of_tied_layers():
    """Layers 0 and 2 identical and better than layer 1 (noise): the selection runs layer by layer in order,
    the chosen layer is 0 (a tie with layer 2 goes to the earlier one) and its alpha the best of layer 0."""
    features, mu_hat = _data()
    informative = features[:, 1].copy()
    features = np.stack([informative, np.random.default_rng(9).normal(size=(N, HIDDEN)), informative], axis=1)
    alphas = (100.0, 1.0)
    probe = fit_probe(
        features, mu_hat, IDS, _splits(), kind="per_layer", config=ProbeConfig(ridge_alphas=alphas)
    )
    assert [(r["layer"], r["alpha"]) for r in probe.selection] == [
        (layer, a) for layer in range(3) for a in alphas
    ]
    reference, _, _ = _ridge_reference(features, mu_hat, 0, alphas)
    alpha = min(reference, key=lambda r: r[1])[0]
    assert (
        probe.layer == 0 and probe.hyperparameters["layer"] == 0 and probe.hyperparameters["alpha"] == alpha
    )
    briers = {(r["layer"], r["alpha"]): r["validation_brier"] for r in probe.selection}
    assert briers[(0, alpha)] == briers[(2, alpha)] < briers[(1, alpha)]


def test_fitted_probe_records_its_own_splits():
    """Split digests (SHA-256 of the sorted, newline-joined ids) each from its own split, the counts, and the
    seen fingerprints: train and validation ids only, never the test ones (which stay scorable)."""
    features, mu_hat = _data()
    probe = fit_probe(features, mu_hat, IDS, _splits(), kind="ridge", config=ProbeConfig(ridge_alphas=(1.0,)))
    digest = lambda ids: hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()  # noqa: E731
    assert probe.train_ids_sha256 == digest(TRAIN) and probe.validation_ids_sha256 == digest(VALIDATION)
    assert (probe.n_train, probe.n_validation) == (16, 6)
    assert probe.seen_question_hashes == {
        hashlib.sha256(q.encode()).hexdigest()[:16] for q in TRAIN + VALIDATION
    }
    assert (probe.n_layers, probe.hidden_size) == (3, 3)
    assert probe.predict(features[_rows(TEST)], list(TEST)).shape == (2,)


def test_fit_ignores_rows_outside_the_train_and_validation_splits():
    """Test-question rows (and their targets) are never read: changing them leaves the probe unchanged."""
    features, mu_hat = _data()
    config = ProbeConfig(learning_rates=(0.3,), max_epochs=3)
    first = fit_probe(features, mu_hat, IDS, _splits(), kind="paper", config=config)
    changed, targets = features.copy(), mu_hat.copy()
    changed[_rows(TEST)] += 100.0
    targets[_rows(TEST)] = 1.0 - targets[_rows(TEST)]
    second = fit_probe(changed, targets, IDS, _splits(), kind="paper", config=config)
    np.testing.assert_array_equal(first.weight, second.weight)
    assert first.selection == second.selection


def _hand_probe(**changes) -> LinearProbe:
    fields = dict(
        kind="ridge", layer=1, link="sigmoid", weight=np.array([0.5, -2.0]), bias=0.25,
        feature_mean=np.array([1.0, 2.0]), feature_scale=np.array([4.0, 0.5]), n_layers=3, hidden_size=2,
        hyperparameters={"alpha": 7.0}, selection=[{"alpha": 7.0, "validation_brier": 0.125}],
        train_ids_sha256="a" * 64, validation_ids_sha256="b" * 64, n_train=5, n_validation=2,
        seen_question_hashes=frozenset({"0123456789abcdef"}),
    )  # fmt: skip
    return LinearProbe(**{**fields, **changes})


FEATURES = np.array([[[9.0, 9.0], [3.0, 1.5], [-9.0, 7.0]], [[0.0, 1.0], [-1.0, 2.5], [5.0, -3.0]]])


def test_predict_uses_the_probes_layer_mean_scale_weight_and_bias():
    """By hand: layer 1 is (3, 1.5) and (-1, 2.5); z = ((3-1)/4, (1.5-2)/0.5) = (0.5, -1), score 0.25 + 0.25
    + 2 = 2.5; z = (-0.5, 1), score 0.25 - 0.25 - 2 = -2."""
    probe = _hand_probe()
    np.testing.assert_allclose(
        probe.predict(FEATURES, ["x", "y"]), 1.0 / (1.0 + np.exp(-np.array([2.5, -2.0])))
    )
    clipped = _hand_probe(link="clip").predict(FEATURES, ["x", "y"])
    np.testing.assert_array_equal(clipped, [1.0, 0.0])
    # layer None: means over layers (1, 2.5) and (4/3, 1/6); no normalisation
    raw = _hand_probe(layer=None, feature_mean=None, feature_scale=None, link="clip")
    np.testing.assert_allclose(raw.predict(FEATURES, ["x", "y"]), [0.0, np.clip(0.25 + 2 / 3 - 1 / 3, 0, 1)])


def test_predict_refuses_a_seen_question_and_a_wrong_shape_with_whole_messages():
    probe = _hand_probe(seen_question_hashes=frozenset({hashlib.sha256(b"seen").hexdigest()[:16]}))
    with pytest.raises(SplitLeakageError) as error:
        probe.predict(FEATURES, ["fresh", "seen"])
    assert str(error.value) == (
        "this ridge probe was fitted or tuned on 1 of these 2 questions ('seen'); scoring them would leak "
        "the training targets into the evaluation. Score only held-out questions."
    )
    with pytest.raises(ValueError) as error:
        probe.predict(FEATURES[:, :2], ["x", "y"])
    assert str(error.value) == "features have shape (2, 2, 2); this probe expects (N, 3, 2)"
    pooled = _hand_probe(n_layers=0, hidden_size=3)
    with pytest.raises(ValueError) as error:
        pooled.predict(np.zeros((2, 2)), ["x", "y"])
    assert str(error.value) == "features have shape (2, 2); this probe expects (N, 3)"


def test_save_writes_each_field_under_its_own_key(tmp_path):
    """The JSON of a hand-built probe whose fields all differ, whole (weights_sha256 from hashlib here)."""
    folder = _hand_probe().save(tmp_path / "probe")
    saved = json.loads((folder / "probe.json").read_text())
    assert saved == {
        "format": "capcal-linear-probe",
        "version": 1,
        "kind": "ridge",
        "layer": 1,
        "link": "sigmoid",
        "n_layers": 3,
        "hidden_size": 2,
        "normalization": {"standardize": True, "mean": [1.0, 2.0], "scale": [4.0, 0.5]},
        "hyperparameters": {"alpha": 7.0},
        "selection": [{"alpha": 7.0, "validation_brier": 0.125}],
        "training": {
            "n_train": 5,
            "n_validation": 2,
            "train_ids_sha256": "a" * 64,
            "validation_ids_sha256": "b" * 64,
            "seen_question_hashes": ["0123456789abcdef"],
        },
        "weights_sha256": hashlib.sha256((folder / "probe.safetensors").read_bytes()).hexdigest(),
    }
    unnormalised = json.loads(
        (_hand_probe(feature_mean=None, feature_scale=None).save(tmp_path / "raw") / "probe.json").read_text()
    )
    assert unnormalised["normalization"] == {"standardize": False, "mean": None, "scale": None}


def test_random_splits_read_each_fraction_and_the_seed():
    """validation_fraction 0.3 and test_fraction 0.1 of 10 ids: 1 test, 3 validation, 6 train, in the order
    of SHA-256("7:<id>") (seed 7): test first, then validation. Fraction 0 is allowed (the closed end)."""
    ids = [f"id{i}" for i in range(10)]
    ordered = sorted(ids, key=lambda q: hashlib.sha256(f"7:{q}".encode()).hexdigest())
    splits = QuestionSplits.random(ids, validation_fraction=0.3, test_fraction=0.1, seed=7)
    assert splits.test == tuple(ordered[:1])
    assert splits.validation == tuple(ordered[1:4])
    assert splits.train == tuple(ordered[4:])
    none = QuestionSplits.random(ids, validation_fraction=0.5, test_fraction=0.0, seed=7)
    assert none.test == () and none.validation == tuple(ordered[:5]) and none.train == tuple(ordered[5:])
    with pytest.raises(ValueError) as error:
        QuestionSplits.random(ids, test_fraction=-1e-9)
    assert str(error.value) == "test_fraction must be in [0, 1), got -1e-09"


def test_overlapping_splits_message_names_both_splits_the_count_and_the_first_shared_id():
    with pytest.raises(SplitLeakageError) as error:
        QuestionSplits(train=("a", "d", "c"), validation=("b",), test=("d", "c", "e"))
    assert str(error.value) == "splits overlap: 2 question(s) in both train and test (e.g. 'c')"


def test_probe_config_boundaries_on_both_sides():
    """logit_clip in the open (0, 0.5); momentum in [0, 1); weight_decay >= 0; integers >= 1."""
    for good in (
        {"logit_clip": 1e-9}, {"logit_clip": 0.4999}, {"momentum": 0.0}, {"weight_decay": 0.0},
        {"batch_size": 1, "max_epochs": 1, "patience": 1}, {"learning_rates": (1e-12,)},
        {"ridge_alphas": (1e-12,)},
    ):  # fmt: skip
        ProbeConfig(**good)
    with pytest.raises(ValueError) as error:
        ProbeConfig(logit_clip=0.0)
    assert str(error.value) == "logit_clip must be in (0, 0.5), got 0.0"
    for bad in ({"momentum": -1e-9}, {"weight_decay": -1e-9}):
        with pytest.raises(ValueError) as error:
            ProbeConfig(**bad)
        assert str(error.value) == "momentum must be in [0, 1) and weight_decay >= 0"
    for name in ("batch_size", "max_epochs", "patience"):
        with pytest.raises(ValueError) as error:
            ProbeConfig(**{name: 0})
        assert str(error.value) == f"{name} must be a positive integer (an integer >= 1), got 0"


def test_fit_probe_refusals_with_whole_messages():
    features, mu_hat = _data()
    splits = _splits()
    cases = [
        ({"kind": "lasso"}, "kind must be 'paper', 'ridge' or 'per_layer', got 'lasso'"),
        ({"config": ProbeConfig(layer=3)}, "config.layer=3 is not a layer of features with shape (24, 3, 3)"),
        (
            {"config": ProbeConfig(layer=-1)},
            "config.layer=-1 is not a layer of features with shape (24, 3, 3)",
        ),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as error:
            fit_probe(features, mu_hat, IDS, splits, **{"kind": "ridge", **kwargs})
        assert str(error.value) == message
    pooled = features[:, 0]
    with pytest.raises(ValueError) as error:
        fit_probe(pooled, mu_hat, IDS, splits, kind="ridge", config=ProbeConfig(layer=0))
    assert str(error.value) == "config.layer=0 is not a layer of features with shape (24, 3)"
    with pytest.raises(ValueError) as error:
        fit_probe(pooled, mu_hat, IDS, splits, kind="per_layer")
    assert str(error.value) == "per_layer probes need features with a layer axis, shape (N, L + 1, d)"
    missing = QuestionSplits(train=TRAIN, validation=("zz", "zy"))
    with pytest.raises(ValueError) as error:
        fit_probe(features, mu_hat, IDS, missing, kind="ridge")
    assert str(error.value) == "2 validation question(s) have no features/targets (e.g. 'zz')"
    with pytest.raises(ValueError) as error:
        fit_probe(features[:0], mu_hat[:0], [], splits, kind="ridge")
    assert str(error.value) == "features must have shape (N, layers, d) or (N, d) with N >= 1, got (0, 3, 3)"
    # the boundary layers themselves are accepted
    for layer in (0, LAYERS - 1):
        probe = fit_probe(
            features, mu_hat, IDS, splits, kind="ridge", config=ProbeConfig(layer=layer, ridge_alphas=(1.0,))
        )
        assert probe.layer == layer


def test_load_probe_restores_each_field_of_a_hand_built_probe(tmp_path):
    """Every field differs from its siblings (train vs validation digest and count, mean vs scale, layer vs
    n_layers vs hidden_size): the loaded probe equals the saved one field by field."""
    probe = _hand_probe()
    loaded = load_probe(probe.save(tmp_path / "probe"))
    for name in probe.__dataclass_fields__:
        original, restored = getattr(probe, name), getattr(loaded, name)
        if isinstance(original, np.ndarray):
            np.testing.assert_array_equal(restored, original, err_msg=name)
        else:
            assert restored == original, name
    unnormalised = load_probe(_hand_probe(feature_mean=None, feature_scale=None).save(tmp_path / "raw"))
    assert unnormalised.feature_mean is None and unnormalised.feature_scale is None


def test_load_probe_refusals_with_whole_messages(tmp_path):
    folder = _hand_probe().save(tmp_path / "probe")
    other = _hand_probe(bias=0.5).save(tmp_path / "other")
    (folder / "probe.safetensors").write_bytes((other / "probe.safetensors").read_bytes())
    with pytest.raises(ValueError) as error:
        load_probe(folder)
    assert str(error.value) == (
        f"{folder / 'probe.safetensors'}: does not match the weights {folder / 'probe.json'} was written with"
    )
    (other / "probe.json").unlink()
    with pytest.raises(FileNotFoundError) as error:
        load_probe(other)
    assert str(error.value) == (
        f"{other / 'probe.json'} not found (expected a folder written by LinearProbe.save)"
    )


def test_paper_probe_skips_a_learning_rate_that_diverged():
    """Features of size 1e100 without z-scoring: the rate 1e200 overflows on its first epoch (its selection
    row has no validation BCE and no best epoch), the rate 1e-203 stays finite and is chosen."""
    rng = np.random.default_rng(6)
    features = rng.normal(size=(N, HIDDEN)) * 1e100
    config = ProbeConfig(learning_rates=(1e200, 1e-203), standardize=(False,), max_epochs=4, patience=2)
    probe = fit_probe(features, np.round(rng.uniform(size=N), 2), IDS, _splits(), kind="paper", config=config)
    diverged, finite = probe.selection
    assert (diverged["learning_rate"], diverged["validation_bce"], diverged["epochs"]) == (1e200, None, 0)
    assert math.isfinite(finite["validation_bce"]) and finite["epochs"] >= 1
    assert probe.hyperparameters["learning_rate"] == 1e-203 and np.isfinite(probe.weight).all()


def test_random_split_sizes_are_rounded_not_truncated():
    """10 ids: validation 0.28 -> 2.8 -> 3 questions (truncation would give 2); test 0.15 -> 1.5 -> 2."""
    splits = QuestionSplits.random(
        [f"id{i}" for i in range(10)], validation_fraction=0.28, test_fraction=0.15
    )
    assert (len(splits.train), len(splits.validation), len(splits.test)) == (5, 3, 2)


def test_a_constant_train_feature_gets_scale_one_not_a_division_by_zero():
    """Column 1 constant (2.5) on the train rows: its mean is 2.5, its scale 1 (not 0), so the ridge probe's
    weights and predictions stay finite; the other columns get their train standard deviation."""
    features, mu_hat = _data()
    pooled = features.mean(axis=1)
    pooled[_rows(TRAIN), 1] = 2.5
    probe = fit_probe(pooled, mu_hat, IDS, _splits(), kind="ridge", config=ProbeConfig(ridge_alphas=(1.0,)))
    assert probe.feature_mean[1] == 2.5 and probe.feature_scale[1] == 1.0
    assert probe.feature_scale[0] == pytest.approx(pooled[_rows(TRAIN), 0].std(), rel=1e-12)
    assert np.isfinite(probe.weight).all()
    assert np.isfinite(probe.predict(pooled[_rows(TEST)], list(TEST))).all()


def test_the_splits_are_checked_in_the_order_train_validation_test():
    """With a repeated id in every split, the error names the first split as written (train), then, train
    fixed, validation, then test: the split a user reads first is the one reported."""
    with pytest.raises(ValueError, match=r"^splits\.train contains duplicates \(e\.g\. 'a'\)$"):
        QuestionSplits(train=("a", "a"), validation=("b", "b"), test=("c", "c"))
    with pytest.raises(ValueError, match=r"^splits\.validation contains duplicates \(e\.g\. 'b'\)$"):
        QuestionSplits(train=("a",), validation=("b", "b"), test=("c", "c"))
    with pytest.raises(ValueError, match=r"^splits\.test contains duplicates \(e\.g\. 'c'\)$"):
        QuestionSplits(train=("a",), validation=("b",), test=("c", "c"))
