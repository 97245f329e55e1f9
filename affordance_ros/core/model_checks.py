"""What makes an affordance network valid: every check ``AffordanceNetwork`` runs when it is made, from code or from a
file, each failure a ModelFormatError that names the variable and what to fix.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .errors import ModelFormatError
from .number_checks import is_finite_number
from .variables import COVARIANCE_TYPES, GROUPS, Variable

_NORMALISATION_TOLERANCE = 1e-6


def check_network(network) -> None:
    """ModelFormatError for the first thing that makes ``network`` invalid: names, groups, values, sensors, parents
    (no cycle), CPTs, their counts and posterior draws.
    """
    if not network.variables:
        raise ModelFormatError("the network has no variables")
    seen_sensors = set()
    for v in network.variables:
        where = f"variable '{v.name}'"
        if not isinstance(v.name, str) or not v.name:
            raise ModelFormatError("every variable needs a non-empty string 'name'")
        if v.name in GROUPS:
            raise ModelFormatError(f"{where}: a variable cannot be named like a group {list(GROUPS)}")
        if v.group not in GROUPS:
            raise ModelFormatError(f"{where}: group '{v.group}' is not one of {list(GROUPS)}")
        if v.values is not None:
            if len(v.values) < 1 or any(not isinstance(x, str) or not x for x in v.values):
                raise ModelFormatError(f"{where}: 'values' must be a non-empty list of non-empty strings")
            if len(set(v.values)) != len(v.values):
                raise ModelFormatError(f"{where}: repeated values in {list(v.values)}")
        elif v.sensor is None:
            raise ModelFormatError(f"{where}: without a sensor its 'values' must be given")
        if v.sensor is not None:
            _validate_sensor(v, where, seen_sensors)
            _validate_cluster_by(network, v, where)
        if v.parents is not None:
            for p in v.parents:
                if p not in network.names:
                    raise ModelFormatError(f"{where}: unknown parent '{p}'; variables are {list(network.names)}")
                if p == v.name:
                    raise ModelFormatError(f"{where}: a variable cannot be its own parent")
            if len(set(v.parents)) != len(v.parents):
                raise ModelFormatError(f"{where}: repeated parents {list(v.parents)}")
        if v.cpt is not None:
            _validate_cpt(network, v, where)
        if v.counts is not None:
            _validate_counts(v, where)
        if v.draws is not None or v.prior is not None:
            _validate_draws(v, where)
    if len(set(network.names)) != len(network.variables):
        raise ModelFormatError(f"repeated variable names in {list(network.names)}")
    if network.structure_known:
        topological_names(network.names, {v.name: v.parents for v in network.variables})
    _validate_draw_counts(network)


def check_structures(network) -> None:
    """ModelFormatError unless ``network.structures`` is a sample ``members`` can answer from: weights that sum to
    1, the first structure the network's own, every one with the network's variables, values and sensors, its CPTs
    learned, and draws where the network has them.
    """
    members = network.structures
    total = sum(m.weight for m in members)
    if any(not (is_finite_number(m.weight) and m.weight > 0) for m in members) or abs(total - 1.0) > 1e-6:
        raise ModelFormatError(f"'structures': the weights must be positive and sum to 1, got "
                               f"{[m.weight for m in members]}")
    if [v.parents for v in members[0].network.variables] != [v.parents for v in network.variables]:
        raise ModelFormatError("'structures': the first structure must be the model's own")
    with_draws = network.variables[0].draws is not None
    for k, m in enumerate(members):
        other = m.network
        if other.structures:
            raise ModelFormatError(f"'structures'[{k}]: a structure of the sample cannot hold a sample of its own")
        if other.names != network.names or any(
                a.values != b.values or a.group != b.group or a.sensor != b.sensor
                for a, b in zip(other.variables, network.variables)):
            raise ModelFormatError(f"'structures'[{k}]: its variables, values and sensors must be the model's")
        if not other.parameterised:
            raise ModelFormatError(f"'structures'[{k}]: every variable needs its parents and 'cpt'")
        if (other.variables[0].draws is not None) != with_draws:
            raise ModelFormatError(f"'structures'[{k}]: give posterior 'draws' in every structure or in none")


def _validate_cluster_by(network, v: Variable, where: str) -> None:
    cluster_by = v.sensor.cluster_by
    if not cluster_by or v.sensor.fitted:
        return
    if v.values is not None:
        raise ModelFormatError(f"{where}: with sensor 'cluster_by' leave 'values' out: they are the conditions found "
                               "in the cases")
    for n in cluster_by:
        if n not in network.names:
            raise ModelFormatError(f"{where}: sensor 'cluster_by' names unknown variable '{n}'; "
                                   f"variables are {list(network.names)}")
        if n == v.name:
            raise ModelFormatError(f"{where}: sensor 'cluster_by' cannot name the variable itself")
        other = network[n].sensor
        if network[n].values is None and (other is None or other.cluster_by):
            raise ModelFormatError(f"{where}: sensor 'cluster_by' names '{n}', whose values are themselves found "
                                   "per condition; name variables with values or a BIC-clustered sensor")
    if len(set(cluster_by)) != len(cluster_by):
        raise ModelFormatError(f"{where}: repeated names in sensor 'cluster_by' {list(cluster_by)}")


def _validate_sensor(v: Variable, where: str, seen: set) -> None:
    s = v.sensor
    if any(not isinstance(n, str) or not n for n in s.names):
        raise ModelFormatError(f"{where}: its sensor needs a non-empty string 'name' (or 'names')")
    for n in s.names:
        if n in seen:
            raise ModelFormatError(f"{where}: sensor name '{n}' is used twice")
        seen.add(n)
    if s.covariance_type not in COVARIANCE_TYPES:
        raise ModelFormatError(f"{where}: sensor 'covariance_type' is {s.covariance_type!r}; "
                               f"expected one of {list(COVARIANCE_TYPES)}")
    if s.vector:
        _validate_vector_sensor(v, where)
    elif (s.means is None) != (s.stddevs is None):
        raise ModelFormatError(f"{where}: give both sensor 'means' and 'stddevs', or neither")
    if s.fitted and not s.vector:
        if v.values is None:
            raise ModelFormatError(f"{where}: sensor means are given, so 'values' must be given too")
        for field in ("means", "stddevs"):
            arr = getattr(s, field)
            if arr.shape != (len(v.values),):
                raise ModelFormatError(
                    f"{where}: sensor '{field}' has {arr.size} entries, expected one per value ({len(v.values)})")
            if not np.all(np.isfinite(arr)):
                raise ModelFormatError(f"{where}: sensor '{field}' must be finite numbers")
        if np.any(s.stddevs <= 0):
            raise ModelFormatError(f"{where}: sensor 'stddevs' must be > 0")
    if not isinstance(s.max_components, int) or s.max_components < 1:
        raise ModelFormatError(f"{where}: sensor 'max_components' must be an integer >= 1")
    if s.valid_range is not None:
        low, high = s.valid_range
        if not (is_finite_number(low) and is_finite_number(high) and low < high):
            raise ModelFormatError(f"{where}: sensor 'valid_range' must be [low, high], finite, low < high")


def _validate_vector_sensor(v: Variable, where: str) -> None:
    s = v.sensor
    if (s.means is None) != (s.covariances is None):
        raise ModelFormatError(f"{where}: give both sensor 'means' and 'covariances', or neither")
    if s.stddevs is not None:
        raise ModelFormatError(f"{where}: a sensor with several 'names' takes 'covariances', not 'stddevs'")
    if not s.fitted:
        return
    if v.values is None:
        raise ModelFormatError(f"{where}: sensor means are given, so 'values' must be given too")
    card, d = len(v.values), s.dim
    if s.means.shape != (card, d):
        raise ModelFormatError(f"{where}: sensor 'means' has shape {list(s.means.shape)}, expected "
                               f"{[card, d]} (one row per value, one column per name)")
    if s.covariances.shape != (card, d, d):
        raise ModelFormatError(f"{where}: sensor 'covariances' has shape {list(s.covariances.shape)}, "
                               f"expected {[card, d, d]} (one matrix per value)")
    for field in ("means", "covariances"):
        if not np.all(np.isfinite(getattr(s, field))):
            raise ModelFormatError(f"{where}: sensor '{field}' must be finite numbers")
    if not np.allclose(s.covariances, np.swapaxes(s.covariances, 1, 2), rtol=1e-6, atol=1e-9):
        raise ModelFormatError(f"{where}: sensor 'covariances' must be symmetric matrices")
    if np.any(np.linalg.eigvalsh(s.covariances)[:, 0] <= 0):
        raise ModelFormatError(f"{where}: sensor 'covariances' must be positive definite")


def _validate_cpt(network, v: Variable, where: str) -> None:
    if v.parents is None:
        raise ModelFormatError(f"{where}: a 'cpt' needs 'parents'")
    if v.values is None:
        raise ModelFormatError(f"{where}: a 'cpt' needs 'values'")
    shape = tuple(len(network.variables[network.index(p)].values or ()) for p in v.parents) + (len(v.values),)
    if v.cpt.shape != shape:
        names = [*v.parents, v.name]
        raise ModelFormatError(
            f"{where}: cpt has shape {list(v.cpt.shape)}, expected {list(shape)} (axes {names})")
    if not np.all(np.isfinite(v.cpt)) or np.any(v.cpt < 0):
        raise ModelFormatError(f"{where}: cpt entries must be finite and >= 0")
    sums = v.cpt.sum(axis=-1)
    if np.any(np.abs(sums - 1.0) > _NORMALISATION_TOLERANCE):
        bad = np.unravel_index(np.argmax(np.abs(sums - 1.0)), sums.shape)
        raise ModelFormatError(
            f"{where}: cpt rows must sum to 1; the row for parent values {list(bad)} sums to {sums[bad]:.6g}")


def _validate_counts(v: Variable, where: str) -> None:
    if v.cpt is None:
        raise ModelFormatError(f"{where}: 'counts' need a 'cpt' (they are its Dirichlet posterior)")
    if v.counts.shape != v.cpt.shape:
        raise ModelFormatError(f"{where}: 'counts' have shape {list(v.counts.shape)}, expected the cpt's "
                               f"{list(v.cpt.shape)}")
    if not np.all(np.isfinite(v.counts)) or np.any(v.counts < 0):
        raise ModelFormatError(f"{where}: 'counts' must be finite and >= 0")


def _validate_draws(v: Variable, where: str) -> None:
    if v.cpt is None:
        raise ModelFormatError(f"{where}: 'draws' and 'prior' need a 'cpt' (they are its posterior)")
    if v.draws is None or v.prior is None:
        raise ModelFormatError(f"{where}: give both 'draws' and 'prior' (the posterior's), or neither")
    if v.draws.ndim != v.cpt.ndim + 1 or v.draws.shape[1:] != v.cpt.shape or v.draws.shape[0] < 1:
        raise ModelFormatError(f"{where}: 'draws' have shape {list(v.draws.shape)}, expected [S, "
                               f"{', '.join(str(k) for k in v.cpt.shape)}]: S >= 1 draws, each shaped like the cpt")
    if v.prior.shape != v.cpt.shape:
        raise ModelFormatError(f"{where}: 'prior' has shape {list(v.prior.shape)}, expected the cpt's "
                               f"{list(v.cpt.shape)}")
    _validate_draw_values(v, where)


def _validate_draw_values(v: Variable, where: str) -> None:
    """ModelFormatError unless ``v``'s draws are what a learn makes: counts (finite, >= 0, the prior's pseudo-counts
    too), and for every draw each CPT row its Dirichlet(draw + prior) gives sums to 1 within the CPTs' tolerance
    (the row's mean, (draw + prior) / their total, or a flat row where the total is 0): that fails where a row's
    total overflows a double, and every answer under that draw would.
    """
    for key, counts in (("draws", v.draws), ("prior", v.prior)):
        bad = ~np.isfinite(counts) | (counts < 0)
        if np.any(bad):
            at = np.unravel_index(np.argmax(bad), bad.shape)
            entry = [int(k) for k in (at[1:] if key == "draws" else at)]
            place = (f"draw {at[0]}, " if key == "draws" else "") + f"entry {entry}"
            raise ModelFormatError(f"{where}: '{key}' must be finite and >= 0 (they are counts of cases); {place} "
                                   f"is {counts[at]:g}")
    alpha = v.draws + v.prior
    with np.errstate(over="ignore", invalid="ignore"):
        totals = alpha.sum(axis=-1, keepdims=True)
        sums = np.where(totals > 0, alpha / totals, 1.0 / alpha.shape[-1]).sum(axis=-1)
    off = np.abs(sums - 1.0) > _NORMALISATION_TOLERANCE
    if np.any(off):
        at = np.unravel_index(np.argmax(off), off.shape)
        row = f"row for parent values {[int(k) for k in at[1:]]}" if len(at) > 1 else "row"
        raise ModelFormatError(
            f"{where}: 'draws': the CPT rows of draw {at[0]} must sum to 1, but its {row} sums to {sums[at]:.6g}: "
            f"draw + prior there total {totals[at][0]:g}, more than a double holds (draws are counts of cases, each "
            "row's total with the prior a finite number)")


def _validate_draw_counts(network) -> None:
    """ModelFormatError unless every variable with a CPT has draws, as many as the others, or none has."""
    with_cpt = [v for v in network.variables if v.cpt is not None]
    sizes = {v.draws.shape[0] for v in with_cpt if v.draws is not None}
    if not sizes:
        return
    if len(sizes) > 1:
        raise ModelFormatError(f"the variables' 'draws' differ in number ({sorted(sizes)}): every variable needs the "
                               "same draws")
    missing = [v.name for v in with_cpt if v.draws is None]
    if missing:
        raise ModelFormatError(f"variables {missing} have no 'draws' where the others have: give every variable's "
                               "draws, or none")


def topological_names(names: Sequence[str], parents: Mapping[str, Sequence[str]]) -> list[str]:
    """Kahn's algorithm; ModelFormatError naming the variables on a cycle."""
    children = {n: [] for n in names}
    indegree = {n: 0 for n in names}
    for n in names:
        for p in parents[n] or ():
            children[p].append(n)
            indegree[n] += 1
    ready = [n for n in names if indegree[n] == 0]
    order = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for c in children[n]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if len(order) != len(names):
        cyclic = [n for n in names if indegree[n] > 0]
        raise ModelFormatError(f"the structure has a cycle through {cyclic}")
    return order
