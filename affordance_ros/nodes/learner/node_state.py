"""The learner node's lifecycle state, for the parts whose behaviour depends on it."""

from __future__ import annotations


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


__all__ = ["NodeState"]
