"""``~/learn`` as a service (Learn.srv) and as an action (Learn.action): one learn at a time, in a worker process.

Both run a ``data.learn_job.LearnJob`` in the node's learning process (``data.learn_worker``),
waited for by a thread of its own, while their callback (a coroutine in a reentrant callback
group) awaits it, so the executor goes on storing trials and answering predictions. A second
learn, by either, is refused at once: the service answers "already running"; the action
rejects the goal in its goal callback (a goal response carries no reason, so the reason is
logged and published on ``~/learn_refused``, where ``affordance-ros call learn`` reads it: the node's
own transient-local topic, not /rosout, whose one publisher per logger name rcl shares between nodes
of one name in a process and drops with the first of them destroyed). The action also sends feedback
(phase, iteration, log-likelihood, cases, elapsed; at most every ``FEEDBACK_PERIOD`` seconds and
at every change of phase) and can be cancelled: learning stops at its next step and the
current model stays. Service and action live side by side at ``~/learn`` (an action's services
and topics are under ``~/learn/_action/``).

They exist as long as the node (as a nav2 lifecycle node's services exist from configure on) and
refuse while it is not active, saying why: deactivating, cleaning up or shutting the node down
cancels a learn that is running (``stop``), whose caller is then answered (``success`` false, the
reason) and whose action goal ends aborted, with its result. Destroyed in the middle of a call, a
service would fail in ``send_response`` (rclpy's InvalidHandle, which ends the node's process),
and an action server would leave its client without a result.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING, Callable

from rcl_interfaces.msg import Log
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.task import Future
from rclpy.time import Time

from ...action import Learn as LearnAction
from ...core import AffordanceError, LearningCancelled
from ...data.current_model import CurrentModel
from ...data.learn_job import LearnOutcome, LearnProgress
from ...data.learn_worker import LearnWorker
from ...data.log_text import printable
from ...srv import Learn
from ..contract import REFUSED_QOS, REFUSED_TOPIC
from .node_state import LearnSlot, NodeState
from .reporter import Reporter

if TYPE_CHECKING:
    from .model_topic import ModelTopic

FEEDBACK_PERIOD = 0.1  # seconds between feedback messages of one phase
STOP_GRACE = 5.0  # seconds a learn the node cancels gets to stop at its next step before its process is killed
STOP_POLL = 0.05  # seconds between looks at a cancelled learn (and at a second stop signal)
REFUSED = "learn refused: "  # how the log line giving the reason for a refused learn starts


def never() -> bool:
    """The ``give_up`` of a wait that is never cut short."""
    return False


def fill(out, outcome: LearnOutcome) -> None:
    """The fields the Learn response and the Learn action's result share, from a learn's outcome."""
    result = outcome.result
    out.success = True
    out.message = outcome.message
    out.num_cases = result.num_cases
    out.arcs = [f"{a}->{b}" for a, b in result.arcs]
    probabilities = result.arc_probabilities or {arc: 1.0 for arc in result.arcs}
    ranked = sorted(probabilities.items(), key=lambda item: -item[1])
    out.sampled_arcs = [f"{a}->{b}" for (a, b), _ in ranked]
    out.arc_probabilities = [float(p) for _, p in ranked]
    out.log_likelihood = float(result.log_likelihood)
    out.iterations = int(result.iterations)
    out.duration = float(result.duration)


class LearnEndpoints:
    """The Learn service and action on ``node``, until ``destroy``.

    A learn runs while the node is active (``lifecycle``; else it is refused, saying why) in the learning process
    ``worker`` and its model goes to ``model`` (``attach``: from configure to cleanup); the node's parameters
    'structure' (for a request that leaves it empty) and 'prior_strength' describe it. ``reporter`` hears what
    happened.
    """

    def __init__(self, node, lifecycle: NodeState, reporter: Reporter):
        self.node = node
        self.lifecycle = lifecycle
        self.reporter = reporter
        self.worker: LearnWorker | None = None
        self.model: ModelTopic | None = None
        self.slot = LearnSlot()
        self._stopped = ""  # why the node stopped the learn that runs ('' while it was not)
        self._waiting: threading.Thread | None = None
        group = ReentrantCallbackGroup()  # a second request is taken (and refused) while the first awaits
        self.service = node.create_service(Learn, "~/learn", self._on_service, callback_group=group)
        self.action = ActionServer(node, LearnAction, "~/learn", self._execute, callback_group=group,
                                   goal_callback=self._on_goal, cancel_callback=self._on_cancel)
        self.refusals = node.create_publisher(Log, f"~/{REFUSED_TOPIC}", REFUSED_QOS)

    def attach(self, worker: LearnWorker, model: ModelTopic) -> None:
        """Learn in ``worker`` for ``model`` from now on (the node is configured)."""
        self.worker = worker
        self.model = model

    def detach(self) -> None:
        """The node is cleaned up: no worker and no model any more."""
        self.worker = None
        self.model = None

    @property
    def busy(self) -> bool:
        """True while a learn is being worked on."""
        return self.slot.busy

    def stop(self, reason: str, give_up: Callable[[], bool] = never) -> None:
        """Cancel a learn that is running (its caller is told ``reason``) and wait for the learning process to
        let go of it (``_cancel``; ``give_up()``, a second stop signal, ends the wait). The caller is answered
        when the executor next runs the learn's callback."""
        if not self.busy:
            return
        self._stopped = reason
        self._cancel(give_up)

    def _cancel(self, give_up: Callable[[], bool] = never) -> None:
        """Tell the learning process to stop the learn at its next step, and wait until it has; one that has not
        within ``STOP_GRACE`` seconds (or when ``give_up()``) is killed (the next learn starts another)."""
        worker, waiting = self.worker, self._waiting
        if worker is None or waiting is None:  # (no worker once the node is cleaned up: the learn was cancelled then)
            return
        worker.cancel()
        deadline = time.monotonic() + STOP_GRACE
        while waiting.is_alive() and time.monotonic() < deadline and not give_up():
            waiting.join(STOP_POLL)
        if waiting.is_alive():
            self.node.get_logger().warning(  # (any thread: not through ``log``)
                f"the learning process did not stop within {STOP_GRACE:g} s of the cancel (stopped? in a long "
                "step?): killed it; the next learn starts a new one")
            worker.close()  # (the waiting thread sees the end of the process at once)
            waiting.join(STOP_GRACE)

    def _on_cancel(self, goal_handle) -> CancelResponse:
        """A goal's cancel is accepted and its learn stopped at once (not at the learning process's next progress
        message, which a stopped process never sends), by a thread that kills the process when it has not let go
        ``STOP_GRACE`` seconds later."""
        if self.busy:
            threading.Thread(target=self._cancel, name="affordance_learn_cancel", daemon=True).start()
        return CancelResponse.ACCEPT

    def destroy(self) -> None:
        """Remove the service and the action server (the node is being destroyed)."""
        self.node.destroy_service(self.service)
        self.action.destroy()
        self.node.destroy_publisher(self.refusals)

    async def _on_service(self, request: Learn.Request, response: Learn.Response) -> Learn.Response:
        problem = self.lifecycle.why_not_active()
        if problem or not self._claim():
            response.message = self._refuse(problem)
            return response
        return await self._learn(request.structure, response, None)

    def _on_goal(self, goal: LearnAction.Goal) -> GoalResponse:
        """Accept a goal only when the node is active and no learn runs (the learn is then this goal's,
        until it ends)."""
        problem = self.lifecycle.why_not_active()
        if not problem and self._claim():
            return GoalResponse.ACCEPT
        self._refuse(problem)
        return GoalResponse.REJECT

    async def _execute(self, goal_handle) -> LearnAction.Result:
        result = await self._learn(goal_handle.request.structure, LearnAction.Result(), goal_handle)
        if result.success:
            goal_handle.succeed()
        elif goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    def _claim(self) -> bool:
        """Take the one learn there is, if it is free."""
        if not self.slot.claim():
            return False
        self._stopped = ""
        return True

    def _refuse(self, problem: str = "") -> str:
        """Count and log a learn refused (the node is not active: ``problem``, or one runs); the reason."""
        self.reporter.count("learn_refused")
        reason = problem or (f"a learn is already running (for {time.monotonic() - self.slot.started:.1f} s); "
                             "call ~/learn again when it has finished")
        self.reporter.grouped("warning", REFUSED + reason)
        wall = Time(nanoseconds=time.time_ns())  # as log lines are stamped (a simulated clock may stand still)
        self.refusals.publish(Log(stamp=wall.to_msg(), level=Log.WARN, name=self.node.get_logger().name,
                                  msg=reason))
        return reason

    async def _learn(self, structure: str, out, goal_handle):
        """The claimed learn: run it, install its model, fill ``out``; the learn is free again after."""
        progress = self._progress(goal_handle)
        outcome = "failed"
        try:
            worker, model = self.worker, self.model
            if worker is None:  # cleaned up since the learn was claimed
                raise LearningCancelled(self._stopped)
            job = model.current.learn_job(structure or self.node.get_parameter("structure").value,
                                          float(self.node.get_parameter("prior_strength").value))
            learned = await self._in_thread(functools.partial(worker.learn, job, progress))
            if self._stopped:  # it finished as the node stopped it: the node no longer takes models
                CurrentModel.discard(learned)
                raise LearningCancelled(self._stopped)
            model.learned(learned)
            fill(out, learned)
            outcome = "ok"
        except (LearningCancelled, AffordanceError) as exc:
            if isinstance(exc, LearningCancelled) or self._stopped:  # (the node may have killed its process)
                out.message = (f"cancelled: {self._stopped}; " if self._stopped else "cancelled: ") + \
                    "nothing was learned; the current model stays"
                outcome = "cancelled"
            else:
                out.message = str(exc)
        except Exception as exc:  # a bug: answer and keep running rather than take the node down
            self.reporter.grouped("error", f"learn failed unexpectedly: {exc!r}")
            out.message = printable(f"internal error while learning: {exc!r}")
        finally:
            self.slot.release()  # only now: until the new model is in use, online saves wait
        self.reporter.count(f"learn_{outcome}")
        self.reporter.grouped("info" if outcome == "ok" else "warning", f"learn: {out.message}")
        return out

    def _progress(self, goal_handle):
        """The progress callback of one learn (called in the waiting thread): cancels it when asked to,
        and sends the action's feedback."""
        last = {"phase": None, "elapsed": 0.0}

        def progress(step: LearnProgress) -> None:
            if self._stopped or (goal_handle is not None and goal_handle.is_cancel_requested):
                raise LearningCancelled("cancelled")
            if goal_handle is None:
                return
            if step.phase != last["phase"] or step.elapsed - last["elapsed"] >= FEEDBACK_PERIOD:
                last.update(phase=step.phase, elapsed=step.elapsed)
                goal_handle.publish_feedback(LearnAction.Feedback(
                    phase=step.phase, iteration=step.iteration, log_likelihood=step.log_likelihood,
                    cases=step.cases, elapsed=step.elapsed))
        return progress

    def _in_thread(self, work) -> Future:
        """Run ``work`` in a thread of its own; the future is done (and the executor woken) when it ends."""
        finished, executor = Future(), self.node.executor

        def run():
            try:
                finished.set_result(work())
            except BaseException as exc:  # raised in the awaiting callback
                finished.set_exception(exc)
            finally:
                try:
                    executor.wake()  # the awaiting callback is polled on the executor's next wake-up
                except InvalidHandle:  # the executor was shut down meanwhile
                    pass

        self._waiting = threading.Thread(target=run, name="affordance_learn", daemon=True)
        self._waiting.start()
        return finished
