"""EM's SeparatorEStep (cliques merged, evidence laid out once) checked against brute-force enumeration."""

import numpy as np
import pytest
from helpers import random_network
from test_inference import brute_force_counts, random_evidence

from affordance_ros.core import CaseSet, benchmark_network, benchmark_structure, sample_cases
from affordance_ros.core.inference import JunctionTree
from affordance_ros.core.separator_estep import SeparatorEStep


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("chunk_size", [3, 4096])
def test_counts_and_log_likelihood_equal_brute_force(seed, chunk_size):
    rng = np.random.default_rng(300 + seed)
    net = random_network(rng, n_vars=int(rng.integers(3, 8)))
    cases = CaseSet.from_columns(net, random_evidence(net, rng, 7))
    estep = SeparatorEStep(JunctionTree(net), cases.evidence(net), chunk_size)
    cpts = [v.cpt for v in net.variables]
    counts, total_ll = estep(cpts)
    expected, expected_ll = brute_force_counts(net, cases)
    assert total_ll == pytest.approx(expected_ll, abs=1e-8)
    assert estep.log_likelihood(cpts) == pytest.approx(expected_ll, abs=1e-8)
    for got, want in zip(counts, expected):
        np.testing.assert_allclose(got, want, atol=1e-9)


def test_montesano_cliques_are_merged_and_counts_equal_the_junction_tree():
    structure = benchmark_structure("montesano", 3.0)
    truth = benchmark_network("montesano", 3.0, seed=1)
    cases, _ = sample_cases(truth, 500, np.random.default_rng(2), labelled=("Action",))
    tree = JunctionTree(structure)
    estep = SeparatorEStep(tree, cases.evidence(structure), chunk_size=128)
    assert len(estep.tree.cliques) < len(tree.cliques)   # the two large cliques share 54 of their states
    cpts = [v.cpt for v in truth.variables]
    want, want_ll = tree.estep(cases.evidence(structure))(cpts)
    got, got_ll = estep(cpts)
    assert got_ll == pytest.approx(want_ll, rel=1e-12)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
