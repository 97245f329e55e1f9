"""XMLBIF 0.3 (the XML Bayesian network format of JavaBayes, pgmpy, pyAgrum (.bifxml), Weka).

Only the discrete network travels: variables (``<VARIABLE TYPE="nature">`` with their
``<OUTCOME>`` labels, in order), parents (``<GIVEN>``, in order) and CPTs (``<TABLE>``: the
parent configurations with the last parent fastest, and in each the child's probabilities,
i.e. our CPT array flattened). Groups come from a mapping (or ``default_group``);
``import-model`` takes groups and sensors from a configuration.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Mapping

import numpy as np

from ...core import AffordanceNetwork, ModelFormatError, Variable


def read_xmlbif(source: str | os.PathLike, groups: Mapping[str, str] | None = None,
                default_group: str = "object") -> AffordanceNetwork:
    """The network of an XMLBIF file (a path, or the text itself when it starts with '<')."""
    try:
        if isinstance(source, str) and source.lstrip().startswith("<"):
            root = ElementTree.fromstring(source)
        else:
            root = ElementTree.parse(source).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise ModelFormatError(f"not a readable XMLBIF file: {exc}") from None
    network = root.find("NETWORK") if root.tag != "NETWORK" else root
    if network is None:
        raise ModelFormatError("XMLBIF: no <NETWORK> element")
    values = {}
    for element in network.iter("VARIABLE"):
        name = _text(element, "NAME")
        outcomes = [(o.text or "").strip() for o in element.findall("OUTCOME")]
        if not outcomes:
            raise ModelFormatError(f"XMLBIF: variable '{name}' has no <OUTCOME>")
        values[name] = outcomes
    tables = {}
    for element in list(network.iter("DEFINITION")) + list(network.iter("PROBABILITY")):
        child = _text(element, "FOR")
        parents = [(g.text or "").strip() for g in element.findall("GIVEN")]
        try:
            numbers = [float(x) for x in _text(element, "TABLE").split()]
        except ValueError:
            raise ModelFormatError(f"XMLBIF: the table of '{child}' holds something other than numbers") from None
        tables[child] = (parents, numbers)
    built = []
    for name, labels in values.items():
        if name not in tables:
            raise ModelFormatError(f"XMLBIF: no <DEFINITION> for '{name}'")
        parents, numbers = tables[name]
        unknown = [p for p in parents if p not in values]
        if unknown:
            raise ModelFormatError(f"XMLBIF: the definition of '{name}' names unknown parents {unknown}")
        shape = [len(values[p]) for p in parents] + [len(labels)]
        built.append(Variable(name=name, group=(groups or {}).get(name, default_group), values=tuple(labels),
                              parents=tuple(parents), cpt=table_cpt(f"XMLBIF: the table of '{name}'", numbers, shape)))
    return AffordanceNetwork(built)


def write_xmlbif(model: AffordanceNetwork, path: str | os.PathLike | None = None, name: str = "affordance") -> str:
    """The XMLBIF text of ``model``'s discrete network (CPTs required); written to ``path`` if given."""
    if not model.parameterised:
        raise ModelFormatError("the model has no learned parameters: learn it first")
    root = ElementTree.Element("BIF", VERSION="0.3")
    network = ElementTree.SubElement(root, "NETWORK")
    ElementTree.SubElement(network, "NAME").text = name
    for v in model.variables:
        element = ElementTree.SubElement(network, "VARIABLE", TYPE="nature")
        ElementTree.SubElement(element, "NAME").text = v.name
        for label in v.values:
            ElementTree.SubElement(element, "OUTCOME").text = label
        ElementTree.SubElement(element, "PROPERTY").text = f"group = {v.group}"
    for v in model.variables:
        element = ElementTree.SubElement(network, "DEFINITION")
        ElementTree.SubElement(element, "FOR").text = v.name
        for parent in v.parents:
            ElementTree.SubElement(element, "GIVEN").text = parent
        ElementTree.SubElement(element, "TABLE").text = " ".join(repr(float(x)) for x in np.ravel(v.cpt))
    ElementTree.indent(root)
    text = '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def table_cpt(where: str, numbers, shape) -> np.ndarray:
    """A CPT of ``shape`` (parents..., child) from numbers with the child fastest; rows renormalised
    (files round their numbers), ModelFormatError if they are not probabilities."""
    size = int(np.prod(shape))
    if len(numbers) != size:
        raise ModelFormatError(f"{where} has {len(numbers)} numbers, expected {size}")
    cpt = np.asarray(numbers, dtype=float).reshape(shape)
    sums = cpt.sum(axis=-1, keepdims=True)
    if not np.all(np.isfinite(cpt)) or np.any(cpt < 0) or np.any(np.abs(sums - 1.0) > 1e-3):
        raise ModelFormatError(f"{where}: every row must hold probabilities >= 0 that sum to 1")
    return cpt / sums


def _text(element, tag: str) -> str:
    child = element.find(tag)
    if child is None or child.text is None:
        raise ModelFormatError(f"XMLBIF: <{element.tag}> without <{tag}>")
    return child.text.strip()
