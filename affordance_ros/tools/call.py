"""`affordance-ros call`: ask a running learner node, from the shell (there is no `ros2` command here).

    affordance-ros call learn [--structure k2] [--progress]
    affordance-ros call predict --query action --sensor obj_vel=9.7 --value Shape=box
    affordance-ros call select-action --effect ObjVel=fast --sensor size=0.2 --sensor shape=5.1
    affordance-ros call suggest --candidate size=9.7,shape=0.2 --candidate Shape=box --best 3

The same arguments as `affordance-ros predict`; the answer is printed as JSON on stdout. ``select-action`` and
``suggest`` also go by their services' names (and ``AffordanceClient``'s): ``select_action``, ``suggest_trial``.
``learn`` uses the node's Learn action (``--progress``: its feedback on stderr; Ctrl-C cancels
the learn, the node keeps its current model, and the command exits with status 130). A goal the
node rejects (a learn is running already) is reported with the node's reason: an action's goal
response carries none, so it is read from the node's ``~/learn_refused`` topic. The calls are
``AffordanceClient``'s (nodes/planner/affordance_client.py), the planners' client: ``--timeout`` seconds to find
the node and have its answer (learn: to have the goal taken; the learn itself: ``--learn-timeout``), a
request without an answer sent again after 2, 4, 8, ... s (under load, Fast DDS drops the answer to a caller
the node has not discovered yet). Failures (no node, gone, ``success: false``, a rejected goal) are one line
on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from typing import Sequence

from ..core.options import SUGGEST_CRITERIA
from ..core.predict import STRATEGIES
from .json_answers import add_top_argument, shortened
from .progress import LearnProgress
from .ros_args import candidate_objects, count_or_all, name_value_pairs, sensor_readings

DEFAULT_NODE = "/affordance_learner"


class CallError(Exception):
    """The call could not be made (no node within the timeout, gone, a learn cancelled): one line for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `call` sub-commands: learn, predict, select-action, suggest."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--node", default=DEFAULT_NODE,
                        help=f"the learner node's full name (default {DEFAULT_NODE}; its services are NODE/learn, ...)")
    common.add_argument("--timeout", type=float, default=10.0,
                        help="seconds to find the node's service and have its answer; learn: to find the action "
                             "and have the goal taken (default 10)")
    common.add_argument("--pretty", action="store_true", help="indent the JSON")
    evidence = argparse.ArgumentParser(add_help=False)
    evidence.add_argument("--sensor", action="append", metavar="SENSOR=READING", help="raw sensor reading; repeatable")
    evidence.add_argument("--value", action="append", metavar="VARIABLE=LABEL", help="known label; repeatable")
    which = parser.add_subparsers(dest="service", required=True, metavar="{learn,predict,select-action,suggest}",
                                  help="select-action and suggest also go by their services' names, select_action "
                                       "and suggest_trial")
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
    select = which.add_parser("select-action", parents=[common, evidence], aliases=["select_action"],
                              help="rank the actions by how likely they produce an effect (~/select_action)",
                              description="Every action ranked by p(desired effects | action, object evidence).")
    select.set_defaults(service="select-action")  # (the name, whichever alias was typed)
    select.add_argument("--effect", action="append", required=True, metavar="VARIABLE=LABEL",
                        help="a desired effect; repeatable")
    select.add_argument("--strategy", choices=STRATEGIES, default=STRATEGIES[0],
                        help="how to rank: expected (the most probable first; default), optimistic (the highest "
                             "Gittins index first: learn while doing), thompson (the best under one posterior "
                             "draw of the CPTs), cautious (the highest lower bound first: when a failure is costly)")
    suggest = which.add_parser("suggest", parents=[common], aliases=["suggest_trial"],
                               help="which trial would teach the model the most (~/suggest_trial)",
                               description="Every action on every candidate object, ranked by what its effects "
                                           "would teach the node's model (~/suggest_trial).")
    suggest.set_defaults(service="suggest")
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
    """Make the call; print the answer as JSON. CallError (or the learner's refusal, an AffordanceError) for a
    failure."""
    sensors = readings(getattr(args, "sensor", None))
    values = pairs(getattr(args, "value", None), "--value")
    effects = pairs(getattr(args, "effect", None), "--effect")
    candidates = candidate_objects(getattr(args, "candidate", None), CallError)
    if not args.timeout > 0:
        raise CallError(f"--timeout must be > 0 seconds, got {args.timeout:g}")

    import rclpy  # (here: the command line's other commands need no ROS)

    from ..core import LearningCancelled
    from ..nodes.planner.affordance_client import AffordanceClient
    from ..nodes.planner.calls import LearnerRefused, LearnerUnavailable
    from ..nodes.qos import dds_profiles

    context = rclpy.Context()
    with dds_profiles():  # (messages within one frame: Fast DDS reads it as the first node is made)
        rclpy.init(args=["call", *ros_args], context=context)
        node = rclpy.create_node("affordance_call", context=context)
    client = None
    try:
        client = AffordanceClient(node, args.node, args.timeout)
        if args.service == "learn":
            answer = _learn(client, args)
        elif args.service == "predict":
            answer = shortened(_json(client.predict(args.query, values, sensors).to_dict(readings=False)),
                               args.top)
        elif args.service == "suggest":
            answer = _json(client.suggest_trial(candidates, args.action, args.criterion,
                                                args.best or None).to_dict(effects=False))
        else:
            answer = _ranking(client.select_action(effects, values, sensors, args.strategy))
    except (LearnerUnavailable, LearnerRefused, LearningCancelled) as exc:
        raise CallError(str(exc)) from None
    finally:
        if client is not None:
            client.destroy()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    json.dump(answer, sys.stdout, indent=2 if args.pretty else None)
    print()
    return 0


def _ranking(ranking) -> dict:
    """A ranking as JSON: each action with its probability, how sure the model is of it (stddev, 90 % interval,
    support: null where unknown or, for support, infinite) and its score under the strategy."""
    ranked = [{"action": a, "probability": p, "stddev": sd, "interval": list(interval), "support": n, "score": score}
              for a, p, sd, interval, n, score in zip(ranking.actions, ranking.probabilities, ranking.stddevs,
                                                       ranking.intervals, ranking.support, ranking.scores)]
    return _json({"action_variable": ranking.action_variable, "strategy": ranking.strategy, "ranking": ranked,
                  "tied": ranking.tied, **({"message": ranking.message} if ranking.message else {})})


def _json(value):
    """``value`` with every NaN and infinity as None (JSON has neither)."""
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json(item) for item in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _learn(client, args) -> dict:
    """The Learn action, its feedback on stderr with --progress; Ctrl-C (or SIGTERM) cancels it."""
    bar = LearnProgress(enabled=args.progress)

    def progress(feedback) -> None:
        bar(feedback.phase, feedback.iteration, feedback.log_likelihood, feedback.elapsed, feedback.cases)

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = client.learn(args.structure, progress if args.progress else None,
                              learn_timeout=args.learn_timeout or math.inf)
    finally:
        signal.signal(signal.SIGTERM, previous)
        bar.close()
    return report.to_dict()


def _interrupt(signum, frame):
    raise KeyboardInterrupt
