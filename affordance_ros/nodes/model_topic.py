"""The learner's current model on ROS: made current, refined online, saved, published on ``~/model``.

Created when the node is configured. A model becomes current when it is loaded (configure) or
learned (``learned``: its file is put in place of the model file, and it goes out on ``~/model`` at
once); with online learning every
stored case refines it (``stored``), and the refined model is written to the model file and
published every ``online_save_period`` seconds (``save``; 0: after every case), never while a
learn runs (the learn writes its own), and never over a model file another program changed
(``ModelManager.save_online`` refuses: counted and logged). ``~/model`` carries the model JSON,
transient local: a subscriber that comes later gets the latest.
"""

from __future__ import annotations

import json
from typing import Callable

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from ..core import AffordanceError, AffordanceNetwork
from ..data.health import LastLearn
from ..data.learn_job import LearnOutcome
from ..data.model_manager import ModelManager, OnlineUpdate
from ..data.trial import TrialRecord

MODEL_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


class ModelTopic:
    """The current model of ``manager`` with its ``~/model`` lifecycle publisher on ``node``.

    ``learning()`` says whether a learn runs (saves then wait); ``count(name)`` and ``log(level, message)``
    report online updates and failed saves. ``last_learn``: the duration and log-likelihood of the last learn.
    """

    def __init__(self, node, manager: ModelManager, online_save_period: float, learning: Callable[[], bool],
                 count: Callable[[str], None], log: Callable[[str, str], None]):
        self.node, self.manager, self.online_save_period = node, manager, online_save_period
        self.learning, self.count, self.log = learning, count, log
        self.publisher = node.create_lifecycle_publisher(String, "~/model", MODEL_QOS)
        self.last_learn: LastLearn | None = None

    def install(self, model: AffordanceNetwork) -> None:
        """``model`` takes over (loaded at configure, or learned); with online learning it first catches up
        on the stored cases it has not seen."""
        updates, message = self.manager.install(model)
        self._report(updates)
        if message:
            self.log("info", message)

    def learned(self, outcome: LearnOutcome) -> None:
        """A learned model replaces the model file, takes over and goes out on ~/model (AffordanceError, and
        the current model stays, when it cannot)."""
        try:
            updates, message = self.manager.install_learned(outcome)
        except OSError as exc:
            self.discard(outcome)
            raise AffordanceError(f"could not write the learned model to {self.manager.model_path} ({exc}); the "
                                  "previous model stays") from None
        self._report(updates)
        if message:
            self.log("info", message)
        self.last_learn = LastLearn(float(outcome.result.duration), float(outcome.result.log_likelihood))
        self.publish()

    @staticmethod
    def discard(outcome: LearnOutcome) -> None:
        """A learned model that is not used: its file goes."""
        outcome.file.unlink(missing_ok=True)

    def stored(self, case_id: int, record: TrialRecord) -> None:
        """A case was stored: with online learning it refines the model at once."""
        if self.manager.online is None:
            return
        self._report([self.manager.update_online(case_id, record)])
        if self.online_save_period == 0:
            self.save()

    def save(self, stopping: bool = False) -> None:
        """Write the online-updated model and publish it; not while a learn runs (it writes its own), unless
        ``stopping`` (then it is not published)."""
        if (self.learning() and not stopping) or not self.manager.unsaved:
            return
        try:
            self.manager.save_online()
        except OSError as exc:
            self.count("online_save_errors")
            self.log("error", f"could not write the online-updated model to {self.manager.model_path}: {exc}")
            return
        if not stopping:
            self.publish()

    def publish(self) -> None:
        """The current model on ~/model (while the publisher is active)."""
        model = self.manager.current_model()
        if model is not None and self.publisher.is_activated:
            self.publisher.publish(String(data=json.dumps(model.to_dict())))

    def close(self) -> None:
        """Remove the publisher."""
        self.node.destroy_lifecycle_publisher(self.publisher)

    def _report(self, updates: list[OnlineUpdate]) -> None:
        """Count and log what online updates did."""
        for update in updates:
            self.count("online_updates" if update.ok else "online_skipped")
            if update.message:
                self.log("info" if update.ok else "warning", update.message)
