"""Record the affordance topics into a new bag: ``ros2 bag record`` for these machines.

    affordance-ros record BAG [--storage mcap] [--trials 300] [--duration 60]
    ros2 run affordance_ros record BAG --ros-args -r __ns:=/robot1 -p use_sim_time:=true

Subscribes to ``action``, ``object_features`` and ``effects`` (relative names: namespace and
remapping apply, as for the learner node) and writes every message as it arrives, serialized
as received, with the node clock's time (sim time with ``use_sim_time``) as its log time.
Nothing is checked or paired: the bag holds what the node would have seen, and
``affordance-ros import``/``learn`` report on it later. What was written is committed every
``--flush-period`` seconds, so a recording that is killed keeps all but its last moments
(the bag then has no metadata.yaml; the readers here read its storage file directly).
Stops on Ctrl-C or SIGTERM (after taking what DDS has delivered already: until the topics are quiet
for 0.2 s, 10 s at most; a second signal stops at once), after ``--duration`` seconds, or once every
topic has ``--trials`` messages; the bag is then closed properly.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from ..core import GROUPS
from ..data.bag import STORAGES, BagError
from .ros_args import qos_depth, run_executable

NODE_NAME = "affordance_recorder"
DRAIN_LIMIT = 10.0  # seconds at most of taking what is queued after a stop signal


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("bag", help="the bag directory to create (must not exist)")
    parser.add_argument("--storage", choices=STORAGES, default="sqlite3", help="storage format (default sqlite3)")
    parser.add_argument("--trials", type=int, default=0,
                        help="stop once every topic has this many messages (default 0: no limit)")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="stop after this many seconds (default 0: no limit)")
    parser.add_argument("--flush-period", type=float, default=1.0,
                        help="seconds between commits of what was recorded (default 1)")
    parser.add_argument("--qos-depth", type=qos_depth, default=0,
                        help="history of the reliable subscriptions: 0 (default) keeps all (a publisher "
                             "faster than the recorder waits instead of losing messages); N > 0 keeps the last N")
    return parser


def run(args, ros_args: Sequence[str] = ()) -> int:
    import rclpy  # (here, not at the top: the command line's other commands need no ROS)
    from rclpy.clock import Clock, ClockType
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    from ..nodes import shutdown
    from ..nodes.qos import dds_profiles
    from ..nodes.robot.bag_recorder import BagRecorder

    context = rclpy.Context()
    node = recorder = None
    # SIGINT/SIGTERM ask to stop (rclpy's own handler would shut the context down at once, and what DDS has
    # acknowledged to the robot but the recorder has not taken yet would be lost); a second one stops at once
    with shutdown.StopSignals() as signals:
        shutdown.init(args=["record", *ros_args], context=context)
        try:
            with dds_profiles():  # (messages within one frame: Fast DDS reads it as the first node is made)
                node = rclpy.create_node(NODE_NAME, context=context)
            recorder = BagRecorder(node, args.bag, args.storage, args.qos_depth, args.flush_period, args.trials)
            stop = recorder.done
            if args.duration > 0:
                node.create_timer(args.duration, lambda: stop.done() or stop.set_result("duration"),
                                  clock=Clock(clock_type=ClockType.STEADY_TIME))
            print(f"record: recording {', '.join(recorder.writer.topics.values())} into {args.bag} "
                  f"({args.storage})", flush=True)
            started = time.monotonic()
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            try:
                shutdown.spin_until(executor, lambda: signals.requested or stop.done())
                if signals.requested:  # take what was delivered already: the robot was told it arrived
                    taken = shutdown.drain(executor, lambda: sum(recorder.counts.values()), lambda: signals.count > 1,
                                           limit=DRAIN_LIMIT)
                    print(f"record: {signals.name}: took {taken} more messages that were queued", flush=True)
            except ExternalShutdownException:
                pass
            finally:
                executor.shutdown()
        finally:
            if recorder is not None:
                recorder.close()
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown(context=context)
    counts = recorder.counts
    print(f"record: wrote {sum(counts.values())} messages in {time.monotonic() - started:.1f} s to {args.bag}: "
          + ", ".join(f"{counts[k]} on {recorder.writer.topics[k]}" for k in GROUPS), flush=True)
    return 0


def main(args=None) -> int:
    """The ROS executable (lib/affordance_ros/record)."""
    return run_executable("record", __doc__.split("\n")[0], add_arguments, run, args, errors=(BagError,))


if __name__ == "__main__":
    sys.exit(main())
