"""`affordance-ros suggest` (on a model file) and `affordance-ros call suggest` (the node's ~/suggest_trial):
the ranking suggest_trials gives, as JSON; mistakes in one line with exit status 2."""

import json
import subprocess

import numpy as np
import pytest
from conftest import CLI, learned_node
from test_cli import run

from affordance_ros.core import AffordanceNetwork, LearningOptions, benchmark_network, fit_em, sample_cases
from affordance_ros.core.suggest import Candidate, suggest_trials

CANDIDATES = ["color=0.2,shape=5.1,size=9.8", "Shape=circle Size=small", ""]
OBJECTS = [Candidate({"color": 0.2, "shape": 5.1, "size": 9.8}), Candidate(values={"Shape": "circle", "Size": "small"}),
           Candidate()]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("suggest")
    truth = benchmark_network("montesano", 1.0, 2)
    cases, _ = sample_cases(truth, 300, np.random.default_rng(0), labelled=("Action",))
    model, _ = fit_em(truth.replace_variables({v.name: {"cpt": None} for v in truth.variables}), cases,
                      LearningOptions())
    model.save(tmp / "model.json")
    return tmp / "model.json"


def candidate_args():
    return [arg for c in CANDIDATES for arg in ("--candidate", c)]


def test_suggest_ranks_the_trials_of_a_model_file(model_file):
    out = run("suggest", "--model", model_file, *candidate_args())
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    expected = suggest_trials(AffordanceNetwork.load(model_file), OBJECTS)
    assert answer == json.loads(json.dumps(expected.to_dict(effects=False)))
    assert len(answer["suggestions"]) == 9 and answer["criterion"] == "information_gain"
    first = answer["suggestions"][0]
    assert set(first) == {"action", "candidate", "score", "information_gain", "predictive_information",
                          "predictive_entropy", "tried", "expected", "readings"}
    assert set(first["expected"]) == {"ObjVel", "ObjHandVel", "HandVel", "Contact"}

    out = run("suggest", "--model", model_file, *candidate_args(), "--action", "tap", "--action", "touch",
              "--criterion", "least_tried", "--best", "2", "--effects")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    expected = suggest_trials(AffordanceNetwork.load(model_file), OBJECTS, ["tap", "touch"], "least_tried", 2)
    assert answer == json.loads(json.dumps(expected.to_dict()))
    assert [s["action"] for s in answer["suggestions"]] != [] and "effects" in answer["suggestions"][0]


@pytest.mark.parametrize("args, message", [
    (["--candidate", "size"], "--candidate 'size': entry 'size' must look like NAME=VALUE"),
    (["--candidate", "size=nan"], "the reading must be a finite number"),
    (["--candidate", "size=abc"], "candidate 0: reading 'abc' of sensor 'size' is not a number"),
    (["--candidate", "Shape=cube"], "unknown label 'cube'"),
    (["--candidate", "obj_vel=3"], "an effect, which the trial is to show"),
    (["--candidate", "", "--action", "kick"], "unknown label 'kick'"),
])
def test_suggest_mistakes_give_one_line_and_exit_2(model_file, args, message):
    out = run("suggest", "--model", model_file, *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def call_suggest(*args, name="suggest"):
    return subprocess.run([CLI, "call", name, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("criterion, carried", [("information_gain", ()), ("predictive_information",
                                                 ("predictive_information",)), ("least_tried", ("tried",))])
def test_call_suggest_asks_the_node_and_prints_what_suggest_prints(ros, tmp_path, criterion, carried):
    learner, model = learned_node(ros, tmp_path, 300)
    out = call_suggest(*candidate_args(), "--best", "3", "--criterion", criterion)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    expected = json.loads(json.dumps(suggest_trials(model, OBJECTS, criterion=criterion, top=3).to_dict(effects=False)))
    assert list(answer) == list(expected)  # criterion, requested, note, action_variable, suggestions
    assert {k: answer[k] for k in answer if k != "suggestions"} == {k: expected[k] for k in expected
                                                                   if k != "suggestions"}
    assert answer["criterion"] == criterion and answer["note"] == ""
    assert len(answer["suggestions"]) == 3
    # SuggestTrial carries predictive_information and tried only as the score of their criterion
    not_carried = {"predictive_information", "tried"} - set(carried)
    for got, want in zip(answer["suggestions"], expected["suggestions"]):
        assert list(got) == list(want)
        # (the node's model and its file hold the same numbers: the answers are equal, float for float)
        assert {k: v for k, v in got.items() if k not in not_carried} == {
            k: v for k, v in want.items() if k not in not_carried}
        assert all(got[k] is None for k in not_carried)
    wrong = call_suggest("--candidate", "Shape=cube", name="suggest_trial")  # (the service's name: an alias)
    assert wrong.returncode == 2 and "call suggest: error: unknown label 'cube'" in wrong.stderr, wrong.stderr
    assert learner.counts["suggest_ok"] == 1 and learner.counts["suggest_failed"] == 1


def test_call_suggest_before_a_model_notes_its_round_robin(ros):
    ros.learner()
    out = call_suggest("--candidate", "size=9.7", "--best", "2")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["criterion"] == "round_robin" and answer["requested"] == "information_gain"
    assert answer["note"].startswith("no model yet: a round robin") and len(answer["suggestions"]) == 2
