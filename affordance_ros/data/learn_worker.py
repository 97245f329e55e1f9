"""Learning in a worker process, so that the node's interpreter keeps answering while a learn runs.

A learn is pure Python and numpy work for seconds; in a thread of the node's process it holds
the interpreter lock often enough to delay every ~/predict by tens of milliseconds. Here it
runs in a process of its own (the "spawn" context: a fresh interpreter, nothing of the
node's DDS threads inherited), kept for the next learn. What it gets is a ``learn.LearnJob`` as
plain data (the configuration and the current model as JSON, the paths); it runs ``learn.learn``
(the case database opened read-only, the model file written atomically) and sends the
``LearnOutcome`` back. The worker runs at a lower CPU priority (nice +10): on a busy machine the
node's answers come first.

Progress and cancel cross the process boundary through a queue and an event handed to the
worker when it starts: the worker puts every ``LearnProgress`` on the queue and stops (raising
``LearningCancelled``, nothing written) at its next step once the event is set; the calling
thread passes the steps to its own ``progress`` callback, which may ask to cancel.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from ..core import AffordanceError, LearningCancelled
from .learn import LearnJob, LearnOutcome, LearnProgress, learn

NICENESS = 10
POLL = 0.05  # seconds between looks at the worker's progress queue

# In the worker process: where its progress goes and how it is told to stop (set by ``_background``).
_steps = None
_cancel = None


def run_job(job: dict) -> LearnOutcome:
    """What the worker process runs: ``learn`` of the job (``LearnJob.to_dict``), its progress on the queue."""
    def progress(step: LearnProgress) -> None:
        if _cancel is not None and _cancel.is_set():
            raise LearningCancelled("cancelled")
        if _steps is not None:
            _steps.put(step)

    return learn(LearnJob.from_dict(job), progress)


def _ready() -> int:
    return os.getpid()


def _background(steps=None, cancel=None) -> None:
    """The worker's initializer: where progress goes, the cancel event, and a lower CPU priority, so that
    the node's answers come first on a busy machine."""
    global _steps, _cancel
    _steps, _cancel = steps, cancel
    try:
        os.nice(NICENESS)
    except OSError:
        pass


class LearnWorker:
    """One worker process for learning, started on first use (or ``start``) and kept until ``close``."""

    def __init__(self, context: str = "spawn"):
        self._context = multiprocessing.get_context(context)
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._steps = self._cancel = None

    def start(self):
        """Start the process now (imports take a second or two) rather than at the first learn; a future
        that is done once it runs, with the process id."""
        with self._lock:
            if self._pool is None:
                self._steps, self._cancel = self._context.Queue(), self._context.Event()
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=self._context, initializer=_background,
                                                 initargs=(self._steps, self._cancel))
            pool = self._pool
        return pool.submit(_ready)

    def learn(self, job: LearnJob, progress=None) -> LearnOutcome:
        """``learn.learn(job)`` in the worker process; blocks the calling thread (not the interpreter).
        ``progress(LearnProgress)`` hears of every step in this thread; it may raise ``LearningCancelled``,
        which stops the worker at its next step (nothing written) and is raised here."""
        try:
            self.start()
            self._cancel.clear()
            self._drain(None)  # steps a cancelled learn left behind
            future = self._pool.submit(run_job, job.to_dict())
            cancelled = None
            while not future.done():
                try:
                    self._drain(progress, timeout=POLL)
                except LearningCancelled as exc:
                    cancelled = exc
                    self._cancel.set()
            if cancelled is not None and future.exception() is not None:
                raise cancelled  # (the worker stopped at its next step; a learn that finished first stands)
            if cancelled is None:
                self._drain(progress)
            return future.result()
        except BrokenProcessPool:
            with self._lock:
                self._pool = None   # the next learn starts a new process
            raise AffordanceError("the learning process ended unexpectedly (out of memory?); the previous "
                                  "model stays") from None

    def _drain(self, progress, timeout: float = 0.0) -> None:
        """Hand the worker's steps so far to ``progress`` (waiting up to ``timeout`` for the first)."""
        while True:
            try:
                step = self._steps.get(timeout=timeout) if timeout else self._steps.get_nowait()
            except (queue.Empty, OSError, ValueError):
                return
            timeout = 0.0
            if progress is not None:
                progress(step)

    def cancel(self) -> None:
        """Ask a learn that is running to stop at its next step."""
        if self._cancel is not None:
            self._cancel.set()

    def close(self) -> None:
        """Stop the worker process, a learn it is running included (its model file is then not written)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            processes = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                if process.is_alive():
                    process.terminate()
                process.join(5.0)


__all__ = ["LearnWorker", "run_job"]
