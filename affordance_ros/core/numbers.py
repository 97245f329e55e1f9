"""The one check of a single number given by a user, a message or a file."""

from __future__ import annotations

import math


def is_finite_number(value) -> bool:
    """True for an int or float (not a bool) that is neither NaN nor infinite."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


__all__ = ["is_finite_number"]
