"""A planner's service answered from the model: the request's sizes checked, every mistake ``success: false``.

``answer`` is the one envelope of ``~/predict``, ``~/select_action`` and ``~/suggest_trial``: no model yet, a
request beyond the size limits, a mistake in the request (an AffordanceError or ValueError, its message) and an
unexpected error (``internal error: ...``, the node keeps running) each become ``success: false`` with the
message; otherwise the service's ``fill`` writes the response. The request's sizes are checked before anything
of ours is built from it; but rclpy has built its Python lists already (at most 100000 entries each: the
interfaces' bound, which a client's middleware keeps), and the C heap the middleware used stays with the
process: after such a refusal the node gives it back (``release_freed_memory``). A client that bypasses its
middleware's checks is access control's to keep out (docs/node.md, "Access control").
"""

from __future__ import annotations

import ctypes
from typing import Callable

from ...core import AffordanceError, AffordanceNetwork
from ...data.log_text import printable
from ...data.pairing import PairingError, SizeLimits

TOO_LARGE = "request too large: "  # how the answer to a request beyond the size limits starts


def answer(model: AffordanceNetwork | None, request, response, fill: Callable, limits: SizeLimits,
           no_model: str) -> str:
    """Fill ``response`` to ``request`` by ``fill(model, request, response)`` once the request's sizes are within
    ``limits``; ``success`` False with the message for no model (``no_model``), a request too large, a mistake
    in it, or an unexpected error (returned, to be logged). '' when it succeeded."""
    response.success = False
    if model is None:
        response.message = no_model
        return response.message
    try:
        too_large = size_problem(request, limits)
        if not too_large:
            fill(model, request, response)
    except (AffordanceError, ValueError) as exc:
        response.message = printable(exc)
        return response.message
    except Exception as exc:  # a bug: answer and keep running
        response.message = printable(f"internal error: {exc!r}")
        return response.message
    if too_large:
        response.message = printable(f"{TOO_LARGE}{too_large}")
        release_freed_memory()
        return response.message
    response.success = True
    return ""


def size_problem(request, limits: SizeLimits) -> str:
    """'' if every string and list of ``request`` is within ``limits``, else which is not."""
    try:
        check_size(request, limits)
    except PairingError as exc:
        return str(exc)
    return ""


def check_size(request, limits: SizeLimits) -> None:
    """PairingError (a ValueError) if a string or a list of ``request`` is longer than ``limits`` allow."""
    for name in request.get_fields_and_field_types():
        value = getattr(request, name)
        if isinstance(value, str):
            limits.check_name(value, f"'{name}' field")
        elif not isinstance(value, (int, float, bool)):
            limits.check_list(len(value), f"entries in '{name}'")
            for item in value:
                if isinstance(item, str):
                    limits.check_name(item, f"entry of '{name}'")


def log_level(problem: str) -> str:
    """The level a service's failed answer is logged at: error for a bug, warning for a mistake of the caller."""
    return "error" if problem.startswith("internal error") else "warning"


def release_freed_memory() -> None:
    """Give the memory the C heap keeps after freeing (glibc's ``malloc_trim``) back to the system."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


__all__ = ["TOO_LARGE", "answer", "check_size", "log_level", "release_freed_memory", "size_problem"]
