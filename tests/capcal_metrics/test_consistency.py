"""Response consistency on integer answer labels, against brute force: the modal count, both forms' values,
their exact draw distributions over all subsets, padding never read, validation."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from capcal_metrics.consistency import leakage_free_consistency, modal_count, response_consistency


def _share(drawn: list[int]) -> Fraction:
    """Brute-force consistency: the count of the most common label over the number drawn."""
    return Fraction(max(Counter(drawn).values()), len(drawn))


def _ragged(
    rng: np.random.Generator, n_questions: int, n_min: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Labels (N, width) with row lengths in [n_min, width]; padding holds 99, which would win any vote."""
    n = rng.integers(n_min, width + 1, n_questions)
    labels = rng.integers(0, 4, (n_questions, width))
    labels[np.arange(width) >= n[:, None]] = 99
    return labels, n


def test_modal_count_matches_counter():
    drawn = np.random.default_rng(0).integers(-3, 4, size=(500, 7))
    assert modal_count(drawn).tolist() == [max(Counter(row.tolist()).values()) for row in drawn]
    assert modal_count([[5]]).tolist() == [1]


def test_k_equal_n_is_the_modal_share_of_all_responses():
    labels, n = _ragged(np.random.default_rng(1), 200, 6, 6)
    full = n == 6
    got = response_consistency(labels[full], 6, seed=3)
    assert got.tolist() == [float(_share(row.tolist())) for row in labels[full]]


def test_padding_is_never_drawn():
    rng = np.random.default_rng(2)
    labels, n = _ragged(rng, 300, 4, 9)
    other = np.where(np.arange(9) < n[:, None], labels, -7)
    for k in (1, 3, 4):
        np.testing.assert_array_equal(
            response_consistency(labels, k, n=n, seed=5), response_consistency(other, k, n=n, seed=5)
        )
    z = rng.integers(0, 2, labels.shape)
    a = leakage_free_consistency(labels, z, 2, n=n, pool_size=3, seed=5)
    b = leakage_free_consistency(
        other, np.where(np.arange(9) < n[:, None], z, 1), 2, n=n, pool_size=3, seed=5
    )
    np.testing.assert_array_equal(a.confidence, b.confidence)
    np.testing.assert_array_equal(a.mu_hat, b.mu_hat)
    assert not (a.pool_mask | a.target_mask)[np.arange(9) >= n[:, None]].any()


def _chi_square_pvalue(got: list, exact: Counter) -> float:
    """p-value of the observed outcome counts against the exact outcome distribution (every outcome of
    ``got`` must be in its support)."""
    support = sorted(exact)
    observed = Counter(got)
    assert set(observed) <= set(support)
    total = sum(exact.values())
    expected = np.array([exact[v] / total for v in support]) * len(got)
    return stats.chisquare([observed[v] for v in support], expected).pvalue


def test_paper_form_follows_the_exact_distribution_over_all_subsets():
    """One question (7 responses, padded to 9 columns) repeated 40,000 times: the frequencies of the
    consistency values match the distribution over all C(7, 3) subsets."""
    question = [1, 1, 1, 2, 2, 0, 1]
    k, rows = 3, 40_000
    exact = Counter(_share([question[j] for j in s]) for s in itertools.combinations(range(7), k))
    labels = np.tile(question + [99, 99], (rows, 1))
    got = response_consistency(labels, k, n=np.full(rows, 7), seed=11)
    assert _chi_square_pvalue([Fraction(v).limit_denominator(k) for v in got], exact) > 1e-4


def test_leakage_free_form_follows_the_exact_joint_distribution():
    """Pool of 3 of 6 responses, 2 drawn from it: the joint frequencies of (consistency, mu_hat) match the
    enumeration of every (pool, draw) pair, all equally likely."""
    answers, correct = [1, 1, 2, 2, 1, 3], [1, 1, 0, 0, 1, 0]
    k, pool_size, rows = 2, 3, 30_000
    exact: Counter = Counter()
    for pool in itertools.combinations(range(6), pool_size):
        target = [j for j in range(6) if j not in pool]
        mu = Fraction(sum(correct[j] for j in target), len(target))
        for drawn in itertools.combinations(pool, k):
            exact[(_share([answers[j] for j in drawn]), mu)] += 1
    free = leakage_free_consistency(
        np.tile(answers, (rows, 1)), np.tile(correct, (rows, 1)), k, pool_size=pool_size, seed=4
    )
    got = [
        (Fraction(c).limit_denominator(k), Fraction(m).limit_denominator(6 - pool_size))
        for c, m in zip(free.confidence, free.mu_hat, strict=True)
    ]
    assert _chi_square_pvalue(got, exact) > 1e-4


def test_leakage_free_rows_match_brute_force():
    rng = np.random.default_rng(6)
    labels, n = _ragged(rng, 200, 7, 12)
    z = rng.integers(0, 2, labels.shape)
    for k in (1, 3, 5):
        free = leakage_free_consistency(labels, z, k, n=n, pool_size=5, seed=2)
        for i in range(len(n)):
            valid = np.arange(12) < n[i]
            drawn = free.draw_indices[i]
            assert len(set(drawn.tolist())) == k and free.pool_mask[i, drawn].all()
            assert not (free.pool_mask[i] & free.target_mask[i]).any()
            np.testing.assert_array_equal(free.pool_mask[i] | free.target_mask[i], valid)
            assert free.pool_mask[i].sum() == 5 and free.n_target[i] == n[i] - 5
            assert free.confidence[i] == float(_share(labels[i, drawn].tolist()))
            target = z[i, free.target_mask[i]]
            assert free.n_correct_target[i] == target.sum()
            assert free.mu_hat[i] == target.sum() / (n[i] - 5)
    # the split depends only on (seed, pool_size): one common target for every k
    a = leakage_free_consistency(labels, z, 1, n=n, pool_size=5, seed=2)
    b = leakage_free_consistency(labels, z, 5, n=n, pool_size=5, seed=2)
    np.testing.assert_array_equal(a.target_mask, b.target_mask)


def test_seed_determinism_and_variation():
    labels, n = _ragged(np.random.default_rng(3), 300, 8, 15)
    first = response_consistency(labels, 5, n=n, seed=1)
    np.testing.assert_array_equal(first, response_consistency(labels, 5, n=n, seed=1))
    assert not np.array_equal(first, response_consistency(labels, 5, n=n, seed=2))


LABELS = np.array([[1, 2, 1, 1]])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: response_consistency(LABELS.astype(float), 2), "2-D integer array"),
        (lambda: response_consistency(np.array([1, 2, 1]), 2), "2-D integer array"),
        (lambda: response_consistency(LABELS, 2, n=[5]), "n must be <="),
        (lambda: response_consistency(LABELS, 3, n=[2]), "k=3 exceeds the number of samples of question 0"),
        (lambda: response_consistency(LABELS, 0), "integer >= 1"),
        (lambda: leakage_free_consistency(LABELS, [[1, 0, 1, 1]], 4), "no target samples"),
        (lambda: leakage_free_consistency(LABELS, [[1, 0, 1, 1]], 3, pool_size=2), "must be >= k=3"),
        (lambda: leakage_free_consistency(LABELS, [[1, 0, 2, 1]], 2), "0/1"),
        (lambda: leakage_free_consistency(LABELS, [[1, 0, 1]], 2), "correctness has shape"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_chunks_change_nothing(monkeypatch):
    """Rows are processed CHUNK_ROWS at a time; the random stream is drawn row after row, so chunks of 3 rows
    give the very values of one chunk (uneven row lengths included)."""
    from capcal_metrics import consistency

    rng = np.random.default_rng(8)
    labels = rng.integers(0, 3, size=(11, 9))
    correctness = (labels == 0).astype(int)
    n = rng.integers(6, 10, size=11)
    whole = response_consistency(labels, 4, n=n, seed=5)
    whole_lf = leakage_free_consistency(labels, correctness, 2, n=n, pool_size=4, seed=5)
    monkeypatch.setattr(consistency, "CHUNK_ROWS", 3)
    np.testing.assert_array_equal(response_consistency(labels, 4, n=n, seed=5), whole)
    chunked_lf = leakage_free_consistency(labels, correctness, 2, n=n, pool_size=4, seed=5)
    for field in ("confidence", "mu_hat", "draw_indices", "pool_mask", "target_mask"):
        np.testing.assert_array_equal(getattr(chunked_lf, field), getattr(whole_lf, field), err_msg=field)


def test_the_documented_random_streams():
    """The docstrings' contract, row by row: response consistency takes the k allowed positions with the
    smallest keys of ``default_rng([seed, 0, k])``; the leakage-free split takes the pool_size allowed
    positions with the smallest keys of ``default_rng([seed, 1, pool_size])``, and the draw the k pool
    entries with the smallest keys of ``default_rng([seed, 2, k, pool_size])``, in the pool's order."""
    rng = np.random.default_rng(21)
    labels = rng.integers(0, 3, size=(7, 8))
    correctness = (labels == 1).astype(int)
    n = np.array([8, 6, 7, 8, 5, 8, 6])
    seed, k, pool_size = 9, 3, 4

    keys = np.random.default_rng([seed, 0, k]).random(labels.shape)
    expected = []
    for i, row in enumerate(labels):
        picked = sorted(range(n[i]), key=lambda j: keys[i, j])[:k]
        expected.append(max(Counter(row[picked].tolist()).values()) / k)
    np.testing.assert_array_equal(response_consistency(labels, k, n=n, seed=seed), expected)

    result = leakage_free_consistency(labels, correctness, k, n=n, pool_size=pool_size, seed=seed)
    split = np.random.default_rng([seed, 1, pool_size]).random(labels.shape)
    draw = np.random.default_rng([seed, 2, k, pool_size]).random((labels.shape[0], pool_size))
    for i in range(labels.shape[0]):
        pool = sorted(range(n[i]), key=lambda j: split[i, j])[:pool_size]
        assert set(np.flatnonzero(result.pool_mask[i])) == set(pool), i
        masked = np.where(np.arange(labels.shape[1]) < n[i], split[i], 2.0)
        pool_order = np.argpartition(masked, pool_size - 1)[:pool_size]  # the pool's order, as drawn
        drawn = pool_order[sorted(range(pool_size), key=lambda j: draw[i, j])[:k]]
        assert set(result.draw_indices[i]) == set(drawn.tolist()), i
        target = [j for j in range(n[i]) if j not in pool]
        assert result.mu_hat[i] == np.mean(correctness[i, target]), i


def test_messages_name_the_argument_and_the_shortest_question():
    labels = np.zeros((4, 6), dtype=int)
    n = np.array([6, 5, 3, 4])  # question 2 is the shortest
    with pytest.raises(ValueError, match=r"^k=4 exceeds the number of samples of question 2 \(3\)$"):
        response_consistency(labels, 4, n=n)
    with pytest.raises(ValueError, match=r"^pool_size=3 leaves no target samples for question 2 \(n = 3\)"):
        leakage_free_consistency(labels, labels, 2, n=n, pool_size=3)
    with pytest.raises(ValueError, match=r"^pool_size must be a positive integer"):
        leakage_free_consistency(labels, labels, 1, n=n, pool_size=0)
    with pytest.raises(ValueError, match=r"^correctness must be 0/1$"):
        leakage_free_consistency(labels, np.full((4, 6), 2), 1, n=n)


def test_padding_correctness_is_not_read():
    # entries beyond n may hold anything (here 7), as the docstring says; only the responses are checked
    rng = np.random.default_rng(4)
    labels, n = _ragged(rng, 50, 4, 8)
    z = rng.integers(0, 2, labels.shape)
    padded = np.where(np.arange(8) < n[:, None], z, 7)
    a = leakage_free_consistency(labels, z, 2, n=n, seed=3)
    b = leakage_free_consistency(labels, padded, 2, n=n, seed=3)
    np.testing.assert_array_equal(a.mu_hat, b.mu_hat)
    np.testing.assert_array_equal(a.n_correct_target, b.n_correct_target)


def test_the_default_seed_is_zero_and_counts_are_int64():
    labels, n = _ragged(np.random.default_rng(6), 200, 5, 9)
    z = (labels == 0).astype(np.int8)
    np.testing.assert_array_equal(
        response_consistency(labels, 3, n=n), response_consistency(labels, 3, n=n, seed=0)
    )
    default = leakage_free_consistency(labels, z, 2, n=n, pool_size=3)
    explicit = leakage_free_consistency(labels, z, 2, n=n, pool_size=3, seed=0)
    np.testing.assert_array_equal(default.draw_indices, explicit.draw_indices)
    np.testing.assert_array_equal(default.confidence, explicit.confidence)
    assert default.n_correct_target.dtype == np.int64 and default.n_target.dtype == np.int64
    np.testing.assert_array_equal(default.n_correct_target, (z * default.target_mask).sum(axis=1))


def test_the_split_is_the_smallest_keys_on_wide_rows():
    """On rows of hundreds of responses (where a partial sort leaves the tail unordered) the pool is still
    exactly the pool_size positions with the smallest keys of ``default_rng([seed, 1, pool_size])``. Seed 2
    with 20 rows of 300 is a case where the (pool_size - 1)-th smallest key alone decides the last member
    (rows 2 and 14: a partition at pool_size - 2 keeps a different set)."""
    rng = np.random.default_rng(30)
    labels = rng.integers(0, 5, size=(20, 300))
    seed, pool_size = 2, 150
    result = leakage_free_consistency(labels, labels == 0, 40, pool_size=pool_size, seed=seed)
    split = np.random.default_rng([seed, 1, pool_size]).random(labels.shape)
    for i in range(labels.shape[0]):
        pool = np.argsort(split[i])[:pool_size]
        assert set(np.flatnonzero(result.pool_mask[i])) == set(pool.tolist()), i
        assert set(result.draw_indices[i].tolist()) <= set(pool.tolist()), i


@pytest.mark.parametrize(
    ("n", "message"),
    [
        (np.array([[4], [4]]), r"^n must be a 1-D array, got shape \(2, 1\)$"),
        (np.array([4, 0]), r"^n must be >= 1; found 0$"),
    ],
)
def test_the_row_lengths_are_checked(n, message):
    with pytest.raises(ValueError, match=message):
        response_consistency(np.zeros((2, 4), dtype=int), 1, n=n)


def test_a_question_with_one_response_and_no_questions():
    # n_i = 1 is a valid row length (k = 1); a labels array without rows is refused by name
    labels = np.array([[3, 9, 9], [1, 2, 1]])
    np.testing.assert_array_equal(response_consistency(labels, 1, n=[1, 3]), [1.0, 1.0])
    with pytest.raises(ValueError, match=r"^labels must be a non-empty 2-D integer array"):
        response_consistency(np.zeros((0, 4), dtype=int), 1)
