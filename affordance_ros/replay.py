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
from typing import Callable, Sequence

from .bag import BagError, BagMessage, BagReader, split_nanoseconds
from .progress import ProgressBar

NODE_NAME = "affordance_replay"
CLOCK_TOPIC = "/clock"
CLOCK_PREROLL = 0.3  # seconds of /clock at the first log time before the first message
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
                        help="wait until each topic has this many subscribers before playing (default 1; 0: do not wait)")
    parser.add_argument("--qos-depth", type=qos_depth, default=0,
                        help="history of the reliable publishers: 0 (default) keeps all, so playing waits for a "
                             "subscriber that is behind instead of dropping messages; N > 0 keeps the last N")
    parser.add_argument("--progress", action="store_true", default=None,
                        help="show a progress bar on stderr (default: only on a terminal)")
    return parser


def qos_depth(text: str) -> int:
    """argparse type of --qos-depth: a whole number >= 0 (0: keep all)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: keep all), got {text}")
    return value


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def playback_offsets(log_times: Sequence[int], rate: float) -> list[float]:
    """Wall-clock seconds after the start at which each message is due."""
    if not log_times:
        return []
    first = log_times[0]
    return [(t - first) * 1e-9 / rate for t in log_times]


class BagPlayer:
    """Publishes bag messages on their recorded topics with a node of its own (created on ``node``)."""

    def __init__(self, node, messages: Sequence[BagMessage], publish_clock: bool = False, qos_depth: int = 0):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from rosgraph_msgs.msg import Clock

        from .msg import Action, Features
        from .qos import publish_waiting, trial_qos

        self.node = node
        self.messages = sorted(messages, key=lambda m: m.log_time)
        qos = trial_qos(qos_depth)
        types = {"action": Action, "object": Features, "effect": Features}
        topics = {m.topic: m.kind for m in self.messages}
        self.publishers = {topic: node.create_publisher(types[kind], topic, qos) for topic, kind in topics.items()}
        self._clock_msg = Clock
        self.clock = (node.create_publisher(Clock, CLOCK_TOPIC, QoSProfile(
            depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)) if publish_clock else None)
        self.published = 0
        self._publish_waiting = publish_waiting

    def subscribers_ready(self, minimum: int) -> bool:
        return all(p.get_subscription_count() >= minimum for p in self.publishers.values())

    def play(self, rate: float = 1.0, clock_frequency: float = DEFAULT_CLOCK_FREQUENCY,
             progress: Callable[[int, int], None] | None = None) -> int:
        """Publish every message at its time (blocking); returns how many were published.

        With /clock: ticks ``clock_frequency`` times per wall second, never ahead of the
        message due next, so a subscriber's clock does not run ahead of the data it was sent.
        """
        messages = self.messages
        offsets = playback_offsets([m.log_time for m in messages], rate)
        clock_period = 1.0 / clock_frequency
        first = messages[0].log_time if messages else 0
        if self.clock is not None:  # subscribers' clocks start at the bag's first log time before any data
            until = time.monotonic() + CLOCK_PREROLL
            while time.monotonic() < until:
                self._publish_clock(first)
                time.sleep(clock_period)
        start = next_tick = time.monotonic()
        for k, (message, due) in enumerate(zip(messages, offsets)):
            while True:
                now = time.monotonic()
                if self.clock is not None and now >= next_tick:
                    self._publish_clock(min(message.log_time, first + int((now - start) * rate * 1e9)))
                    next_tick += clock_period * (1 + int((now - next_tick) / clock_period))
                if now - start >= due:
                    break
                time.sleep(min(start + due, next_tick if self.clock is not None else float("inf")) - now)
            self._publish_waiting(self.publishers[message.topic], message.raw, self.node.context.ok)
            self.published += 1
            if progress is not None:
                progress(k + 1, len(messages))
        if self.clock is not None and messages:
            self._publish_clock(messages[-1].log_time)
        return self.published

    def wait_for_acknowledgements(self, timeout: float = 10.0) -> bool:
        from rclpy.duration import Duration
        return all(p.wait_for_all_acked(Duration(seconds=timeout)) for p in self.publishers.values())

    def _publish_clock(self, nanoseconds: int) -> None:
        msg = self._clock_msg()
        msg.clock.sec, msg.clock.nanosec = split_nanoseconds(nanoseconds)
        self.clock.publish(msg)


def run(args, ros_args: Sequence[str] = ()) -> int:
    """`affordance-ros replay` and the `replay` executable: read the bag, wait for subscribers, play."""
    reader = BagReader(args.bag, namespace=args.namespace)
    messages = reader.read()
    for warning in reader.report.warnings:
        print(f"replay: warning: {warning}", file=sys.stderr)
    print(f"replay: {reader.report.summary()}", flush=True)
    if not messages:
        raise BagError(f"'{args.bag}' has no affordance messages to replay")

    import rclpy
    from rclpy.executors import ExternalShutdownException

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


def split_ros_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(own arguments, ROS arguments): everything from --ros-args to a lone '--' (or the end) is ROS's."""
    own, ros, inside = [], [], False
    for arg in argv:
        if arg == "--ros-args":
            inside = True
            ros.append(arg)
        elif inside and arg == "--":
            inside = False
        elif inside:
            ros.append(arg)
        else:
            own.append(arg)
    return own, ros


def main(args=None) -> int:
    """The ROS executable (lib/affordance_ros/replay)."""
    own, ros = split_ros_args(sys.argv[1:] if args is None else args)
    parser = add_arguments(argparse.ArgumentParser(prog="replay", description=__doc__.split("\n")[0]))
    options = parser.parse_args(own)
    try:
        return run(options, ros)
    except BagError as exc:
        print(f"replay: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
