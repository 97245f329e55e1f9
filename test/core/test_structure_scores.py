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
