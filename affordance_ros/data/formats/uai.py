"""UAI (the format of the UAI inference competitions; pyAgrum, pgmpy, merlin, toulbar2 read it).

A ``BAYES`` network: the number of variables, their cardinalities, one function per variable (its
parents, then itself: our CPT's axes) and its table with the last variable fastest (our CPT
flattened: the order of the UAI specification, "last increment first"; pyAgrum 2.3 writes and
reads tables of more than one parent with the parents in the reverse order, pgmpy 1.1 with the
child slowest, so for those tools prefer BIF or XMLBIF). The format has no names and no labels:
``write_uai`` keeps the variables in the model's order (and their labels in order), ``read_uai``
names them ``names`` (default V0, V1, ...) with labels ``values`` (default "0", "1", ...);
``import-model`` takes both from a configuration, variable i and label j of the file being those
of the configuration.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...core import AffordanceNetwork, ModelFormatError, Variable
from .xmlbif import table_cpt


def read_uai(source: str | os.PathLike, names: Sequence[str] | None = None,
             values: Mapping[str, Sequence[str]] | None = None, groups: Mapping[str, str] | None = None,
             default_group: str = "object") -> AffordanceNetwork:
    """The network of a UAI ``BAYES`` file (a path, or the text itself when it contains a newline)."""
    text = source if isinstance(source, str) and "\n" in source else _read(Path(source))
    tokens = re.sub(r"#[^\n]*", "", text).split()  # (pyAgrum writes '# name' comments)
    if tokens and tokens[0].upper() != "BAYES":
        raise ModelFormatError(f"UAI: a '{tokens[0]}' network; only BAYES (a Bayesian network) is read")
    try:
        n = int(tokens[1])
        cards = [int(x) for x in tokens[2:2 + n]]
        pos = 2 + n
        n_functions = int(tokens[pos])
        pos += 1
        scopes = []
        for _ in range(n_functions):
            size = int(tokens[pos])
            scopes.append([int(x) for x in tokens[pos + 1:pos + 1 + size]])
            pos += 1 + size
        tables = []
        for _ in range(n_functions):
            size = int(tokens[pos])
            tables.append([float(x) for x in tokens[pos + 1:pos + 1 + size]])
            pos += 1 + size
        if pos > len(tokens):
            raise IndexError
    except (IndexError, ValueError):
        raise ModelFormatError("not a readable UAI file: it ends early or holds something other than numbers") \
            from None
    names = list(names) if names is not None else [f"V{i}" for i in range(n)]
    if len(names) != n:
        raise ModelFormatError(f"UAI: the file has {n} variables, {len(names)} names were given")
    labels = [list((values or {}).get(name) or [str(j) for j in range(cards[i])]) for i, name in enumerate(names)]
    for i, name in enumerate(names):
        if len(labels[i]) != cards[i]:
            raise ModelFormatError(f"UAI: variable {i} ('{name}') has {cards[i]} values in the file, "
                                   f"{len(labels[i])} labels were given ({labels[i]})")
    family = {}
    for scope, table in zip(scopes, tables):
        if not scope or any(not 0 <= v < n for v in scope) or scope[-1] in family:
            raise ModelFormatError(f"UAI: function over {scope}: every variable needs exactly one function, "
                                   "its parents first and itself last")
        family[scope[-1]] = (scope[:-1], table)
    if len(family) != n:
        raise ModelFormatError(f"UAI: variables {sorted(set(range(n)) - set(family))} have no function")
    built = []
    for i, name in enumerate(names):
        parents, table = family[i]
        cpt = table_cpt(f"UAI: the table of variable {i} ('{name}')", table, [cards[p] for p in parents] + [cards[i]])
        built.append(Variable(name=name, group=(groups or {}).get(name, default_group), values=tuple(labels[i]),
                              parents=tuple(names[p] for p in parents), cpt=cpt))
    return AffordanceNetwork(built)


def write_uai(model: AffordanceNetwork, path: str | os.PathLike | None = None) -> str:
    """The UAI text of ``model``'s discrete network (variables in the model's order); written to ``path``."""
    if not model.parameterised:
        raise ModelFormatError("the model has no learned parameters: learn it first")
    lines = ["BAYES", str(len(model)), " ".join(str(v.card) for v in model.variables), str(len(model))]
    lines += [" ".join(str(x) for x in (len(v.parents) + 1, *model.parent_indices(i), i))
              for i, v in enumerate(model.variables)]
    for v in model.variables:
        lines += ["", str(v.cpt.size), " ".join(repr(float(x)) for x in np.ravel(v.cpt))]
    text = "\n".join(lines) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"cannot read UAI file '{path}': {exc}") from None
