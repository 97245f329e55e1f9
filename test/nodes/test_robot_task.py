"""The simulated robot with a task, over DDS with the learner: each action chosen by ~/select_action with a strategy,
online learning or a new model every few trials, and its successes and regret against the ground truth's best
action."""

import numpy as np
import pytest
from conftest import sampled_records, wait_for

from affordance_ros.core import benchmark_network
from affordance_ros.data.storage import CaseStore
from affordance_ros.nodes.simulation.robot_task import truth_table, wanted_effect

TRUTH = benchmark_network("montesano", 1.0, 0)  # sampled_records' world, and the robot's with truth_seed 0
WANTED = {"ObjVel": "fast"}


def run_task(ros, learner, n, **params):
    # (objects as the stored trials' world brings them: sampled_records draws them from the ground truth itself)
    robot = ros.robot(count=n, seed=4, truth_seed=0, design="truth", exploration="task", wanted_effect="ObjVel=fast",
                      **params)
    ros.wait_for_robot(robot, timeout=300.0)
    wait_for(lambda: learner.counts["stored"] >= n, what=f"{n} stored cases")
    task = robot.explorer
    ros.remove(robot)
    return task


def test_the_truth_table_is_the_ground_truths_probability_of_the_wanted_effect():
    table = truth_table(TRUTH, WANTED)
    rng = np.random.default_rng(3)
    from affordance_ros.core.ground_truth import sample_values

    objects = [TRUTH.index(name) for name in TRUTH.group("object")]
    cards = [TRUTH.variables[i].card for i in objects]
    codes = sample_values(TRUTH, 200_000, rng)
    kinds = np.ravel_multi_index(tuple(codes[:, objects].T), cards)
    fast = codes[:, TRUTH.index("ObjVel")] == TRUTH["ObjVel"].code("fast")
    action = codes[:, TRUTH.index("Action")]
    for kind, a in [(k, a) for k in range(len(table)) for a in range(3)]:
        seen = (kinds == kind) & (action == a)
        if seen.sum() > 2000:  # sampled often enough to check: within 4 standard errors
            p = table[kind, a]
            assert abs(fast[seen].mean() - p) < 4 * np.sqrt(p * (1 - p) / seen.sum()) + 1e-3


def test_a_robot_with_a_task_does_what_select_action_ranks_first_and_reports_its_regret(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(1000):
            store.add(record)
    learner = ros.learner(online_learning=True, select_seed=1)
    assert ros.learn().success
    task = run_task(ros, learner, 60, strategy="expected")
    assert len(task.regrets) == 60 and task.unranked == 0 and learner.counts["select_ok"] >= 60
    assert all(r >= 0 for r in task.regrets) and 0 <= task.successes <= 60
    # against the ground truth, on the same objects: a random action's regret, and the regret of the choices
    table, kinds = truth_table(TRUTH, WANTED), np.array(task.kinds)
    assert task.regrets == pytest.approx(list(table[kinds].max(axis=1) - table[kinds, [
        task.actions.index(a) for a in task.actions_done]]))
    random_regret = float(np.mean(table[kinds].max(axis=1) - table[kinds].mean(axis=1)))
    assert np.mean(task.regrets) < 0.5 * random_regret, task.summary()
    assert "of 60 trials succeeded" in task.summary() and sum(task.chosen.values()) == 60


@pytest.mark.posterior
def test_without_a_model_it_acts_at_random_until_the_learn_it_asks_for(ros, tmp_path):
    learner = ros.learner(select_seed=1, online_learning=True)
    task = run_task(ros, learner, 45, strategy="optimistic", learn_every=20)
    # trials 1-20 before any model: random (counted); then a learn of those 20, and the learner ranks (online
    # updates in between keep the posterior draws optimistic needs)
    assert task.unranked == 20 and len(task.regrets) == 45
    assert learner.counts["learn_ok"] == task.learns == 2 and learner.counts["select_ok"] >= 25
    assert learner.counts["online_updates"] >= 20


@pytest.mark.parametrize("params, message", [
    (dict(scenario="tools"), "exploration 'task' needs scenario 'network'"),
    (dict(wanted_effect="Speed=fast"), "'Speed' is not an effect variable of the world; its effects are"),
    (dict(wanted_effect="ObjVel=quick"), "'ObjVel' has no label 'quick'; its labels are"),
    (dict(wanted_effect="ObjVel"), "must look like VARIABLE=LABEL"),
    (dict(strategy="greedy"), "strategy 'greedy' is not one of"),
])
def test_a_task_the_robot_cannot_do_is_refused(ros, params, message):
    with pytest.raises(ValueError, match=message):
        ros.robot(**{"exploration": "task", **params})


def test_wanted_effects_may_be_several():
    assert wanted_effect("ObjVel=fast, Contact=long", TRUTH) == {"ObjVel": "fast", "Contact": "long"}
