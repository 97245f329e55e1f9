"""Replay a bag's affordance topics into a live ROS graph: ``ros2 bag play`` for these machines.

    affordance-ros replay BAG [--rate 10] [--clock] [--namespace /robot1]
    ros2 run affordance_ros replay BAG --rate 10 --clock --ros-args -r /action:=/robot2/action

The Action and Features messages are published as recorded (their serialized bytes), on the
topics they were recorded on, at their recorded pace divided by ``--rate``. Messages that are
not this package's Action/Features (another type, another definition, damaged) are not
published; the reasons are printed first. ``--clock`` also publishes the bag's log time on
/clock, so that a learner node started with ``use_sim_time:=true`` sees the same clock as
when it was recorded and pairs and times out trials exactly as offline import does, at any rate.
Waits for a subscriber on each topic first (like the simulated robot), so nothing is lost.
``--confirm`` also keeps every trial the bag holds whole (its three parts, one trial_id) until the
learner confirms it on ``--status-topic``, sends it again after ``--resend-timeout`` seconds, and
exits (status 1, naming them) if some are still unconfirmed after ``--confirm-timeout`` or were given
up (re-sent ``TrialPublisher``'s ``max_resends`` times without being taken while the learner took
later ones). A trial the recording itself lost to a timeout is then stored as well: a re-send comes
all at once. ``--spool FILE`` (implies ``--confirm``) keeps the trials not yet confirmed in FILE too:
a replay stopped or timed out before the learner confirmed them (an outage) sends them again when it
is run with the same spool; at most ``--spool-limit`` trials wait at a time (then playing waits).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from typing import Sequence

from ..data.bag import BagError
from ..data.spool import SpoolError
from .progress import ProgressBar
from .ros_args import qos_depth, run_executable

STATUS_TOPIC = "affordance_learner/stored"  # (as nodes.contract: the command line's help needs no ROS)
DEFAULT_RESEND_TIMEOUT = 5.0
DEFAULT_SPOOL_LIMIT = 100_000

NODE_NAME = "affordance_replay"
DEFAULT_CLOCK_FREQUENCY = 40.0  # /clock messages per wall second (as ros2 bag play --clock)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("bag", help="rosbag2 bag: a directory with metadata.yaml, or a .db3/.mcap file")
    parser.add_argument("--rate", type=_positive, default=1.0,
                        help="speed factor: 1 plays at the recorded pace, 10 ten times faster (default 1)")
    parser.add_argument("--clock", action="store_true",
                        help="publish the bag's log time on /clock (for nodes with use_sim_time:=true)")
    parser.add_argument("--clock-frequency", type=_positive, default=DEFAULT_CLOCK_FREQUENCY,
                        help=f"/clock messages per second of wall time (default {DEFAULT_CLOCK_FREQUENCY:g})")
    parser.add_argument("--namespace", default="/",
                        help="the bag's topics are NAMESPACE/action, NAMESPACE/object_features, "
                             "NAMESPACE/effects (default /)")
    parser.add_argument("--min-subscribers", type=int, default=1,
                        help="wait until each topic has this many subscribers before playing "
                             "(default 1; 0: do not wait)")
    parser.add_argument("--qos-depth", type=qos_depth, default=0,
                        help="history of the reliable publishers: 0 (default) keeps all, so playing waits for a "
                             "subscriber that is behind instead of dropping messages; N > 0 keeps the last N")
    parser.add_argument("--confirm", action="store_true",
                        help="keep each whole trial until the learner confirms it on --status-topic; send it again "
                             "when no confirmation came (survives a learner crash; see TrialPublisher)")
    parser.add_argument("--status-topic", default=STATUS_TOPIC,
                        help=f"with --confirm: where the learner confirms trials (default {STATUS_TOPIC})")
    parser.add_argument("--resend-timeout", type=_positive, default=DEFAULT_RESEND_TIMEOUT,
                        help=f"with --confirm: seconds before an unconfirmed trial is sent again "
                             f"(default {DEFAULT_RESEND_TIMEOUT:g})")
    parser.add_argument("--confirm-timeout", type=_positive, default=120.0,
                        help="with --confirm: seconds to wait for the last confirmations (default 120)")
    parser.add_argument("--spool", metavar="FILE",
                        help="keep the trials not yet confirmed in FILE too (implies --confirm): a replay stopped "
                             "before the learner confirmed them sends them again when run with the same FILE")
    parser.add_argument("--spool-limit", type=_count, default=DEFAULT_SPOOL_LIMIT,
                        help="with --confirm: trials waiting for their confirmation at most; then playing waits "
                             f"for the learner (default {DEFAULT_SPOOL_LIMIT})")
    parser.add_argument("--progress", action="store_true", default=None,
                        help="show a progress bar on stderr (default: only on a terminal)")
    return parser


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def run(args, ros_args: Sequence[str] = ()) -> int:
    """`affordance-ros replay` and the `replay` executable: read the bag, wait for subscribers, play."""
    # (here, not at the top: the command line's other commands need neither ROS nor rosbags; ROS first,
    # so that without it the command says so before reading a bag)
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from ..data.bag import BagReader
    from ..nodes.qos import TRIAL_HEARTBEAT_PERIOD, dds_profiles
    from ..nodes.robot.bag_player import BagPlayer
    from ..nodes.robot.trial_publisher import TrialPublisher

    reader = BagReader(args.bag, namespace=args.namespace)
    messages = reader.read()
    for warning in reader.report.warnings:
        print(f"replay: warning: {warning}", file=sys.stderr)
    print(f"replay: {reader.report.summary()}", flush=True)
    if not messages:
        raise BagError(f"'{args.bag}' has no affordance messages to replay")

    context = rclpy.Context()
    rclpy.init(args=["replay", *ros_args], context=context)
    node = trials = spinning = None
    executor = SingleThreadedExecutor(context=context)
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        # the simulated robot's heartbeat: what a learner's full queue refused is sent again within 0.1 s, not
        # Fast DDS's 3 s (which held `--rate 10` to the learner's pace); Fast DDS reads it as the first node is made
        with dds_profiles(heartbeat_period=TRIAL_HEARTBEAT_PERIOD):
            node = rclpy.create_node(NODE_NAME, context=context)
        if args.confirm or args.spool:
            trials = TrialPublisher(node, args.resend_timeout, args.qos_depth, args.status_topic,
                                    spool_path=args.spool, spool_limit=args.spool_limit)
            executor.add_node(node)  # answers and re-sends while playing (a full spool waits for answers)
            spinning = threading.Thread(target=executor.spin, name="affordance_replay_spin", daemon=True)
            spinning.start()
        player = BagPlayer(node, messages, publish_clock=args.clock, qos_depth=args.qos_depth, trials=trials)
        if args.min_subscribers > 0 and not player.subscribers_ready(args.min_subscribers):
            print(f"replay: waiting for {args.min_subscribers} subscriber(s) on {', '.join(player.publishers)}",
                  flush=True)
            while not player.subscribers_ready(args.min_subscribers):
                time.sleep(0.02)
        duration = (messages[-1].log_time - messages[0].log_time) * 1e-9
        print(f"replay: playing {len(messages)} messages ({duration:.1f} s recorded) at rate {args.rate:g}"
              + (" with /clock" if args.clock else ""), flush=True)
        started = time.monotonic()
        with ProgressBar("replaying", enabled=args.progress) as bar:
            player.play(args.rate, args.clock_frequency, bar.update)
        acknowledged = player.wait_for_acknowledgements()
        print(f"replay: published {player.published} messages in {time.monotonic() - started:.2f} s"
              + ("" if acknowledged else "; some were not acknowledged by every subscriber within 10 s"), flush=True)
        if trials is not None and not _confirmed(trials, args.confirm_timeout):
            return 1
    except (KeyboardInterrupt, ExternalShutdownException):
        print("replay: interrupted" + (f"; {trials.summary()}" if trials is not None else ""), file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        executor.shutdown()
        if spinning is not None:
            spinning.join(10.0)
        if trials is not None:
            trials.destroy()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return 0


def _confirmed(trials, timeout: float) -> bool:
    """Wait (the node spins in its thread: answers, re-sends) until every kept trial is answered or ``timeout``;
    print the outcome."""
    deadline = time.monotonic() + timeout
    while trials.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"replay: {trials.summary()}", flush=True)
    for trial_id, reason in list(trials.rejected.items())[:10]:
        print(f"replay: rejected trial '{trial_id[:80]}': {reason[:300]}", file=sys.stderr)
    unconfirmed, given_up = trials.unconfirmed, list(trials.given_up)
    if unconfirmed:
        print(f"replay: error: {len(unconfirmed)} trials were not confirmed within {timeout:g} s: "
              + _some(unconfirmed) + (f" (kept in the spool {trials.spool.path}: a replay with --spool "
                                      f"{trials.spool.path} sends them again)" if trials.spool else ""),
              file=sys.stderr)
    if given_up:  # not confirmed either: the learner did not take them max_resends times while it took later ones
        print(f"replay: error: {len(given_up)} trials were given up after {trials.max_resends} re-sends the learner "
              "did not take: " + _some(given_up), file=sys.stderr)
    return not unconfirmed and not given_up


def _some(trial_ids: list[str]) -> str:
    return ", ".join(t[:80] for t in trial_ids[:10]) + (", ..." if len(trial_ids) > 10 else "")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(args=None) -> int:
    """The ROS executable (lib/affordance_ros/replay)."""
    return run_executable("replay", __doc__.split("\n")[0], add_arguments, run, args, errors=(BagError, SpoolError))


if __name__ == "__main__":
    sys.exit(main())
