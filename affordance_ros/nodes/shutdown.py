"""Stopping a node's process cleanly on SIGINT/SIGTERM, for the executables' main() functions.

rclpy's own signal handler shuts the context down from inside the signal: the executor then
stops in the middle of whatever it did, a callback may be cut by a KeyboardInterrupt (a commit
half-reported), and publishers and subscriptions destroyed after the context died can crash the
process (exit -11). Instead, ``init`` starts rclpy without its handler and ``StopSignals`` turns
SIGINT/SIGTERM into a request the spin loop sees between callbacks; then the node is drained
(``drain``: what DDS has delivered already is taken), destroyed, and only then the context is
shut down (``close``), so that every stop exits 0 and the last log lines still reach /rosout.
"""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import time
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from .command_line import CommandLineError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PROFILE_VARIABLE = "AFFORDANCE_ROS_PROFILE"
GC_THRESHOLD = 10_000  # allocations between young collections once a node runs (Python's default: 700)
SPIN_PERIOD = 0.1  # seconds a spin waits at most: how soon a stop request is seen
SETTLE_LIMIT = 10.0  # seconds a node's last callbacks get after its shutdown transition (e.g. a cancelled learn's)
ANSWER_GRACE = 0.5  # and then for the callbacks their answers start (an action's result) and for DDS to send them


def init(args=None, context=None) -> None:
    """rclpy.init without rclpy's signal handlers (use ``StopSignals``)."""
    rclpy.init(args=args, context=context, signal_handler_options=SignalHandlerOptions.NO)


class StopSignals:
    """While entered, SIGINT and SIGTERM request a stop (``requested``, how many in ``count``) instead
    of raising KeyboardInterrupt; the previous handlers come back on exit."""

    def __init__(self):
        self.count = 0
        self.name = ""
        self._previous = {}

    @property
    def requested(self) -> bool:
        return self.count > 0

    def _handle(self, signum, frame) -> None:
        self.count += 1
        self.name = signal.Signals(signum).name

    def __enter__(self) -> "StopSignals":
        self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


def settle_collector() -> None:
    """Python's cyclic garbage collector, for a node that serves requests: what exists once the node is made
    (modules, rclpy, the loaded model) is frozen, never scanned again, and a young collection runs after
    ``GC_THRESHOLD`` allocations instead of 700: fewer pauses in the middle of a callback, and shorter full
    collections."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def spin_until(executor, done: Callable[[], bool], limit: float = math.inf) -> None:
    """Spin in short waits until ``done()`` (a stop request, a future completed, the context shut down), at most
    ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not done() and executor.context.ok() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=SPIN_PERIOD)


def drain(executor, taken: Callable[[], int], give_up: Callable[[], bool], idle: float = 0.2,
          limit: float = 10.0) -> int:
    """Take what is still queued: spin until ``idle`` seconds pass without ``taken()`` (a count of
    messages handled) growing, ``limit`` seconds in all, or ``give_up()`` (a second stop request).
    Returns how many messages were taken."""
    start_count = taken()
    deadline = time.monotonic() + limit
    quiet_since, last = time.monotonic(), start_count
    while executor.context.ok() and not give_up():
        now = time.monotonic()
        if now - quiet_since > idle or now > deadline:
            break
        executor.spin_once(timeout_sec=idle / 4)
        count = taken()
        if count != last:
            quiet_since, last = time.monotonic(), count
    return taken() - start_count


def close(executor, node, context=None) -> None:
    """Destroy the node (its last log lines while the context is alive), then the executor, then the context."""
    if node is not None:
        executor.remove_node(node)
        node.destroy_node()
    executor.shutdown()
    rclpy.try_shutdown(context=context)


def run(make_node: Callable, startup_errors: tuple, name: str, args=None, done: Callable | None = None,
        taken: Callable | None = None, stopped: Callable | None = None, finish: Callable | None = None) -> int:
    """An executable's main(): the node from ``make_node()`` (exit 1, the message logged, on ``startup_errors``;
    exit 2, its line on stderr, on a CommandLineError)
    spins until SIGINT/SIGTERM or ``done(node)``; after a signal, ``taken(node)`` (messages handled so far)
    drains what is queued and ``stopped(node, signal_name)`` runs; then ``finish(node, give_up)`` (e.g. a
    lifecycle node's shutdown transition; ``give_up()``: a second signal came, stop waiting), spinning on until
    ``done(node)`` (``SETTLE_LIMIT``, then ``ANSWER_GRACE`` seconds more when it was not at once), and ``close``.
    Returns the exit status. With the environment variable AFFORDANCE_ROS_PROFILE set to a path, the main
    thread runs under cProfile, its stats written to <path>.<name> at exit (a developer's profile of the
    executor thread: docs/benchmarks.md)."""
    arguments = (make_node, startup_errors, name, args, done, taken, stopped, finish)
    profile = os.environ.get(PROFILE_VARIABLE)
    if not profile:
        return _run(*arguments)
    import cProfile
    profiler = cProfile.Profile()
    try:
        return profiler.runcall(_run, *arguments)
    finally:
        profiler.dump_stats(f"{profile}.{name}")


def _run(make_node, startup_errors, name, args, done, taken, stopped, finish) -> int:
    init(args=args)
    with StopSignals() as stop:
        try:
            node = make_node()
        except CommandLineError as exc:
            rclpy.try_shutdown()
            print(exc, file=sys.stderr)
            return 2
        except startup_errors as exc:
            rclpy.logging.get_logger(name).fatal(str(exc))
            rclpy.try_shutdown()
            return 1
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        settle_collector()
        try:
            spin_until(executor, lambda: stop.requested or (done is not None and done(node)))
            if stop.requested and taken is not None:
                count = drain(executor, lambda: taken(node), lambda: stop.count > 1)
                node.get_logger().info(f"{stop.name}: took {count} more messages that were queued")
            if stop.requested and stopped is not None:
                stopped(node, stop.name)
        except ExternalShutdownException:
            pass
        finally:
            if finish is not None and executor.context.ok():
                give_up = lambda: stop.count > 1  # noqa: E731
                finish(node, give_up)
                if done is not None and not done(node):  # what the transition ended answers (a cancelled learn)
                    spin_until(executor, lambda: done(node) or give_up(), SETTLE_LIMIT)
                    spin_until(executor, give_up, ANSWER_GRACE)
            close(executor, node)
    return 0
