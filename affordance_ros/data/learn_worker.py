"""Learning in a process of its own, which dies with the node and never writes the model file.

A learn is pure Python and numpy work for seconds; in a thread of the node's process it would hold
the interpreter lock often enough to delay every ~/predict. Here it
runs in a child process (``python -m affordance_ros.data.learn_worker``: a fresh interpreter,
nothing of the node's DDS threads inherited), kept for the next learn and restarted when it is
found dead. What it gets is a ``learn_job.LearnJob`` as plain data (the configuration and the current
model as JSON, the paths); it runs ``learn_job.learn`` (the case database opened read-only, the model
written to a file of its own beside the model file, which the node renames over the model file,
or not: ``CurrentModel.install_learned``) and sends the ``LearnOutcome`` back. It runs at a lower
CPU priority (nice +10): on a busy machine the node's answers come first.

Node and worker talk over one socket pair (pickled messages): the job and "cancel" one way,
progress and the outcome (or the error) the other. The worker reads its end in a thread of its
own; when the node's process ends, however it ends (SIGKILL included), the kernel closes the
node's end, that read sees the end of the stream, and the worker exits at once: it cannot finish
a learn for a node that is gone. (``prctl(PR_SET_PDEATHSIG)`` would do the same for a child of
a *thread*: the signal follows the thread that started the child, and the worker is restarted
from whichever thread finds it dead; the socket follows the process.) Needing no semaphore (no
``multiprocessing`` queue or event), it starts no resource tracker either.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection

from ..core import AffordanceError, LearningCancelled
from .learn_job import LearnJob, LearnOutcome, LearnProgress, learn

NICENESS = 10
POLL = 0.05            # seconds between looks at the worker while it learns
PROGRESS_PERIOD = 0.02  # seconds between progress messages of one phase (every change of phase is sent)


class LearnWorker:
    """One worker process for learning, started by ``start`` (or the first learn), restarted when found dead,
    stopped by ``close``. ``learn`` may be called from any thread, one learn at a time."""

    def __init__(self):
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()       # starting and stopping the process
        self._sending = threading.Lock()    # a job and a cancel may be sent from two threads
        self._closes = 0                    # how many times ``close`` stopped the process

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> int:
        """Start the process if it does not run (its imports take a second or two, which it spends while the
        caller goes on); its process id."""
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self._process.pid
            self._stop()
            ours, theirs = socket.socketpair()
            with theirs:
                # a session of its own: a Ctrl-C at the terminal is the node's to handle (the worker ends with it)
                self._process = subprocess.Popen([sys.executable, "-m", __name__, str(theirs.fileno())],
                                                 pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                                 start_new_session=True)
            self._conn = Connection(ours.detach())
            return self._process.pid

    def learn(self, job: LearnJob, progress=None) -> LearnOutcome:
        """``learn_job.learn(job)`` in the worker process; blocks the calling thread (not the interpreter).
        ``progress(LearnProgress)`` hears of the steps in this thread; it may raise ``LearningCancelled``,
        which stops the worker at its next step (nothing learned) and is raised here. A worker that died
        while idle is replaced (also when it is found dead only as the job goes out); one that dies while
        learning fails the learn (AffordanceError); one stopped by ``close`` meanwhile, LearningCancelled."""
        closes = self._closes
        for attempt in (1, 2):
            self.start()
            conn, process = self._conn, self._process
            try:
                self._send(("learn", job.to_dict()))
                return self._wait(conn, process, progress)
            except (_Ended, OSError) as ended:  # OSError: from _send, so the job never reached the worker
                with self._lock:
                    if self._process is process:
                        self._stop()
                if self._closes != closes:  # (not started again for a learn that was stopped)
                    raise LearningCancelled("the learning process was stopped") from None
                if getattr(ended, "taken", False) or attempt == 2:
                    raise AffordanceError("the learning process ended unexpectedly (out of memory? killed?); the "
                                          "previous model stays") from None
        raise AssertionError("unreachable")

    def _wait(self, conn: Connection, process: subprocess.Popen, progress) -> LearnOutcome:
        """The outcome of the job sent on ``conn``; _Ended if the process ends first."""
        cancelled, taken = None, False
        while True:
            try:
                if not conn.poll(POLL):
                    if process.poll() is not None:
                        raise EOFError
                    continue
                kind, value = conn.recv()
            except (EOFError, OSError):
                raise _Ended(taken) from None
            if kind == "taken":
                taken = True
            elif kind == "progress":
                try:
                    if progress is not None and cancelled is None:
                        progress(value)
                except LearningCancelled as exc:
                    cancelled = exc
                    self.cancel()
            elif kind == "done":
                return value
            else:
                raise cancelled if cancelled is not None and isinstance(value, LearningCancelled) else value

    def cancel(self) -> None:
        """Ask a learn that is running to stop at its next step."""
        try:
            self._send(("cancel", None))
        except (OSError, AttributeError):  # no worker, or it ended: nothing runs
            pass

    def close(self) -> None:
        """Stop the worker process, a learn it is running included (nothing is then learned: LearningCancelled
        in ``learn``); a later learn starts another."""
        with self._lock:
            self._closes += 1
            self._stop()

    def _send(self, message) -> None:
        with self._sending:
            self._conn.send(message)

    def _stop(self) -> None:
        process = self._process
        conn = self._conn
        self._process = None
        self._conn = None
        if conn is not None:
            conn.close()  # the worker sees the end of its stream and exits
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait(10.0)


class _Ended(Exception):
    """The worker process ended before the outcome came; ``taken``: after it had taken the job."""

    def __init__(self, taken: bool):
        super().__init__(taken)
        self.taken = taken


def serve(fd: int) -> int:
    """The worker process: learn the jobs that come on the socket ``fd``, until the node's end closes."""
    conn = Connection(fd)
    try:
        os.nice(NICENESS)
    except OSError:
        pass
    jobs, cancel = queue.Queue(), threading.Event()

    def listen() -> None:  # the node's messages; the end of the stream (the node is gone) ends this process
        while True:
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                os._exit(0)
            if kind == "cancel":
                cancel.set()
            else:
                jobs.put(value)

    threading.Thread(target=listen, name="affordance_learn_node", daemon=True).start()
    while True:
        job = jobs.get()
        cancel.clear()
        conn.send(("taken", None))
        try:
            conn.send(("done", learn(LearnJob.from_dict(job), _progress(conn, cancel))))
        except Exception as exc:  # noqa: BLE001 (the node raises it: AffordanceError, LearningCancelled, a bug)
            conn.send(("error", exc))


def _progress(conn: Connection, cancel: threading.Event):
    """The progress callback of one learn in the worker: stops it when cancelled, sends the steps (every
    change of phase, else at most every ``PROGRESS_PERIOD`` seconds)."""
    last = {"phase": None, "time": 0.0}

    def progress(step: LearnProgress) -> None:
        if cancel.is_set():
            raise LearningCancelled("cancelled")
        now = time.monotonic()
        if step.phase != last["phase"] or now - last["time"] >= PROGRESS_PERIOD:
            last.update(phase=step.phase, time=now)
            conn.send(("progress", step))
    return progress


__all__ = ["LearnWorker", "serve"]

if __name__ == "__main__":
    raise SystemExit(serve(int(sys.argv[1])))
