"""The learner's state below ROS: the configuration, the case store, the current model, online updates.

``ModelManager`` is what the learner node owns below ROS: it loads the configuration and the
model file and opens the case database (holding it against a second learner: ``DatabaseLock``);
a learn (``learn_job.learn``, run by the node in its learning process: ``learn_worker``) is described
by ``learn_job`` from this state, and its model put in place of the model file and made current
by ``install_learned``; with online learning ``install`` refines it with every newly stored case
and ``save_online`` writes it atomically to the model file.

The model file is the node's: it remembers the file it loaded or wrote last (``FileIdentity``), and
when another program has replaced or changed it since, an online save refuses to write over it (it
says so) and a learn, which the user asked for, replaces it and says so, but only if the file is
still the one it was when that learn began: a model written meanwhile (by another tool, or another
node on the same model file) is newer than the learn's, and is kept (the learn fails, saying so).
The check and the rename are one step for every node: both are done holding an exclusive lock on
the model file's folder (``flock``, released when the process ends however it ends). A model or configuration
whose probability tables would not fit in memory is refused where it is loaded, with the size it
would need (``table_problem``).

Which stored cases a model has seen is kept in its metadata ("cases", see ``online_refiner``),
so that online updates catch up on the cases stored while a learn ran or after a restart.
"""

from __future__ import annotations

import fcntl
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core import AffordanceError, AffordanceNetwork, LearningOptions
from .database_lock import DatabaseInUse, DatabaseLock
from .learn_job import LEARNED, LearnJob, LearnOutcome
from .online_refiner import OnlineRefiner
from .pairing import PartValidator, SizeLimits
from .storage import CaseStore, CaseStoreError
from .training_cases import seen_until
from .trial import TrialRecord

# The largest probability tables a model may need, in numbers (8 bytes each): 10^8 is 800 MB.
MAX_TABLE_ENTRIES = 100_000_000


class StartupError(RuntimeError):
    """The learner cannot start (bad configuration, unusable database); the message says what to fix."""


@dataclass(frozen=True)
class OnlineUpdate:
    """What one online update did: ``ok`` False with the reason when the model could not use the case."""

    ok: bool
    message: str = ""


class ModelManager:
    """The configuration (and the ``parts`` it accepts), the case ``store``, the current ``model`` and,
    with online learning, its ``online`` refiner. Used from one thread. ``owner`` (a node's name): hold the
    database against other learners (StartupError naming the one that holds it)."""

    def __init__(self, config_path: str | Path, database_path: str | Path, model_path: str | Path,
                 online_learning: bool = False, limits: SizeLimits = SizeLimits(), owner: str | None = None):
        self.config_path, self.database_path, self.model_path = Path(config_path), Path(database_path), Path(model_path)
        _not_a_folder("database_path", self.database_path, "cases.db")
        _not_a_folder("model_path", self.model_path, "model.json")
        try:
            self.config = AffordanceNetwork.load(self.config_path, what="configuration")
            LearningOptions.from_mapping(self.config.learning)  # (a mistake there is told now, not at a learn)
            self.parts = PartValidator(self.config, limits)
            _check_tables(self.config, "the configuration")
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
        self.online_learning = online_learning
        self.model: AffordanceNetwork | None = None
        self.online: OnlineRefiner | None = None
        self.model_file: FileIdentity | None = None  # the model file as the node loaded or wrote it last
        self.learn_base: FileIdentity | None = None  # the model file as it was when the current learn began
        _remove_leftovers(self.model_path)

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
            _check_tables(model, "it")
        except AffordanceError as exc:
            return (f"not using the model in {self.model_path}: {exc}. Predictions wait for the next ~/learn, "
                    "which replaces that file.")
        self.model, self.model_file = model, FileIdentity.of(self.model_path)
        return None

    def current_model(self) -> AffordanceNetwork | None:
        """The model in use, with every online update so far."""
        if self.online is not None:
            self.model = self.online.model
        return self.model

    def learn_job(self, structure: str, prior_strength: float) -> LearnJob:
        """A learn from the stored cases (``learn_job.learn``), with the current model (the prior when
        ``prior_strength`` > 0), writing the model file."""
        self.learn_base = FileIdentity.of(self.model_path)
        return LearnJob(self.config, self.config_path, self.database_path, self.model_path, structure,
                        float(prior_strength), self.current_model())

    def install_learned(self, outcome: LearnOutcome) -> tuple[list[OnlineUpdate], str]:
        """A learned model replaces the model file (its file is renamed over it: atomic) and takes over
        (``install``). AffordanceError, and nothing changed, when its tables are too large or when the model
        file was written by someone else while the learn ran (it is newer than the learn: it stays)."""
        try:
            _check_tables(outcome.model, "the learned model")
            with _folder_locked(self.model_path):
                on_disk = FileIdentity.of(self.model_path)
                if on_disk not in (self.model_file, self.learn_base):
                    raise AffordanceError(
                        f"the model file {self.model_path} was written by another program while this learn ran, so "
                        "it is newer than what was learned and stays as it is; nothing was installed (restart the "
                        "node to use that file, or call ~/learn again to replace it)")
                changed = self._changed_on_disk()
                os.replace(outcome.file, self.model_path)
                _sync_folder(self.model_path)
                self.model_file = FileIdentity.of(self.model_path)
        except AffordanceError:
            outcome.file.unlink(missing_ok=True)
            raise
        updates, message = self.install(outcome.model)
        note = f"{changed}; the learned model replaced it" if changed else ""
        return updates, "; ".join(m for m in (note, message) if m)

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
        """Write the online-updated model to the model file (atomically). Raises OSError (ModelFileChanged
        when another program changed the model file since the node loaded or wrote it: it is not touched)."""
        if not self.unsaved:
            return
        with _folder_locked(self.model_path):
            changed = self._changed_on_disk()
            if changed:
                raise ModelFileChanged(f"{changed}, so online updates are not written over it (restart the node "
                                       "to use that file, or call ~/learn to replace it)")
            self.current_model().save(self.model_path)
            self.model_file = FileIdentity.of(self.model_path)
        self.online.unsaved = False

    def _changed_on_disk(self) -> str:
        """'' if the model file is as the node loaded or wrote it last, else what happened to it."""
        if FileIdentity.of(self.model_path) == self.model_file:
            return ""
        return f"the model file {self.model_path} was " + ("removed" if not self.model_path.exists() else
                                                          "replaced or changed by another program")

    def close(self) -> None:
        self.store.close()
        if self.lock is not None:
            self.lock.release()


class ModelFileChanged(OSError):
    """The model file is not the one the node loaded or wrote last."""


@dataclass(frozen=True)
class FileIdentity:
    """A file as it was: device, inode, size and modification time (an atomic rename makes a new inode)."""

    device: int
    inode: int
    size: int
    modified: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity | None:
        try:
            status = os.stat(path)
        except FileNotFoundError:
            return None
        return cls(status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _not_a_folder(parameter: str, path: Path, example: str) -> None:
    """StartupError for a folder given as a file (SQLite would say 'unable to open database file'; a learn could
    never write a model there)."""
    if path.is_dir():
        raise StartupError(f"{parameter} '{path}' is a folder, not a file: give the file's path in it "
                           f"(e.g. {path / example})")


def table_problem(network: AffordanceNetwork, limit: int = MAX_TABLE_ENTRIES) -> str:
    """'' if the probability tables of ``network`` (each variable's values times its parents') fit in
    ``limit`` numbers, else the size they would need."""
    cards = {v.name: len(v.values) if v.values else 1 for v in network.variables}  # (values not known yet: 1)
    sizes = {v.name: cards[v.name] * math.prod(cards[p] for p in v.parents or ()) for v in network.variables}
    total = sum(sizes.values())
    if total <= limit:
        return ""
    largest = max(sizes, key=sizes.get)
    return (f"its probability tables would need {total:,} numbers ({total * 8 / 1e9:,.1f} GB; the largest, of "
            f"'{largest}' given {list(network[largest].parents or ())}, {sizes[largest]:,}), more than the {limit:,} "
            "the node allows: use fewer values or fewer parents")


def _check_tables(network: AffordanceNetwork, what: str) -> None:
    problem = table_problem(network)
    if problem:
        raise AffordanceError(f"{what}: {problem}")


@contextmanager
def _folder_locked(path: Path):
    """An exclusive ``flock`` on the folder of ``path`` while the block runs: what the nodes writing that
    model file check and rename, they do one at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)


def _sync_folder(path: Path) -> None:
    """The rename of ``path`` made durable."""
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _remove_leftovers(model_path: Path) -> None:
    """Remove learned models' files a learning process that was killed left beside the model file."""
    for leftover in model_path.parent.glob(f".{model_path.name}{LEARNED}*"):
        pid = leftover.name[len(f".{model_path.name}{LEARNED}"):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            leftover.unlink(missing_ok=True)


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


__all__ = ["MAX_TABLE_ENTRIES", "FileIdentity", "ModelFileChanged", "ModelManager", "OnlineUpdate", "StartupError",
           "config_mismatch", "table_problem"]
