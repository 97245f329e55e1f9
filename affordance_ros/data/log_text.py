"""Text from the outside world made safe to log or to echo back: control characters escaped, length bounded.

A trial_id with a newline would forge a log line, ANSI escape codes would recolour a terminal, and
a 1 MB sensor name copied into every warning fills the disk: everything the learner logs or puts in
a reply that came from a message goes through ``printable`` (whole messages) or ``quoted`` (a name).
And a flood of bad messages must not become a flood of log lines: ``RepeatedMessages`` logs the first
of a kind and then one line per period with how many more came.
"""

from __future__ import annotations

import re
import time
from typing import Callable

# Longest log line or reply message: longer ones are cut, saying how much was left out.
MAX_MESSAGE_LENGTH = 2000
# Longest name (trial_id, sensor, label) quoted inside a message.
MAX_QUOTED_LENGTH = 80

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group(0)
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def printable(text, limit: int = MAX_MESSAGE_LENGTH) -> str:
    """``text`` with every control character escaped (newline as \\n, ESC as \\x1b), cut to about ``limit``
    characters with a note of how many were left out."""
    text = str(text)
    escaped = _CONTROL.sub(_escape, text[:limit])
    if len(escaped) > limit:
        escaped = escaped[:limit]
    if len(text) > limit:
        escaped += f"... ({len(text) - limit} more characters)"
    return escaped


def quoted(text, limit: int = MAX_QUOTED_LENGTH) -> str:
    """A name to quote in a message: ``printable`` with a short ``limit``."""
    return printable(text, limit)


_VARYING = re.compile(r"'[^']*'|-?\d[\d.e+-]*")


def shape(message: str) -> str:
    """``message`` without what varies between messages of one kind (quoted names, numbers): a key under which
    ``RepeatedMessages`` counts them."""
    return _VARYING.sub("_", message[:300])


class RepeatedMessages:
    """Log lines a flood cannot multiply: per kind of message (``key``), the first is logged at once and the
    others within ``period`` seconds are only counted, then told in one line (how many, the latest of them)
    when the period is over: at the next message of that kind, or at ``flush``, which the caller calls
    regularly. ``log(level, message)`` writes a line; ``clock`` gives seconds."""

    def __init__(self, log: Callable[[str, str], None], period: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.log = log
        self.period = period
        self.clock = clock
        self._periods: dict[str, list] = {}  # key -> [start, count held back, level, latest message]

    def __call__(self, key: str, level: str, message: str) -> None:
        now = self.clock()
        held = self._periods.get(key)
        if held is not None and now - held[0] < self.period:
            held[1:] = [held[1] + 1, level, message]
            return
        if held is not None:
            self._tell(key, held, now)
        self._periods[key] = [now, 0, level, ""]
        self.log(level, message)

    def grouped(self, level: str, message: str) -> None:
        """Log ``message``: at once at level info, else as one of its kind (``shape``: the same message but for
        names and numbers)."""
        if level == "info":
            self.log(level, message)
        else:
            self(shape(message), level, message)

    def flush(self, force: bool = False) -> None:
        """Tell what was held back in the periods that are over (``force``: in every period)."""
        now = self.clock()
        for key, held in list(self._periods.items()):
            if force or now - held[0] >= self.period:
                self._tell(key, held, now)
                del self._periods[key]

    def _tell(self, key: str, held: list, now: float) -> None:
        start, count, level, latest = held
        if count:
            self.log(level, f"{count} more like that in the last {now - start:.0f} s; the latest: {latest}")
