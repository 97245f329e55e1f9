"""The one check of a single number given by a user, a message or a file."""

from __future__ import annotations

import math


def is_finite_number(value) -> bool:
    """True for an int or float (not a bool) that is neither NaN nor infinite."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)




def decimal_comma_hint(text: str) -> str:
    """For a reading that is not a number: "; write '.' as the decimal point" when it is one written with a
    decimal comma ('1,5'), else ''.
    """
    try:
        float(text.replace(",", ".", 1))
    except ValueError:
        return ""
    return "; write '.' as the decimal point" if "," in text else ""


__all__ = ["decimal_comma_hint", "is_finite_number"]
