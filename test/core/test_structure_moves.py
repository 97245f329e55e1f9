"""MCMC's incremental bookkeeping of legal moves equals a brute-force recount on every graph it visits."""

import numpy as np
import pytest

from affordance_ros.core import benchmark_network, sample_cases
from affordance_ros.core.parameters import family_counts
from affordance_ros.core.structure import ArcMoves, CaseCounts, K2Score, mcmc


def brute_force_moves(adj: np.ndarray, allowed: np.ndarray, max_parents: int) -> list:
    """Additions (allowed, absent, under the parent limit, acyclic by a DFS), then deletions, each by (u, v)."""
    n = len(adj)

    def reaches(a, b):   # a path a -> ... -> b
        seen, stack = set(), [a]
        while stack:
            x = stack.pop()
            if x == b:
                return True
            if x not in seen:
                seen.add(x)
                stack.extend(np.flatnonzero(adj[x]).tolist())
        return False

    additions = [(u, v) for u in range(n) for v in range(n)
                 if u != v and allowed[u, v] and not adj[u, v] and adj[:, v].sum() < max_parents
                 and not reaches(v, u)]
    return additions + [tuple(int(x) for x in arc) for arc in np.argwhere(adj)]


def adjacency(graph: ArcMoves) -> np.ndarray:
    adj = np.zeros((graph.n, graph.n), dtype=bool)
    for v in range(graph.n):
        adj[list(graph.parent_tuple(v)), v] = True
    return adj


@pytest.mark.parametrize("seed", range(4))
def test_moves_and_proposal_counts_match_a_recount(seed):
    rng = np.random.default_rng(seed)
    n, max_parents = 9, 2 + seed % 2
    allowed = rng.random((n, n)) < 0.8
    start = [(), (0,), (0, 1), (), (2,), (), (), (), ()]
    graph = ArcMoves(allowed, max_parents, start)
    accepted = 0
    for _ in range(400):
        adj = adjacency(graph)
        assert graph.moves == brute_force_moves(adj, allowed, max_parents)
        u, v = graph.moves[rng.integers(graph.n_moves)]
        toggle = graph.toggled(u, v)
        proposed = adj.copy()
        proposed[u, v] = not adj[u, v]
        assert toggle.n_moves == len(brute_force_moves(proposed, allowed, max_parents))
        if rng.random() < 0.5:
            graph.apply(toggle)
            accepted += 1
            assert np.array_equal(adjacency(graph), proposed)
    assert accepted > 100


def test_family_counts_of_the_scorer_equal_the_plain_count():
    truth = benchmark_network("montesano", sigma=1.0, seed=2)
    _, codes = sample_cases(truth, 500, np.random.default_rng(1), labelled=tuple(truth.names))
    counts = CaseCounts(codes, truth.cards)
    for child, parents in ((4, ()), (4, (0,)), (7, (0, 2, 3)), (6, (1, 2, 3, 5))):
        assert np.array_equal(counts.counts(child, parents), family_counts(codes, truth.cards, child, parents))


def reference_mcmc(score, allowed, max_parents, start, steps, burn_in, rng):
    """MC^3 as the textbook has it: recount every legal move of the proposed graph, same draws."""
    n = len(start)
    adj = np.zeros((n, n), dtype=bool)
    for v, ps in enumerate(start):
        adj[list(ps), v] = True
    family = [score(v, tuple(np.flatnonzero(adj[:, v]))) for v in range(n)]
    total, trace, freq, accepted = sum(family), [], np.zeros((n, n)), 0
    for step in range(steps):
        moves = brute_force_moves(adj, allowed, max_parents)
        u, v = moves[rng.integers(len(moves))]
        proposal = adj.copy()
        proposal[u, v] = not adj[u, v]
        new_family = score(v, tuple(np.flatnonzero(proposal[:, v])))
        log_ratio = new_family - family[v] + np.log(len(moves)) - np.log(len(brute_force_moves(proposal, allowed,
                                                                                             max_parents)))
        if np.log(rng.random()) < log_ratio:
            adj, total, family[v], accepted = proposal, total + new_family - family[v], new_family, accepted + 1
        if step >= burn_in:
            freq += adj
        trace.append(total)
    return trace, freq / (steps - burn_in), accepted / steps


@pytest.mark.parametrize("seed", range(3))
def test_mcmc_takes_the_same_steps_as_the_textbook_chain(seed):
    truth = benchmark_network("montesano", sigma=1.0, seed=seed)
    _, codes = sample_cases(truth, 150, np.random.default_rng(seed), labelled=tuple(truth.names))
    allowed = ~np.eye(len(truth), dtype=bool)
    start = [(), (0,), (), (1,), (), (), (), ()]
    steps, burn_in = 600, 100
    want = reference_mcmc(K2Score(CaseCounts(codes, truth.cards)), allowed, 2, start, steps, burn_in,
                          np.random.default_rng(seed))
    _, _, freq, acceptance, trace = mcmc(K2Score(CaseCounts(codes, truth.cards)), len(truth), allowed, 2, start,
                                         steps - burn_in, burn_in, np.random.default_rng(seed))
    assert acceptance == want[2] and acceptance > 0.02   # small data: the chain moves
    np.testing.assert_allclose(trace, want[0], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(freq, want[1])
