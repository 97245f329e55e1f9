"""`affordance-ros call`: ask a running learner node, from the shell (there is no `ros2` command here).

    affordance-ros call learn [--structure k2] [--progress]
    affordance-ros call predict --query action --sensor obj_vel=9.7 --value Shape=box
    affordance-ros call select-action --effect ObjVel=fast --sensor size=0.2 --sensor shape=5.1
    affordance-ros call suggest --candidate size=9.7,shape=0.2 --candidate Shape=box --best 3

The same arguments as `affordance-ros predict`; the answer is printed as JSON on stdout.
``learn`` uses the node's Learn action (``--progress``: its feedback on stderr; Ctrl-C cancels
the learn, the node keeps its current model, and the command exits with status 130). A goal the
node rejects (a learn is running already) is reported with the node's reason: an action's goal
response carries none, so it is read from the node's ``~/learn_refused`` topic. Waits ``--timeout``
seconds for the node's service or action to appear. Failures (no node, ``success: false``, a
rejected goal) are one line on stderr and exit status 2. A request without an answer is sent again after
2, 4, 8, ... s: under load, Fast DDS drops the answer to a caller the node has not discovered yet.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import signal
import sys
import time
from typing import Callable, Sequence

from ..core.options import SUGGEST_CRITERIA
from .json_answers import add_top_argument, shortened
from .progress import LearnProgress
from .ros_args import candidate_objects, count_or_all, name_value_pairs, sensor_readings

DEFAULT_NODE = "/affordance_learner"
REASON_WAIT = 5.0  # seconds to wait for the node to say why it rejected a goal
FIRST_RESEND = 2.0  # seconds without an answer before a request is sent again (then 4, 8, ...)
PRESENCE_PERIOD = 0.5  # seconds between looks at whether the server is still in the ROS graph
GONE_AFTER = 2.0  # seconds the server must be missing from the graph before the call gives up on it


class CallError(Exception):
    """The call could not be made or was answered with success false: one line for the user."""


class ServerGone(CallError):
    """The node serving the call left the ROS graph before it answered."""


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `call` sub-commands: learn, predict, select-action, suggest."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--node", default=DEFAULT_NODE,
                        help=f"the learner node's full name (default {DEFAULT_NODE}; its services are NODE/learn, ...)")
    common.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to wait for the node's service or action to appear (default 10)")
    common.add_argument("--pretty", action="store_true", help="indent the JSON")
    evidence = argparse.ArgumentParser(add_help=False)
    evidence.add_argument("--sensor", action="append", metavar="SENSOR=READING", help="raw sensor reading; repeatable")
    evidence.add_argument("--value", action="append", metavar="VARIABLE=LABEL", help="known label; repeatable")
    which = parser.add_subparsers(dest="service", required=True, metavar="{learn,predict,select-action,suggest}")
    learn = which.add_parser("learn", parents=[common], help="learn a new model from the stored cases (Learn action)",
                             description="Learn a new model from the node's stored cases, with the Learn action.")
    learn.add_argument("--structure", default="", help="k2, mcmc or fixed (default: the node's 'structure' parameter)")
    learn.add_argument("--progress", action="store_true",
                       help="show the action's feedback on stderr (phase, step, score; in a log a line a second "
                            "and at every change of phase)")
    learn.add_argument("--learn-timeout", type=float, default=0.0,
                       help="seconds to wait for the result; then the learn is cancelled (default 0: no limit)")
    predict = which.add_parser("predict", parents=[common, evidence], help="posterior of query variables (~/predict)",
                               description="The posterior of the query variables given the evidence (~/predict).")
    predict.add_argument("--query", action="append", required=True,
                         help="a variable name or a group (action, object, effect); repeatable")
    add_top_argument(predict)
    select = which.add_parser("select-action", parents=[common, evidence],
                              help="rank the actions by how likely they produce an effect (~/select_action)",
                              description="Every action ranked by p(desired effects | action, object evidence).")
    select.add_argument("--effect", action="append", required=True, metavar="VARIABLE=LABEL",
                        help="a desired effect; repeatable")
    suggest = which.add_parser("suggest", parents=[common], help="which trial would teach the model the most "
                                                                 "(~/suggest_trial)",
                               description="Every action on every candidate object, ranked by what its effects "
                                           "would teach the node's model (~/suggest_trial).")
    add_suggest_arguments(suggest)
    return parser


def add_suggest_arguments(parser: argparse.ArgumentParser) -> None:
    """The options `suggest` and `call suggest` share: the candidates, actions, criterion, how many."""
    parser.add_argument("--candidate", action="append", required=True, metavar="NAME=VALUE,...",
                        help="an object the robot could act on: its sensor readings (NAME=NUMBER) and/or labels "
                             "(NAME=LABEL), separated by commas; '' for an object nothing is known of; repeatable")
    parser.add_argument("--action", action="append", help="an action to consider (default: all); repeatable")
    parser.add_argument("--criterion", choices=SUGGEST_CRITERIA, default=SUGGEST_CRITERIA[0],
                        help="information_gain: what the trial's effects would teach about the model's parameters "
                             "(default); predictive_information: what they would teach about the effects of the "
                             "candidates (EPIG); predictive_entropy: how unsure the model is of the effects; "
                             "least_tried: the fewest earlier trials")
    parser.add_argument("--best", type=count_or_all("every trial"), default=0, metavar="N",
                        help="show the N best trials (default 0: every action on every candidate, best first)")


def pairs(items, what: str) -> dict:
    """NAME=VALUE arguments as a dict; CallError for a malformed one."""
    return name_value_pairs(items, what, CallError)


def readings(items) -> dict:
    """--sensor SENSOR=READING arguments as floats."""
    return sensor_readings(items, CallError)


def run(args, ros_args: Sequence[str] = ()) -> int:
    """Make the call; print the answer as JSON. CallError for a failure."""
    sensors = readings(getattr(args, "sensor", None))
    values = pairs(getattr(args, "value", None), "--value")
    effects = pairs(getattr(args, "effect", None), "--effect")
    candidates = candidate_objects(getattr(args, "candidate", None), CallError)

    import rclpy  # (here: the command line's other commands need no ROS)
    from rclpy.executors import SingleThreadedExecutor

    from ..nodes.qos import dds_profiles

    context = rclpy.Context()
    with dds_profiles():  # (messages within one frame: read as the context is made)
        rclpy.init(args=["call", *ros_args], context=context)
    node = rclpy.create_node("affordance_call", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    wait = functools.partial(_wait, executor)
    try:
        if args.service == "learn":
            answer = _learn(node, wait, args)
        elif args.service == "predict":
            answer = _predict(node, wait, args, sensors, values)
        elif args.service == "suggest":
            answer = _suggest(node, wait, args, candidates)
        else:
            answer = _select_action(node, wait, args, sensors, values, effects)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    json.dump(answer, sys.stdout, indent=2 if args.pretty else None)
    print()
    return 0


def _wait(executor, request, timeout: float | None, what: str, present: Callable[[], bool] | None = None):
    """The answer to ``request``, spinning meanwhile (feedback callbacks run); CallError after ``timeout`` seconds
    (None: no limit), ServerGone once ``present()`` (the server is in the graph) has been false for ``GONE_AFTER``
    seconds. ``request`` is a future, or a function that sends a request and returns its future: that one is sent
    again after 2, 4, 8, ... s without an answer, since Fast DDS's rmw drops a response when the server has not
    yet matched the caller's reader ("failed to send response (timeout): client will not receive response"),
    which happens under load to a caller that has just started. Only requests a server answers alike however
    often they come are sent so."""
    from rclpy.task import Future

    if isinstance(request, Future):
        executor.spin_until_future_complete(request, timeout_sec=timeout)
        if not request.done():
            raise CallError(f"no answer from {what} within {timeout:g} s")
        return request.result()
    answer = Future()

    def send() -> None:
        request().add_done_callback(lambda sent: answer.done() or answer.set_result(sent.result()))

    started = sent = seen = time.monotonic()
    limit, resend = math.inf if timeout is None else timeout, FIRST_RESEND
    send()
    while True:
        now = time.monotonic()
        step = min(PRESENCE_PERIOD, resend - (now - sent), limit - (now - started))
        executor.spin_until_future_complete(answer, timeout_sec=max(0.0, step))
        if answer.done():
            return answer.result()
        now = time.monotonic()
        if now - started >= limit:
            raise CallError(f"no answer from {what} within {timeout:g} s")
        if present is None or present():
            seen = now
        elif now - seen >= GONE_AFTER:
            raise ServerGone(f"{what} left the ROS graph before it answered: did the learner node stop? (its log "
                             "says why)")
        if now - sent >= resend:
            send()
            sent, resend = now, resend * 2


def _service(node, wait, srv_type, name: str, request, timeout: float):
    from ..nodes.qos import reply_qos
    client = node.create_client(srv_type, name, qos_profile=reply_qos())
    if not client.wait_for_service(timeout_sec=timeout):
        raise CallError(f"no service {name} within {timeout:g} s: is the learner node running (and active)?")
    answer = wait(lambda: client.call_async(request), None, name, client.service_is_ready)
    if not answer.success:
        raise CallError(answer.message)
    return answer


def _predict(node, wait, args, sensors, values) -> dict:
    from ..srv import Predict

    answer = _service(node, wait, Predict, f"{args.node}/predict", Predict.Request(
        query=args.query, sensor_names=list(sensors), sensor_values=list(sensors.values()),
        variable_names=list(values), variable_values=list(values.values())), args.timeout)
    return shortened({"marginals": {d.variable: dict(zip(d.values, d.probabilities)) for d in answer.marginals},
                      "most_probable": dict(zip([d.variable for d in answer.marginals], answer.most_probable)),
                      "joint_probability": answer.joint_probability}, args.top)


def _select_action(node, wait, args, sensors, values, effects) -> dict:
    from ..srv import SelectAction

    answer = _service(node, wait, SelectAction, f"{args.node}/select_action", SelectAction.Request(
        sensor_names=list(sensors), sensor_values=list(sensors.values()), variable_names=list(values),
        variable_values=list(values.values()), effect_names=list(effects), effect_values=list(effects.values())),
        args.timeout)
    return {"action_variable": answer.action_variable,
            "ranking": [{"action": a, "probability": p} for a, p in zip(answer.actions, answer.probabilities)],
            "tied": answer.tied, **({"message": answer.message} if answer.message else {})}


def _suggest(node, wait, args, candidates) -> dict:
    """The answer as `suggest` prints it, without --effects (SuggestTrial carries no whole distributions)."""
    from ..nodes.exploration import suggest_request
    from ..nodes.suggest_service import ranked_by
    from ..srv import SuggestTrial

    answer = _service(node, wait, SuggestTrial, f"{args.node}/suggest_trial", suggest_request(
        candidates, args.action or (), args.criterion, args.best), args.timeout)
    return {"criterion": answer.criterion, "requested": args.criterion,
            "note": "" if answer.message == ranked_by(answer.criterion) else answer.message,
            "action_variable": answer.action_variable,
            "suggestions": [_suggestion(answer, s) for s in range(len(answer.actions))]}


def _suggestion(answer, s: int) -> dict:
    """Suggestion ``s`` of a SuggestTrial answer, as `suggest` prints one."""
    effects, names = list(answer.effect_variables), list(answer.reading_names)
    expected = {name: {"label": answer.expected_labels[j], "probability": answer.expected_probabilities[j],
                       "stddev": _number(answer.probability_stddevs[j])}
                for name, j in zip(effects, range(s * len(effects), (s + 1) * len(effects)))}
    readings = {name: {"mean": answer.reading_means[j], "stddev": answer.reading_stddevs[j]}
                for name, j in zip(names, range(s * len(names), (s + 1) * len(names)))}
    score, criterion = answer.scores[s], answer.criterion
    # SuggestTrial carries predictive_information and tried only as the score of their criterion: else None
    return {"action": answer.actions[s], "candidate": answer.candidates[s], "score": score,
            "information_gain": _number(answer.information_gains[s]),
            "predictive_information": score if criterion == "predictive_information" else None,
            "predictive_entropy": _number(answer.predictive_entropies[s]),
            "tried": 0.0 - score if criterion == "least_tried" else None,  # (0.0 - score: never -0.0)
            "expected": expected, "readings": readings}


def _number(x: float) -> float | None:
    """JSON has no NaN: None."""
    return None if math.isnan(x) else x


def _learn(node, wait, args) -> dict:
    import uuid

    from action_msgs.msg import GoalStatus
    from rclpy.action import ActionClient
    from rclpy.action.client import ClientGoalHandle
    from unique_identifier_msgs.msg import UUID

    from ..action import Learn

    name = f"{args.node}/learn"
    # subscribed before the server is waited for, so that the refusals are matched by the time one is sent
    # (and the node keeps them for late subscribers: transient local)
    reason = _refusal_reason(node, args.node)
    client = ActionClient(node, Learn, name)
    if not client.wait_for_server(timeout_sec=args.timeout):
        raise CallError(f"no action {name} within {args.timeout:g} s: is the learner node running (and active)?")

    progress = LearnProgress(enabled=args.progress)

    def feedback(msg):
        f = msg.feedback
        progress(f.phase, f.iteration, f.log_likelihood, f.elapsed, f.cases)

    # one goal id however often the goal is sent: the node accepts it once and rejects it as a duplicate after
    goal_id, sends = UUID(uuid=list(uuid.uuid4().bytes)), []

    def send_goal():
        sends.append(time.monotonic())
        return client.send_goal_async(Learn.Goal(structure=args.structure), goal_uuid=goal_id,
                                      feedback_callback=feedback if args.progress else None)

    handle = wait(send_goal, args.timeout, name, client.server_is_ready)
    if not handle.accepted and len(sends) == 1:
        raise CallError(f"{name} refused the goal: {_reason(wait, reason)}")
    if not handle.accepted:  # the answer to an earlier send may have been lost: its result says whether it runs
        handle = ClientGoalHandle(client, goal_id, Learn.Impl.SendGoalService.Response(accepted=True))
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        answer = wait(handle.get_result_async, args.learn_timeout or None, name, client.server_is_ready)
    except (KeyboardInterrupt, CallError) as stop:
        progress.close()
        if isinstance(stop, ServerGone):
            raise
        answer = _cancel(handle, functools.partial(wait, present=client.server_is_ready), name)
        if not answer.result.success:  # (else it ended before the cancel came)
            if isinstance(stop, KeyboardInterrupt):
                raise KeyboardInterrupt("the learn was cancelled; the node keeps its current model") from None
            raise CallError(f"no result within --learn-timeout {args.learn_timeout:g} s: the learn was cancelled; "
                            "the node keeps its current model") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    progress.close()
    if answer.status == GoalStatus.STATUS_UNKNOWN:  # the node knows no such goal: every send was refused
        raise CallError(f"{name} refused the goal: {_reason(wait, reason)}")
    result = answer.result
    if not result.success:
        raise CallError(result.message)
    return {"success": True, "message": result.message, "num_cases": result.num_cases, "arcs": list(result.arcs),
            "log_likelihood": result.log_likelihood, "iterations": result.iterations, "duration": result.duration}


def _reason(wait, reason) -> str:
    """Why the node refused a goal, as it said on ``~/learn_refused``."""
    try:
        return wait(reason, REASON_WAIT, "the reason on learn_refused")
    except CallError:
        return f"the node did not say why within {REASON_WAIT:g} s (see its log)"


def _refusal_reason(node, learner: str):
    """A future done with the reason the learner ``learner`` gives (on its ``~/learn_refused``) when it refuses
    a learn from now on: a rejected goal's response says nothing more. Reasons the node kept from before
    (transient local) are skipped by their stamp."""
    from rcl_interfaces.msg import Log
    from rclpy.task import Future

    from ..nodes.learning import REFUSED_QOS, REFUSED_TOPIC

    reason, since = Future(), time.time() - 1.0

    def heard(said: Log) -> None:
        if not reason.done() and said.stamp.sec + said.stamp.nanosec * 1e-9 >= since:
            reason.set_result(said.msg)

    node.create_subscription(Log, f"{learner}/{REFUSED_TOPIC}", heard, REFUSED_QOS)
    return reason


def _cancel(handle, wait, name: str):
    """Cancel the learn; its answer, once the node has stopped it."""
    wait(handle.cancel_goal_async, 10.0, name)
    return wait(handle.get_result_async, 30.0, name)


def _interrupt(signum, frame):
    raise KeyboardInterrupt
