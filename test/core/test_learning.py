"""Learning checked against known ground truth: EM, the Discrete baseline, K2, MCMC, sensor fits."""

import dataclasses

import numpy as np
import pytest
from helpers import plain

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    DataError,
    ModelFormatError,
    benchmark_network,
    benchmark_structure,
    fit_discrete,
    fit_em,
    sample_cases,
)
from affordance_ros.core.em import rms_difference
from affordance_ros.core.sensors import fit_sensor


def cpt_error(model, truth):
    return rms_difference([v.cpt for v in model.variables], [v.cpt for v in truth.variables])


def without_arcs(network):
    return AffordanceNetwork([dataclasses.replace(v, parents=None, cpt=None) for v in network.variables],
                             network.metadata)


def all_labels(truth, n, seed):
    """Complete cases: every variable observed by its label."""
    cases, _ = sample_cases(truth, n, np.random.default_rng(seed), labelled=tuple(truth.names))
    return cases


@pytest.mark.parametrize("prior", [0.0, 1.0])
def test_em_objective_never_decreases(prior):
    truth = benchmark_network("montesano", sigma=3.0, seed=11)
    cases, _ = sample_cases(truth, 500, np.random.default_rng(1))
    _, result = fit_em(truth, cases, plain(prior=prior, em_init="uniform", tol=1e-6, max_iter=60))
    trace = np.array(result.log_likelihoods if prior == 0 else result.log_posteriors)
    assert len(trace) == result.iterations + 1
    assert np.all(np.diff(trace) >= -1e-7 * np.abs(trace[1:])), np.diff(trace).min()
    assert trace[-1] > trace[0] + 1.0


def test_em_beats_discrete_when_sensors_overlap():
    """The paper's claim on the simple network with sigma 3: EM's CPT error is far below Discrete's."""
    em_errors, discrete_errors = [], []
    for seed in range(5):
        truth = benchmark_network("simple", sigma=3.0, seed=seed)
        cases, codes = sample_cases(truth, 3000, np.random.default_rng(100 + seed))
        marginals = [np.bincount(codes[:, i], minlength=2) / len(codes) for i in range(len(truth))]
        discrete = fit_discrete(truth, cases, prior=0.0, priors=marginals)
        em, result = fit_em(truth, cases, plain(prior=0.0))
        assert result.converged
        em_errors.append(cpt_error(em, truth))
        discrete_errors.append(cpt_error(discrete, truth))
    assert np.median(em_errors) < 0.5 * np.median(discrete_errors), (em_errors, discrete_errors)


def test_em_recovers_ground_truth_with_clear_sensors():
    truth = benchmark_network("montesano", sigma=1.0, seed=5)
    cases, _ = sample_cases(truth, 20000, np.random.default_rng(2), labelled=("Action",))
    model, result = fit_em(truth, cases, plain(prior=0.0))
    assert result.converged
    assert cpt_error(model, truth) < 0.03


def test_discrete_on_complete_labels_is_counting():
    truth = benchmark_network("simple", sigma=1.0, seed=3)
    cases = all_labels(truth, 400, 9)
    model = fit_discrete(truth, cases, prior=0.0)
    a, b, c = (cases.labels[n] for n in "ABC")
    for i in range(2):
        for j in range(2):
            rows = (a == i) & (b == j)
            expected = np.bincount(c[rows], minlength=2) / rows.sum()
            np.testing.assert_allclose(model["C"].cpt[i, j], expected)


def test_em_with_labels_only_converges_to_counts_in_one_step():
    truth = benchmark_network("simple", sigma=1.0, seed=3)
    cases = all_labels(truth, 400, 9)
    em, result = fit_em(truth, cases, plain(prior=0.0))
    np.testing.assert_allclose(em["C"].cpt, fit_discrete(truth, cases, prior=0.0)["C"].cpt, atol=1e-12)
    assert result.iterations <= 2


def test_k2_recovers_simple_and_montesano_arcs():
    for name, seed in (("simple", 0), ("montesano", 1)):
        truth = benchmark_network(name, sigma=1.0, seed=seed)
        learner = AffordanceLearner(structure="k2", max_parents=4).fit(without_arcs(truth), all_labels(truth, 20000, 3))
        assert sorted(learner.model_.arcs) == sorted(truth.arcs), name


def test_k2_respects_group_constraints_and_max_parents():
    truth = benchmark_network("montesano", sigma=1.0, seed=1)
    learner = AffordanceLearner(structure="k2", max_parents=1).fit(without_arcs(truth), all_labels(truth, 3000, 3))
    model = learner.model_
    assert all(len(v.parents) <= 1 for v in model.variables)
    for parent, child in model.arcs:
        assert not (model[parent].group == "effect" and model[child].group in ("action", "object"))


def test_mcmc_puts_high_probability_on_true_arcs():
    truth = benchmark_network("montesano", sigma=1.0, seed=1)
    learner = AffordanceLearner(structure="mcmc", mcmc_samples=3000, mcmc_burn_in=500, seed=4).fit(
        without_arcs(truth), all_labels(truth, 20000, 3))
    probs = learner.result_.arc_probabilities
    for parent, child in truth.arcs:
        assert probs.get((parent, child), 0.0) > 0.9, (parent, child, probs)
    false_arcs = {arc: p for arc, p in probs.items() if arc not in truth.arcs and p > 0.5}
    assert not false_arcs


def test_mcmc_is_reproducible_with_a_seed():
    truth = benchmark_network("simple", sigma=1.0, seed=0)
    config, cases = without_arcs(truth), all_labels(truth, 2000, 1)
    runs = [AffordanceLearner(structure="mcmc", mcmc_samples=500, mcmc_burn_in=100, seed=7).fit(config, cases)
            for _ in range(2)]
    assert runs[0].result_.arc_probabilities == runs[1].result_.arc_probabilities
    assert runs[0].result_.structure_result.score_trace == runs[1].result_.structure_result.score_trace


def test_learner_fixed_structure_keeps_configured_arcs():
    truth = benchmark_network("montesano", sigma=2.0, seed=2)
    config = AffordanceNetwork([dataclasses.replace(v, cpt=None) for v in truth.variables])
    cases, _ = sample_cases(truth, 1000, np.random.default_rng(0), labelled=("Action",))
    learner = AffordanceLearner(structure="fixed").fit(config, cases)
    assert learner.model_.arcs == truth.arcs
    assert learner.result_.num_cases == 1000 and learner.result_.iterations >= 1
    with pytest.raises(ModelFormatError, match="needs 'parents'"):
        AffordanceLearner(structure="fixed").fit(without_arcs(truth), cases)


def test_sensor_mixture_by_bic_finds_the_clusters():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(m, 0.5, 400) for m in (8.0, 0.0, 4.0)])
    means, stddevs, weights = fit_sensor(x, None, 6, rng)
    assert means.size == 3
    np.testing.assert_allclose(means, [0.0, 4.0, 8.0], atol=0.15)
    np.testing.assert_allclose(stddevs, 0.5, atol=0.1)
    np.testing.assert_allclose(weights, 1 / 3, atol=0.03)


def test_learner_fits_open_sensor_models_and_generates_labels():
    truth = benchmark_network("simple", sigma=0.5, seed=1)
    config = AffordanceNetwork([
        dataclasses.replace(v, parents=None, cpt=None, values=None if v.name == "G" else v.values,
                            sensor=dataclasses.replace(v.sensor, means=None, stddevs=None, max_components=4))
        for v in truth.variables])
    cases, _ = sample_cases(truth, 3000, np.random.default_rng(0))
    model = AffordanceLearner(structure="k2").fit(config, cases.with_network(config)).model_
    assert model.parameterised
    assert model["G"].values == ("g_0", "g_1")
    np.testing.assert_allclose(model["A"].sensor.means, [0.0, 5.0], atol=0.1)


def test_learning_from_no_cases_is_a_clear_error():
    truth = benchmark_network("simple", sigma=1.0, seed=0)
    empty = CaseSet(truth, {}, {"a": np.zeros(0)}, [])
    with pytest.raises(DataError, match="no cases"):
        AffordanceLearner().fit(without_arcs(truth), empty)
    with pytest.raises(DataError, match="no cases"):
        fit_em(truth, empty, plain())


def test_learned_model_round_trips_through_json(tmp_path):
    truth = benchmark_network("montesano", sigma=3.0, seed=0)
    cases, _ = sample_cases(truth, 300, np.random.default_rng(0), labelled=("Action",))
    model = AffordanceLearner(structure="k2").fit(without_arcs(benchmark_structure("montesano", 3.0)), cases).model_
    model.save(tmp_path / "m.json")
    loaded = AffordanceNetwork.load(tmp_path / "m.json")
    assert loaded.arcs == model.arcs
    for a, b in zip(loaded.variables, model.variables):
        np.testing.assert_array_equal(a.cpt, b.cpt)
    assert loaded.metadata["learned"]["num_cases"] == 300
