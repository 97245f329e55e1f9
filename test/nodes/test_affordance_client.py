"""AffordanceClient, the planner's side, against a real learner node over DDS: blocking calls from a script, the
async form inside an executor, the core's own answers, and a learner that is absent, refuses or goes away."""

import math
import signal
import threading
import time

import numpy as np
import pytest
import rclpy
from conftest import learned_node, sampled_records, wait_for, write_config
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.executors import SingleThreadedExecutor
from rclpy.task import Future
from ros_harness import start, stop

from affordance_ros import AffordanceClient, LearnerRefused, LearnerUnavailable
from affordance_ros.core import (
    ActionRanking,
    EvidenceError,
    LearningCancelled,
    LearnProgress,
    Prediction,
    predict,
    rank_actions,
)
from affordance_ros.core.suggest import Candidate, TrialSuggestions, suggest_trials
from affordance_ros.data.storage import CaseStore

SMALL_BOX = {"color": 5.1, "shape": 5.0, "size": 0.1}


def planner(ros, name="planner", **kwargs):
    """A node of the test's context that nothing spins (a script's), and its client."""
    node = rclpy.create_node(name, context=ros.context)
    return node, AffordanceClient(node, **kwargs)


def resolved(future: Future, timeout=120.0):
    """The result of a future completed by another thread's executor."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    assert done.wait(timeout), "the future was not completed"
    return future.result()


@pytest.mark.posterior
def test_the_blocking_calls_answer_with_the_core_types_what_the_model_answers(ros, tmp_path):
    learner, model = learned_node(ros, tmp_path, 300)
    node, client = planner(ros, timeout=60.0)
    try:
        prediction = client.predict("effect", values={"Action": "tap"}, sensors=SMALL_BOX)
        here = predict(model, ["effect"], sensors=SMALL_BOX, values={"Action": "tap"})
        assert isinstance(prediction, Prediction)
        assert list(prediction.marginals) == list(here.marginals) == model.group("effect")
        for name, dist in here.marginals.items():
            assert list(prediction.marginals[name]) == list(dist)
            assert np.allclose(list(prediction.marginals[name].values()), list(dist.values()), rtol=1e-12, atol=0)
        assert prediction.most_probable == here.most_probable
        assert prediction.joint_probability == pytest.approx(here.joint_probability, rel=1e-12)
        assert list(prediction.readings) == list(here.readings) and prediction.readings
        for name, reading in here.readings.items():
            assert prediction.readings[name] == pytest.approx(reading, rel=1e-12)
        for name, dist in here.marginals.items():  # how sure: the same posterior's spread, over the wire
            for label in dist:
                assert prediction.stddevs[name][label] == pytest.approx(here.stddevs[name][label], rel=1e-12)
                assert prediction.intervals[name][label] == pytest.approx(here.intervals[name][label], rel=1e-12)
                assert 0 < prediction.stddevs[name][label] < 0.5
            assert prediction.support[name] == pytest.approx(here.support[name], rel=1e-9) and 0 < here.support[name]

        ranking = client.select_action({"ObjVel": "fast"}, sensors=SMALL_BOX)
        expected = rank_actions(model, {"ObjVel": "fast"}, sensors=SMALL_BOX)
        assert isinstance(ranking, ActionRanking) and ranking.action_variable == "Action"
        assert ranking.actions == expected.actions and not ranking.tied and ranking.message == ""
        assert ranking.probabilities == pytest.approx(expected.probabilities, rel=1e-12)
        assert ranking.strategy == "expected" and ranking.scores == pytest.approx(ranking.probabilities, rel=1e-12)
        assert ranking.stddevs == pytest.approx(expected.stddevs, rel=1e-12)
        assert np.allclose(ranking.intervals, expected.intervals, rtol=1e-12, atol=0)
        assert ranking.support == pytest.approx(expected.support, rel=1e-9)
        cautious = client.select_action({"ObjVel": "fast"}, sensors=SMALL_BOX, strategy="cautious")
        assert cautious.strategy == "cautious" and all(a >= b - 1e-9 * abs(a) for a, b in zip(cautious.scores,
                                                                                          cautious.scores[1:]))
        assert cautious.scores == pytest.approx([low for low, _ in cautious.intervals], rel=1e-12)

        candidates = [{"size": 9.7, "shape": 0.2}, {"Shape": "circle", "Size": "big"}, Candidate()]
        suggested = client.suggest_trial(candidates, top=4)
        local = suggest_trials(model, [Candidate({"size": 9.7, "shape": 0.2}),
                                       Candidate({}, {"Shape": "circle", "Size": "big"}), Candidate()], top=4)
        assert isinstance(suggested, TrialSuggestions)
        assert (suggested.criterion, suggested.requested, suggested.note) == ("information_gain",) * 2 + ("",)
        assert [(s.action, s.candidate) for s in suggested.suggestions] == [
            (s.action, s.candidate) for s in local.suggestions]
        for got, want in zip(suggested.suggestions, local.suggestions):
            assert got.score == pytest.approx(want.score, rel=1e-12)
            assert got.expected == want.expected
            for name, label in want.expected.items():
                assert got.effect_stddevs[name][label] == pytest.approx(want.effect_stddevs[name][label], rel=1e-12)
            assert math.isnan(got.tried) and math.isnan(got.predictive_information)

        report = client.learn("k2")
        assert report.num_cases == 300 and report.arcs and "->" in report.arcs[0]
        # (a request whose answer was lost is sent again: served more than once, never failed)
        assert learner.counts["predict_ok"] >= 1 and learner.counts["select_ok"] >= 2
        assert learner.counts["suggest_ok"] >= 1 and learner.counts["learn_ok"] == 2
        assert learner.counts["predict_failed"] == learner.counts["select_failed"] == 0
    finally:
        client.destroy()
        node.destroy_node()


def test_inside_an_executor_a_coroutine_callback_awaits_the_answers(ros, tmp_path):
    learned_node(ros, tmp_path, 300)
    node = rclpy.create_node("async_planner", context=ros.context)
    client = AffordanceClient(node, timeout=60.0)  # (made before an executor spins the node)
    answers, group = [], ReentrantCallbackGroup()

    async def plan():
        timer.cancel()
        ranking = await client.select_action_async({"ObjVel": "fast"}, sensors=SMALL_BOX)
        effects = await client.predict_async("effect", values={"Action": ranking.actions[0]}, sensors=SMALL_BOX)
        answers.append((ranking, effects))

    timer = node.create_timer(0.05, plan, callback_group=group)
    ros.add(node, own_executor=True)
    wait_for(lambda: answers, timeout=120.0, what="the planner's callback to get both answers")
    ranking, effects = answers[0]
    assert effects.marginals["ObjVel"]["fast"] == pytest.approx(ranking.probabilities[0], rel=1e-9)
    # the node spun by its executor in another thread: a blocking call from here waits for that executor's work,
    # a done callback gets the answer there
    assert client.predict("action", sensors={"obj_vel": 9.7}).most_probable["Action"] in ranking.actions
    assert resolved(client.predict_async("object", sensors=SMALL_BOX)).marginals["Size"]


def test_a_learner_that_is_not_there_ends_each_call_with_an_error_naming_it(ros):
    node, client = planner(ros, learner="/nobody_here", timeout=1.0)
    try:
        with pytest.raises(LearnerUnavailable, match=r"^no service /nobody_here/predict within 1 s: is the learner "
                                                     r"node running \(and active\)\?$") as raised:
            client.predict("action")
        assert raised.value.name == "/nobody_here/predict"
        with pytest.raises(LearnerUnavailable, match="no service /nobody_here/select_action within 2 s"):
            client.select_action({"ObjVel": "fast"}, timeout=2.0)
        with pytest.raises(LearnerUnavailable, match="no service /nobody_here/suggest_trial within 1 s"):
            client.suggest_trial([{}])
        with pytest.raises(LearnerUnavailable, match="no action /nobody_here/learn within 1 s"):
            client.learn()
        future = client.predict_async("action")  # the async form, in an executor of the script's
        executor = SingleThreadedExecutor(context=ros.context)
        executor.add_node(node)
        executor.spin_until_future_complete(future, timeout_sec=120.0)
        executor.remove_node(node)
        with pytest.raises(LearnerUnavailable, match="no service /nobody_here/predict within 1 s"):
            future.result()
    finally:
        client.destroy()
        node.destroy_node()


def test_a_learner_that_leaves_before_it_answers_ends_the_call(ros, tmp_path, monkeypatch):
    learner, _ = learned_node(ros, tmp_path, 100)
    original = Client.call_async
    # every request reaches the learner and is answered, but no answer gets back
    monkeypatch.setattr(Client, "call_async", lambda self, request: (original(self, request), Future())[1])
    node = rclpy.create_node("planner", context=ros.context)
    client = AffordanceClient(node, timeout=600.0)
    ros.add(node, own_executor=True)
    future = client.predict_async("action")
    wait_for(lambda: learner.counts["predict_ok"] >= 2, timeout=60, what="the request and its re-send")
    ros.remove(learner)
    with pytest.raises(LearnerUnavailable, match="^/affordance_learner/predict left the ROS graph before it "
                                                 r"answered: did the learner node stop\? \(its log says why\)$"):
        resolved(future)


def test_the_learners_refusals_are_evidence_errors_with_its_message(ros, tmp_path):
    learner, _ = learned_node(ros, tmp_path, 100)
    node, client = planner(ros, timeout=60.0)
    try:
        with pytest.raises(LearnerRefused, match="unknown variable 'objvel' \\(did you mean 'ObjVel'") as raised:
            client.select_action({"objvel": "fast"})
        assert isinstance(raised.value, EvidenceError) and raised.value.name == "/affordance_learner/select_action"
        with pytest.raises(EvidenceError, match="unknown variable 'Nope'"):
            client.predict("Nope")
        # mistakes the client sees itself: before anything is sent (an unknown strategy was sent, and refused)
        asked = learner.counts["select_ok"] + learner.counts["select_failed"]
        with pytest.raises(EvidenceError, match=r"^unknown strategy 'greedy'; expected one of \['expected', "):
            client.select_action({"ObjVel": "fast"}, strategy="greedy")
        with pytest.raises(EvidenceError, match=r"^unknown strategy 'optimist' \(did you mean 'optimistic'\?\)"):
            client.select_action_async({"ObjVel": "fast"}, strategy="optimist")
        assert learner.counts["select_ok"] + learner.counts["select_failed"] == asked
        with pytest.raises(EvidenceError, match="sensor 'size': the reading must be a number"):
            client.predict("action", sensors={"size": "big"})
        with pytest.raises(ValueError, match="timeout must be > 0 seconds"):
            client.predict("action", timeout=0)
    finally:
        client.destroy()
        node.destroy_node()


def test_cancelling_a_learns_future_cancels_the_learn(ros, tmp_path):
    with CaseStore(tmp_path / "cases.db") as store:
        for record in sampled_records(300):
            store.add(record)
    learner = ros.learner(config_path=str(write_config(tmp_path / "config.json", mcmc_samples=10_000_000)))
    node = rclpy.create_node("planner", context=ros.context)
    client = AffordanceClient(node, timeout=60.0)
    ros.add(node, own_executor=True)
    feedback = []
    future = client.learn_async("mcmc", progress=feedback.append)
    wait_for(lambda: any(f.phase == "structure" for f in feedback), timeout=120, what="the learn's structure phase")
    # the feedback as a core type, as every other answer of the client (was the wire's Learn_Feedback)
    assert all(type(f) is LearnProgress for f in feedback) and feedback[0].cases == 300, feedback[0]
    future.cancel()
    wait_for(lambda: learner.counts["learn_cancelled"] == 1, timeout=60, what="the node to cancel the learn")
    # and a learn that runs out of learn_timeout is cancelled too, and says so
    with pytest.raises(LearningCancelled, match="no result within 1 s .learn_timeout.: the learn was cancelled"):
        resolved(client.learn_async("mcmc", learn_timeout=1.0))
    wait_for(lambda: learner.counts["learn_cancelled"] == 2, timeout=60, what="the second cancel")


def test_a_blocking_call_inside_a_callback_of_the_nodes_own_executor_says_to_use_the_async_form(ros, tmp_path):
    learned_node(ros, tmp_path, 100)
    node = rclpy.create_node("planner", context=ros.context)
    client = AffordanceClient(node, timeout=60.0)
    raised = []

    def plan():
        timer.cancel()
        try:
            client.predict("action")
        except RuntimeError as exc:
            raised.append(exc)

    timer = node.create_timer(0.05, plan)
    ros.add(node, own_executor=True)
    wait_for(lambda: raised, timeout=120, what="the blocking call to give up")
    assert "use the *_async form there and await it" in str(raised[0])


@pytest.mark.parametrize("how", ["node destroyed", "executor shut down"])
def test_a_blocking_call_whose_node_or_executor_goes_away_ends_at_once(ros, tmp_path, how):
    """select_action(..., timeout=60) in a thread, the learner stopped (SIGSTOP: it is in the graph but answers
    nothing), the planner's node destroyed 1 s later: the call must end then, not at its timeout or never."""
    learner = start("learner_node", tmp_path, "learner", database_path=tmp_path / "cases.db",
                    model_path=tmp_path / "model.json", status_period=0.0)
    node = rclpy.create_node("planner", context=ros.context)
    client = AffordanceClient(node, timeout=60.0)
    executor = SingleThreadedExecutor(context=ros.context)
    if how == "executor shut down":  # the planner's own executor spins the node in another thread
        executor.add_node(node)
        threading.Thread(target=executor.spin, daemon=True).start()
    ended = []

    def plan():
        try:
            client.select_action({"ObjVel": "fast"}, timeout=60.0)
        except BaseException as exc:  # noqa: BLE001 (what the call ends with, whatever it is)
            ended.append(exc)

    try:
        assert client.clients["select_action"].wait_for_service(timeout_sec=60.0)
        learner.send_signal(signal.SIGSTOP)
        waiting = threading.Thread(target=plan, daemon=True)
        waiting.start()
        time.sleep(1.0)  # (the request is out; no answer comes)
        if how == "node destroyed":
            node.destroy_node()
        else:
            executor.shutdown()
        waiting.join(40.0)  # (the call's own timeout is 60 s)
        assert not waiting.is_alive(), "the call still waits"
    finally:
        learner.send_signal(signal.SIGCONT)
        assert stop(learner) == 0
    why = ("the node /planner was destroyed" if how == "node destroyed"
           else "the node's executor stopped spinning it (shut down, or the node removed from it)")
    assert len(ended) == 1 and isinstance(ended[0], RuntimeError), ended
    assert str(ended[0]) == f"the call to /affordance_learner/select_action ended before its answer: {why}"
    if how == "executor shut down":
        client.destroy()
        node.destroy_node()
