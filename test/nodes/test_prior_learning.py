"""prior_strength: ~/learn learns from the cases stored since the current model, with that model
as a Dirichlet prior, so that knowledge accumulates across sessions."""

import json

import numpy as np
from conftest import MONTESANO_CONFIG, sampled_records
from rclpy.parameter import Parameter

from affordance_ros.core import AffordanceLearner, AffordanceNetwork
from affordance_ros.core.ground_truth import benchmark_network
from affordance_ros.data.storage import CaseStore
from affordance_ros.data.trial import case_set

TRUTH = benchmark_network("montesano", 1.0, 0)  # what sampled_records draws from


def cpt_rms(a, b):
    diffs = np.concatenate([(a[v.name].cpt - b[v.name].cpt).ravel() for v in a.variables])
    return float(np.sqrt(np.mean(diffs ** 2)))


def store(path, records):
    with CaseStore(path) as cases:
        for record in records:
            cases.add(record)


def test_learning_with_the_current_model_as_prior(ros, tmp_path):
    first, later = sampled_records(400), sampled_records(100, seed=1, prefix="n")
    store(tmp_path / "cases.db", first)
    learner = ros.learner()
    assert ros.learn(structure="fixed").success is False  # no arcs yet: learn a structure first
    assert ros.learn(structure="k2").success
    current = AffordanceNetwork.load(tmp_path / "model.json")
    assert current.metadata["cases"]["count"] == 400

    assert learner.set_parameters([Parameter("prior_strength", value=400.0)])[0].successful
    nothing_new = ros.learn()
    assert not nothing_new.success
    assert ("no new cases since the current model was learned (it has seen 400 stored cases, up to trial "
            "'r00399')") in nothing_new.message
    assert AffordanceNetwork.load(tmp_path / "model.json").metadata == current.metadata  # untouched

    store(tmp_path / "cases.db", later)
    carried = ros.learn(structure="fixed")
    assert carried.success, carried.message
    assert carried.num_cases == 100
    assert "stored since the current model, with it as a prior worth 400 cases" in carried.message
    model = AffordanceNetwork.load(tmp_path / "model.json")
    assert model.metadata["learned"]["prior_strength"] == 400.0 and model.metadata["learned"]["num_cases"] == 100
    assert model.metadata["cases"]["count"] == 500 and model.metadata["cases"]["last_trial_id"] == "n00099"

    # exactly the core's learner on the new cases with the current model as prior
    config = AffordanceNetwork.load(MONTESANO_CONFIG).with_structure({v.name: v.parents for v in current.variables})
    expected = AffordanceLearner(structure="fixed", prior_strength=400.0).fit(
        config, case_set(config, later), prior_model=current).model_
    assert cpt_rms(model, expected) < 1e-12
    # knowledge accumulates: nearer the ground truth than the 100 new cases alone
    alone = AffordanceLearner(structure="fixed").fit(config, case_set(config, later)).model_
    assert model.arcs == current.arcs and sorted(current.arcs) == sorted(TRUTH.arcs)  # K2 found the true arcs
    assert cpt_rms(model, TRUTH) < 0.8 * cpt_rms(alone, TRUTH)
    batch = AffordanceLearner(structure="fixed").fit(config, case_set(config, first + later)).model_
    assert cpt_rms(model, batch) < 0.5 * cpt_rms(alone, batch)  # near learning on all 500

    # nothing new again
    assert "no new cases" in ros.learn().message
    # a negative strength is refused
    assert not learner.set_parameters([Parameter("prior_strength", value=-1.0)])[0].successful


def test_a_model_that_does_not_say_which_cases_it_has_seen(ros, tmp_path):
    store(tmp_path / "cases.db", sampled_records(100))
    learner = ros.learner()
    assert ros.learn().success
    ros.remove(learner)
    doc = json.loads((tmp_path / "model.json").read_text())
    del doc["metadata"]["cases"]  # as written by an earlier version
    (tmp_path / "model.json").write_text(json.dumps(doc))
    learner = ros.learner(prior_strength=50.0)
    refused = ros.learn()
    assert not refused.success
    assert "does not record which stored cases it has seen" in refused.message
    assert "learn once with prior_strength 0" in refused.message
    assert learner.set_parameters([Parameter("prior_strength", value=0.0)])[0].successful
    assert ros.learn().num_cases == 100
