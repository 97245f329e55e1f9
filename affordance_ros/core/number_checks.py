"""The one check of a single number given by a user, a message or a file."""

from __future__ import annotations

import math
import numbers


def is_finite_number(value) -> bool:
    """True for a real number that is neither NaN nor infinite and not a bool: an int or a float, or numpy's
    (``np.float32(9.7)``, ``np.int64(3)``: what indexing an array gives).
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)




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
