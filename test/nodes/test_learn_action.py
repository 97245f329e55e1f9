"""~/learn as an action (feedback, result, cancel, a second goal rejected) beside the Learn service at the same name."""

import json
import subprocess

from action_msgs.msg import GoalStatus
from conftest import CLI, sampled_records, wait_for, write_config
from ros_harness import Waiter

from affordance_ros.action import Learn as LearnAction
from affordance_ros.data.storage import CaseStore

ACTION = "/affordance_learner/learn"


def seed_database(tmp_path, n=150):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(n):
            store.add(record)


def send(ros, structure=""):
    """Send a goal; (goal handle, feedback list)."""
    client = ros.action_client(LearnAction, ACTION)
    assert client.wait_for_server(timeout_sec=20.0), "the Learn action server did not appear"
    feedback = []
    handle = Waiter(client.send_goal_async(LearnAction.Goal(structure=structure),
                                            feedback_callback=lambda msg: feedback.append(msg.feedback))).result(20.0)
    assert handle.accepted
    return handle, feedback


def test_the_action_learns_with_feedback_and_the_service_still_works(ros, tmp_path):
    seed_database(tmp_path)
    learner = ros.learner()
    # (the service and the action's services live side by side at ~/learn: both are called below)
    handle, feedback = send(ros, "k2")
    answer = Waiter(handle.get_result_async()).result(60.0)
    assert answer.status == GoalStatus.STATUS_SUCCEEDED
    result = answer.result
    assert result.success and result.num_cases == 150 and result.iterations > 0, result.message
    assert result.arcs and all("->" in arc for arc in result.arcs)
    assert result.log_likelihood == learner.configured.manager.current.model.metadata["learned"]["log_likelihood"]
    wait_for(lambda: {"sensors", "structure", "parameters"} <= {f.phase for f in feedback}, what="feedback")
    assert all(f.cases == 150 for f in feedback)
    elapsed = [f.elapsed for f in feedback]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= result.duration + 0.5
    em = [f for f in feedback if f.phase == "parameters"]
    assert em[0].iteration >= 1 and em[0].log_likelihood < 0

    # the Learn service at the same name is still there and answers as before
    again = ros.learn(structure="fixed")
    assert again.success and again.num_cases == 150, again.message
    assert learner.counts["learn_ok"] == 2


def test_cancel_stops_learning_and_keeps_the_current_model(ros, tmp_path):
    seed_database(tmp_path)
    config = write_config(tmp_path / "config.json", mcmc_samples=5_000_000, mcmc_burn_in=0)
    learner = ros.learner(config_path=str(config))
    first = ros.learn(structure="k2")
    assert first.success, first.message
    model_file = (tmp_path / "model.json").read_text()
    model = learner.configured.manager.current.model

    handle, feedback = send(ros, "mcmc")  # minutes of MCMC
    wait_for(lambda: any(f.phase == "structure" and f.iteration >= 100 for f in feedback), timeout=60.0,
             what="MCMC feedback")
    busy = ros.learn()  # meanwhile the service refuses a second learn
    assert not busy.success and "already running" in busy.message
    cancel = Waiter(handle.cancel_goal_async()).result(20.0)
    assert len(cancel.goals_canceling) == 1
    answer = Waiter(handle.get_result_async()).result(30.0)
    assert answer.status == GoalStatus.STATUS_CANCELED
    assert not answer.result.success and "cancelled" in answer.result.message
    assert (tmp_path / "model.json").read_text() == model_file  # the current model stays, in use and on disk
    assert learner.configured.manager.current.model is model
    assert learner.counts["learn_cancelled"] == 1 and not learner.learn.busy
    after = ros.learn(structure="k2")  # and the next learn runs
    assert after.success, after.message
    assert json.loads((tmp_path / "model.json").read_text())["metadata"]["learned"]["structure"] == "k2"


def test_a_second_goal_is_rejected_with_its_reason_and_call_learn_prints_it(ros, tmp_path):
    seed_database(tmp_path)
    config = write_config(tmp_path / "config.json", mcmc_samples=5_000_000, mcmc_burn_in=0)
    learner = ros.learner(config_path=str(config))
    handle, feedback = send(ros, "mcmc")  # minutes of MCMC
    wait_for(lambda: learner.learn.busy, what="the first learn to run")

    # a second goal is rejected in the goal callback (not accepted, then aborted)
    client = ros.action_client(LearnAction, ACTION)
    second = Waiter(client.send_goal_async(LearnAction.Goal(structure="k2"))).result(20.0)
    assert not second.accepted
    assert learner.counts["learn_refused"] == 1

    # the goal response carries no reason: `affordance-ros call learn` reads it on the node's ~/learn_refused
    called = subprocess.run([CLI, "call", "learn", "--structure", "k2"], capture_output=True, text=True, timeout=120)
    assert called.returncode == 2 and called.stdout == ""
    assert called.stderr.startswith(f"affordance-ros call learn: error: {ACTION} refused the goal: a learn is already "
                                    "running (for "), called.stderr
    assert "s); call ~/learn again when it has finished" in called.stderr
    assert learner.counts["learn_refused"] == 2

    cancel = Waiter(handle.cancel_goal_async()).result(20.0)
    assert len(cancel.goals_canceling) == 1
    assert Waiter(handle.get_result_async()).result(30.0).status == GoalStatus.STATUS_CANCELED
    assert not learner.learn.busy
