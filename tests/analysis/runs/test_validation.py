"""Table-level input checks of the analysis: counts, named confidences, per-response rectangles, question ids
and JSON files."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from analysis.runs.validation import (
    as_response_matrix,
    check_confidences,
    check_counts,
    check_grid,
    check_question_ids,
    read_json_file,
)


def test_counts_come_back_as_int64():
    n, c = check_counts([10, 4.0], np.array([3, 4]))
    assert n.dtype == c.dtype == np.int64
    np.testing.assert_array_equal(n, [10, 4])
    np.testing.assert_array_equal(c, [3, 4])


@pytest.mark.parametrize(
    ("n_samples", "n_correct", "message"),
    [
        ([10, 0], [3, 0], r"n_samples must be >= 1; found 0"),
        ([10, 4], [3, -1], r"n_correct must be >= 0; found -1"),
        ([10, 4.5], [3, 1], "n_samples must contain whole numbers"),
        ([10, 4], [3, 5], r"n_correct must be <= n_samples \(first violation at index 1\)"),
        ([10, 4], [3], "same length, got 2 and 1"),
        ([], [], "n_samples is empty"),
        ([[10]], [[3]], "n_samples must be a 1-D array"),
        (["10"], [3], "n_samples must be numeric"),
    ],
)
def test_bad_counts_are_named(n_samples, n_correct, message):
    with pytest.raises(ValueError, match=message):
        check_counts(n_samples, n_correct)


def test_grid_is_sorted_distinct_positive_integers():
    assert check_grid((16, 4, 4.0, 1), "ks") == [1, 4, 16]
    with pytest.raises(ValueError, match="^budgets is empty$"):
        check_grid([], "budgets")
    with pytest.raises(ValueError, match=r"ks must be a positive integer \(an integer >= 1\), got 0"):
        check_grid([4, 0], "ks")
    with pytest.raises(ValueError, match="ks must be a sequence of positive integers"):
        check_grid(5, "ks")


def test_named_confidences_keep_order_and_name_the_bad_one():
    checked = check_confidences({"probe": [0.2, 0.9], "verbalized": (1, 0)}, 2)
    assert list(checked) == ["probe", "verbalized"]
    assert checked["verbalized"].dtype == np.float64
    with pytest.raises(ValueError, match=r"confidences\['verbalized'\] must lie in \[0, 1\]"):
        check_confidences({"probe": [0.2, 0.9], "verbalized": [0.5, 1.5]}, 2)
    with pytest.raises(
        ValueError, match=r"confidences\['probe'\] must have one entry per question \(3\), got 2"
    ):
        check_confidences({"probe": [0.2, 0.9]}, 3)
    with pytest.raises(ValueError, match="mapping"):
        check_confidences([0.2, 0.9], 2)


def test_ragged_rows_become_a_padded_rectangle():
    matrix, n = as_response_matrix([[1, 0, 1], [0]], "correctness", dtype=np.int64, fill=-1)
    np.testing.assert_array_equal(matrix, [[1, 0, 1], [0, -1, -1]])
    np.testing.assert_array_equal(n, [3, 1])
    full, n_full = as_response_matrix(np.ones((2, 4)), "confidences")
    assert full.shape == (2, 4)
    np.testing.assert_array_equal(n_full, [4, 4])


@pytest.mark.parametrize(
    ("values", "n", "message"),
    [
        ([[1, 0], [1]], np.array([2, 2]), "row lengths differ from the number of samples"),
        ([], None, "correctness is empty"),
        ([[1, "x"]], None, "row 0 is not numeric"),
        ("10", None, "2-D array or a sequence"),
        ([[1], []], None, r"every row needs 1 <= n_i"),
    ],
)
def test_bad_response_rows_are_named(values, n, message):
    with pytest.raises(ValueError, match=message):
        as_response_matrix(values, "correctness", n=n)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([[1], [1, float("inf")]], "row 1 is not numeric (cannot convert float infinity to integer)"),
        ([[10**30]], "row 0 is not numeric (Python int too large to convert to C long)"),
    ],
)
def test_integer_rows_too_large_for_int64_are_named(values, message):
    """An overflow is a bad row like any other, not a bare OverflowError."""
    with pytest.raises(ValueError, match=f"^correctness: {re.escape(message)}$"):
        as_response_matrix(values, "correctness", dtype=np.int64)


@pytest.mark.parametrize(
    ("values", "n", "message"),
    [
        ([[1, 0, 1], [0.5, 1]], None, "correctness: row 1 holds 0.5, not a whole number"),
        ([[1, np.float64(0.999)]], None, "correctness: row 0 holds 0.999, not a whole number"),
        (np.array([[1.0, 0.0], [0.0, 0.25]]), None, "correctness: row 1 holds 0.25, not a whole number"),
        (np.array([[1.0, np.inf]]), None, "correctness: row 0 holds inf, not a whole number"),
        (np.array([[1.0, 0.0], [np.nan, 1.0]]), np.array([2, 2]), "correctness: row 1 holds nan, not"),
    ],
)
def test_integer_rows_refuse_values_that_are_not_whole_numbers(values, n, message):
    """Read as integers, 0.5 would be cut to 0 and a correct-or-not list would change its mean silently."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
        as_response_matrix(values, "correctness", n=n, dtype=np.int64)


def test_integer_rows_take_whole_floats_and_leave_padding_alone():
    """Whole floats and booleans are the integers they spell; NaN padding past a row's n is never read."""
    matrix, n = as_response_matrix([[1.0, 0.0, True], [np.int64(1)]], "correctness", dtype=np.int64)
    assert matrix.dtype == np.int64 and matrix.tolist() == [[1, 0, 1], [1, 0, 0]] and n.tolist() == [3, 1]
    padded = np.array([[1.0, 0.0], [1.0, np.nan]])
    with np.errstate(invalid="raise"):  # no cast of NaN to an integer
        matrix, n = as_response_matrix(padded, "correctness", n=np.array([2, 1]), dtype=np.int64, fill=-1)
    assert matrix.tolist() == [[1, 0], [1, -1]] and n.tolist() == [2, 1]
    assert as_response_matrix([[0.5, 1]], "confidences")[0].tolist() == [[0.5, 1.0]]  # floats stay floats


def test_question_ids_are_distinct_strings():
    assert check_question_ids([1, "b"], length=2) == ["1", "b"]
    with pytest.raises(ValueError, match=r"contains duplicates \(e.g. 'a'\)"):
        check_question_ids(["a", "b", "a"])
    with pytest.raises(ValueError, match=r"must have 3 entries \(one per row\), got 2"):
        check_question_ids(["a", "b"], length=3)
    with pytest.raises(ValueError, match="not a single string"):
        check_question_ids("ab")


def test_json_file_errors_name_the_file_and_line(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "capcal-thing", "version": 2, "x": [1]}), encoding="utf-8")
    assert read_json_file(good, file_format="capcal-thing", version=2)["x"] == [1]
    assert read_json_file(good) == {"format": "capcal-thing", "version": 2, "x": [1]}

    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "x": [1,\n}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(broken))}:3: not valid JSON"):
        read_json_file(broken)

    with pytest.raises(ValueError, match=rf"^{re.escape(str(good))}: not a capcal-thing file \(version 1\)$"):
        read_json_file(good, file_format="capcal-thing", version=1)
    with pytest.raises(KeyError, match="not a other-thing file"):
        read_json_file(good, file_format="other-thing", version=2, error=KeyError)
