"""Where the parts of the learner node report what happened: counters, log lines, floods of warnings grouped.

Every part of the node (its endpoints, its trial pipeline, its current model) is handed the node's one
``Reporter``: ``count`` adds to the node's counters (any thread), ``log`` writes a line escaped and bounded
(``log_printable``: text from messages cannot forge or flood the log), and ``grouped`` / ``repeated`` log the
first warning of a kind at once and then one line per period with how many more came (``flush``, on the node's
timer, tells what was held back).
"""

from __future__ import annotations

from ...data.health import Counters
from ...data.log_text import RepeatedMessages, printable

REPEAT_PERIOD = 5.0  # seconds: repeated warnings of one kind are told once per period


class Reporter:
    """Counts into ``counts`` and logs on ``logger`` (an rclpy logger), grouping repeated warnings per ``period``."""

    def __init__(self, logger, counts: Counters, period: float = REPEAT_PERIOD):
        self.logger = logger
        self.counts = counts
        self.repeats = RepeatedMessages(self.log, period)

    def count(self, name: str) -> None:
        """Count one more ``name`` (any thread)."""
        self.counts.add(name)

    def log(self, level: str, message: str) -> None:
        """Log at ``level`` (info, warning, error), escaped and bounded (``log_printable``)."""
        log_printable(self.logger, level, message)

    def grouped(self, level: str, message: str) -> None:
        """Log ``message``: at once at level info, else grouped with the messages of its shape (the same but for
        names and numbers)."""
        self.repeats.grouped(level, message)

    def repeated(self, kind: str, level: str, message: str) -> None:
        """Log ``message``, grouped with the messages of ``kind``."""
        self.repeats(kind, level, message)

    def flush(self, force: bool = False) -> None:
        """Tell the warnings held back in the periods that are over (``force``: in every period)."""
        self.repeats.flush(force)


def log_printable(logger, level: str, message: str) -> None:
    """Log at ``level`` (info, warning, error), control characters escaped and the length bounded: text
    from messages cannot forge or flood the log."""
    message = printable(message)
    # one call site per severity: rclpy refuses different severities from one line of code
    if level == "info":
        logger.info(message)
    elif level == "error":
        logger.error(message)
    else:
        logger.warning(message)


__all__ = ["REPEAT_PERIOD", "Reporter", "log_printable"]
