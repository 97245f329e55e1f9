"""Progress of a learning run (phase, iteration, log-likelihood) and cancelling it from the callback."""

import numpy as np
import pytest

from affordance_ros.core import AffordanceLearner, AffordanceNetwork, LearningCancelled, benchmark_network, sample_cases
from affordance_ros.share import default_config_path


@pytest.fixture(scope="module")
def data():
    truth = benchmark_network("montesano", sigma=1.0, seed=2)
    cases, _ = sample_cases(truth, 300, np.random.default_rng(4), labelled=("Action",))
    return AffordanceNetwork.load(default_config_path()), cases


@pytest.mark.parametrize("structure", ["k2", "mcmc"])
def test_every_phase_reports_its_steps_and_em_its_log_likelihood(data, structure):
    config, cases = data
    heard = []
    learner = AffordanceLearner(structure=structure, mcmc_samples=300, mcmc_burn_in=100).fit(
        config, cases, progress=lambda *step: heard.append(step))
    phases = [phase for phase, _, _ in heard]
    assert phases[0] == "sensors"
    assert phases.index("structure") < phases.index("parameters")
    structure_steps = [i for phase, i, _ in heard if phase == "structure"]
    assert structure_steps[:len(config)] == list(range(1, len(config) + 1))  # K2 places every variable
    if structure == "mcmc":
        assert structure_steps[len(config):] == [100, 200, 300, 400]  # burn-in + samples, every 100 steps
    em = [(i, ll) for phase, i, ll in heard if phase == "parameters"]
    assert [i for i, _ in em] == list(range(1, learner.result_.iterations + 1))
    lls = [ll for _, ll in em]
    assert all(np.isfinite(lls)) and lls == sorted(lls)  # EM never decreases the likelihood (prior aside)


@pytest.mark.parametrize("phase", ["sensors", "structure", "parameters"])
def test_a_callback_cancels_learning_in_any_phase(data, phase):
    config, cases = data
    learner = AffordanceLearner(structure="mcmc", mcmc_samples=300, mcmc_burn_in=100, prior=0.0)

    def stop_in(name, iteration, ll):
        return name != phase or iteration < 2 and phase != "sensors"  # False: cancel

    with pytest.raises(LearningCancelled, match=phase):
        learner.fit(config, cases, progress=stop_in)
    assert not hasattr(learner, "model_")

    def raise_in(name, iteration, ll):
        if name == phase:
            raise LearningCancelled("stop")

    with pytest.raises(LearningCancelled, match="stop"):
        learner.fit(config, cases, progress=raise_in)
    assert not hasattr(learner, "model_")
