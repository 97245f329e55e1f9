"""Models in and out of other tools' formats: ``export_model`` and ``import_model`` (the CLI's
``export-model`` and ``import-model``).

Exporting writes the discrete network (variables in the model's order, labels in order, parents
in order, CPTs); the sensor models do not travel (the formats have no place for them).
Importing reads such a file and gives every variable the group, the sensor and (for UAI, which
has no names) the name and labels of the configuration's variable, and the configuration's
``learning`` options: a network from pyAgrum, pgmpy, GeNIe or bnlearn (or an expert) becomes a
model of ours, ready to predict, to seed online learning or to be a prior (``prior_strength``).
The file's labels must be the configuration's; in another order, the CPTs are reordered.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...core import AffordanceNetwork, ModelFormatError
from .bif import read_bif, write_bif
from .uai import read_uai, write_uai
from .xmlbif import read_xmlbif, write_xmlbif

FORMATS = {"bif": (".bif", ".bif.gz"), "xmlbif": (".xmlbif", ".bifxml", ".xml"), "uai": (".uai",)}


def format_of(path: str | os.PathLike, given: str | None = None) -> str:
    """``given``, else the format the file name's extension says; ModelFormatError if it says none."""
    if given:
        if given not in FORMATS:
            raise ModelFormatError(f"unknown format '{given}'; expected one of {list(FORMATS)}")
        return given
    name = Path(path).name.lower()
    for fmt, suffixes in FORMATS.items():
        if name.endswith(suffixes):
            return fmt
    raise ModelFormatError(f"cannot tell the format of '{path}' from its extension; give --format "
                           f"({', '.join(FORMATS)})")


def export_model(model: AffordanceNetwork, fmt: str, out: str | os.PathLike) -> None:
    """Write ``model``'s discrete network to ``out`` in ``fmt`` (bif, xmlbif, uai)."""
    writer = {"bif": write_bif, "xmlbif": write_xmlbif, "uai": write_uai}[format_of(out, fmt)]
    writer(model, out)


def import_model(path: str | os.PathLike, config: AffordanceNetwork, fmt: str | None = None) -> AffordanceNetwork:
    """The network in ``path`` with the groups, sensors and learning options of ``config``."""
    fmt = format_of(path, fmt)
    if not Path(path).is_file():
        raise ModelFormatError(f"model file '{path}' does not exist")
    if fmt == "uai":
        for v in config.variables:
            if v.values is None:
                raise ModelFormatError(f"UAI files have no labels: the configuration must give the 'values' of "
                                       f"'{v.name}'")
        network = read_uai(path, names=config.names, values={v.name: v.values for v in config.variables})
    else:
        network = (read_bif if fmt == "bif" else read_xmlbif)(path)
    unfitted = [v.sensor.name for v in config.variables if v.sensor is not None and not v.sensor.fitted]
    if unfitted:
        raise ModelFormatError(f"the configuration's sensors {unfitted} have no means/stddevs: a model needs them "
                               "(give them in the configuration)")
    missing = [n for n in config.names if n not in network.names]
    extra = [n for n in network.names if n not in config.names]
    if missing or extra:
        raise ModelFormatError(f"'{path}' does not have the configuration's variables: "
                               + "; ".join(part for part in (f"missing {missing}" if missing else "",
                                                             f"not configured {extra}" if extra else "") if part))
    order = {}
    for v in config.variables:
        labels = network[v.name].values
        if v.values is not None and sorted(v.values) != sorted(labels):
            raise ModelFormatError(f"variable '{v.name}': the file's labels {list(labels)} are not the configured "
                                   f"{list(v.values)}")
        order[v.name] = [labels.index(x) for x in (v.values or labels)]
    changes = {}
    for v in config.variables:
        w = network[v.name]
        cpt = w.cpt
        for axis, name in enumerate((*w.parents, v.name)):
            cpt = np.take(cpt, order[name], axis=axis)
        changes[v.name] = {"group": v.group, "sensor": v.sensor, "values": v.values or w.values,
                           "parents": w.parents, "cpt": cpt}
    variables = [network[n] for n in config.names]
    model = AffordanceNetwork(variables).replace_variables(changes)
    metadata = dict(config.metadata)
    metadata["imported"] = {"file": str(path), "format": fmt}
    model = AffordanceNetwork(model.variables, metadata, config.learning)
    return model
