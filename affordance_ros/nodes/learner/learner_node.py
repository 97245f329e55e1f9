"""The affordance learner node: stores the robot's trials, learns the network, answers predictions.

A managed (lifecycle) node. configure: read the configuration, open the case database (refused,
naming the holder, when another learner holds it), load the model, start storing, ``~/stored``
(TrialStatus, reliable, keep all: the answer for every trial, stored once committed and again when it
is re-sent, duplicate, rejected, retry) and /diagnostics; activate: the subscriptions ``action``
(Action), ``object_features`` and ``effects`` (Features), the services ``~/predict`` (Predict),
``~/select_action`` (SelectAction) and ``~/suggest_trial`` (SuggestTrial: which trial would teach the
model the most), the timers and ``~/model`` (the model JSON, transient local: published at activation,
after every learn and every online save); deactivate, cleanup and shutdown undo them. The Learn service
and action (``~/learn``) exist as long as the node and refuse while it is not active; deactivate,
cleanup and shutdown cancel a learn that runs and its caller is answered. ``use_sim_time`` cannot
be changed while the node is active (a clock that jumps would make every trial's stamp look far
ahead or behind). With ``autostart`` (default) the node configures and activates itself at start.

This class declares the parameters and drives the lifecycle; its parts are named objects
(``learner_parts``): ``ConfiguredLearner`` from configure to cleanup, ``ActiveEndpoints`` from activate
to deactivate, ``LearnEndpoints`` always; each is handed the typed parts it uses and the node's one
``Reporter`` (counters, log).

Threads: the executor thread takes the messages, pairs them, answers the trials and predict
and select_action; storing runs in the writer's thread (commits in groups; the executor never
waits for SQLite, and stops taking parts while the writer's queue is full: ``IngestGroup``);
learning runs in a worker process (``data.learn_worker``: a learn in a thread of this interpreter
would delay every ~/predict), waited for by a thread of ``LearnEndpoints`` while the ~/learn callback
(a coroutine in a reentrant callback group) awaits it, so the executor goes on with everything else
and a second learn request is refused at once. The executor is single-threaded: it delivers a stream
of trials in milliseconds, where rclpy's multi-threaded one delays some subscription callbacks.
"""

from __future__ import annotations

import functools
import traceback
from typing import Callable

from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn

from ...data.health import Counters
from ...data.model_manager import StartupError
from .. import shutdown
from ..command_line import check_command_line, values_checked
from ..qos import LEARNER_READER_SAMPLES, SERVICE_ANSWER_WAIT, TRIAL_HEARTBEAT_PERIOD, dds_profiles
from .learn_endpoints import LearnEndpoints, never
from .node_state import NodeState
from .parameters import LearnerSettings, ParameterError, declare_learner_parameters, refuse_clock_changes
from .parts import ActiveEndpoints, ConfiguredLearner
from .reporter import REPEAT_PERIOD, Reporter

NODE_NAME = "affordance_learner"
SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE


def reported(transition):
    """A transition callback whose unexpected exception is logged (rclpy's lifecycle turns it into ERROR
    without a word)."""
    @functools.wraps(transition)
    def callback(node, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            return transition(node, state)
        except Exception as exc:
            node.reporter.log("error", f"{transition.__name__} failed: {exc!r}\n"
                                       + "".join(traceback.format_exc(limit=-8)))
            return TransitionCallbackReturn.ERROR
    return callback


class LearnerNode(LifecycleNode):
    """The affordance learner, a lifecycle node: see the module's docstring.

    ``settings`` are its parameters, ``lifecycle`` its lifecycle state, ``counts`` its counters (``reporter``
    counts and logs for every part); ``configured`` (``ConfiguredLearner``) exists from configure to cleanup,
    ``active`` (``ActiveEndpoints``) from activate to deactivate, ``learn`` (``LearnEndpoints``) always.
    """

    def __init__(self, **kwargs):
        super().__init__(NODE_NAME, **kwargs)
        self.settings: LearnerSettings | None = None
        self.lifecycle = NodeState()
        self.counts = Counters()
        self.reporter = Reporter(self.get_logger(), self.counts)
        self.configured: ConfiguredLearner | None = None
        self.active: ActiveEndpoints | None = None
        self.give_up: Callable[[], bool] = never  # a second stop signal: stop waiting for trials not storable now
        self._problem = ""  # why configure failed
        self._autostarting = False  # while __init__ configures: a failure is main()'s to log (FATAL), once
        self.create_timer(REPEAT_PERIOD, self.reporter.flush)
        self.learn = LearnEndpoints(self, self.lifecycle, self.reporter)
        try:
            self.settings = declare_learner_parameters(self)
            refuse_clock_changes(self, self.lifecycle)
            if not self.settings.autostart:
                self.get_logger().info("unconfigured (autostart false): waiting for ~/change_state configure")
            else:
                self._autostarting = True
                if self.trigger_configure() != SUCCESS or self.trigger_activate() != SUCCESS:
                    raise StartupError(self._problem or "could not start (see the log)")
                self._autostarting = False
        except ParameterError as exc:
            self.destroy_node()
            raise StartupError(str(exc)) from None
        except BaseException:
            self.destroy_node()
            raise

    # ---------------------------------------------------------- lifecycle
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self.configured = ConfiguredLearner(self, self.settings, self.reporter, self.learn, self.lifecycle)
        except Exception as exc:  # StartupError says what to fix; anything else (the learning process cannot start)
            self._problem = str(exc) if isinstance(exc, StartupError) else f"configure failed: {exc!r}"
            if not self._autostarting:
                self.get_logger().error(f"configure failed: {exc}" if isinstance(exc, StartupError) else self._problem)
            return FAILURE
        self.lifecycle.label = "inactive"
        self.get_logger().info(self.configured.summary())
        return SUCCESS

    @reported
    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.active = ActiveEndpoints(self, self.configured, self.settings, self.reporter)
        result = super().on_activate(state)  # activates ~/model
        self.lifecycle.label = "active"
        self.configured.model.publish()
        self.get_logger().info("active: taking trials and answering ~/learn, ~/predict, ~/select_action, "
                               "~/suggest_trial")
        return result

    @reported
    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate("the node was deactivated")
        self.get_logger().info("inactive: not taking trials nor answering")
        self.lifecycle.label = "inactive"
        return super().on_deactivate(state)

    @reported
    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup("the node was cleaned up")
        self.lifecycle.label = "unconfigured"
        return SUCCESS

    @reported
    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate("the node is shutting down")
        self._cleanup("the node is shutting down")
        self.lifecycle.label = "finalized"
        return SUCCESS

    def _deactivate(self, why: str) -> None:
        self.learn.stop(why, self.give_up)  # cancels a learn that is running; its caller is answered
        if self.active is not None:
            self.active.close()
            self.active = None

    def _cleanup(self, why: str) -> None:
        if self.configured is None:
            return
        self.learn.stop(why, self.give_up)
        self.configured.close(self.give_up)
        self.configured = None

    # ---------------------------------------------------------- stopping
    def finalize(self, give_up: Callable[[], bool]) -> None:
        """The shutdown transition (saves, last log lines), unless it happened already. ``give_up()`` (a second
        stop signal) ends its wait for the trials queued while they cannot be stored (the database locked,
        failing or removed): they stay unconfirmed, and the robot sends them again."""
        self.give_up = give_up
        if self.lifecycle.label != "finalized":
            self.trigger_shutdown()

    def finished(self) -> bool:
        """Shut down, and no learn's caller is left to answer."""
        return self.lifecycle.label == "finalized" and not self.learn.busy

    def destroy_node(self) -> None:
        self._deactivate("the node is being destroyed")
        self._cleanup("the node is being destroyed")
        self.learn.destroy()
        self.reporter.flush(force=True)
        super().destroy_node()


def parts_received(node: LearnerNode) -> int:
    """Trial parts the node took so far (how ``shutdown.drain`` sees that queued messages are still coming)."""
    return sum(node.counts[f"received_{kind}"] for kind in ("action", "object", "effect"))


def main(args=None) -> int:
    # Short DDS reader queues: under a flood a good trial's part waits behind fewer parts; answers wait for a new
    # caller (qos.py). Entered first: Fast DDS reads its profiles once, at the process's first node.
    with dds_profiles(LEARNER_READER_SAMPLES, TRIAL_HEARTBEAT_PERIOD, SERVICE_ANSWER_WAIT) as readers:
        check_command_line("learner_node", NODE_NAME, declare_learner_parameters, __doc__, args)
        # SIGINT/SIGTERM only ask the spin loop to stop: what DDS delivered already is stored, the node goes
        # through its shutdown transition and is destroyed, and only then the context (shutdown.py).

        def make_node() -> LearnerNode:
            node = values_checked("learner_node", LearnerNode)
            node.get_logger().info(readers)
            return node
        return shutdown.run(make_node, (StartupError,), NODE_NAME, args,
                            done=LearnerNode.finished, taken=parts_received, finish=LearnerNode.finalize)


if __name__ == "__main__":
    raise SystemExit(main())
