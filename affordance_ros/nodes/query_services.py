"""The planners' services of the learner: ``~/predict`` and ``~/select_action`` (see ``answers``).

Created when the node activates and removed when it deactivates; both answer from the model in
use (a learn running meanwhile swaps in its model only when done), count what they answered
and log what they could not.

A request beyond the size limits is refused before anything of ours is built from it; but rclpy has
built its Python lists already (at most 100000 entries each: the interfaces' bound, which a client's
middleware keeps), and the C heap the middleware used for it stays with the process (glibc keeps freed
memory): after such a refusal the node gives it back (``malloc_trim``). A client that bypasses its
middleware's checks is access control's to keep out (docs/node.md, "Access control").
"""

from __future__ import annotations

import ctypes
import os
from typing import Callable

import numpy as np
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ..core import AffordanceNetwork
from ..data.pairing import SizeLimits
from ..srv import Predict, SelectAction
from .answers import TOO_LARGE, answer, checked, predict_into, select_action_into

# The services' QoS: reliable, as rclpy's default, but keeping the last 100 replies instead of 10: a reply that
# must be sent to a client again stays in the reply writer's history while 100 more are written to the others.
# The answers that were lost with four planners were not lost here but in their clients, which keep 10 replies
# of the service by rclpy's default (``qos.reply_qos``). 1000 cost twice the CPU per reply in Fast DDS (1.2
# against 0.6 ms).
SERVICE_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


class QueryServices:
    """``~/predict`` and ``~/select_action`` on ``node``, in one callback group: answered from ``model()``
    (None before the first learn: the answer then says how many cases ``stored_count()`` found), requests
    within ``limits``; ``count(name)`` and ``log(level, message)`` report what was answered; ``seed`` (-1: one
    drawn at random, logged) seeds the generator of select_action's ties and thompson draws."""

    def __init__(self, node, callback_group, model: Callable[[], AffordanceNetwork | None],
                 stored_count: Callable[[], int], limits: SizeLimits, count: Callable[[str], None],
                 log: Callable[[str, str], None], seed: int = -1):
        self.node, self.model, self.stored_count, self.limits = node, model, stored_count, limits
        self.count, self.log = count, log
        # one generator for the node's select_action draws (ties, thompson): a given seed repeats a run's answers
        self.seed = seed if seed >= 0 else int.from_bytes(os.urandom(4), "little") >> 1
        self.rng = np.random.default_rng(self.seed)
        node.get_logger().info(f"~/select_action draws (ties, thompson) seeded with {self.seed}"
                               + (" (select_seed -1: drawn at random)" if seed < 0 else ""))
        self.services = [
            node.create_service(Predict, "~/predict", self._on_predict, qos_profile=SERVICE_QOS,
                                callback_group=callback_group),
            node.create_service(SelectAction, "~/select_action", self._on_select_action, qos_profile=SERVICE_QOS,
                                callback_group=callback_group)]

    def close(self) -> None:
        """Remove the services."""
        for service in self.services:
            self.node.destroy_service(service)

    def _on_predict(self, request: Predict.Request, response: Predict.Response) -> Predict.Response:
        return self._answer("predict", "predict", checked(self.limits, request, predict_into(request)), response)

    def _on_select_action(self, request: SelectAction.Request,
                          response: SelectAction.Response) -> SelectAction.Response:
        return self._answer("select_action", "select",
                            checked(self.limits, request, select_action_into(request, self.rng)), response)

    def _answer(self, service: str, counter: str, fill, response):
        problem = answer(self.model(), response, fill,
                         f"no model yet: call ~/learn first ({self.stored_count()} cases stored)")
        if problem:
            self.log("error" if problem.startswith("internal error") else "warning", f"{service}: {problem}")
        if problem.startswith(TOO_LARGE):
            release_freed_memory()
        self.count(f"{counter}_{'failed' if problem else 'ok'}")
        return response


def release_freed_memory() -> None:
    """Give the memory the C heap keeps after freeing (glibc's ``malloc_trim``) back to the system."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass
