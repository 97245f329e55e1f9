"""`affordance-ros call`: the running learner node's action and services from the shell."""

import json
import subprocess
import time

import pytest
from conftest import sampled_records
from test_cli import EXE

from affordance_ros.data.storage import CaseStore

pytestmark = pytest.mark.ros


def call(*args, timeout=120):
    return subprocess.run([EXE, "call", *map(str, args)], capture_output=True, text=True, timeout=timeout)


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

    wrong = call("predict", "--query", "Nope")  # success false: one line, exit 2
    assert wrong.returncode == 2 and "unknown variable 'Nope'" in wrong.stderr
    assert len(wrong.stderr.splitlines()) == 1 and wrong.stdout == ""


def test_call_without_a_node_waits_then_says_so():
    started = time.monotonic()
    out = call("predict", "--query", "action", "--node", "/nobody_here", "--timeout", "1")
    assert out.returncode == 2 and time.monotonic() - started < 30
    assert out.stderr.strip() == ("affordance-ros call predict: error: no service /nobody_here/predict within 1 s: "
                                  "is the learner node running (and active)?")
