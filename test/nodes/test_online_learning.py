"""online_learning: every newly stored case refines the model at once (stepwise EM), predictions
use it, it is written to model_path; a batch learn replaces it; a restart catches up."""

from dataclasses import replace

import numpy as np
import pytest
from conftest import sampled_records, wait_for

from affordance_ros.core import AffordanceNetwork, predict, rank_actions
from affordance_ros.data.current_model import OnlineRefiner
from affordance_ros.data.storage import CaseStore
from affordance_ros.srv import SelectAction

EVIDENCE = dict(sensor_names=["obj_vel", "hand_vel", "size"], sensor_values=[9.7, 0.3, 5.1])


def saved(path, updates):
    """The model file once it holds ``updates`` online updates."""
    def ready():
        try:
            return (AffordanceNetwork.load(path).metadata.get("online") or {}).get("updates") == updates
        except Exception:  # not there yet (written atomically, so never half)
            return False
    wait_for(ready, what=f"a model file with {updates} online updates")
    return AffordanceNetwork.load(path)


def action_marginal(response):
    assert response.success, response.message
    return dict(zip(response.marginals[0].values, response.marginals[0].probabilities))


def max_cpt_change(a, b):
    return max(float(np.abs(a[v.name].cpt - b[v.name].cpt).max()) for v in a.variables)


def test_new_cases_refine_the_model_and_its_predictions(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    learner = ros.learner(online_learning=True, online_save_period=0.2)
    assert ros.learn().success
    before = AffordanceNetwork.load(tmp_path / "model.json")
    assert before.metadata["cases"]["count"] == 300 and "online" not in before.metadata
    predicted_before = action_marginal(ros.predict(query=["action"], **EVIDENCE))

    robot = ros.robot(count=60, seed=9)
    ros.wait_for_robot(robot)
    wait_for(lambda: learner.counts["online_updates"] == 60, what="60 online updates")
    after = saved(tmp_path / "model.json", 60)

    # the model changed, and says so
    assert after.metadata["online"]["num_cases"] == 360
    assert after.metadata["cases"]["count"] == 360
    assert after.metadata["cases"]["last_trial_id"] == learner.configured.manager.store.records()[-1].trial_id
    assert after.metadata["learned"] == before.metadata["learned"]
    assert after.arcs == before.arcs
    assert max_cpt_change(after, before) > 1e-3
    # exactly the updates of stepwise EM on the new cases, started from the learned model worth 300 cases
    reference = OnlineRefiner(before)
    for case_id, record in learner.configured.manager.store.numbered_records(after=before.metadata["cases"]["last_id"]):
        reference.update(case_id, record)
    assert max_cpt_change(reference.model, after) < 1e-12

    # predictions use the updated model
    predicted_after = action_marginal(ros.predict(query=["action"], **EVIDENCE))
    expected = predict(after, ["action"], sensors=dict(zip(EVIDENCE["sensor_names"], EVIDENCE["sensor_values"])))
    assert predicted_after == pytest.approx(expected.marginals["Action"], abs=1e-12)
    assert max(abs(predicted_after[a] - predicted_before[a]) for a in predicted_after) > 1e-4
    ranked = ros.call(SelectAction, "/affordance_learner/select_action", effect_names=["ObjVel"],
                      effect_values=["fast"], variable_names=["Shape"], variable_values=["box"])
    assert list(ranked.probabilities) == pytest.approx(
        rank_actions(after, {"ObjVel": "fast"}, values={"Shape": "box"}).probabilities, abs=1e-12)

    # a batch learn replaces it; online updates restart from the new model
    relearned = ros.learn(structure="fixed")
    assert relearned.success and relearned.num_cases == 360
    batch = AffordanceNetwork.load(tmp_path / "model.json")
    assert "online" not in batch.metadata and batch.metadata["cases"]["count"] == 360
    robot = ros.robot(count=10, seed=10)
    ros.wait_for_robot(robot)
    wait_for(lambda: learner.counts["online_updates"] == 70, what="10 more online updates")
    again = saved(tmp_path / "model.json", 10)
    assert again.metadata["online"]["num_cases"] == 370 and again.metadata["learned"] == batch.metadata["learned"]
    assert learner.counts["online_skipped"] == 0


def test_a_restart_catches_up_skips_unknown_sensors_and_saves_at_shutdown(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(200):
            store.add(record)
    learner = ros.learner()  # online learning off: the model stays as learned
    assert ros.learn().success
    ros.remove(learner)
    learned = AffordanceNetwork.load(tmp_path / "model.json")

    # cases stored while the node was down (e.g. imported); one from an older configuration
    strange = sampled_records(1, prefix="old")[0]
    strange = replace(strange, object_features={**strange.object_features, "weight": 3.0})
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(20, seed=4, prefix="down"):
            store.add(record)
        store.add(strange)

    learner = ros.learner(online_learning=True, online_save_period=3600.0)
    assert learner.counts["online_updates"] == 20 and learner.counts["online_skipped"] == 1
    assert learner.configured.manager.current.model.metadata["online"]["num_cases"] == 220
    assert AffordanceNetwork.load(tmp_path / "model.json").metadata.get("online") is None  # not yet written
    robot = ros.robot(count=5, seed=11)
    ros.wait_for_robot(robot)
    wait_for(lambda: learner.counts["online_updates"] == 25, what="5 online updates")
    ros.remove(learner)  # stopping writes the updated model
    final = AffordanceNetwork.load(tmp_path / "model.json")
    assert final.metadata["online"]["updates"] == 25 and final.metadata["cases"]["count"] == 225
    assert max_cpt_change(final, learned) > 1e-3

    # started again: nothing to catch up on, the updates go on from the saved model
    learner = ros.learner(online_learning=True)
    assert learner.counts["online_updates"] == 0
    assert learner.configured.manager.current.model.metadata["online"]["updates"] == 25
    assert ros.predict(query=["effect"], variable_names=["Action"], variable_values=["tap"]).success
