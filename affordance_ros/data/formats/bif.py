"""The Bayesian Interchange Format (BIF 0.15, as pgmpy, pyAgrum, GeNIe and bnlearn read and write it).

Only the discrete network travels: variables, their values (label order kept), parents and CPTs.
Groups and sensors are ours: ``read_bif`` puts every variable in one group (or the group a
mapping gives it); ``import-model`` takes them from a configuration.

Reading accepts a CPT in rows, ``(parent values) p1, p2, ...;`` (every parent configuration
listed), or as ``table p...;`` with the child's value varying slowest and the last parent
fastest (pgmpy's and pyAgrum's order); ``default`` rows fill configurations not listed.
Writing uses rows for CPTs with parents and ``table`` for the others.
"""

from __future__ import annotations

import gzip
import itertools
import os
import re
from pathlib import Path
from typing import Mapping

import numpy as np

from ...core import AffordanceNetwork, ModelFormatError, Variable

_TOKEN = re.compile(r"""\s*(?:(//[^\n]*|/\*.*?\*/)|([{}()\[\];,|])|("[^"]*"|[^\s{}()\[\];,|]+))""", re.S)


def read_bif(source: str | os.PathLike, groups: Mapping[str, str] | None = None,
             default_group: str = "object") -> AffordanceNetwork:
    """The network of a BIF file (a path, or the text itself when it contains a newline)."""
    text = _text(source)
    try:
        variables, tables = _parse(text)
    except (IndexError, ValueError) as exc:
        raise ModelFormatError(f"not a readable BIF file: {exc}") from None
    groups = groups or {}
    missing = [name for name in variables if name not in tables]
    if missing:
        raise ModelFormatError(f"BIF: no probability block for {missing}")
    built = []
    for name, values in variables.items():
        parents, rows = tables[name]
        for p in parents:
            if p not in variables:
                raise ModelFormatError(f"BIF: probability ( {name} | ... ) names an unknown parent '{p}'")
        shape = [len(variables[p]) for p in parents] + [len(values)]
        cpt = _cpt(name, values, parents, [variables[p] for p in parents], rows, shape)
        built.append(Variable(name=name, group=groups.get(name, default_group), values=tuple(values),
                              parents=tuple(parents), cpt=cpt))
    return AffordanceNetwork(built)


def write_bif(model: AffordanceNetwork, path: str | os.PathLike | None = None, name: str = "affordance") -> str:
    """The BIF text of ``model``'s discrete network (CPTs required); written to ``path`` if given."""
    if not model.parameterised:
        raise ModelFormatError("the model has no learned parameters: learn it first")
    lines = [f"network {_name(name)} {{", "}"]
    for v in model.variables:
        lines += [f"variable {_name(v.name)} {{",
                  f"  type discrete [ {v.card} ] {{ {', '.join(_name(x) for x in v.values)} }};", "}"]
    for v in model.variables:
        head = _name(v.name) + (" | " + ", ".join(_name(p) for p in v.parents) if v.parents else "")
        lines.append(f"probability ( {head} ) {{")
        if not v.parents:
            lines.append(f"  table {_numbers(v.cpt)};")
        else:
            parent_values = [model[p].values for p in v.parents]
            for combination in itertools.product(*[range(len(values)) for values in parent_values]):
                labels = ", ".join(_name(values[j]) for values, j in zip(parent_values, combination))
                lines.append(f"  ({labels}) {_numbers(v.cpt[combination])};")
        lines.append("}")
    text = "\n".join(lines) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


# ----------------------------------------------------------------- parsing
def _text(source) -> str:
    if isinstance(source, str) and "\n" in source:
        return source
    path = Path(source)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"cannot read BIF file '{path}': {exc}") from None


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip():
                raise ValueError(f"unexpected text at character {pos}: {text[pos:pos + 30]!r}")
            break
        pos = match.end()
        if match.group(1) is None:
            out.append(match.group(2) or match.group(3).strip('"'))
    return out


def _parse(text: str):
    tokens = _tokens(text)
    variables, tables = {}, {}
    i = 0
    while i < len(tokens):
        word = tokens[i]
        if word == "network":
            i = _skip_block(tokens, tokens.index("{", i))
        elif word == "variable":
            name, i = tokens[i + 1], tokens.index("{", i) + 1
            values = None
            while tokens[i] != "}":
                if tokens[i] == "type":
                    start = tokens.index("{", i) + 1
                    end = tokens.index("}", start)
                    values = [t for t in tokens[start:end] if t != ","]
                    i = tokens.index(";", end) + 1
                else:  # property lines and the like
                    i = tokens.index(";", i) + 1
            if not values:
                raise ValueError(f"variable '{name}' has no discrete values")
            variables[name] = values
            i += 1
        elif word == "probability":
            close = tokens.index(")", i)
            head = [t for t in tokens[i + 2:close] if t not in (",",)]
            name, parents = head[0], [t for t in head[1:] if t != "|"]
            i = close + 2  # past ')' '{'
            rows = []
            while tokens[i] != "}":
                end = tokens.index(";", i)
                statement = tokens[i:end]
                if statement[0] == "(":
                    close_row = statement.index(")")
                    rows.append((tuple(t for t in statement[1:close_row] if t != ","),
                                 [float(t) for t in statement[close_row + 1:] if t != ","]))
                elif statement[0] in ("table", "default"):
                    rows.append((statement[0], [float(t) for t in statement[1:] if t != ","]))
                i = end + 1
            tables[name] = (parents, rows)
            i += 1
        else:
            raise ValueError(f"unexpected '{word}'")
    return variables, tables


def _skip_block(tokens: list[str], start: int) -> int:
    depth, i = 0, start
    while True:
        depth += {"{": 1, "}": -1}.get(tokens[i], 0)
        i += 1
        if depth == 0:
            return i


def _cpt(name, values, parents, parent_values, rows, shape) -> np.ndarray:
    where = f"BIF: probability of '{name}'"
    cpt = np.full(shape, np.nan)
    for key, probabilities in rows:
        if key == "table":
            size = int(np.prod(shape))
            if len(probabilities) != size:
                raise ModelFormatError(f"{where}: table has {len(probabilities)} numbers, expected {size}")
            child_first = np.asarray(probabilities).reshape([len(values)] + shape[:-1])
            cpt = np.moveaxis(child_first, 0, -1)
        elif key == "default":
            cpt[np.isnan(cpt[..., 0])] = _row(where, probabilities, len(values))
        else:
            try:
                index = tuple(pv.index(label) for pv, label in zip(parent_values, key, strict=True))
            except ValueError:
                raise ModelFormatError(f"{where}: row {list(key)} names unknown parent values") from None
            cpt[index] = _row(where, probabilities, len(values))
    if np.isnan(cpt).any():
        raise ModelFormatError(f"{where}: some parent configurations have no row")
    sums = cpt.sum(axis=-1, keepdims=True)
    if np.any(np.abs(sums - 1.0) > 1e-3) or np.any(cpt < 0):
        raise ModelFormatError(f"{where}: every row must hold probabilities >= 0 that sum to 1")
    return cpt / sums  # (files round their numbers: rows summing to 1 +- 1e-3 are renormalised)


def _row(where: str, probabilities, card: int) -> np.ndarray:
    if len(probabilities) != card:
        raise ModelFormatError(f"{where}: a row has {len(probabilities)} numbers, expected {card}")
    return np.asarray(probabilities, dtype=float)


# ----------------------------------------------------------------- writing
def _name(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_.\-]+", text) else f'"{text}"'


def _numbers(row) -> str:
    return ", ".join(repr(float(x)) for x in np.ravel(row))
