"""Progress on stderr, only on a terminal unless asked for: a one-line bar for long reads, and the steps of a
learn; a command's report on stdout, line by line."""

from __future__ import annotations

import math
import os
import sys
import time


def report_line_by_line() -> None:
    """stdout for a command's report: flushed at every line also when it is a pipe or a file
    (`affordance-ros evaluate ... | tee log`), where Python would hold the report back until the
    command ends (unless PYTHONUNBUFFERED is set); and when its reader goes away (`... | head -1`)
    the rest of the report goes to /dev/null and the command carries on to its end (its files
    written, its exit status its own)."""
    if isinstance(sys.stdout, _ReportStream) or not hasattr(sys.stdout, "reconfigure"):
        return
    sys.stdout.reconfigure(line_buffering=True)
    sys.stdout = _ReportStream(sys.stdout)


class _ReportStream:
    """A text stream whose writes and flushes never fail for a closed pipe: then its file descriptor is pointed
    at /dev/null (what is still buffered goes there too)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _reader_gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)


class ProgressBar:
    """``update(done, total)`` redraws at most every ``interval`` seconds; ``close()`` ends the line.

    ``enabled``: None shows it only when ``stream`` is a terminal.
    """

    def __init__(self, what: str, stream=None, enabled: bool | None = None, interval: float = 0.1, width: int = 30):
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.interval = interval
        self.width = width
        self._last_draw = -float("inf")
        self._drawn = False
        self._state = (0, None)

    def update(self, done: int, total: int | None = None) -> None:
        self._state = (done, total)
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last_draw >= self.interval:
            self._last_draw = now
            self._draw()

    def close(self) -> None:
        if self.enabled and (self._drawn or self._state[0]):
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False

    def line(self) -> str:
        done, total = self._state
        if total:
            fraction = min(1.0, done / total)
            filled = int(round(fraction * self.width))
            return f"{self.what} [{'#' * filled}{'.' * (self.width - filled)}] {100 * fraction:3.0f}% {done}/{total}"
        return f"{self.what} {done}"

    def _draw(self) -> None:
        self.stream.write("\r" + self.line())
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class LearnProgress:
    """The progress of a learn on stderr: ``learn: structure, step 1200, score -5231.118 (3.2 s)``.

    On a terminal the line is redrawn in place (at most every ``interval`` seconds); in a log (``--progress``
    with stderr redirected) a line is written at every change of phase and at most once every ``log_interval``
    seconds within one, so that MCMC's thousands of steps stay a few lines. A score that is not known yet
    (NaN) is left out. ``enabled``: None shows it only when ``stream`` is a terminal.
    """

    # what one step of a phase is (core.progress: K2 variables placed, MCMC samples, EM iterations, sampler sweeps)
    STEPS = {"structure": "step", "parameters": "EM iteration", "posterior": "sweep"}
    SCORES = {"structure": "score", "parameters": "log-likelihood"}

    def __init__(self, stream=None, enabled: bool | None = None, interval: float = 0.1, log_interval: float = 1.0):
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.in_place = _is_terminal(self.stream)
        self.interval = interval if self.in_place else log_interval
        self._started = time.monotonic()
        self._phase = None
        self._last_draw = -float("inf")
        self._width = 0

    def __call__(self, phase: str, iteration: int, score: float = float("nan"), elapsed: float | None = None,
                 cases: int | None = None) -> None:
        """One step of the learn (``elapsed`` None: seconds since this object was made)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if phase == self._phase and now - self._last_draw < self.interval:
            return
        self._phase = phase
        self._last_draw = now
        self._write(self.line(phase, iteration, score, now - self._started if elapsed is None else elapsed, cases))

    @classmethod
    def line(cls, phase: str, iteration: int, score: float, elapsed: float, cases: int | None = None) -> str:
        parts = [phase]
        if phase in cls.STEPS and iteration:
            parts.append(f"{cls.STEPS[phase]} {iteration}")
        if math.isfinite(score):
            parts.append(f"{cls.SCORES.get(phase, 'score')} {score:.3f}")
        if cases is not None:
            parts.append(f"{cases} cases")
        return f"learn: {', '.join(parts)} ({elapsed:.1f} s)"

    def close(self) -> None:
        """End the line drawn in place (a message after it starts on a line of its own)."""
        if self.in_place and self._width:
            self.stream.write("\n")
            self.stream.flush()
        self._width = 0

    def _write(self, text: str) -> None:
        if self.in_place:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def __enter__(self) -> "LearnProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
