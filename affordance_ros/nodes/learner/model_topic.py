"""The current model on ROS: ``~/model``, and its online updates counted, logged and saved.

Created when the node is configured. The model itself is ``data.current_model.CurrentModel``; this part
publishes it on ``~/model`` (the model JSON, transient local: a subscriber that comes later gets the latest) when
the node activates, after every learn (``learned``) and after every online save, and reports what online learning
does. With online learning every stored case refines the model (``stored``), and the refined model is written to
the model file and published every ``online_save_period`` seconds (``save``; 0: after every case), never while a
learn runs (the learn writes its own), and never over a model file another program changed (counted and logged).
"""

from __future__ import annotations

import json

from std_msgs.msg import String

from ...core import AffordanceError, AffordanceNetwork
from ...data.current_model import CurrentModel, OnlineUpdate
from ...data.health import LastLearn
from ...data.learn_job import LearnOutcome
from ...data.trial import TrialRecord
from ..contract import MODEL_QOS, MODEL_TOPIC
from .node_state import LearnSlot
from .reporter import Reporter


class ModelTopic:
    """``current`` with its ``~/model`` lifecycle publisher on ``node``: saves wait while a learn runs (``learning``);
    ``reporter`` hears of online updates and failed saves. ``last_learn``: the duration and log-likelihood of the
    last learn."""

    def __init__(self, node, current: CurrentModel, online_save_period: float, learning: LearnSlot,
                 reporter: Reporter):
        self.node = node
        self.current = current
        self.online_save_period = online_save_period
        self.learning = learning
        self.reporter = reporter
        self.publisher = node.create_lifecycle_publisher(String, f"~/{MODEL_TOPIC}", MODEL_QOS)
        self.last_learn: LastLearn | None = None

    def install(self, model: AffordanceNetwork) -> None:
        """``model`` takes over (loaded at configure, or learned); with online learning it first catches up
        on the stored cases it has not seen."""
        updates, message = self.current.install(model)
        self._report(updates, message)

    def learned(self, outcome: LearnOutcome) -> None:
        """A learned model replaces the model file, takes over and goes out on ~/model (AffordanceError, and
        the current model stays, when it cannot)."""
        try:
            updates, message = self.current.install_learned(outcome)
        except OSError as exc:
            self.current.discard(outcome)
            raise AffordanceError(f"could not write the learned model to {self.current.model_path} ({exc}); the "
                                  "previous model stays") from None
        self._report(updates, message)
        self.last_learn = LastLearn(float(outcome.result.duration), float(outcome.result.log_likelihood))
        self.publish()

    def stored(self, case_id: int, record: TrialRecord) -> None:
        """A case was stored: with online learning it refines the model at once."""
        if self.current.online is None:
            return
        self._report([self.current.update_online(case_id, record)])
        if self.online_save_period == 0:
            self.save()

    def save(self, stopping: bool = False) -> None:
        """Write the online-updated model and publish it; not while a learn runs (it writes its own), unless
        ``stopping`` (then it is not published)."""
        if (self.learning.busy and not stopping) or not self.current.unsaved:
            return
        try:
            self.current.save_online()
        except OSError as exc:
            self.reporter.count("online_save_errors")
            self.reporter.log("error", f"could not write the online-updated model to {self.current.model_path}: {exc}")
            return
        if not stopping:
            self.publish()

    def publish(self) -> None:
        """The current model on ~/model (while the publisher is active)."""
        model = self.current.model
        if model is not None and self.publisher.is_activated:
            self.publisher.publish(String(data=json.dumps(model.to_dict())))

    def close(self) -> None:
        """Remove the publisher."""
        self.node.destroy_lifecycle_publisher(self.publisher)

    def _report(self, updates: list[OnlineUpdate], message: str = "") -> None:
        """Count and log what online updates did, and the message for the user."""
        for update in updates:
            self.reporter.count("online_updates" if update.ok else "online_skipped")
            if update.message:
                self.reporter.log("info" if update.ok else "warning", update.message)
        if message:
            self.reporter.log("info", message)


__all__ = ["ModelTopic"]
