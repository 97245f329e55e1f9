"""Learning does not block: predict answers and trials are stored while it runs; a second learn is refused."""

import json

from conftest import sampled_records, wait_for, write_config

from affordance_ros.data.storage import CaseStore
from affordance_ros.srv import Learn

# A long MCMC structure search (half a million steps on 200 cases): long enough to do things meanwhile.
SLOW_MCMC = dict(mcmc_samples=500000, mcmc_burn_in=1000)


def test_predict_and_storing_go_on_while_learning(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(200):
            store.add(record)
    learner = ros.learner(config_path=str(write_config(tmp_path / "config.json", **SLOW_MCMC)))
    first = ros.learn(structure="k2")
    assert first.success, first.message
    model_before = json.loads((tmp_path / "model.json").read_text())

    slow = ros.call_async(Learn, "/affordance_learner/learn", structure="mcmc")
    wait_for(lambda: learner.learn.busy, what="the slow learn to start")

    second = ros.learn()
    assert not second.success
    assert "already running" in second.message and "call ~/learn again when it has finished" in second.message

    answers = [ros.predict(query=["action"], sensor_names=["obj_vel"], sensor_values=[float(x)]) for x in range(3)]
    assert all(a.success for a in answers), [a.message for a in answers]
    robot = ros.robot(count=20)
    wait_for(lambda: learner.counts["stored"] == 20, what="trials stored during learning")
    assert not slow.done(), "learning finished too early to show anything: make SLOW_MCMC slower"
    # meanwhile the previous model is the one answering and on disk
    assert json.loads((tmp_path / "model.json").read_text()) == model_before

    done = slow.result(timeout=120.0)
    assert done.success, done.message
    assert done.num_cases in range(200, 221)
    assert learner.counts["learn_refused"] == 1
    assert json.loads((tmp_path / "model.json").read_text())["metadata"]["learned"]["structure"] == "mcmc"
    assert ros.learn().success  # free again
    ros.remove(robot)
