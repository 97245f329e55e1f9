"""The learner's state below ROS: the configuration, the case store and the current model.

``ModelManager`` is what the learner node owns below ROS: it loads the configuration (and the
``parts`` of trials it accepts), opens the case database (holding it against a second learner:
``DatabaseLock``) and holds the model in use (``current``: ``current_model.CurrentModel``, which
loads, learns, refines and saves it). A configuration whose probability tables would not fit in
memory is refused with the size it would need (``current_model.table_problem``).
"""

from __future__ import annotations

from pathlib import Path

from ..core import AffordanceError, AffordanceNetwork, LearningOptions
from .current_model import CurrentModel, check_tables, remove_leftovers
from .database_lock import DatabaseInUse, DatabaseLock
from .pairing import PartValidator, SizeLimits
from .storage import CaseStore, CaseStoreError


class StartupError(RuntimeError):
    """The learner cannot start (bad configuration, unusable database); the message says what to fix."""


class ModelManager:
    """The configuration (and the ``parts`` it accepts), the case ``store`` and the ``current`` model, which
    online learning refines with every stored case. Used from one thread. ``owner`` (a node's name): hold the
    database against other learners (StartupError naming the one that holds it)."""

    def __init__(self, config_path: str | Path, database_path: str | Path, model_path: str | Path,
                 online_learning: bool = False, limits: SizeLimits = SizeLimits(), owner: str | None = None):
        self.config_path = Path(config_path)
        self.database_path = Path(database_path)
        self.model_path = Path(model_path)
        _not_a_folder("database_path", self.database_path, "cases.db")
        _not_a_folder("model_path", self.model_path, "model.json")
        try:
            self.config = AffordanceNetwork.load(self.config_path, what="configuration")
            LearningOptions.from_mapping(self.config.learning)  # (a mistake there is told now, not at a learn)
            self.parts = PartValidator(self.config, limits)
            check_tables(self.config, "the configuration")
        except (AffordanceError, ValueError) as exc:
            raise StartupError(f"config_path '{self.config_path}': {exc}") from None
        try:
            self.lock = DatabaseLock(self.database_path, owner) if owner else None
        except DatabaseInUse as exc:
            raise StartupError(str(exc)) from None
        except OSError as exc:
            raise StartupError(f"database_path '{self.database_path}': cannot make or lock its lock file "
                               f"{exc.filename or ''} ({exc.strerror or exc}): is the folder writable?") from None
        try:
            self.store = CaseStore(self.database_path, database_lock=self.lock)
        except CaseStoreError as exc:
            if self.lock is not None:
                self.lock.release()
            raise StartupError(str(exc)) from None
        self.current = CurrentModel(self.config, self.config_path, self.store, self.model_path, online_learning)
        remove_leftovers(self.model_path)

    def close(self) -> None:
        self.store.close()
        if self.lock is not None:
            self.lock.release()

    def __enter__(self) -> ModelManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _not_a_folder(parameter: str, path: Path, example: str) -> None:
    """StartupError for a folder given as a file (SQLite would say 'unable to open database file'; a learn could
    never write a model there)."""
    if path.is_dir():
        raise StartupError(f"{parameter} '{path}' is a folder, not a file: give the file's path in it "
                           f"(e.g. {path / example})")


__all__ = ["ModelManager", "StartupError"]
