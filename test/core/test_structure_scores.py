"""Family scores of many candidate parents at once (what K2 asks) equal the one-at-a-time scores."""

import numpy as np
import pytest

from affordance_ros.core import LearningOptions, benchmark_network, sample_cases
from affordance_ros.core.options import SCORES
from affordance_ros.core.scenarios import simulate
from affordance_ros.core.structure import SCORE_CLASSES, CaseCounts, CVScore, family_score, k2


@pytest.mark.parametrize("score", ["k2", "bdeu", "bic"])
def test_additions_equal_single_family_scores(score):
    truth = benchmark_network("montesano", sigma=1.0, seed=2)
    cases, codes = sample_cases(truth, 3000, np.random.default_rng(0), labelled=tuple(truth.names))
    options = LearningOptions(score=score, ess=2.0)
    together = family_score(CaseCounts(codes, truth.cards), options)
    alone = family_score(CaseCounts(codes, truth.cards), options)
    for child, parents in ((4, ()), (4, (0,)), (7, (0, 2)), (6, (1, 2, 3))):
        candidates = [u for u in range(len(truth)) if u != child and u not in parents]
        got = together.additions(child, parents, candidates)
        expected = [alone.local(child, tuple(sorted((*parents, u)))) for u in candidates]
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        # and the cache then answers the same
        assert [together(child, (*parents, u)) for u in candidates] == pytest.approx(expected, rel=1e-12)


def test_k2_adds_no_parent_on_a_tie_of_rounding():
    """The hand-posture scenario's balanced design (every action with every hand equally often): the
    cross-validated scores of Hand with and without Action are equal but for rounding,
    and K2 must not add the arc Action -> Hand on it."""
    columns = simulate("hands", 10, seed=0)
    codes = np.stack([np.unique(columns[n], return_inverse=True)[1] for n in ("Action", "Hand", "Object")], axis=1)
    scorer = CVScore(CaseCounts(codes, [4, 3, 2]), prior=0.01)
    assert scorer(1, (0,)) == pytest.approx(scorer(1, ()), rel=1e-12)
    allowed = ~np.eye(3, dtype=bool)
    assert k2(scorer, [0, 1, 2], allowed, max_parents=2) == [(), (), ()]


def test_one_score_class_per_score_option():
    assert sorted(SCORE_CLASSES) == sorted(SCORES)
    counts = CaseCounts(np.zeros((4, 2), dtype=np.int64), [2, 2])
    for name in SCORES:
        scorer = family_score(counts, LearningOptions(score=name, prior=0.5, ess=3.0))
        assert type(scorer) is SCORE_CLASSES[name] and scorer.name == name
    assert family_score(counts, LearningOptions(score="bdeu", ess=3.0)).ess == 3.0
    assert family_score(counts, LearningOptions(score="cv", prior=0.5)).prior == 0.5


def greedy_k2(scorer, order, allowed, max_parents):
    """K2 as Cooper & Herskovits write it: one node at a time, one family score at a time."""
    parents = [() for _ in order]
    for pos, child in enumerate(order):
        current, best = (), scorer(child, ())
        while len(current) < max_parents:
            left = [u for u in order[:pos] if allowed[u, child] and u not in current]
            if not left:
                break
            values = [scorer(child, (*current, u)) for u in left]
            top = max(values)
            if top <= best + 1e-12 * max(1.0, abs(best)):
                break
            best, current = top, current + (max(u for u, v in zip(left, values) if v == top),)
        parents[child] = tuple(sorted(current))
    return parents


@pytest.mark.parametrize("score", ["k2", "bdeu", "bic", "cv"])
@pytest.mark.parametrize("n_cases", [100, 3000])
def test_k2_in_rounds_takes_the_parents_of_k2_one_node_at_a_time(score, n_cases):
    truth = benchmark_network("montesano", sigma=1.0, seed=3)
    _, codes = sample_cases(truth, n_cases, np.random.default_rng(n_cases), labelled=tuple(truth.names))
    options = LearningOptions(score=score, ess=2.0, prior=0.5)
    allowed = ~np.eye(len(truth), dtype=bool)
    order = list(np.random.default_rng(1).permutation(len(truth)))
    for max_parents in (1, 3):
        expected = greedy_k2(family_score(CaseCounts(codes, truth.cards), options), order, allowed, max_parents)
        assert k2(family_score(CaseCounts(codes, truth.cards), options), order, allowed, max_parents) == expected


@pytest.mark.parametrize("n_cases", [40, 400, 5000])
def test_counts_of_distinct_cases_and_of_every_pair_are_the_counts_of_the_cases(n_cases):
    rng = np.random.default_rng(n_cases)
    cards = [2, 3, 2, 4, 2]
    codes = np.stack([rng.integers(0, c, n_cases) for c in cards], axis=1)
    codes[:, 2] = codes[:, 0]                   # few distinct cases: counted as weighted distinct rows
    counts = CaseCounts(codes, cards)
    requests = [(1, (), [None, 0, 2, 3]), (3, (0, 2), [1, None, 4]), (4, (1,), [3]), (0, (), [None, 4])]
    for request in requests:
        table, q, starts, r = counts.candidate_tables([request])
        child, parents, candidates = request
        for family, u in enumerate(candidates):
            family_parents = (u, *parents) if u is not None else parents
            flat = np.zeros(q[family] * cards[child], dtype=np.int64)
            for row in codes:
                cell = 0
                for p in family_parents:
                    cell = cell * cards[p] + row[p]
                flat[cell * cards[child] + row[child]] += 1
            rows = table[starts[family]:starts[family] + q[family]]
            np.testing.assert_array_equal(rows[:, :cards[child]].ravel(), flat)
            assert np.broadcast_to(r, len(q))[family] == cards[child] and not rows[:, cards[child]:].any()
    together = counts.candidate_tables(requests)
    apart = [counts.candidate_tables([request]) for request in requests]
    width = together[0].shape[1]
    np.testing.assert_array_equal(
        together[0], np.concatenate([np.pad(t, ((0, 0), (0, width - t.shape[1]))) for t, *_ in apart]))
