"""A one-line progress bar on stderr for long reads: only on a terminal, unless asked for."""

from __future__ import annotations

import sys
import time


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
