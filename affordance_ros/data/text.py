"""Text from the outside world made safe to log or to echo back: control characters escaped, length bounded.

A trial_id with a newline would forge a log line, ANSI escape codes would recolour a terminal, and
a 1 MB sensor name copied into every warning fills the disk: everything the learner logs or puts in
a reply that came from a message goes through ``printable`` (whole messages) or ``quoted`` (a name).
"""

from __future__ import annotations

import re

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
