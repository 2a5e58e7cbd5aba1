"""Response consistency: encoding, both forms against brute force, the exact draw distribution, disjoint
splits."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from analysis.estimators import (
    consistency_from_table,
    encode_answer_classes,
    leakage_free_consistency,
    modal_count,
    response_consistency,
)


def _random_answers(rng: np.random.Generator, n_questions: int, n_min: int, n_max: int) -> list[list]:
    """Ragged per-question answers: strings from a few classes, with None (unparseable) sometimes."""
    rows = []
    for _ in range(n_questions):
        n = int(rng.integers(n_min, n_max + 1))
        weights = rng.dirichlet(np.ones(5))
        labels = rng.choice(["7", "8", "x", "42", None], size=n, p=weights)
        rows.append([None if a is None else str(a) for a in labels])
    return rows


def _answers_table(rows: list[list]) -> pd.DataFrame:
    """A sampling table of ``rows`` (one list of extracted answers per question), "7" the correct answer."""
    return pd.DataFrame(
        {
            "question_id": [f"toy/{i}" for i in range(len(rows))],
            "extracted_answers": rows,
            "correctness": [[int(a == "7") for a in row] for row in rows],
        }
    )


def _brute_modal(answers: list, singletons: bool = False) -> int:
    keys = [("none", j) if (a is None and singletons) else a for j, a in enumerate(answers)]
    return max(Counter(keys).values())


def test_modal_count_matches_counter_on_random_rows():
    rng = np.random.default_rng(0)
    drawn = rng.integers(0, 4, size=(500, 7))
    expected = [max(Counter(row.tolist()).values()) for row in drawn]
    assert modal_count(drawn).tolist() == expected


@pytest.mark.parametrize("unparseable", ["one_class", "singletons"])
def test_k_equal_n_is_the_modal_share_of_all_answers(unparseable):
    # k = n draws every response: deterministic max count / n, with None handled per policy
    rng = np.random.default_rng(1)
    rows = [row[:6] for row in _random_answers(rng, 300, 6, 6)]
    answers = encode_answer_classes(rows, unparseable=unparseable)
    got = response_consistency(answers, 6, seed=3)
    expected = [_brute_modal(row, unparseable == "singletons") / 6 for row in rows]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)


def test_all_none_and_single_response_edge_cases():
    answers = encode_answer_classes([[None, None, None], ["5"], [None, "5", "5"]])
    assert answers.unparseable.sum() == 3 + 0 + 1
    np.testing.assert_array_equal(response_consistency(encode_answer_classes([["5"], [None]]), 1), [1.0, 1.0])
    singles = encode_answer_classes([[None, None, None]], unparseable="singletons")
    np.testing.assert_allclose(response_consistency(singles, 3), [1 / 3])
    np.testing.assert_allclose(response_consistency(encode_answer_classes([[None, None, None]]), 3), [1.0])


def test_rows_of_different_lengths_draw_only_their_own_responses():
    """A question with 2 responses, both "5", beside one with 6: k = 2 draws both of its own responses, so
    its consistency is 1 on every seed; the padding after them is never drawn."""
    rows = [["5", "5"]] * 30 + [["1", "2", "3", "4", "5", "6"]]
    answers = encode_answer_classes(rows)
    for seed in range(3):
        got = response_consistency(answers, 2, seed=seed)
        np.testing.assert_array_equal(got, [1.0] * 30 + [0.5])


def test_answer_class_merges_equal_answers():
    rows = [["18", "18.0", "18.00", "3"]]
    plain = encode_answer_classes(rows)
    merged = encode_answer_classes(rows, answer_class=lambda a: float(a))
    assert response_consistency(plain, 4)[0] == 0.25
    assert response_consistency(merged, 4)[0] == 0.75


def test_integer_labels_and_lists_give_identical_draws():
    rng = np.random.default_rng(2)
    labels = rng.integers(-1, 5, size=(400, 12))
    as_lists = [[None if v == -1 else f"a{v}" for v in row] for row in labels]
    from_ints, from_lists = encode_answer_classes(labels), encode_answer_classes(as_lists)
    for k in (1, 5, 12):
        np.testing.assert_array_equal(
            response_consistency(from_ints, k, seed=7), response_consistency(from_lists, k, seed=7)
        )
    # labels that need relabelling (large and negative-free ids) take the compaction path: same result
    np.testing.assert_array_equal(
        response_consistency(encode_answer_classes(np.where(labels >= 0, labels * 1000, -1)), 5, seed=7),
        response_consistency(from_ints, 5, seed=7),
    )


def test_row_lengths_of_an_integer_label_array_leave_its_padding_out():
    """``n`` gives each row's valid length: what lies beyond it is padding, whatever its value; the classes
    are those of the per-question lists cut at those lengths."""
    labels = np.array([[0, 1, 7, 7], [2, 2, -1, 9]])
    with_lengths = encode_answer_classes(labels, n=[2, 3])
    as_lists = encode_answer_classes([["a0", "a1"], ["a2", "a2", None]])
    np.testing.assert_array_equal(with_lengths.n, [2, 3])

    def same_class(classes):  # ids name classes within a row only: compare which responses share one
        ids = classes.ids[:, :3]
        return ids[:, :, None] == ids[:, None, :]

    np.testing.assert_array_equal(same_class(with_lengths), same_class(as_lists))
    np.testing.assert_array_equal(with_lengths.unparseable[:, :3], as_lists.unparseable)
    np.testing.assert_array_equal(with_lengths.ids, [[0, 1, -1, -1], with_lengths.ids[1, :3].tolist() + [-1]])
    np.testing.assert_array_equal(encode_answer_classes(labels).n, [4, 4])  # without n: every column


def test_paper_form_matches_the_exact_draw_distribution():
    """One question repeated 40,000 times (each row an independent draw): the frequency of each consistency
    value must match the exact distribution over all C(n, k) subsets (chi-square, 5 cells, p > 1e-4)."""
    from scipy import stats

    question = ["1", "1", "1", "2", "2", None, None, "3", "1"]
    n, k = len(question), 5
    exact = Counter(
        Fraction(_brute_modal([question[j] for j in subset]), k)
        for subset in itertools.combinations(range(n), k)
    )
    total = sum(exact.values())
    answers = encode_answer_classes([question] * 40_000)
    got = response_consistency(answers, k, seed=11)
    values = sorted(exact)
    observed = np.array([np.sum(np.isclose(got, float(v))) for v in values])
    assert observed.sum() == got.size  # no value outside the exact support
    expected = np.array([exact[v] / total for v in values]) * got.size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_seed_determinism_and_variation():
    answers = encode_answer_classes(_random_answers(np.random.default_rng(3), 200, 8, 15))
    first, again = response_consistency(answers, 5, seed=1), response_consistency(answers, 5, seed=1)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, response_consistency(answers, 5, seed=2))


def test_leakage_free_draws_are_disjoint_from_the_target_and_match_brute_force():
    rng = np.random.default_rng(4)
    rows = _random_answers(rng, 300, 12, 20)
    correctness = [[int(a == "42") for a in row] for row in rows]
    answers = encode_answer_classes(rows)
    for k in (1, 3, 5):
        free = leakage_free_consistency(answers, correctness, k, pool_size=6, seed=5)
        valid = answers.valid
        assert not np.any(free.pool_mask & free.target_mask)
        np.testing.assert_array_equal(free.pool_mask | free.target_mask, valid)
        np.testing.assert_array_equal(free.pool_mask.sum(axis=1), 6)
        for i, row in enumerate(rows):
            drawn = free.draw_indices[i]
            assert len(set(drawn.tolist())) == k  # without replacement
            assert free.pool_mask[i, drawn].all() and not free.target_mask[i, drawn].any()
            assert free.confidence[i] == _brute_modal([row[j] for j in drawn]) / k
            target = [correctness[i][j] for j in range(len(row)) if free.target_mask[i, j]]
            assert free.n_target[i] == len(row) - 6 == len(target)
            assert free.mu_hat[i] == pytest.approx(np.mean(target), abs=1e-15)
    # the split depends only on (seed, pool_size): the same target for every k
    a = leakage_free_consistency(answers, correctness, 2, pool_size=6, seed=5)
    b = leakage_free_consistency(answers, correctness, 6, pool_size=6, seed=5)
    np.testing.assert_array_equal(a.target_mask, b.target_mask)
    np.testing.assert_array_equal(a.mu_hat, b.mu_hat)


def test_leakage_free_validation():
    answers = encode_answer_classes([["1", "2", "1", "1"]])
    with pytest.raises(ValueError, match="no target samples"):
        leakage_free_consistency(answers, [[1, 0, 1, 1]], 4)
    with pytest.raises(ValueError, match="pool_size=2 must be >= k=3"):
        leakage_free_consistency(answers, [[1, 0, 1, 1]], 3, pool_size=2)
    with pytest.raises(ValueError, match="0/1"):
        leakage_free_consistency(answers, [[1, 0, 2, 1]], 2)
    with pytest.raises(ValueError, match=r"correctness: row 0 holds 0.5, not a whole number"):
        leakage_free_consistency(answers, [[1, 0, 0.5, 1]], 2)  # read as integers, as the table's
    with pytest.raises(ValueError, match="row lengths"):
        leakage_free_consistency(answers, [[1, 0, 1]], 2)
    with pytest.raises(ValueError, match="exceeds"):
        response_consistency(answers, 5)
    with pytest.raises(ValueError, match="integer >= 1"):
        response_consistency(answers, 0)
    with pytest.raises(ValueError, match="empty"):
        encode_answer_classes([["1"], []])


def test_consistency_from_table_on_a_load_run_shaped_table():
    rng = np.random.default_rng(6)
    rows = _random_answers(rng, 50, 25, 25)
    table = _answers_table(rows)
    out = consistency_from_table(table, ks=(5, 20), seed=0)
    assert list(out.columns) == [
        "question_id", "mu_hat", "consistency_k5", "consistency_lf_k5", "consistency_k20",
        "consistency_lf_k20", "mu_hat_lf", "n_lf",
    ]  # fmt: skip
    assert (out["n_lf"] == 5).all()  # pool of max(ks) = 20, target = the other 5
    np.testing.assert_allclose(out["mu_hat"], [np.mean(z) for z in table["correctness"]])
    with pytest.raises(ValueError, match="extracted_answers"):
        consistency_from_table(table.drop(columns="extracted_answers"))


def test_consistency_from_table_rejects_a_missing_correctness_value():
    """A null in a question's correctness list is an error naming the row, read as integers: read as floats
    it would become NaN, turn mu_hat into NaN and reach the leakage-free form as a garbage integer."""
    table = pd.DataFrame(
        {
            "question_id": ["toy/0", "toy/1"],
            "extracted_answers": [["1", "2", "1"], ["3", "3", "4"]],
            "correctness": [[1, 0, 1], [None, 1, 0]],
        }
    )
    message = "correctness: row 1 is not numeric (int() argument must be"
    with pytest.raises(ValueError, match=re.escape(message)):
        consistency_from_table(table, ks=(1, 2))


def test_every_leakage_free_column_of_a_table_draws_from_the_one_pool_of_max_ks():
    """The table's leakage-free columns share one split: a draw pool of max(ks) responses and the target
    ``mu_hat_lf`` / ``n_lf`` from the rest (a column built with its own k as the pool size, the bug this
    catches, scores its draw against a target that overlaps it).

    Two checks: (1) at k = max(ks) the draw is the whole pool, so with two answer classes, "7" (correct) and
    "8", the pool holds a - mu_hat_lf * n_lf sevens of a question's a, and consistency_lf_k20 is
    max(sevens, 20 - sevens) / 20, worked out here from the counts; (2) each smaller k's column is
    ``leakage_free_consistency`` with pool_size = max(ks) (the documented pool), which a pool of k would not
    give on these questions."""
    rng = np.random.default_rng(11)
    n, ks = 25, (5, 10, 20)
    rows = [["7" if rng.random() < p else "8" for _ in range(n)] for p in rng.uniform(0.1, 0.9, size=40)]
    table = _answers_table(rows)
    out = consistency_from_table(table, ks=ks, seed=3)
    assert (out["n_lf"] == n - 20).all()
    sevens = np.array([row.count("7") for row in rows]) - np.rint(out["mu_hat_lf"] * out["n_lf"]).astype(int)
    np.testing.assert_allclose(out["consistency_lf_k20"], np.maximum(sevens, 20 - sevens) / 20, rtol=0)
    answers = encode_answer_classes(rows)
    z = [[int(a == "7") for a in row] for row in rows]
    for k in (5, 10):
        shared = leakage_free_consistency(answers, z, k, pool_size=20, seed=3).confidence
        own = leakage_free_consistency(answers, z, k, pool_size=k, seed=3).confidence
        assert not np.array_equal(shared, own)  # the test tells the two pools apart
        np.testing.assert_array_equal(out[f"consistency_lf_k{k}"].to_numpy(), shared)


def test_consistency_from_table_passes_each_column_and_setting_through():
    """Each column of the table and each setting reaches its use (a column read from a sibling one, a setting
    left at its default, are the bugs this catches). The questions are built so that any draw of k = 5 of
    their 6 answers has one modal count, worked out here: six different wrong answers (1 of 5; as their
    correctness, all 0, it would be 5 of 5), merged by ``answer_class`` into three odd and three even
    (3 of 5), six unparseable answers (one class: 5 of 5; ``unparseable="singletons"``: 1 of 5) and six
    equal correct ones (5 of 5)."""
    rows = [["8", "9", "10", "11", "12", "13"], [None] * 6, ["7"] * 6]
    table = pd.DataFrame(
        {
            "question_id": ["toy/wrong", "toy/none", "toy/right"],
            "extracted_answers": rows,
            "correctness": [[int(a == "7") for a in row] for row in rows],
        }
    )
    out = consistency_from_table(table, ks=(5,), seed=3)
    assert out["question_id"].tolist() == ["toy/wrong", "toy/none", "toy/right"]
    assert out["consistency_k5"].tolist() == [1 / 5, 5 / 5, 5 / 5]
    merged = consistency_from_table(table, ks=(5,), answer_class=lambda a: int(a) % 2)
    assert merged["consistency_k5"].tolist() == [3 / 5, 5 / 5, 5 / 5]
    singletons = consistency_from_table(table, ks=(5,), unparseable="singletons")
    assert singletons["consistency_k5"].tolist() == [1 / 5, 1 / 5, 5 / 5]
    # the answers' row lengths are the correctness' too
    short = table.copy()
    short.at[2, "correctness"] = short.at[2, "correctness"][:5]
    with pytest.raises(ValueError, match=r"correctness: row lengths differ .* \(first at row 2\)"):
        consistency_from_table(short, ks=(2,))
    with pytest.raises(ValueError, match="table has no 'question_id' column"):
        consistency_from_table(pd.DataFrame({"x": [1]}))


def test_consistency_from_table_draws_with_its_seed():
    """The table's ``seed`` reaches both forms' draws: another seed, other columns (40 questions of 12
    answers, k = 2 and a pool of 10); the same seed, the same columns."""
    rng = np.random.default_rng(9)
    rows = _random_answers(rng, 40, 12, 12)
    table = _answers_table(rows)
    out, again = (consistency_from_table(table, ks=(2, 10), seed=3) for _ in range(2))
    other = consistency_from_table(table, ks=(2, 10), seed=4)
    pd.testing.assert_frame_equal(out, again)
    for column in ("consistency_k2", "consistency_lf_k2", "mu_hat_lf"):
        assert not out[column].equals(other[column]), column


def test_the_leakage_free_split_and_draw_take_the_given_seed():
    """``leakage_free_consistency``'s ``seed`` reaches its split and its draw: the same seed gives the same
    split, another seed another one (on 50 questions of 12 responses, a pool of 6)."""
    rng = np.random.default_rng(8)
    rows = _random_answers(rng, 50, 12, 12)
    correctness = [[int(a == "42") for a in row] for row in rows]
    answers = encode_answer_classes(rows)
    first = leakage_free_consistency(answers, correctness, 3, pool_size=6, seed=5)
    again = leakage_free_consistency(answers, correctness, 3, pool_size=6, seed=5)
    other = leakage_free_consistency(answers, correctness, 3, pool_size=6, seed=0)
    np.testing.assert_array_equal(first.pool_mask, again.pool_mask)
    np.testing.assert_array_equal(first.draw_indices, again.draw_indices)
    assert not np.array_equal(first.pool_mask, other.pool_mask)
    assert not np.array_equal(first.draw_indices, other.draw_indices)


def _partition(ids: np.ndarray, n: int) -> list[set[int]]:
    """A row's responses grouped by class id, as sets of positions, in order of first position."""
    groups: dict[int, set[int]] = {}
    for position, identifier in enumerate(ids[:n].tolist()):
        groups.setdefault(identifier, set()).add(position)
    return list(groups.values())


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ([2, 0, -1], [{0}, {1}, {2}]),  # a parsed label equal to width - 1 beside an unparseable one
        ([2, 2, -1], [{0, 1}, {2}]),
        ([1, -1, -1], [{0}, {1, 2}]),  # the unparseable responses are one class
        ([0, 1, 2], [{0}, {1}, {2}]),
    ],
)
def test_the_unparseable_class_never_takes_a_parsed_labels_id(row, expected):
    """Integer labels may use any id up to the row's width: the one class of unparseable responses must stay
    apart from a parsed label of id width - 1 (the shortcut that gives it width - 1 holds only below that)."""
    classes = encode_answer_classes(np.array([row, [0, 0, 0]], dtype=np.int64))
    assert _partition(classes.ids[0], 3) == expected
    assert classes.unparseable[0].tolist() == [label == -1 for label in row]
