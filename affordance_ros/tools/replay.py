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
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Sequence

from ..data.bag import BagError, BagReader
from .progress import ProgressBar
from .ros_args import qos_depth, run_executable

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


def run(args, ros_args: Sequence[str] = ()) -> int:
    """`affordance-ros replay` and the `replay` executable: read the bag, wait for subscribers, play."""
    reader = BagReader(args.bag, namespace=args.namespace)
    messages = reader.read()
    for warning in reader.report.warnings:
        print(f"replay: warning: {warning}", file=sys.stderr)
    print(f"replay: {reader.report.summary()}", flush=True)
    if not messages:
        raise BagError(f"'{args.bag}' has no affordance messages to replay")

    import rclpy  # (here, not at the top: the command line's other commands need no ROS)
    from rclpy.executors import ExternalShutdownException

    from ..nodes.bag_player import BagPlayer

    context = rclpy.Context()
    rclpy.init(args=["replay", *ros_args], context=context)
    node = None
    previous_sigterm = signal.signal(signal.SIGTERM, _interrupt)
    try:
        node = rclpy.create_node(NODE_NAME, context=context)
        player = BagPlayer(node, messages, publish_clock=args.clock, qos_depth=args.qos_depth)
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
    except (KeyboardInterrupt, ExternalShutdownException):
        print("replay: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(args=None) -> int:
    """The ROS executable (lib/affordance_ros/replay)."""
    return run_executable("replay", __doc__.split("\n")[0], add_arguments, run, args, errors=(BagError,))


if __name__ == "__main__":
    sys.exit(main())
