"""Exceptions of the core library; each says what is wrong and what to fix."""

from __future__ import annotations

import difflib
from typing import Iterable

SPELLING_CUTOFF = 0.8  # how alike (difflib's ratio, ignoring case) a mistyped name must be to a known one to be named


class AffordanceError(ValueError):
    """Base class: a user-facing mistake in a model, the data or a query."""


class ModelFormatError(AffordanceError):
    """A model or configuration file (or dict) that does not follow the schema."""


class EvidenceError(AffordanceError):
    """A query or evidence that does not fit the model (unknown names, labels, NaN)."""


class DataError(AffordanceError):
    """Training cases that cannot be used (empty, malformed, unknown labels)."""


class UnknownColumnError(DataError):
    """Columns of cases that are neither variables nor sensors of the network; ``column`` names the first,
    ``columns`` all that were found, ``near`` the variable or sensor the first was meant to be (None: none).
    """

    def __init__(self, message: str, column: str, near: str | None = None, columns: tuple[str, ...] = ()):
        super().__init__(message)
        self.column = column
        self.near = near
        self.columns = tuple(columns) or (column,)

    def __reduce__(self):  # (pickled whole: errors cross from the learning process)
        return type(self), (str(self), self.column, self.near, self.columns)


def _folded(name: str) -> str:
    """A name as a user may have meant it: without case, surrounding spaces and underscores."""
    return name.strip().lower().replace("_", "")


# what a mistyped name and the one meant may differ in, the nearest first
_SAME_BUT_FOR = (lambda name: name.strip(), lambda name: name.strip().lower(), _folded)


def one_letter_apart(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by one letter: substituted, added, left out, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(a))  # the first difference
    if len(a) < len(b):
        return a[k:] == b[k + 1:]
    swapped = k + 1 < len(a) and a[k] == b[k + 1] and a[k + 1] == b[k]
    return a[k + 1:] == b[k + 1:] or swapped and a[k + 2:] == b[k + 2:]


def meant(name: str, known: Iterable[str], spelling: bool = True) -> list[str]:
    """The names of ``known`` a mistyped ``name`` most likely meant: those it differs from in surrounding spaces
    only, else in case only (e.g. 'Action' for 'action'), else also in underscores ('obj_vel' for 'ObjVel'), else
    (``spelling``) those it differs from by one letter ('size' for 'sise', 'ObjVel' for 'ObjVell'; names of three
    letters or more), else the one closest in spelling ('ObjHandVel' for 'ObjHndVl'), else none.
    """
    known = list(dict.fromkeys(known))
    for same in _SAME_BUT_FOR:
        found = [k for k in known if same(k) == same(name)]
        if found:
            return found
    if not spelling:
        return []
    # (difflib's ratio misses a substituted letter in a short name: 'sise' and 'size' are 0.75 alike)
    for same in (_SAME_BUT_FOR[0], _folded):  # as typed first: 'actions' meant 'action' more than 'Action'
        found = [k for k in known if len(same(name)) >= 3 and one_letter_apart(same(name), same(k))]
        if found:
            return found
    folded = [_folded(k) for k in known]
    close = difflib.get_close_matches(_folded(name), folded, n=1, cutoff=SPELLING_CUTOFF)
    return [known[folded.index(close[0])]] if close else []


def suggestion(name: str, known: Iterable[str], spelling: bool = True) -> tuple[str, str]:
    """("did you mean 'Action'?", why: 'names are case-sensitive', 'spaces are part of a name' or '') for a name
    ``known`` lacks; ('', '') when none is near.
    """
    near = meant(name, known, spelling)
    if not near:
        return "", ""
    why = ("spaces are part of a name" if any(k == name.strip() for k in near)
           else "names are case-sensitive" if any(k.lower() == name.lower() for k in near) else "")
    return f"did you mean {' or '.join(repr(k) for k in near)}?", why


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """' (did you mean 'Action'? names are case-sensitive)' for a name ``known`` lacks, '' when nothing is near."""
    ask, why = suggestion(name, known)
    return f" ({ask}{' ' + why if why else ''})" if ask else ""
