"""Complete cases (every variable given by label) are counted, not inferred: the same CPTs, counts and
log-likelihoods as inference gives them, on cases of which some are complete and others have values missing
or seen through sensors only.
"""

import numpy as np
import pytest
from helpers import random_network

from affordance_ros.core import CaseEvidence, CaseSet, LearningOptions, fit_discrete, fit_em, log_likelihood
from affordance_ros.core import cases as cases_module
from affordance_ros.core.errors import EvidenceError
from affordance_ros.core.estep import CountedEStep, choose_estep
from affordance_ros.core.evidence import CompleteCases, most_probable_values
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.inference import JunctionTree
from affordance_ros.core.posterior_sampling import dirichlet_prior, draw_posterior, impute


def mixed_cases(network, n_cases, rng, missing=0.02, read=0.3):
    """Cases of ``network``: every label, less a share ``missing`` of them; readings of a share ``read`` of the
    sensors' values (beside the label or instead of it)."""
    codes = sample_values(network, n_cases, rng)
    labels = {}
    readings = {}
    for i, v in enumerate(network.variables):
        column = codes[:, i].copy()
        column[rng.random(n_cases) < missing] = -1
        labels[v.name] = column
        if v.sensor is not None:
            x = v.sensor.means[codes[:, i]] + v.sensor.stddevs[codes[:, i]] * rng.normal(size=n_cases)
            x[rng.random(n_cases) >= read] = np.nan
            readings[v.sensor.name] = x
    return CaseSet(network, labels, readings)


def inferred_only(monkeypatch):
    """Make every learn infer every case, as before complete cases were counted."""
    monkeypatch.setattr(cases_module.CaseEvidence, "complete",
                        property(lambda self: CompleteCases.none(self.n_cases, len(self.network))))


@pytest.mark.parametrize("seed", range(4))
def test_em_on_mixed_cases_counts_the_complete_ones_and_learns_what_inference_learns(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    network = random_network(rng, n_vars=7)
    cases = mixed_cases(network, 1500, rng)
    complete = CaseEvidence(cases, network).complete
    assert 0 < complete.n_cases < cases.n_cases
    options = LearningOptions(em_acceleration="none", tol=1e-6)
    counted, counted_result = fit_em(network, cases, options)
    assert isinstance(choose_estep(JunctionTree(network), CaseEvidence(cases, network)), CountedEStep)
    inferred_only(monkeypatch)
    inferred, inferred_result = fit_em(network, cases, options)
    assert counted_result.iterations == inferred_result.iterations
    np.testing.assert_allclose(counted_result.log_likelihoods, inferred_result.log_likelihoods, rtol=1e-12)
    for a, b in zip(counted.variables, inferred.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-9)
        np.testing.assert_allclose(a.counts, b.counts, atol=1e-9)


def test_complete_cases_only_take_no_inference_and_learn_the_same(monkeypatch):
    rng = np.random.default_rng(7)
    network = random_network(rng, n_vars=8, sensor_fraction=0.0)
    cases = mixed_cases(network, 2000, rng, missing=0.0, read=0.0)
    estep = choose_estep(JunctionTree(network), CaseEvidence(cases, network))
    assert isinstance(estep, CountedEStep) and estep.rest is None
    counted, result = fit_em(network, cases, LearningOptions())
    discrete = fit_discrete(network, cases, prior=1.0)
    inferred_only(monkeypatch)
    inferred, inferred_result = fit_em(network, cases, LearningOptions())
    np.testing.assert_allclose(result.log_likelihoods, inferred_result.log_likelihoods, rtol=1e-12)
    for a, b, c in zip(counted.variables, inferred.variables, discrete.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-12)
        np.testing.assert_allclose(a.cpt, c.cpt, atol=1e-12)


def test_streamed_rest_with_counted_complete_cases_learns_the_same(monkeypatch):
    rng = np.random.default_rng(3)
    network = random_network(rng, n_vars=6)
    cases = mixed_cases(network, 1200, rng, missing=0.05)
    held, held_result = fit_em(network, cases, LearningOptions(tol=1e-6))
    monkeypatch.setattr(cases_module, "STREAM_ENTRIES", 500)
    monkeypatch.setattr(cases_module, "EVIDENCE_CHUNK", 200)
    observed = CaseEvidence(cases, network)
    assert not observed.held and not observed.incomplete().held
    streamed, streamed_result = fit_em(network, cases, LearningOptions(tol=1e-6))
    np.testing.assert_allclose(streamed_result.log_likelihoods, held_result.log_likelihoods, rtol=1e-12)
    for a, b in zip(streamed.variables, held.variables):
        np.testing.assert_allclose(a.cpt, b.cpt, atol=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_log_likelihood_of_mixed_cases_is_the_inferred_one(seed):
    rng = np.random.default_rng(10 + seed)
    network = random_network(rng, n_vars=7)
    cases = mixed_cases(network, 800, rng)
    evidence = cases.evidence(network)
    inferred = float(network.engine.log_likelihood([v.cpt for v in network.variables], evidence).sum())
    for given in (cases, CaseEvidence(cases, network), evidence):
        assert log_likelihood(network, given) == pytest.approx(inferred, rel=1e-12)
    from_labels, from_evidence = CaseEvidence(cases, network).complete, CompleteCases.in_evidence(evidence)
    np.testing.assert_array_equal(from_labels.rows, from_evidence.rows)
    np.testing.assert_array_equal(from_labels.codes, from_evidence.codes)
    assert from_labels.log_scale == pytest.approx(from_evidence.log_scale, rel=1e-12)


def test_map_values_of_complete_cases_are_their_labels_as_from_the_evidence():
    rng = np.random.default_rng(5)
    network = random_network(rng, n_vars=6)
    cases = mixed_cases(network, 500, rng, missing=0.0, read=0.5)
    observed = CaseEvidence(cases, network)
    assert observed.complete.all
    priors = [np.full(v.card, 1.0 / v.card) for v in network.variables]
    priors[0] = np.eye(network.variables[0].card)[0]    # a prior that rules labels out: argmax picks value 0
    for given in (None, priors):
        expected = most_probable_values(cases.evidence(network), observed.priors if given is None else given)
        np.testing.assert_array_equal(observed.map_values(given), expected)


def test_a_complete_case_the_cpts_rule_out_is_named_as_inference_names_it():
    rng = np.random.default_rng(2)
    network = random_network(rng, n_vars=5, sensor_fraction=0.0)
    cases = mixed_cases(network, 50, rng, missing=0.0, read=0.0)
    first = network.variables[0]
    value = cases.labels[first.name][7]
    index = tuple(cases.labels[p][7] for p in first.parents) + (value,)
    cpt = first.cpt.copy()
    cpt[index] = 0.0
    ruled_out = network.with_cpts({first.name: cpt / cpt.sum(axis=-1, keepdims=True)})
    estep = choose_estep(JunctionTree(ruled_out), CaseEvidence(cases, ruled_out))
    cpts = [v.cpt for v in ruled_out.variables]
    for ask in (lambda: estep(cpts), lambda: log_likelihood(ruled_out, cases)):
        with pytest.raises(EvidenceError, match=r"case\(s\) \[.*\b7\b.*\] has probability zero"):
            ask()


def test_posterior_draws_count_the_complete_cases_and_impute_only_the_others():
    """The chain on mixed cases is the chain on the cases with hidden values alone, the complete cases' counts added
    to every sweep: with those counts in the prior of the latter, the same draws from the same seed, each less them;
    and imputing a complete case gives back its labels (the imputing path counted them the same)."""
    rng = np.random.default_rng(4)
    network = random_network(rng, n_vars=5)
    cases = mixed_cases(network, 300, rng, missing=0.1)
    observed = CaseEvidence(cases, network)
    complete = observed.complete
    assert 0 < complete.n_cases < cases.n_cases
    prior = dirichlet_prior(network, 1.0)
    seen = complete.family_counts([network.parent_indices(i) for i in range(len(network))], network.cards)
    mixed = draw_posterior(network, observed.chunks, prior, draws=5, seed=3, burn_in=4, thin=2)
    alone = draw_posterior(network, observed.incomplete().chunks, [a + c for a, c in zip(prior, seen)], draws=5,
                           seed=3, burn_in=4, thin=2)
    assert mixed.sweeps == alone.sweeps == 4 + 5 * 2
    for name, counts in zip(network.names, seen):
        np.testing.assert_array_equal(mixed.draws[name][0], alone.draws[name][0] + counts)
    codes = impute(JunctionTree(network), [v.cpt for v in network.variables],
                   observed.evidence().take(complete.rows), rng)
    np.testing.assert_array_equal(codes, complete.codes)


def test_posterior_of_complete_cases_only_is_the_dirichlet_of_their_counts_in_one_sweep():
    rng = np.random.default_rng(6)
    network = random_network(rng, n_vars=5, sensor_fraction=0.0)
    cases = mixed_cases(network, 200, rng, missing=0.0, read=0.0)
    observed = CaseEvidence(cases, network)
    sample = draw_posterior(network, observed.chunks, dirichlet_prior(network, 1.0), draws=4)
    seen = observed.complete.family_counts([network.parent_indices(i) for i in range(len(network))], network.cards)
    assert sample.sweeps == 1
    for name, counts in zip(network.names, seen):
        assert all(np.array_equal(draw, counts) for draw in sample.draws[name][0])
