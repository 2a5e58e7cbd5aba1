"""``analysis.report.registry``'s estimator functions on small tables (no model, no run folder): the elicited
reader, the isotonic recalibration fitted on the calibration split and applied to the evaluation questions,
and each reason it gives for not fitting. The oracle for the fitted values is
``analysis.estimators.recalibration.fit_isotonic`` called directly (itself tested against sklearn)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from safetensors.numpy import save_file

from analysis.estimators.consistency import consistency_from_table
from analysis.estimators.probes import QuestionSplits, fit_probe
from analysis.estimators.recalibration import fit_isotonic
from analysis.report.registry import (
    MIN_RECALIBRATION_QUESTIONS,
    CalibrationData,
    Estimator,
    EstimatorContext,
    EstimatorResult,
    compute_estimators,
    consistency,
    elicited,
    isotonic,
    probe,
    probe_training_questions,
    selfcheck_mean,
)


def _calibration(table: pd.DataFrame, dropped: int = 0) -> CalibrationData:
    return CalibrationData(("capcal_arithmetic_train",), table, dropped, (), "in-domain", "declared")


def _context(evaluation: pd.DataFrame, calibration: CalibrationData | None) -> EstimatorContext:
    return EstimatorContext("m", "capcal_arithmetic", evaluation, calibration, None)


def _train(size: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(size=size)
    return pd.DataFrame(
        {
            # ids whose text order differs from their numeric order ("10" < "9")
            "question_id": [str(i) for i in range(size)],
            "ptrue": confidence,
            "expected_accuracy": np.clip(confidence + rng.normal(0, 0.2, size), 0, 1).round(3),
        }
    )


def test_elicited_reads_the_column_and_nothing_when_it_is_absent_or_empty() -> None:
    evaluation = pd.DataFrame({"question_id": ["1", "2"], "verbalized": [0.25, np.nan]})
    result = elicited("verbalized")(_context(evaluation, None))
    assert list(result.columns) == ["verbalized"]
    np.testing.assert_array_equal(result.columns["verbalized"], [0.25, np.nan])
    assert result.notes == [] and result.trained_on is None
    assert elicited("ptrue")(_context(evaluation, None)).columns == {}
    empty = evaluation.assign(verbalized=np.nan)
    assert elicited("verbalized")(_context(empty, None)).columns == {}
    assert elicited("verbalized").__name__ == "elicited_verbalized"


def test_isotonic_is_fitted_on_the_calibration_rows_with_a_confidence_and_applied_where_one_is_finite() -> (
    None
):
    train = _train(14)
    train.loc[[2, 11], "ptrue"] = np.nan  # no confidence: not fitted on
    evaluation = pd.DataFrame(
        {
            "question_id": ["e10", "e9", "e1", "e2"],
            "ptrue": [0.1, np.nan, 0.55, 0.97],
            "expected_accuracy": 0.5,
        }
    )
    fit = isotonic("ptrue")
    assert fit.__name__ == "isotonic_ptrue"
    result = fit(_context(evaluation, _calibration(train, dropped=1)))
    kept = train.dropna(subset=["ptrue"])
    oracle = fit_isotonic(
        kept["ptrue"].to_numpy(), kept["expected_accuracy"].to_numpy(), list(kept["question_id"])
    )
    pairs = zip(evaluation["ptrue"], evaluation["question_id"], strict=True)
    expected = np.array(
        [oracle.predict(np.array([c]), [q])[0] if np.isfinite(c) else np.nan for c, q in pairs]
    )
    assert list(result.columns) == ["isotonic_ptrue"]
    np.testing.assert_allclose(result.columns["isotonic_ptrue"], expected, rtol=0, atol=1e-12)
    assert (
        np.isnan(result.columns["isotonic_ptrue"][1])
        and np.isfinite(result.columns["isotonic_ptrue"][[0, 2, 3]]).all()
    )
    assert result.trained_questions == 12
    assert result.trained_on == (
        "capcal_arithmetic_train (14 questions, in-domain, declared; 1 question(s) also in the evaluation "
        "set dropped); fitted on 12 questions with ptrue"
    )
    assert result.notes == []


def test_isotonic_says_why_it_is_not_fitted() -> None:
    evaluation = pd.DataFrame({"question_id": ["e1", "e2"], "ptrue": [0.2, 0.8], "expected_accuracy": 0.5})
    fit = isotonic("ptrue")
    # no calibration split, or no confidence on the evaluation questions: nothing, silently (said once)
    assert fit(_context(evaluation, None)) == fit(
        _context(evaluation.drop(columns="ptrue"), _calibration(_train(12)))
    )
    nothing = fit(_context(evaluation, None))
    assert nothing.columns == {} and nothing.notes == [] and nothing.trained_on is None
    assert fit(_context(evaluation.assign(ptrue=np.nan), _calibration(_train(12)))).columns == {}
    no_column = fit(_context(evaluation, _calibration(_train(12).drop(columns="ptrue"))))
    assert no_column.columns == {} and no_column.notes == [
        "no isotonic_ptrue: no ptrue on the calibration split"
    ]
    few = _train(MIN_RECALIBRATION_QUESTIONS + 1)
    few.loc[0, "ptrue"] = np.nan
    few.loc[1, "ptrue"] = np.nan  # MIN - 1 questions with a confidence
    short = fit(_context(evaluation, _calibration(few)))
    assert short.columns == {} and short.notes == [
        f"no isotonic_ptrue: {MIN_RECALIBRATION_QUESTIONS - 1} calibration questions with ptrue (needs 10)"
    ]
    few.loc[1, "ptrue"] = 0.5  # exactly MIN: fitted
    assert "isotonic_ptrue" in fit(_context(evaluation, _calibration(few))).columns


@pytest.mark.parametrize("dropped", [0, 3])
def test_the_calibration_label_names_the_split_its_size_domain_and_drops(dropped: int) -> None:
    label = _calibration(_train(12), dropped).label()
    tail = f"; {dropped} question(s) also in the evaluation set dropped" if dropped else ""
    assert label == f"capcal_arithmetic_train (12 questions, in-domain, declared{tail})"


def test_object_columns_are_read_as_numbers() -> None:
    """Confidence and accuracy columns that pandas holds as objects (a join that brought in None, values
    read from JSON one by one) are read as floats, None as NaN, exactly as float columns are."""
    as_objects = pd.DataFrame(
        {"question_id": ["e10", "e9", "e1"], "ptrue": pd.Series([0.2, None, 0.9], dtype=object)}
    )
    result = elicited("ptrue")(_context(as_objects, None))
    assert result.columns["ptrue"].dtype == np.float64
    np.testing.assert_array_equal(result.columns["ptrue"], [0.2, np.nan, 0.9])

    train = _train(12)
    floats = isotonic("ptrue")(_context(as_objects.astype({"ptrue": float}), _calibration(train)))
    objects = train.astype({"ptrue": object, "expected_accuracy": object})
    fitted = isotonic("ptrue")(_context(as_objects, _calibration(objects)))
    assert fitted.columns["isotonic_ptrue"].dtype == np.float64
    np.testing.assert_array_equal(fitted.columns["isotonic_ptrue"], floats.columns["isotonic_ptrue"])


# ------------------------------------------------------------------ the probe

LAYERS, HIDDEN = 3, 4  # synthetic activations: embeddings + 2 layers, 4 units


def _activations(
    folder: Path, keys: list[tuple[str, str]], seed: int = 0
) -> dict[tuple[str, str], np.ndarray]:
    """An activations folder (one shard, the index of ``capcal_models.activation_format``) holding random
    last-token and prompt-mean states for each (task, question_id); returns the last-token states."""
    rng = np.random.default_rng(seed)
    tensors, entries, written = {}, {}, {}
    for number, (task, question_id) in enumerate(keys):
        written[(task, question_id)] = rng.normal(size=(LAYERS, HIDDEN)).astype(np.float32)
        tensors[f"{number}.last_token"] = written[(task, question_id)]
        tensors[f"{number}.prompt_mean"] = rng.normal(size=(LAYERS, HIDDEN)).astype(np.float32)
        entries.setdefault(task, {})[question_id] = {
            "shard": "activations-00000.safetensors",
            "last_token": f"{number}.last_token",
            "prompt_mean": f"{number}.prompt_mean",
            "prompt_tokens": 3,
            "prompt_sha256": "0" * 64,
        }
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "activations-00000.safetensors"))
    index = {
        "format": "capcal-activations",
        "version": 1,
        "model": "m",
        "model_fingerprint": None,
        "dtype": "float32",
        "num_layers_with_embeddings": LAYERS,
        "hidden_size": HIDDEN,
        "entries": entries,
    }
    (folder / "index.json").write_text(json.dumps(index))
    return written


def _probe_tables(train_size: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Calibration questions c0.. (task capcal_arithmetic_train) and four evaluation questions e0..e3."""
    train = _train(train_size).assign(
        task="capcal_arithmetic_train", question_id=[f"c{i}" for i in range(train_size)]
    )
    evaluation = pd.DataFrame(
        {"task": "capcal_arithmetic", "question_id": [f"e{i}" for i in range(4)], "expected_accuracy": 0.5}
    )
    return train, evaluation


def test_probe_is_fitted_on_three_quarters_of_the_calibration_split_and_scores_the_evaluation_questions(
    tmp_path: Path,
) -> None:
    """The probe's confidences are those of ``fit_probe`` called directly on the calibration split's
    last-token states with the same split (9 fitted, 3 validated), and its label says so."""
    train, evaluation = _probe_tables()
    keys = [(t, q) for t, q in zip(train["task"], train["question_id"], strict=True)]
    keys += [(t, q) for t, q in zip(evaluation["task"], evaluation["question_id"], strict=True)]
    states = _activations(tmp_path, keys)
    context = EstimatorContext("m", "capcal_arithmetic", evaluation, _calibration(train, dropped=2), tmp_path)
    result = probe(context)
    splits = QuestionSplits.random(list(train["question_id"]), validation_fraction=0.25, test_fraction=0.0)
    assert (len(splits.train), len(splits.validation)) == (9, 3)
    oracle = fit_probe(
        np.stack([states[key] for key in keys[:12]]),
        train["expected_accuracy"].to_numpy(),
        list(train["question_id"]),
        splits,
        kind="paper",
    )
    expected = oracle.predict(np.stack([states[key] for key in keys[12:]]), list(evaluation["question_id"]))
    assert list(result.columns) == ["probe"]
    np.testing.assert_allclose(result.columns["probe"], expected, rtol=0, atol=1e-12)
    assert result.trained_questions == 9 and result.notes == [] and result.extra == {}
    assert result.trained_on == (
        "capcal_arithmetic_train (12 questions, in-domain, declared; 2 question(s) also in the evaluation "
        "set dropped); paper probe on the last prompt token (mean over layers), 9 questions fitted, "
        "3 validated, evaluated on 4 capcal_arithmetic questions"
    )
    assert probe_training_questions(12) == 9 and probe_training_questions(13) == 10


def test_probe_says_why_it_is_not_fitted(tmp_path: Path) -> None:
    """No activations folder or no calibration split: nothing, silently; an empty split, or activations
    missing for some question: nothing, with the reason."""
    train, evaluation = _probe_tables()
    assert probe(EstimatorContext("m", "capcal_arithmetic", evaluation, _calibration(train), None)) == (
        EstimatorResult()
    )
    assert probe(EstimatorContext("m", "capcal_arithmetic", evaluation, None, tmp_path)) == EstimatorResult()
    empty = probe(
        EstimatorContext("m", "capcal_arithmetic", evaluation, _calibration(train.iloc[:0]), tmp_path)
    )
    assert empty == EstimatorResult(notes=["no probe: the calibration split has no questions left"])
    keys = [(t, q) for t, q in zip(train["task"], train["question_id"], strict=True)]
    _activations(tmp_path, keys)  # none of the evaluation questions
    missing = probe(EstimatorContext("m", "capcal_arithmetic", evaluation, _calibration(train), tmp_path))
    assert missing == EstimatorResult(
        notes=[
            f"no probe: {tmp_path}: no activations for 4 of 4 questions: capcal_arithmetic/e0, "
            "capcal_arithmetic/e1, capcal_arithmetic/e2, capcal_arithmetic/e3"
        ]
    )


def test_selfcheck_mean_is_the_mean_p_yes_of_each_questions_responses() -> None:
    """A question without a list (or an empty one) has none; no column, or no question with one: nothing."""
    evaluation = pd.DataFrame(
        {"question_id": ["1", "2", "3", "4"], "selfcheck_p_yes_normalized": [[0.2, 0.4], [], None, [1.0]]}
    )
    result = selfcheck_mean(_context(evaluation, None))
    assert list(result.columns) == ["selfcheck_mean"] and result.notes == [] and result.trained_on is None
    np.testing.assert_allclose(
        result.columns["selfcheck_mean"], [0.3, np.nan, np.nan, 1.0], rtol=0, atol=1e-15
    )
    assert selfcheck_mean(_context(evaluation.iloc[1:3], None)) == EstimatorResult()
    assert selfcheck_mean(_context(evaluation[["question_id"]], None)) == EstimatorResult()


def test_consistency_scores_each_k_below_the_smallest_n_and_says_when_none_is() -> None:
    """k = n would draw every response (and leave the leakage-free form no target): ks (2, 4) on questions
    of 4 responses score k = 2 only, as consistency_from_table does; ks (4,) score none and say so."""
    evaluation = pd.DataFrame(
        {
            "question_id": ["1", "2", "10"],
            "n": [4, 4, 4],
            "extracted_answers": [["5", "5", "5", "3"], ["1", "2", "1", "2"], ["7", "7", "7", "7"]],
            "correctness": [[1, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]],
        }
    )
    context = dataclasses.replace(_context(evaluation, None), consistency_ks=(2, 4), seed=5)
    result = consistency(context)
    assert list(result.columns) == ["consistency_k2"]
    expected = consistency_from_table(evaluation, ks=[2], seed=5)
    np.testing.assert_array_equal(result.columns["consistency_k2"], expected["consistency_k2"])
    assert result.notes == [
        "consistency_k{k}: modal-answer share among k of the n responses drawn without replacement (paper "
        "form: the draws overlap the samples that define mu_hat); k in [2]"
    ]
    assert list(result.extra) == ["leakage_free"]
    none = consistency(dataclasses.replace(context, consistency_ks=(4,)))
    assert none.columns == {} and none.notes == ["consistency: no k in [4] is below n"]


def test_compute_estimators_keeps_each_entrys_training_label_and_size_as_the_entry_gave_them() -> None:
    """A training label without a size (or a size without a label) is kept as given, not read from the
    other field: the report's label and its question count are two facts."""
    evaluation = pd.DataFrame({"question_id": ["a", "b"]})

    def labelled(context: EstimatorContext) -> EstimatorResult:
        return EstimatorResult(columns={"labelled": np.array([0.2, 0.4])}, trained_on="split x")

    def sized(context: EstimatorContext) -> EstimatorResult:
        return EstimatorResult(columns={"sized": np.array([0.6, 0.8])}, trained_questions=7)

    computed = compute_estimators(
        _context(evaluation, None),
        (Estimator("labelled", labelled, "capability"), Estimator("sized", sized, "capability")),
    )
    assert computed.trained_on == {"labelled": "split x"}
    assert computed.trained_questions == {"sized": 7}
    assert list(computed.evaluation["sized"]) == [0.6, 0.8]
