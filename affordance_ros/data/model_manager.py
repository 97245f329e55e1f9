"""The learner's state below ROS: the configuration, the case store, the current model, online updates.

``ModelManager`` is what the learner node owns below ROS: it loads the configuration and the
model file and opens the case database; a learn (``learn.learn``, run by the node in its
learning process: ``learn_worker``) is described by ``learn_job`` from this state, and its
model made current by ``install``, which (with online learning) refines it with every newly
stored case and writes it atomically to the model file on ``save_online``.

Which stored cases a model has seen is kept in its metadata ("cases", see ``online_refiner``),
so that online updates catch up on the cases stored while a learn ran or after a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core import AffordanceError, AffordanceNetwork
from .learn import LearnJob
from .online_refiner import OnlineRefiner
from .pairing import PartValidator, SizeLimits
from .storage import CaseStore, CaseStoreError
from .training_cases import seen_until
from .trial import TrialRecord


class StartupError(RuntimeError):
    """The learner cannot start (bad configuration, unusable database); the message says what to fix."""


@dataclass(frozen=True)
class OnlineUpdate:
    """What one online update did: ``ok`` False with the reason when the model could not use the case."""

    ok: bool
    message: str = ""


class ModelManager:
    """The configuration (and the ``parts`` it accepts), the case ``store``, the current ``model`` and,
    with online learning, its ``online`` refiner. Used from one thread."""

    def __init__(self, config_path: str | Path, database_path: str | Path, model_path: str | Path,
                 online_learning: bool = False, limits: SizeLimits = SizeLimits()):
        self.config_path, self.database_path, self.model_path = Path(config_path), Path(database_path), Path(model_path)
        try:
            self.config = AffordanceNetwork.load(self.config_path, what="configuration")
            self.parts = PartValidator(self.config, limits)
        except (AffordanceError, ValueError) as exc:
            raise StartupError(f"config_path '{self.config_path}': {exc}") from None
        try:
            self.store = CaseStore(self.database_path)
        except CaseStoreError as exc:
            raise StartupError(str(exc)) from None
        self.online_learning = online_learning
        self.model: AffordanceNetwork | None = None
        self.online: OnlineRefiner | None = None

    def load(self) -> str | None:
        """Load the model file if there is one; returns why it is not used, or None."""
        if not self.model_path.exists():
            return None
        try:
            model = AffordanceNetwork.load(self.model_path)
            if not model.parameterised:
                raise AffordanceError("it has no learned parameters")
            mismatch = config_mismatch(model, self.config)
            if mismatch:
                raise AffordanceError(f"it does not fit the configuration: {mismatch}")
        except AffordanceError as exc:
            return (f"not using the model in {self.model_path}: {exc}. Predictions wait for the next ~/learn, "
                    "which replaces that file.")
        self.model = model
        return None

    def current_model(self) -> AffordanceNetwork | None:
        """The model in use, with every online update so far."""
        if self.online is not None:
            self.model = self.online.model
        return self.model

    def learn_job(self, structure: str, prior_strength: float) -> LearnJob:
        """A learn from the stored cases (``learn.learn``), with the current model (the prior when
        ``prior_strength`` > 0), writing the model file."""
        return LearnJob(self.config, self.config_path, self.database_path, self.model_path, structure,
                        float(prior_strength), self.current_model())

    def install(self, model: AffordanceNetwork) -> tuple[list[OnlineUpdate], str]:
        """``model`` takes over; with online learning, updates (re)start from it, first with the stored
        cases it has not seen (stored while a learn ran, or after the model file was last written).
        Returns those updates and what to tell the user ('' for nothing)."""
        self.model = model
        self.online = None
        if not self.online_learning:
            return [], ""
        self.online = OnlineRefiner(model)
        seen = seen_until(self.store, model)
        if seen is None:
            return [], ("online learning starts from the current model; it does not say which stored cases it "
                        "has seen, so none are caught up on")
        updates = [self.update_online(case_id, record) for case_id, record in self.store.numbered_records(after=seen)]
        caught_up = sum(u.ok for u in updates)
        return updates, (f"online learning caught up on {caught_up} stored cases the model had not seen"
                         if caught_up else "")

    def update_online(self, case_id: int, record: TrialRecord) -> OnlineUpdate:
        """One newly stored case refines the model (when online learning runs)."""
        try:
            self.online.update(case_id, record)
        except AffordanceError as exc:
            return OnlineUpdate(False, f"online learning skipped trial '{record.trial_id}': {exc}")
        return OnlineUpdate(True)

    @property
    def unsaved(self) -> bool:
        """Online updates not yet written to the model file."""
        return self.online is not None and self.online.unsaved

    def save_online(self) -> None:
        """Write the online-updated model to the model file (atomically). Raises OSError."""
        if not self.unsaved:
            return
        self.current_model().save(self.model_path)
        self.online.unsaved = False

    def close(self) -> None:
        self.store.close()


def config_mismatch(model: AffordanceNetwork, config: AffordanceNetwork) -> str:
    """'' if the model has the configuration's variables, groups, values and sensors, else what differs."""
    if model.names != config.names:
        return f"variables {list(model.names)}, configured {list(config.names)}"
    for m, c in zip(model.variables, config.variables):
        if m.group != c.group or (c.values is not None and m.values != c.values):
            return f"variable '{c.name}' differs (group, values)"
        if (m.sensor and m.sensor.names) != (c.sensor and c.sensor.names):
            return f"the sensor of '{c.name}' differs"
    return ""


__all__ = ["ModelManager", "OnlineUpdate", "StartupError", "config_mismatch"]
