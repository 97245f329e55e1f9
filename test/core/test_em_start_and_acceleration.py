"""EM with a latent variable (a start that is not a saddle, restarts) and SQUAREM, against ground truth."""

import numpy as np
import pytest
from helpers import plain

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    LearningOptions,
    ModelFormatError,
    Variable,
    benchmark_network,
    benchmark_structure,
    fit_em,
    sample_cases,
)
from affordance_ros.core.em import symmetric_latents
from affordance_ros.core.evidence import latent_variables
from affordance_ros.core.ground_truth import random_cpts, sample_values
from affordance_ros.core.parameters import log_likelihood


def latent_cause_network(seed=0):
    """H (never observed, 2 values) -> A, B, C, D (3 values each, labelled)."""
    variables = [Variable("H", "object", ("h0", "h1"), ())]
    variables += [Variable(n, "effect", ("x", "y", "z"), ("H",)) for n in "ABCD"]
    truth = random_cpts(AffordanceNetwork(variables), np.random.default_rng(seed), alpha=0.5)
    return truth


def latent_cases(truth, n=2000, missing=0.2, seed=1):
    rng = np.random.default_rng(seed)
    codes = sample_values(truth, n, rng)
    codes[rng.random(codes.shape) < missing] = -1
    labels = {v.name: codes[:, i] for i, v in enumerate(truth.variables) if v.name != "H"}
    return CaseSet(truth, labels, {})


def uniform(network):
    return network.with_cpts({v.name: np.full(v.cpt.shape, 1.0 / v.card) for v in network.variables})


def test_latent_variables_are_found_and_the_uniform_start_is_a_symmetric_fixed_point():
    truth = latent_cause_network()
    cases = latent_cases(truth)
    evidence = cases.evidence(truth)
    assert latent_variables(evidence) == [truth.index("H")]
    flat = [v.cpt for v in uniform(truth).variables]
    assert symmetric_latents(truth, flat, [truth.index("H")]) == [truth.index("H")]
    assert symmetric_latents(truth, [v.cpt for v in truth.variables], [truth.index("H")]) == []


def test_default_start_is_not_a_saddle_and_reaches_the_truths_likelihood():
    truth = latent_cause_network()
    cases = latent_cases(truth)
    truth_ll = log_likelihood(truth, cases)
    model, result = fit_em(uniform(truth), cases, plain(prior=0.0, tol=1e-4, max_iter=2000))
    assert result.converged and result.saddles == 0
    assert symmetric_latents(truth, [v.cpt for v in model.variables], [0]) == []
    # maximum likelihood is at least the truth's (up to EM's tolerance)
    assert result.log_likelihood >= truth_ll - 0.5, (result.log_likelihood, truth_ll)


def test_a_symmetric_start_is_escaped_never_reported_as_converged():
    truth = latent_cause_network()
    cases = latent_cases(truth)
    # uniform CPTs everywhere are a fixed point: EM started there stops at once, "converged"
    flat = [v.cpt for v in uniform(truth).variables]
    stuck, result = fit_em(uniform(truth), cases, plain(prior=0.0, max_iter=1), initial_cpts=flat)
    assert not result.converged
    model, result = fit_em(uniform(truth), cases, plain(prior=0.0, tol=1e-4, max_iter=2000), initial_cpts=flat)
    assert result.saddles >= 1 and result.converged
    assert result.log_likelihood >= log_likelihood(truth, cases) - 0.5
    # max_iter exhausted on the saddle: not converged
    _, result = fit_em(uniform(truth), cases, plain(prior=0.0, max_iter=3), initial_cpts=flat)
    assert not result.converged


def test_n_init_keeps_the_best_of_seeded_restarts():
    truth = latent_cause_network(seed=3)
    cases = latent_cases(truth, n=600, seed=4)
    model, result = fit_em(uniform(truth), cases, plain(prior=0.0, n_init=4, seed=7))
    assert len(result.restarts) == 4
    assert result.log_posteriors[-1] == max(result.restarts)
    np.testing.assert_allclose(log_likelihood(model, cases), result.log_likelihood, rtol=1e-10)
    again, result2 = fit_em(uniform(truth), cases, plain(prior=0.0, n_init=4, seed=7))
    assert result2.restarts == result.restarts
    for a, b in zip(model.variables, again.variables):
        np.testing.assert_array_equal(a.cpt, b.cpt)
    single, one = fit_em(uniform(truth), cases, plain(prior=0.0, n_init=1, seed=7))
    assert one.restarts == result.restarts[:1]
    with pytest.raises(ModelFormatError, match="n_init"):
        fit_em(uniform(truth), cases, plain(n_init=0))


@pytest.mark.parametrize("prior", [0.0, 1.0])
def test_squarem_objective_never_decreases_and_reaches_the_same_fixed_point(prior):
    truth = benchmark_network("montesano", sigma=3.0, seed=11)
    cases, _ = sample_cases(truth, 2000, np.random.default_rng(1), labelled=("Action",))
    structure = benchmark_structure("montesano", 3.0)
    slow, plain_result = fit_em(structure, cases, plain(prior=prior, tol=1e-8, max_iter=5000))
    fast, fast_result = fit_em(structure, cases, LearningOptions(prior=prior, tol=1e-8, max_iter=5000,
                                                                 em_acceleration="squarem"))
    assert plain_result.converged and fast_result.converged
    trace = np.array(fast_result.log_posteriors)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    assert max(np.abs(a.cpt - b.cpt).max() for a, b in zip(slow.variables, fast.variables)) < 1e-4
    assert fast_result.log_posteriors[-1] >= plain_result.log_posteriors[-1] - 1e-6
    # far fewer E-steps (maximum likelihood, with CPT entries going to 0, is the slower case)
    fewer = 2 if prior == 0 else 3
    assert fast_result.iterations < plain_result.iterations / fewer, (fast_result.iterations, plain_result.iterations)


def test_squarem_respects_max_iter_and_latent_variables():
    truth = latent_cause_network()
    cases = latent_cases(truth)
    _, result = fit_em(uniform(truth), cases, LearningOptions(prior=0.0, max_iter=5, em_acceleration="squarem"))
    assert result.iterations <= 5 and not result.converged
    model, result = fit_em(uniform(truth), cases, LearningOptions(prior=0.0, tol=1e-5, max_iter=2000,
                                                                 em_acceleration="squarem"))
    assert result.converged and result.log_likelihood >= log_likelihood(truth, cases) - 0.5
    with pytest.raises(ModelFormatError, match="acceleration"):
        fit_em(uniform(truth), cases, LearningOptions(em_acceleration="fast"))


def test_learning_options_n_init_and_acceleration_reach_the_learner():
    assert LearningOptions().n_init == 1 and LearningOptions().em_acceleration == "squarem"
    with pytest.raises(ModelFormatError, match="n_init"):
        LearningOptions(n_init=0)
    with pytest.raises(ModelFormatError, match="em_acceleration"):
        LearningOptions(em_acceleration="x")
    truth = latent_cause_network()
    config = AffordanceNetwork([v for v in uniform(truth).variables],
                             learning={"n_init": 3, "structure": "fixed", "latent": ["H"]})
    learner = AffordanceLearner(prior=0.0).fit(config, latent_cases(truth, n=500))
    assert len(learner.result_.em.restarts) == 3
    assert learner.model_.metadata["learned"]["n_init"] == 3
    assert learner.result_.em.log_posteriors[-1] == max(learner.result_.em.restarts)


@pytest.mark.parametrize("acceleration", ["none", "squarem"])
def test_support_gives_structural_zeros_that_em_keeps(acceleration):
    """``fit_em``'s ``support``: the CPT entries outside it start at zero and stay there (plain EM keeps an exact
    zero; SQUAREM's log-space steps keep it below 1e-250), every row still sums to one, and the entries inside
    are learned from the data as usual."""
    truth = benchmark_network("montesano", sigma=1.0, seed=3)
    cases, _ = sample_cases(truth, 2000, np.random.default_rng(0), labelled=("Action",))
    name = "ObjVel"
    shape = truth[name].cpt.shape
    support = np.random.default_rng(1).random(shape) < 0.6
    support[..., 0] |= ~support.any(axis=-1)                        # every row keeps a value
    unlearned = truth.replace_variables({v.name: {"cpt": None} for v in truth.variables})
    model, result = fit_em(unlearned, cases, LearningOptions(em_acceleration=acceleration), support={name: support})
    cpt = model[name].cpt
    assert np.all(cpt[~support] < (1e-250 if acceleration == "squarem" else 1e-300))
    np.testing.assert_allclose(cpt.sum(axis=-1), 1.0)
    assert np.all(cpt[support] > 0) and np.isfinite(result.log_likelihood)
    free, _ = fit_em(unlearned, cases, LearningOptions(em_acceleration=acceleration))
    assert np.all(free[name].cpt[~support] > 1e-6)                  # without it, EM fills those entries
