"""What a benchmark needs from its environment: the ROS 2 node and the peers importable, an rclpy context of its own,
the learning options the EM benchmarks measure."""

from __future__ import annotations

import importlib
import importlib.util

from affordance_ros.core import LearningOptions

# the learning options with plain EM: what the EM benchmarks measure (the learner's default is SQUAREM)
PLAIN_EM = LearningOptions(em_acceleration="none")


def ros_node_importable(bench: str) -> bool:
    """Whether rclpy and the generated interfaces import here (the learner node does); says why not."""
    try:
        importlib.import_module("affordance_ros.nodes.learner.learner_node")
    except ImportError as exc:
        print(f"affordance-ros-bench {bench}: error: the ROS 2 node cannot be imported here ({exc})")
        return False
    return True


def ros_context():
    """A new rclpy context of its own, initialised (rclpy is imported only by the benchmarks over DDS);
    ``close_ros`` ends it."""
    import rclpy
    context = rclpy.Context()
    rclpy.init(context=context)
    return context


def close_ros(context, nodes=(), executor=None, thread=None, timeout: float = 10.0) -> None:
    """End ``context`` as test/ros_harness.py's ``Ros.close`` does: its executor stopped, its nodes destroyed
    (None: never made), the context shut down, the executor's spin thread joined, and the context destroyed, so
    that its native context goes now, not at some garbage collection (the DDS participant's threads already go
    with the nodes and the shutdown)."""
    import rclpy
    if executor is not None:
        executor.shutdown(timeout_sec=timeout)
    for node in nodes:
        if node is not None:
            node.destroy_node()
    rclpy.try_shutdown(context=context)
    if thread is not None:
        thread.join(timeout)
    context.destroy()


def extras_installed(bench: str) -> bool:
    """Whether pyAgrum and pgmpy (the peer and its networks: the benchmark-only extras) are installed;
    says how to install them if not."""
    if importlib.util.find_spec("pyagrum") is None or importlib.util.find_spec("pgmpy") is None:
        print(f"affordance-ros-bench {bench}: skipped, pyAgrum and pgmpy (the networks) are benchmark-only "
              "extras: run tools/setup_bench.sh")
        return False
    return True
