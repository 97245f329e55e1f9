"""`affordance-ros call`: the running learner node's action and services from the shell."""

import argparse
import json
import re
import subprocess
import time

import pytest
from conftest import CLI, interrupted, sampled_records, wait_for, write_config

from affordance_ros.data.storage import CaseStore

pytestmark = pytest.mark.ros


def call(*args, timeout=120):
    return subprocess.run([CLI, "call", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def call_here(*argv) -> int:
    """`affordance-ros call ARGV` in this process (so that a test can make an answer get lost)."""
    from affordance_ros.tools import call as command

    return command.run(command.add_arguments(argparse.ArgumentParser()).parse_args(list(argv)))


def test_a_lost_answer_is_asked_for_again_and_a_learn_runs_once(ros, tmp_path, monkeypatch, capsys):
    from rclpy.action import ActionClient
    from rclpy.client import Client
    from ros_harness import lose_the_first_answer

    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(200):
            store.add(record)
    learner = ros.learner()
    goals = lose_the_first_answer(monkeypatch, ActionClient, "send_goal_async")
    assert call_here("learn", "--structure", "k2") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["success"] and answer["num_cases"] == 200 and answer["arcs"]
    # the goal was sent again with its id: the node took it once, and the result is the first send's
    assert len(goals) >= 2 and learner.counts["learn_ok"] == 1 and learner.counts["learn_refused"] == 0

    asked = lose_the_first_answer(monkeypatch, Client, "call_async")
    assert call_here("predict", "--query", "action", "--sensor", "obj_vel=9.7") == 0
    assert len(asked) >= 2 and set(json.loads(capsys.readouterr().out)["marginals"]["Action"]) == {
        "grasp", "tap", "touch"}


def test_a_refusal_whose_answer_was_lost_is_still_a_refusal(ros, tmp_path, monkeypatch, capsys):
    from rclpy.action import ActionClient
    from ros_harness import lose_the_first_answer

    from affordance_ros.srv import Learn
    from affordance_ros.tools.call import CallError

    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    learner = ros.learner(config_path=str(write_config(tmp_path / "config.json", mcmc_samples=10_000_000)))
    running = ros.call_async(Learn, "/affordance_learner/learn", structure="mcmc")
    wait_for(lambda: learner.learn.busy, what="the long learn to start")
    goals = lose_the_first_answer(monkeypatch, ActionClient, "send_goal_async")
    with pytest.raises(CallError, match="refused the goal: a learn is already running"):
        call_here("learn", "--structure", "k2")
    assert len(goals) >= 2 and learner.counts["learn_refused"] == len(goals) and learner.counts["learn_ok"] == 0
    learner.learn.stop("the test is over")
    assert not running.result(60.0).success


@pytest.mark.posterior
def test_call_learn_predict_and_select_action(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(200):
            store.add(record)
    learner = ros.learner()
    learned = call("learn", "--structure", "k2", "--progress")
    assert learned.returncode == 0, learned.stderr
    answer = json.loads(learned.stdout)
    assert answer["success"] and answer["num_cases"] == 200 and answer["arcs"]
    assert "learn: parameters" in learned.stderr  # the action's feedback
    assert learner.counts["learn_ok"] == 1

    predicted = call("predict", "--query", "action", "--sensor", "obj_vel=9.7", "--value", "Shape=box")
    assert predicted.returncode == 0, predicted.stderr
    answer = json.loads(predicted.stdout)
    assert set(answer["marginals"]["Action"]) == {"grasp", "tap", "touch"}
    assert abs(sum(answer["marginals"]["Action"].values()) - 1) < 1e-9
    assert answer["most_probable"]["Action"] in answer["marginals"]["Action"]

    ranked = call("select-action", "--effect", "ObjVel=fast", "--sensor", "size=9.7")
    assert ranked.returncode == 0, ranked.stderr
    ranking = json.loads(ranked.stdout)["ranking"]
    probabilities = [r["probability"] for r in ranking]
    assert sorted(r["action"] for r in ranking) == ["grasp", "tap", "touch"]
    assert probabilities == sorted(probabilities, reverse=True)

    sure = json.loads(predicted.stdout)  # how sure: the spread of each probability, the trials behind each answer
    assert set(sure["stddevs"]["Action"]) == set(sure["intervals"]["Action"]) == {"grasp", "tap", "touch"}
    for label, (low, high) in sure["intervals"]["Action"].items():
        assert 0 <= low <= high <= 1 and sure["stddevs"]["Action"][label] > 0
    assert sure["support"]["Action"] > 0
    # (by the service's name, select_action: an alias of select-action)
    optimistic = json.loads(call("select_action", "--effect", "ObjVel=fast", "--sensor", "size=9.7", "--strategy",
                                 "optimistic").stdout)
    assert optimistic["strategy"] == "optimistic"
    scores = [r["score"] for r in optimistic["ranking"]]
    # best first (actions whose scores tie, to rounding, come in an order drawn at random)
    assert all(a >= b - 1e-9 * abs(a) for a, b in zip(scores, scores[1:])), scores
    assert all(r["score"] >= r["interval"][0] for r in optimistic["ranking"])   # (a Gittins index: test_gittins.py)
    assert all(r["stddev"] > 0 and r["support"] > 0 and set(r) == {"action", "probability", "stddev", "interval",
                                                                     "support", "score"} for r in optimistic["ranking"])

    top = json.loads(call("predict", "--query", "action", "--top", "2").stdout)  # the 2 most probable actions
    assert len(top["marginals"]["Action"]) == 2 and top["omitted"]["Action"]["labels"] == 1

    wrong = call("predict", "--query", "Nope")  # success false: one line, exit 2
    assert wrong.returncode == 2 and "unknown variable 'Nope'" in wrong.stderr
    assert len(wrong.stderr.splitlines()) == 1 and wrong.stdout == ""
    wrong = call("select-action", "--effect", "objvel=fast")  # the node's answer names the variable meant
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert "unknown variable 'objvel' (did you mean 'ObjVel'? names are case-sensitive)" in wrong.stderr, wrong.stderr


def test_call_without_a_node_waits_then_says_so():
    started = time.monotonic()
    out = call("predict", "--query", "action", "--node", "/nobody_here", "--timeout", "1")
    assert out.returncode == 2 and time.monotonic() - started < 30
    assert out.stderr.strip() == ("affordance-ros call predict: error: no service /nobody_here/predict within 1 s: "
                                  "is the learner node running (and active)?")


def test_call_learn_progress_is_a_line_a_second_without_nan(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(500):
            store.add(record)
    ros.learner(config_path=str(write_config(tmp_path / "config.json", mcmc_samples=60000)))
    started = time.monotonic()
    learned = call("learn", "--structure", "mcmc", "--progress")
    elapsed = time.monotonic() - started
    assert learned.returncode == 0, learned.stderr
    lines = learned.stderr.splitlines()
    assert lines[0].startswith("learn: sensors") and "nan" not in learned.stderr, lines
    assert any(re.fullmatch(r"learn: structure, step \d+, score -\d+\.\d{3}, 500 cases \(\d+\.\d s\)", line)
               for line in lines), lines
    assert any(line.startswith("learn: parameters, EM iteration") for line in lines), lines
    assert len(lines) <= 3 + elapsed  # at every change of phase, else at most a line a second


def test_ctrl_c_cancels_call_learn_in_one_line_with_exit_status_130(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(500):
            store.add(record)
    learner = ros.learner(config_path=str(write_config(tmp_path / "config.json", mcmc_samples=10_000_000)))
    status, stdout, stderr = interrupted([CLI, "call", "learn", "--structure", "mcmc", "--progress"],
                                         "learn: structure")
    assert status == 130 and stdout == "", stderr
    assert stderr.splitlines()[-1] == ("affordance-ros call learn: interrupted: the learn was cancelled; the node "
                                       "keeps its current model")
    assert "Traceback" not in stderr
    wait_for(lambda: learner.counts["learn_cancelled"] == 1, what="the node to cancel the learn")


def test_call_learn_ends_when_the_node_dies_during_the_learn(ros, tmp_path):
    from ros_harness import start, stop

    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    config = write_config(tmp_path / "config.json", mcmc_samples=10_000_000)
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db", config_path=config,
                    model_path=tmp_path / "model.json")
    try:
        caller = subprocess.Popen([CLI, "call", "learn", "--structure", "mcmc", "--progress"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "cases in" in (tmp_path / "learner.log").read_text(), timeout=60, what="the learner")
        time.sleep(5.0)  # learning
        assert caller.poll() is None
        learner.kill()
        _, stderr = caller.communicate(timeout=90)  # (Fast DDS sees the node gone after its lease: 20 s)
        assert caller.returncode == 2, stderr
        assert stderr.splitlines()[-1] == ("affordance-ros call learn: error: /affordance_learner/learn left the ROS "
                                           "graph before it answered: did the learner node stop? (its log says why)")
    finally:
        stop(learner)
