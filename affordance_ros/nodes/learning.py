"""``~/learn`` as a service (Learn.srv) and as an action (Learn.action): one learn at a time, in a worker process.

Both run ``ModelManager.learn`` in the node's learning process (``data.learn_worker``), waited for
by a thread of its own, while their callback (a coroutine in a
reentrant callback group) awaits it, so the executor goes on storing trials and answering
predictions; a second learn, by either, is answered "already running" at once. The action
also sends feedback (phase, iteration, log-likelihood, cases, elapsed; at most every
``FEEDBACK_PERIOD`` seconds and at every change of phase) and can be cancelled: learning
stops at its next step and the current model stays. Deactivating the node cancels a learn
that is running, whichever started it. Service and action live side by side at ``~/learn``
(an action's services and topics are under ``~/learn/_action/``).
"""

from __future__ import annotations

import threading
import time

from rclpy.action import ActionServer, CancelResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidHandle
from rclpy.task import Future

from ..action import Learn as LearnAction
from ..core import AffordanceError, LearningCancelled
from ..data.model_manager import LearnOutcome, LearnProgress
from ..data.text import printable
from ..srv import Learn

FEEDBACK_PERIOD = 0.1  # seconds between feedback messages of one phase


def fill(out, outcome: LearnOutcome) -> None:
    """The fields the Learn response and the Learn action's result share, from a learn's outcome."""
    result = outcome.result
    out.success, out.message = True, outcome.message
    out.num_cases, out.arcs = result.num_cases, [f"{a}->{b}" for a, b in result.arcs]
    out.log_likelihood, out.iterations = float(result.log_likelihood), int(result.iterations)
    out.duration = float(result.duration)


class LearnEndpoints:
    """The Learn service and action of ``node`` (a LearnerNode: ``manager``, ``count``, ``log``, ``installed``)."""

    def __init__(self, node):
        self.node = node
        self._lock = threading.Lock()
        self._started = 0.0
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        group = ReentrantCallbackGroup()  # a second request is taken (and refused) while the first awaits
        self.service = node.create_service(Learn, "~/learn", self._on_service, callback_group=group)
        self.action = ActionServer(node, LearnAction, "~/learn", self._execute, callback_group=group,
                                   cancel_callback=lambda _: CancelResponse.ACCEPT)

    @property
    def busy(self) -> bool:
        """True while a learn is being worked on."""
        return self._lock.locked()

    def close(self, timeout: float = 60.0) -> None:
        """Cancel a learn that is running, wait for its thread, remove the service and the action server."""
        self._stop.set()
        if self.node.learn_worker is not None:
            self.node.learn_worker.cancel()
        if self._worker is not None:
            self._worker.join(timeout)
        self.node.destroy_service(self.service)
        self.action.destroy()

    async def _on_service(self, request: Learn.Request, response: Learn.Response) -> Learn.Response:
        return await self._learn(request.structure, response, None)

    async def _execute(self, goal_handle) -> LearnAction.Result:
        result = await self._learn(goal_handle.request.structure, LearnAction.Result(), goal_handle)
        if result.success:
            goal_handle.succeed()
        elif goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        return result

    async def _learn(self, structure: str, out, goal_handle):
        node = self.node
        out.success = False
        if not self._lock.acquire(blocking=False):
            node.count("learn_refused")
            out.message = (f"a learn is already running (for {time.monotonic() - self._started:.1f} s); "
                           "call ~/learn again when it has finished")
            return out
        self._started = time.monotonic()
        self._stop.clear()
        manager = node.manager
        work = (structure or node.get_parameter("structure").value,
                float(node.get_parameter("prior_strength").value), manager.current_model())
        progress = self._progress(goal_handle)
        outcome = "failed"
        try:
            learned = await self._in_worker(lambda: node.learn_worker.learn(manager, *work, progress=progress))
            node.installed(learned.model, learned)
            fill(out, learned)
            outcome = "ok"
        except LearningCancelled:
            out.message, outcome = "cancelled: nothing was learned; the current model stays", "cancelled"
        except AffordanceError as exc:
            out.message = str(exc)
        except Exception as exc:  # a bug: answer and keep running rather than take the node down
            node.log("error", f"learn failed unexpectedly: {exc!r}")
            out.message = printable(f"internal error while learning: {exc!r}")
        finally:
            self._lock.release()  # only now: until the new model is in use, online saves wait
        node.count(f"learn_{outcome}")
        node.log("info" if outcome == "ok" else "warning", f"learn: {out.message}")
        return out

    def _progress(self, goal_handle):
        """The progress callback of one learn (called in the waiting thread): cancels it when asked to,
        and sends the action's feedback."""
        last = {"phase": None, "elapsed": 0.0}

        def progress(step: LearnProgress) -> None:
            if self._stop.is_set() or (goal_handle is not None and goal_handle.is_cancel_requested):
                raise LearningCancelled("cancelled")
            if goal_handle is None:
                return
            if step.phase != last["phase"] or step.elapsed - last["elapsed"] >= FEEDBACK_PERIOD:
                last.update(phase=step.phase, elapsed=step.elapsed)
                goal_handle.publish_feedback(LearnAction.Feedback(
                    phase=step.phase, iteration=step.iteration, log_likelihood=step.log_likelihood,
                    cases=step.cases, elapsed=step.elapsed))
        return progress

    def _in_worker(self, job) -> Future:
        """Run ``job`` in a thread of its own; the future is done (and the executor woken) when it ends."""
        finished, executor = Future(), self.node.executor

        def work():
            try:
                finished.set_result(job())
            except BaseException as exc:  # raised in the awaiting callback
                finished.set_exception(exc)
            finally:
                try:
                    executor.wake()  # the awaiting callback is polled on the executor's next wake-up
                except InvalidHandle:  # the executor was shut down meanwhile
                    pass

        self._worker = threading.Thread(target=work, name="affordance_learn", daemon=True)
        self._worker.start()
        return finished
