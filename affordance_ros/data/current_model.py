"""The learner's current model, in one place: loaded or learned, refined online, written to the model file.

``CurrentModel`` holds the model in use (``model``, with every online update so far) and everything done to
it: ``load`` the model file at start-up; ``learn_job`` describes a learn from the stored cases (run by the
node in its learning process, ``learn_worker``), with this model as its prior; ``install_learned`` renames the
learned model's file over the model file and makes it current; ``install`` makes a model current (with online
learning, the updates restart from it, catching up on the stored cases it has not seen); ``update_online``
refines it with one stored case and ``save_online`` writes it atomically to the model file.

``OnlineRefiner`` is its online part: stepwise EM (``core.online.OnlineEM``) started from a learned model and
worth as many cases as that model embodies (the cases it was learned from, its prior's worth when a prior
carried an earlier model, earlier online updates), so that each new case refines it instead of replacing it.
Structure and sensor models stay as learned. The posterior draws of a model that has them take every case
too; the metadata entry "posterior" counts these ``online_updates``.

The model file is the node's: it remembers the file it loaded or wrote last (``FileIdentity``). When another
program has replaced or changed it since, an online save refuses to write over it (``ModelFileChanged``), and
a learn, which the user asked for, replaces it and says so, but only if the file is still the one it was when
that learn began: a model written meanwhile is newer than the learn's, and is kept (the learn fails, saying
so). Check and rename are one step for every node: both hold an exclusive ``flock`` on the model file's
folder. A model whose probability tables would not fit in memory is refused with the size it would need
(``table_problem``).

Which stored cases a model has seen is kept in its metadata, so that a restart (or a learn that took a while)
catches up on the cases stored after them::

    "cases":  {"database": path, "count": cases seen, "last_id": case id of the last one seen,
               "last_trial_id": its trial_id}
    "online": {"updates": online updates so far, "num_cases": what the model is worth in cases}
"""

from __future__ import annotations

import fcntl
import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core import AffordanceError, AffordanceNetwork
from ..core.online import OnlineEM
from .learn_job import LEARNED, LearnJob, LearnOutcome
from .storage import CaseStore
from .training_cases import seen_until
from .trial import TrialRecord, case_set

# The largest probability tables a model may need, in numbers (8 bytes each): 10^8 is 800 MB.
MAX_TABLE_ENTRIES = 100_000_000


@dataclass(frozen=True)
class OnlineUpdate:
    """What one online update did: ``ok`` False with the reason when the model could not use the case."""

    ok: bool
    message: str = ""


class CurrentModel:
    """The model in use for ``config`` (read from ``config_path``), learned from ``store``, kept in ``model_path``;
    refined by every stored case when ``online_learning``. Used from one thread."""

    def __init__(self, config: AffordanceNetwork, config_path: Path, store: CaseStore, model_path: Path,
                 online_learning: bool = False):
        self.config = config
        self.config_path = config_path
        self.store = store
        self.model_path = model_path
        self.online_learning = online_learning
        self.base: AffordanceNetwork | None = None  # the model as loaded or learned, before online updates
        self.online: OnlineRefiner | None = None
        self.model_file: FileIdentity | None = None  # the model file as the node loaded or wrote it last
        self.learn_base: FileIdentity | None = None  # the model file as it was when the current learn began

    @property
    def model(self) -> AffordanceNetwork | None:
        """The model in use, with every online update so far (None before the first learn)."""
        return self.online.model if self.online is not None else self.base

    def load(self) -> str | None:
        """Load the model file if there is one; returns why it is not used, or None (``install`` then starts online
        learning from it)."""
        if not self.model_path.exists():
            return None
        try:
            model = AffordanceNetwork.load(self.model_path)
            if not model.parameterised:
                raise AffordanceError("it has no learned parameters")
            mismatch = config_mismatch(model, self.config)
            if mismatch:
                raise AffordanceError(f"it does not fit the configuration: {mismatch}")
            check_tables(model, "it")
        except AffordanceError as exc:
            return (f"not using the model in {self.model_path}: {exc}. Predictions wait for the next ~/learn, "
                    "which replaces that file.")
        self.base = model
        self.model_file = FileIdentity.of(self.model_path)
        return None

    def learn_job(self, structure: str, prior_strength: float) -> LearnJob:
        """A learn from the stored cases (``learn_job.learn``), with the current model (the prior when
        ``prior_strength`` > 0), writing the model file."""
        self.learn_base = FileIdentity.of(self.model_path)
        return LearnJob(self.config, self.config_path, self.store.path, self.model_path, structure,
                        float(prior_strength), self.model)

    def install_learned(self, outcome: LearnOutcome) -> tuple[list[OnlineUpdate], str]:
        """A learned model replaces the model file (its file is renamed over it: atomic) and takes over
        (``install``). AffordanceError, and nothing changed, when its tables are too large or when the model
        file was written by someone else while the learn ran (it is newer than the learn: it stays)."""
        try:
            check_tables(outcome.model, "the learned model")
            with folder_locked(self.model_path):
                on_disk = FileIdentity.of(self.model_path)
                if on_disk not in (self.model_file, self.learn_base):
                    raise AffordanceError(
                        f"the model file {self.model_path} was written by another program while this learn ran, so "
                        "it is newer than what was learned and stays as it is; nothing was installed (restart the "
                        "node to use that file, or call ~/learn again to replace it)")
                changed = self.changed_on_disk()
                os.replace(outcome.file, self.model_path)
                sync_folder(self.model_path)
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
        self.base = model
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
        with folder_locked(self.model_path):
            changed = self.changed_on_disk()
            if changed:
                raise ModelFileChanged(f"{changed}, so online updates are not written over it (restart the node "
                                       "to use that file, or call ~/learn to replace it)")
            self.model.save(self.model_path)
            self.model_file = FileIdentity.of(self.model_path)
        self.online.unsaved = False

    def changed_on_disk(self) -> str:
        """'' if the model file is as the node loaded or wrote it last, else what happened to it."""
        if FileIdentity.of(self.model_path) == self.model_file:
            return ""
        return f"the model file {self.model_path} was " + ("removed" if not self.model_path.exists() else
                                                          "replaced or changed by another program")

    @staticmethod
    def discard(outcome: LearnOutcome) -> None:
        """A learned model that is not used: its file goes."""
        outcome.file.unlink(missing_ok=True)


class ModelFileChanged(OSError):
    """The model file is not the one the node loaded or wrote last."""


def model_weight(model: AffordanceNetwork) -> float:
    """How many cases the model's CPTs are worth."""
    online = model.metadata.get("online") or {}
    if "num_cases" in online:
        return float(online["num_cases"])
    learned = model.metadata.get("learned") or {}
    return float(learned.get("num_cases", 0)) + float(learned.get("prior_strength") or 0.0)


class OnlineRefiner:
    """A model updated case by case from ``model``; ``model`` builds the updated network when asked."""

    def __init__(self, model: AffordanceNetwork):
        learned = model.metadata.get("learned") or {}
        online = model.metadata.get("online") or {}
        self.num_cases = model_weight(model)
        self.updates = int(online.get("updates", 0))
        self.session_updates = 0
        self.cases = dict(model.metadata.get("cases") or {})
        self._em = OnlineEM(model, prior=float(learned.get("prior", 1.0)), start_weight=self.num_cases)
        self._base = model
        self._model = model
        self._stale = False  # updates not yet in ``_model``
        self.unsaved = False  # updates not yet written to the model file

    def update(self, case_id: int, record: TrialRecord) -> None:
        """One stored case. Raises AffordanceError (e.g. a sensor the model does not know) and then changes
        nothing."""
        self._em.partial_fit(case_set(self._base, [record]))
        self.num_cases += 1
        self.updates += 1
        self.session_updates += 1
        self.cases.update(count=int(self.cases.get("count", 0)) + 1, last_id=int(case_id),
                          last_trial_id=record.trial_id)
        self._stale = True
        self.unsaved = True

    @property
    def model(self) -> AffordanceNetwork:
        """The model with every update so far (built once per batch of updates)."""
        if self._stale:
            model = self._em.model_
            model.metadata = {**self._base.metadata, **({"posterior": model.metadata["posterior"]}
                                                        if "posterior" in model.metadata else {})}
            model.metadata["online"] = {"updates": self.updates, "num_cases": self.num_cases,
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            model.metadata["cases"] = dict(self.cases)
            self._model = model
            self._stale = False
        return self._model


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


def check_tables(network: AffordanceNetwork, what: str) -> None:
    """AffordanceError, naming ``what``, if the probability tables of ``network`` would not fit."""
    problem = table_problem(network)
    if problem:
        raise AffordanceError(f"{what}: {problem}")


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


@contextmanager
def folder_locked(path: Path):
    """An exclusive ``flock`` on the folder of ``path`` while the block runs: the nodes writing that model file
    check and rename it one at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)


def sync_folder(path: Path) -> None:
    """The rename of ``path`` made durable."""
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def remove_leftovers(model_path: Path) -> None:
    """Remove learned models' files a learning process that was killed left beside the model file."""
    for leftover in model_path.parent.glob(f".{model_path.name}{LEARNED}*"):
        pid = leftover.name[len(f".{model_path.name}{LEARNED}"):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            leftover.unlink(missing_ok=True)


__all__ = ["MAX_TABLE_ENTRIES", "CurrentModel", "FileIdentity", "ModelFileChanged", "OnlineRefiner", "OnlineUpdate",
           "config_mismatch", "model_weight", "table_problem"]
