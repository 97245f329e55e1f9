"""The learner node's state that its parts read: the lifecycle state, and whether a learn runs."""

from __future__ import annotations

import threading
import time


class NodeState:
    """The lifecycle state by its label (unconfigured, inactive, active, finalized), set by the node at each
    transition: ~/learn refuses unless active, ``use_sim_time`` is fixed while active, /diagnostics says it."""

    def __init__(self):
        self.label = "unconfigured"

    @property
    def active(self) -> bool:
        return self.label == "active"

    def why_not_active(self) -> str:
        """Why the node does not learn now ('' when active)."""
        return "" if self.active else f"the node is {self.label}: activate it (~/change_state) to learn"


class LearnSlot:
    """The one learn the node runs at a time: ``claim`` takes it (False while a learn runs), ``release`` frees it;
    ``busy`` in between (~/learn refuses a second learn, online saves wait: the learn writes its own model)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started = 0.0  # when the learn that runs was claimed (monotonic)

    @property
    def busy(self) -> bool:
        return self.lock.locked()

    def claim(self) -> bool:
        """Take the one learn there is, if it is free."""
        if not self.lock.acquire(blocking=False):
            return False
        self.started = time.monotonic()
        return True

    def release(self) -> None:
        self.lock.release()


__all__ = ["LearnSlot", "NodeState"]
