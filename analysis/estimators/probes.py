"""Linear probes on prompt activations that predict the capability target mu_hat.

The paper probe is the one of "On Calibration of LLMs: From Response To Capability" (arXiv 2602.13540, its
probing estimator): the hidden states of the last prompt token, read before any generation, predict how
likely the model is to solve the question.

Features are the hidden states of the last prompt token, shape (N, L + 1, d) with the embeddings first
(``analysis.runs.activations.load_activations(...).last_token``), or already pooled (N, d). Three probe kinds:

* ``"paper"`` — the paper's probe: features averaged over layers (or one ``config.layer``), optionally
  z-scored, ``Linear(d, 1)``, trained with binary cross-entropy against the SOFT target mu_hat
  (``BCE(sigmoid(w.x + b), mu_hat)``, a regression through BCE) by SGD (momentum 0.9, weight decay 1e-2,
  batch 32) with early stopping on the validation loss. The learning rate (grid ``config.learning_rates``)
  and z-scoring on/off are chosen by the validation BCE; confidence = sigmoid(w.x + b). The SGD is
  torch.optim.SGD's update written in numpy (the tests check it against torch step for step), with all
  learning rates of the grid trained side by side as columns of one weight matrix: same initialisation
  (torch.nn.Linear's), same batches, each column stopping on its own.
* ``"ridge"`` — closed-form ridge regression on z-scored layer-mean features, on logit(mu_hat) (mu_hat
  clipped to [``logit_clip``, 1 - ``logit_clip``]; confidence = sigmoid) or on mu_hat itself (confidence =
  prediction clipped to [0, 1]). Solved once per split by an eigendecomposition of the Gram (d <= n) or
  kernel (d > n) matrix, so the whole alpha grid costs one decomposition.
* ``"per_layer"`` — the ridge probe on each layer separately; layer and alpha chosen together.

Ridge hyper-parameters are chosen by the validation Brier score mean (c - mu_hat)^2. Every probe is fitted
on the ``train`` questions of a :class:`QuestionSplits`, tuned on its ``validation`` questions, and remembers
both sets (as SHA-256 fingerprints of the question ids): :meth:`LinearProbe.predict` needs the question ids of
the rows it scores and raises :class:`SplitLeakageError` when any was used for fitting or tuning, so a probe
cannot be evaluated on its training questions by accident. :meth:`LinearProbe.save` writes the weights as
safetensors and everything else (config, feature normalisation, chosen hyper-parameters, validation scores,
split fingerprints) as JSON; nothing is pickled.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from safetensors.numpy import load_file, save_file

from analysis.runs.validation import check_question_ids, read_json_file
from capcal_metrics.validation import check_integer, check_probabilities

from .split_guard import SplitLeakageError, held_out_question_ids, ids_digest, question_fingerprints

__all__ = [
    "LinearProbe",
    "ProbeConfig",
    "QuestionSplits",
    "fit_probe",
    "load_probe",
]

ProbeKind = Literal["paper", "ridge", "per_layer"]
PROBE_FORMAT = "capcal-linear-probe"
PROBE_VERSION = 1
WEIGHTS_NAME = "probe.safetensors"
CONFIG_NAME = "probe.json"


@dataclass(frozen=True)
class QuestionSplits:
    """Disjoint train / validation / test question ids (test may be empty: then any unseen id is held out).

    Raises :class:`SplitLeakageError` if a question is in two splits, ``ValueError`` for an empty train or
    validation split or duplicate ids.
    """

    train: tuple[str, ...]
    validation: tuple[str, ...]
    test: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("train", "validation", "test"):
            ids = check_question_ids(getattr(self, name), f"splits.{name}")
            object.__setattr__(self, name, tuple(ids))
        if not self.train or not self.validation:
            raise ValueError("the train and validation splits must both be non-empty")
        for first, second in (("train", "validation"), ("train", "test"), ("validation", "test")):
            shared = set(getattr(self, first)) & set(getattr(self, second))
            if shared:
                raise SplitLeakageError(
                    f"splits overlap: {len(shared)} question(s) in both {first} and {second} "
                    f"(e.g. {sorted(shared)[0]!r})"
                )

    @classmethod
    def random(
        cls,
        question_ids: Sequence[str],
        *,
        validation_fraction: float = 0.2,
        test_fraction: float = 0.2,
        seed: int = 0,
    ) -> QuestionSplits:
        """Split ``question_ids`` at random, stably: questions are ordered by SHA-256 of ``f"{seed}:{id}"``,
        so a question's split does not depend on the input order. Fractions are rounded to whole questions."""
        ids = check_question_ids(question_ids)
        for name, value in (("validation_fraction", validation_fraction), ("test_fraction", test_fraction)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        ordered = sorted(ids, key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
        n_test = int(round(test_fraction * len(ids)))
        n_validation = int(round(validation_fraction * len(ids)))
        test, validation = ordered[:n_test], ordered[n_test : n_test + n_validation]
        return cls(
            train=tuple(ordered[n_test + n_validation :]), validation=tuple(validation), test=tuple(test)
        )


@dataclass(frozen=True)
class ProbeConfig:
    """Training settings; the defaults follow the paper where it states them."""

    learning_rates: tuple[float, ...] = (1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4)
    standardize: tuple[bool, ...] = (False, True)  # paper probe: try with and without z-scoring
    momentum: float = 0.9
    weight_decay: float = 1e-2
    batch_size: int = 32
    max_epochs: int = 200
    patience: int = 10  # epochs without a lower validation loss before stopping
    ridge_alphas: tuple[float, ...] = tuple(float(10.0**e) for e in np.arange(-2.0, 5.01, 0.5))
    ridge_target: Literal["logit", "mu"] = "logit"
    logit_clip: float = 0.01
    layer: int | None = None  # paper / ridge: None = mean over layers, else this layer's hidden state
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.learning_rates or any(not (lr > 0) for lr in self.learning_rates):
            raise ValueError("learning_rates must be a non-empty tuple of positive numbers")
        if not self.standardize or any(not isinstance(s, bool) for s in self.standardize):
            raise ValueError("standardize must be a non-empty tuple of booleans")
        if not self.ridge_alphas or any(not (a > 0) for a in self.ridge_alphas):
            raise ValueError("ridge_alphas must be a non-empty tuple of positive numbers")
        if self.ridge_target not in ("logit", "mu"):
            raise ValueError(f"ridge_target must be 'logit' or 'mu', got {self.ridge_target!r}")
        if not 0.0 < self.logit_clip < 0.5:
            raise ValueError(f"logit_clip must be in (0, 0.5), got {self.logit_clip!r}")
        for name in ("batch_size", "max_epochs", "patience"):
            check_integer(getattr(self, name), name)
        if not (0.0 <= self.momentum < 1.0) or self.weight_decay < 0.0:
            raise ValueError("momentum must be in [0, 1) and weight_decay >= 0")


@dataclass(frozen=True)
class LinearProbe:
    """A fitted linear probe: ``confidence = link(w . (pool(h) - mean) / scale + b)``.

    ``pool`` is the mean over layers (``layer`` None) or one layer; ``link`` is ``"sigmoid"`` or ``"clip"``
    (clip to [0, 1]). Use :meth:`predict` on held-out questions only.
    """

    kind: str
    layer: int | None
    link: str
    weight: np.ndarray
    bias: float
    feature_mean: np.ndarray | None
    feature_scale: np.ndarray | None
    n_layers: int  # layers (incl. embeddings) of the expected features; 0 for pooled (N, d) features
    hidden_size: int
    hyperparameters: dict[str, Any]
    selection: list[dict[str, Any]]
    train_ids_sha256: str
    validation_ids_sha256: str
    n_train: int
    n_validation: int
    seen_question_hashes: frozenset[str] = field(repr=False)

    def predict(self, features: ArrayLike, question_ids: Sequence[str]) -> np.ndarray:
        """Confidences (N,) in [0, 1] for ``features`` (N, L + 1, d) or (N, d) of the questions
        ``question_ids``; raises :class:`SplitLeakageError` if any was a train or validation question."""
        array = _check_features(features, self.n_layers, self.hidden_size)
        held_out_question_ids(
            question_ids, self.seen_question_hashes, length=array.shape[0], what=f"this {self.kind} probe"
        )
        pooled = _pool(array, np.arange(array.shape[0]), self.layer)
        if self.feature_mean is not None:
            pooled = (pooled - self.feature_mean) / self.feature_scale
        raw = pooled @ self.weight + self.bias
        if self.link == "sigmoid":
            return _sigmoid(raw)
        return np.clip(raw, 0.0, 1.0)

    def save(self, directory: str | Path) -> Path:
        """Write ``probe.safetensors`` (weight, bias) and ``probe.json`` (the rest) into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        weights_path = directory / WEIGHTS_NAME
        save_file(
            {"weight": np.ascontiguousarray(self.weight, dtype=np.float64), "bias": np.array([self.bias])},
            str(weights_path),
        )
        config = {
            "format": PROBE_FORMAT,
            "version": PROBE_VERSION,
            "kind": self.kind,
            "layer": self.layer,
            "link": self.link,
            "n_layers": self.n_layers,
            "hidden_size": self.hidden_size,
            "normalization": {
                "standardize": self.feature_mean is not None,
                "mean": None if self.feature_mean is None else self.feature_mean.tolist(),
                "scale": None if self.feature_scale is None else self.feature_scale.tolist(),
            },
            "hyperparameters": self.hyperparameters,
            "selection": self.selection,
            "training": {
                "n_train": self.n_train,
                "n_validation": self.n_validation,
                "train_ids_sha256": self.train_ids_sha256,
                "validation_ids_sha256": self.validation_ids_sha256,
                "seen_question_hashes": sorted(self.seen_question_hashes),
            },
            "weights_sha256": hashlib.sha256(weights_path.read_bytes()).hexdigest(),
        }
        (directory / CONFIG_NAME).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
        return directory


def load_probe(directory: str | Path) -> LinearProbe:
    """Read a probe written by :meth:`LinearProbe.save`; checks the format and that the weights file is the
    one the JSON was written with (SHA-256)."""
    directory = Path(directory)
    config_path, weights_path = directory / CONFIG_NAME, directory / WEIGHTS_NAME
    for path in (config_path, weights_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (expected a folder written by LinearProbe.save)")
    config = read_json_file(config_path, file_format=PROBE_FORMAT, version=PROBE_VERSION)
    if hashlib.sha256(weights_path.read_bytes()).hexdigest() != config.get("weights_sha256"):
        raise ValueError(f"{weights_path}: does not match the weights {config_path} was written with")
    tensors = load_file(str(weights_path))
    normalization = config["normalization"]
    training = config["training"]
    return LinearProbe(
        kind=config["kind"],
        layer=config["layer"],
        link=config["link"],
        weight=tensors["weight"],
        bias=float(tensors["bias"][0]),
        feature_mean=None
        if normalization["mean"] is None
        else np.asarray(normalization["mean"], dtype=np.float64),
        feature_scale=None
        if normalization["scale"] is None
        else np.asarray(normalization["scale"], dtype=np.float64),
        n_layers=int(config["n_layers"]),
        hidden_size=int(config["hidden_size"]),
        hyperparameters=config["hyperparameters"],
        selection=config["selection"],
        train_ids_sha256=training["train_ids_sha256"],
        validation_ids_sha256=training["validation_ids_sha256"],
        n_train=int(training["n_train"]),
        n_validation=int(training["n_validation"]),
        seen_question_hashes=frozenset(training["seen_question_hashes"]),
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # stable for large |x|


def _check_features(
    features: ArrayLike, n_layers: int | None = None, hidden_size: int | None = None
) -> np.ndarray:
    array = np.asarray(features)
    if array.ndim not in (2, 3) or array.shape[0] == 0:
        raise ValueError(f"features must have shape (N, layers, d) or (N, d) with N >= 1, got {array.shape}")
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    layers = array.shape[1] if array.ndim == 3 else 0
    if n_layers is not None and (layers != n_layers or array.shape[-1] != hidden_size):
        expected = f"(N, {n_layers}, {hidden_size})" if n_layers else f"(N, {hidden_size})"
        raise ValueError(f"features have shape {array.shape}; this probe expects {expected}")
    return array


def _pool(features: np.ndarray, rows: np.ndarray, layer: int | None) -> np.ndarray:
    """float64 (len(rows), d): mean over layers (layer None) or one layer; 2-D features as they are."""
    if features.ndim == 2:
        return features[rows].astype(np.float64)
    if layer is None:
        return features[rows].mean(axis=1, dtype=np.float64)
    return features[rows, layer].astype(np.float64)


def _standardization(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-12, scale, 1.0)


def _rows(index: dict[str, int], ids: Sequence[str], split: str) -> np.ndarray:
    missing = [q for q in ids if q not in index]
    if missing:
        raise ValueError(f"{len(missing)} {split} question(s) have no features/targets (e.g. {missing[0]!r})")
    return np.array([index[q] for q in ids], dtype=np.int64)


def fit_probe(
    features: ArrayLike,
    mu_hat: ArrayLike,
    question_ids: Sequence[str],
    splits: QuestionSplits,
    *,
    kind: ProbeKind = "paper",
    config: ProbeConfig | None = None,
) -> LinearProbe:
    """Fit a probe of ``kind`` on ``splits.train``, choosing hyper-parameters on ``splits.validation``.

    ``features`` (N, L + 1, d) or (N, d), ``mu_hat`` (N,) in [0, 1] and ``question_ids`` (N,) are aligned
    row by row and may hold more questions than the two splits (e.g. the test questions too: they are never
    read). Every train and validation id must be present. The returned probe refuses to score any train or
    validation question.
    """
    config = config or ProbeConfig()
    if kind not in ("paper", "ridge", "per_layer"):
        raise ValueError(f"kind must be 'paper', 'ridge' or 'per_layer', got {kind!r}")
    if not isinstance(splits, QuestionSplits):
        raise ValueError("splits must be a QuestionSplits")
    array = _check_features(features)
    targets = check_probabilities(mu_hat, "mu_hat", length=array.shape[0])
    ids = check_question_ids(question_ids, length=array.shape[0])
    index = {q: row for row, q in enumerate(ids)}
    train, validation = _rows(index, splits.train, "train"), _rows(index, splits.validation, "validation")
    n_layers = array.shape[1] if array.ndim == 3 else 0
    if config.layer is not None and not (0 <= config.layer < max(n_layers, 1) and n_layers):
        raise ValueError(f"config.layer={config.layer} is not a layer of features with shape {array.shape}")
    if kind == "per_layer" and not n_layers:
        raise ValueError("per_layer probes need features with a layer axis, shape (N, L + 1, d)")

    if kind == "paper":
        result = _fit_paper(array, targets, train, validation, config)
    else:
        layers = list(range(n_layers)) if kind == "per_layer" else [config.layer]
        result = _fit_ridge(array, targets, train, validation, config, layers)
    return LinearProbe(
        kind=kind,
        n_layers=n_layers,
        hidden_size=int(array.shape[-1]),
        train_ids_sha256=ids_digest(splits.train),
        validation_ids_sha256=ids_digest(splits.validation),
        n_train=len(train),
        n_validation=len(validation),
        seen_question_hashes=question_fingerprints((*splits.train, *splits.validation)),
        **result,
    )


def _bce(logits: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Mean binary cross-entropy with soft targets, from logits, per column: softplus(x) - y x."""
    logits = np.asarray(logits, dtype=np.float64)
    target = target.reshape(-1, *([1] * (logits.ndim - 1)))
    return np.mean(np.logaddexp(0.0, logits) - target * logits, axis=0)


@dataclass(frozen=True)
class _SgdResult:
    weight: np.ndarray  # (d, R): the weights of the epoch with the lowest validation loss, per learning rate
    bias: np.ndarray  # (R,)
    validation_bce: np.ndarray  # (R,); inf where training diverged before any finite epoch
    epochs: np.ndarray  # (R,) the best epoch (0: none)


def _sgd_bce(
    x: np.ndarray,
    y: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    learning_rates: Sequence[float],
    *,
    init: tuple[np.ndarray, float],
    epoch_orders: Any,
    momentum: float,
    weight_decay: float,
    batch_size: int,
    max_epochs: int,
    patience: int,
) -> _SgdResult:
    """Mini-batch SGD on BCE(sigmoid(x w + b), y) for every learning rate at once (one weight column each).

    The update is torch.optim.SGD's (dampening 0, no Nesterov): g = grad + weight_decay * param (bias
    included), buf = momentum * buf + g, param -= lr * buf. All columns see the same initialisation and the
    same batches (``epoch_orders()`` gives each epoch's permutation); a column stops (is frozen) after
    ``patience`` epochs without a lower validation loss, or when its loss stops being finite.
    """
    rates = np.asarray(learning_rates, dtype=np.float64)
    columns = rates.size
    weight = np.repeat(np.asarray(init[0], dtype=np.float64)[:, None], columns, axis=1)
    bias = np.full(columns, float(init[1]))
    buffer_weight, buffer_bias = np.zeros_like(weight), np.zeros_like(bias)
    best_weight, best_bias = weight.copy(), bias.copy()
    best_loss = np.full(columns, np.inf)
    best_epoch = np.zeros(columns, dtype=np.int64)
    stale = np.zeros(columns, dtype=np.int64)
    active = np.ones(columns, dtype=bool)
    for epoch in range(1, max_epochs + 1):
        order = epoch_orders()
        step = rates * active
        with np.errstate(over="ignore", invalid="ignore"):
            for start in range(0, order.size, batch_size):
                batch = order[start : start + batch_size]
                xb = x[batch]
                residual = (_sigmoid(xb @ weight + bias) - y[batch, None]) / batch.size
                buffer_weight = momentum * buffer_weight + (xb.T @ residual + weight_decay * weight)
                buffer_bias = momentum * buffer_bias + (residual.sum(axis=0) + weight_decay * bias)
                weight = weight - step * buffer_weight
                bias = bias - step * buffer_bias
            loss = _bce(x_val @ weight + bias, y_val)
        finite = np.isfinite(loss)
        improved = active & finite & (loss < best_loss - 1e-12)
        best_weight[:, improved], best_bias[improved] = weight[:, improved], bias[improved]
        best_loss[improved], best_epoch[improved] = loss[improved], epoch
        stale = np.where(improved, 0, stale + 1)
        active &= finite & (stale < patience)
        if not active.any():
            break
    return _SgdResult(best_weight, best_bias, best_loss, best_epoch)


def _fit_paper(
    features: np.ndarray, targets: np.ndarray, train: np.ndarray, validation: np.ndarray, config: ProbeConfig
) -> dict[str, Any]:
    x_train_raw, x_val_raw = _pool(features, train, config.layer), _pool(features, validation, config.layer)
    y_train, y_val = targets[train], targets[validation]
    mean, scale = _standardization(x_train_raw)
    d = x_train_raw.shape[1]
    selection: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for standardize in config.standardize:
        x_train = (x_train_raw - mean) / scale if standardize else x_train_raw
        x_val = (x_val_raw - mean) / scale if standardize else x_val_raw
        rng = np.random.default_rng(config.seed)
        bound = 1.0 / math.sqrt(d)  # torch.nn.Linear's default initialisation, U(-1/sqrt(d), 1/sqrt(d))
        init = (rng.uniform(-bound, bound, d), float(rng.uniform(-bound, bound)))
        result = _sgd_bce(
            x_train,
            y_train,
            x_val,
            y_val,
            config.learning_rates,
            init=init,
            epoch_orders=functools.partial(rng.permutation, len(train)),
            momentum=config.momentum,
            weight_decay=config.weight_decay,
            batch_size=config.batch_size,
            max_epochs=config.max_epochs,
            patience=config.patience,
        )
        for column, lr in enumerate(config.learning_rates):
            score = float(result.validation_bce[column])
            selection.append(
                {
                    "learning_rate": lr,
                    "standardize": standardize,
                    "validation_bce": score if math.isfinite(score) else None,
                    "epochs": int(result.epochs[column]),
                }
            )
            if math.isfinite(score) and (best is None or score < best["score"]):
                best = {
                    "score": score,
                    "weight": result.weight[:, column].copy(),
                    "bias": float(result.bias[column]),
                    "lr": lr,
                    "standardize": standardize,
                    "epochs": int(result.epochs[column]),
                }
    if best is None:
        raise RuntimeError(
            "paper probe: training diverged for every learning rate; z-score the features or lower the rates"
        )
    return {
        "layer": config.layer,
        "link": "sigmoid",
        "weight": best["weight"],
        "bias": best["bias"],
        "feature_mean": mean if best["standardize"] else None,
        "feature_scale": scale if best["standardize"] else None,
        "hyperparameters": {
            "learning_rate": best["lr"],
            "standardize": best["standardize"],
            "epochs": best["epochs"],
            "momentum": config.momentum,
            "weight_decay": config.weight_decay,
            "batch_size": config.batch_size,
            "max_epochs": config.max_epochs,
            "patience": config.patience,
            "seed": config.seed,
            "loss": "binary cross-entropy against the soft target mu_hat",
            "selected_by": "validation_bce",
            "validation_bce": best["score"],
        },
        "selection": selection,
    }


def _ridge_path(x: np.ndarray, y: np.ndarray, alphas: Sequence[float]) -> list[np.ndarray]:
    """Ridge weights min ||y - X w||^2 + alpha ||w||^2 for centred X, y, for every alpha, from one
    eigendecomposition (Gram matrix X^T X when d <= n, kernel X X^T otherwise)."""
    n, d = x.shape
    if d <= n:
        eigenvalues, vectors = np.linalg.eigh(x.T @ x)
        projected = vectors.T @ (x.T @ y)
        return [vectors @ (projected / (np.maximum(eigenvalues, 0.0) + alpha)) for alpha in alphas]
    eigenvalues, vectors = np.linalg.eigh(x @ x.T)
    projected = vectors.T @ y
    return [x.T @ (vectors @ (projected / (np.maximum(eigenvalues, 0.0) + alpha))) for alpha in alphas]


def _fit_ridge(
    features: np.ndarray,
    targets: np.ndarray,
    train: np.ndarray,
    validation: np.ndarray,
    config: ProbeConfig,
    layers: list[int | None],
) -> dict[str, Any]:
    if config.ridge_target == "logit":
        clipped = np.clip(targets, config.logit_clip, 1.0 - config.logit_clip)
        transformed = np.log(clipped) - np.log1p(-clipped)
    else:
        transformed = targets
    y_train, y_val = transformed[train], targets[validation]
    selection: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for layer in layers:
        x_train, x_val = _pool(features, train, layer), _pool(features, validation, layer)
        mean, scale = _standardization(x_train)
        x_train, x_val = (x_train - mean) / scale, (x_val - mean) / scale
        intercept = float(y_train.mean())
        for alpha, weight in zip(
            config.ridge_alphas, _ridge_path(x_train, y_train - intercept, config.ridge_alphas), strict=True
        ):
            raw = x_val @ weight + intercept
            prediction = _sigmoid(raw) if config.ridge_target == "logit" else np.clip(raw, 0.0, 1.0)
            brier = float(np.mean((prediction - y_val) ** 2))
            selection.append({"layer": layer, "alpha": alpha, "validation_brier": brier})
            if best is None or brier < best["score"]:
                best = {
                    "score": brier,
                    "layer": layer,
                    "alpha": alpha,
                    "weight": weight,
                    "bias": intercept,
                    "mean": mean,
                    "scale": scale,
                }
    assert best is not None
    return {
        "layer": best["layer"],
        "link": "sigmoid" if config.ridge_target == "logit" else "clip",
        "weight": best["weight"],
        "bias": best["bias"],
        "feature_mean": best["mean"],
        "feature_scale": best["scale"],
        "hyperparameters": {
            "alpha": best["alpha"],
            "layer": best["layer"],
            "target": config.ridge_target,
            "logit_clip": config.logit_clip if config.ridge_target == "logit" else None,
            "standardize": True,
            "selected_by": "validation_brier",
            "validation_brier": best["score"],
        },
        "selection": selection,
    }
