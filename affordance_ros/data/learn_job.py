"""One learn from the case database: a function of plain values, run in the learning process.

``learn(job)`` reads the stored cases that fit the configuration (``training_cases``), learns
the network (``core.AffordanceLearner``), records in the model which stored cases it has seen,
writes it to a new file beside the model file (``LearnOutcome.file``, synced to disk) and returns
the model with its report. It opens the case database read-only and changes nothing else, so it
may run in any thread or process (``learn_worker`` runs it in a process of its own); the node
alone puts the new file in place of the model file (``CurrentModel.install_learned``: a learn
that outlives its node replaces nothing). A ``LearnJob`` holds everything it needs.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import STRUCTURES, AffordanceError, AffordanceLearner, AffordanceNetwork, LearnResult
from ..core.learner import learning_config
from ..core.network import current_umask, model_text
from ..core.progress import LearnProgress
from .storage import CaseStore, CaseStoreError
from .training_cases import SkippedCases, new_cases, stored_cases

LEARNED = ".learned-"  # in the name of a learned model's file until the node renames it


@dataclass(frozen=True)
class LearnJob:
    """What one learn needs: the configuration (and the file it came from, named in messages), the case
    database, the model file to write, the structure ('average', 'k2', 'mcmc', 'fixed'; empty: the configuration's
    learning block, else average), the prior's strength in
    cases and the current model (the prior when ``prior_strength`` > 0; its arcs for 'fixed')."""

    config: AffordanceNetwork
    config_path: Path
    database_path: Path
    model_path: Path
    structure: str
    prior_strength: float
    current: AffordanceNetwork | None = None

    def to_dict(self) -> dict:
        """The job as plain data (the networks as their JSON documents): what crosses to the learning process."""
        return {"config": self.config.to_dict(), "config_path": str(self.config_path),
                "database_path": str(self.database_path), "model_path": str(self.model_path),
                "structure": self.structure, "prior_strength": float(self.prior_strength),
                "current": None if self.current is None else self.current.to_dict()}

    @classmethod
    def from_dict(cls, doc: dict) -> LearnJob:
        """The job ``to_dict`` gave."""
        return cls(AffordanceNetwork.from_dict(doc["config"]), Path(doc["config_path"]), Path(doc["database_path"]),
                   Path(doc["model_path"]), doc["structure"], doc["prior_strength"],
                   None if doc["current"] is None else AffordanceNetwork.from_dict(doc["current"]))


@dataclass(frozen=True)
class LearnOutcome:
    """A learned model, written to ``file`` beside the model file (to be renamed over it), what learning did,
    and the message for the user."""

    model: AffordanceNetwork
    result: LearnResult
    message: str
    file: Path


def learn(job: LearnJob, progress: Callable[[LearnProgress], None] | None = None) -> LearnOutcome:
    """Learn from the stored cases (with ``prior_strength`` > 0 and a current model: from the cases stored
    since it, with it as the prior) and write the model to a new file beside the model file. Raises
    AffordanceError with the message for the user. ``progress`` hears of every step; it may raise
    ``core.LearningCancelled`` to stop learning, which then raises it here with nothing written."""
    started = time.monotonic()
    if job.structure not in ("", *STRUCTURES):
        raise AffordanceError(f"structure '{job.structure}' is not one of {list(STRUCTURES)}")
    prior = job.current if job.prior_strength > 0 else None
    config = learning_config(job.config, job.structure, job.current, prior)
    try:
        with CaseStore(job.database_path, read_only=True) as store:
            if prior is None:
                cases, skipped, marker = stored_cases(store, job.config, judge=config)
            else:
                cases, skipped, marker = new_cases(store, job.config, prior, judge=config)
    except CaseStoreError as exc:
        raise AffordanceError(str(exc)) from None
    if cases.n_cases == 0 and skipped:
        raise AffordanceError(f"no cases to learn from: all {len(skipped)} stored cases were skipped, as they "
                              f"do not fit the configuration {job.config_path}: {skipped.describe()}")

    def step(phase: str, iteration: int, log_likelihood: float) -> None:
        progress(LearnProgress(phase, iteration, log_likelihood, cases.n_cases, time.monotonic() - started))

    learner = AffordanceLearner(structure=job.structure or None, prior_strength=job.prior_strength).fit(
        config, cases, prior_model=prior, progress=step if progress is not None else None)
    model = learner.model_
    model.metadata["cases"] = marker
    try:
        written = write_beside(model, job.model_path)
    except OSError as exc:
        raise AffordanceError(
            f"could not write the model beside {job.model_path} ({exc}); the previous model stays") from None
    return LearnOutcome(model, learner.result_, _report(job, learner.result_, prior is not None, skipped), written)


def write_beside(model: AffordanceNetwork, model_path: Path) -> Path:
    """Write ``model`` to a new file in the folder of ``model_path`` (synced; named after it, this process and
    ``LEARNED``), with the permissions of a new file; the new file's path."""
    model_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{model_path.name}{LEARNED}{os.getpid()}-", dir=model_path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes it 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(model_text(model))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _how(result: LearnResult) -> str:
    """How a learn went, in a few words: the structure, and EM's iterations or the sample of structures."""
    if result.structures is not None:
        sample = result.structures
        return (f"average over {len(sample.members)} structures, {len(result.arcs)} arcs in the most probable, "
                f"{sample.sweeps} sweeps of {len(sample.chain_arcs)} chains, which differ by up to "
                f"{sample.disagreement:.2f} on an edge")
    return (f"{result.structure}, {len(result.arcs)} arcs, {result.iterations} EM iterations"
            f"{'' if result.converged else ', NOT converged'}")


def _report(job: LearnJob, result: LearnResult, with_prior: bool, skipped: SkippedCases) -> str:
    """What a learn did, in one message for the user."""
    return (
        f"learned from {result.num_cases} cases"
        + (f" stored since the current model, with it as a prior worth {job.prior_strength:g} cases"
           if with_prior else "")
        + f" ({_how(result)}) "
        f"in {result.duration:.2f} s; model written to {job.model_path}"
        + (f"; skipped {len(skipped)} stored cases that do not fit the configuration: {skipped.describe()}"
           if skipped else "")
        + ("; no model yet, so no prior (prior_strength applies from the next learn on)"
           if job.prior_strength > 0 and job.current is None else "")
        + "".join(f"; warning: {warning}" for warning in result.warnings))


__all__ = ["LEARNED", "LearnJob", "LearnOutcome", "LearnProgress", "learn", "write_beside"]
