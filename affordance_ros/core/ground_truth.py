"""Ground-truth networks of the paper's experiments, and sampling trials from a network.

The two networks (``simple`` and ``montesano``) follow shared/benchmarks/networks.yaml:
every variable is seen through a sensor ~ Normal(5 * v, sigma); CPT rows are drawn
from a symmetric Dirichlet(1).
"""

from __future__ import annotations

import re

import numpy as np

from .cases import CaseSet
from .evidence import Evidence
from .inference import joint_posterior
from .network import AffordanceNetwork, SensorModel, Variable

NETWORKS = {
    "simple": {
        "variables": [(name, "object", ("0", "1")) for name in "ABCDEFG"],
        "arcs": [("A", "C"), ("B", "C")],
    },
    "montesano": {
        "variables": [
            ("Action", "action", ("grasp", "tap", "touch")),
            ("Color", "object", ("green1", "green2", "yellow", "blue")),
            ("Shape", "object", ("circle", "box")),
            ("Size", "object", ("small", "medium", "big")),
            ("ObjVel", "effect", ("slow", "medium", "fast")),
            ("ObjHandVel", "effect", ("slow", "medium", "fast")),
            ("HandVel", "effect", ("still", "slow", "medium", "fast")),
            ("Contact", "effect", ("short", "long")),
        ],
        "arcs": [("Action", "ObjVel"), ("Action", "ObjHandVel"), ("Action", "HandVel"),
                 ("Action", "Contact"), ("Shape", "ObjVel"), ("Shape", "Contact"),
                 ("Size", "ObjVel"), ("Size", "Contact"), ("ObjVel", "ObjHandVel"),
                 ("ObjHandVel", "Contact")],
    },
}


def sensor_name(variable: str) -> str:
    """The sensor of a variable: its snake-case name ('ObjHandVel' -> 'obj_hand_vel')."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", variable).lower()


def benchmark_structure(name: str, sigma: float | None = 3.0) -> AffordanceNetwork:
    """One of the paper's networks with its arcs and sensors N(5v, sigma), without CPTs.

    ``sigma=None`` leaves the sensor models to be fitted.
    """
    try:
        spec = NETWORKS[name]
    except KeyError:
        raise ValueError(f"unknown benchmark network '{name}'; expected one of {sorted(NETWORKS)}") from None
    variables = []
    for var, group, values in spec["variables"]:
        means = None if sigma is None else 5.0 * np.arange(len(values))
        stddevs = None if sigma is None else np.full(len(values), float(sigma))
        variables.append(Variable(
            name=var, group=group, values=values,
            parents=tuple(p for p, c in spec["arcs"] if c == var),
            sensor=SensorModel(sensor_name(var), means, stddevs)))
    return AffordanceNetwork(variables, metadata={"benchmark": name, "sigma": sigma})


def random_cpts(network: AffordanceNetwork, rng: np.random.Generator, alpha: float = 1.0) -> AffordanceNetwork:
    """Every CPT row drawn from a symmetric Dirichlet(alpha)."""
    cpts = {}
    for v in network.variables:
        shape = [network[p].card for p in v.parents] + [v.card]
        cpts[v.name] = rng.dirichlet(np.full(v.card, alpha), size=shape[:-1]).reshape(shape)
    return network.with_cpts(cpts)


def benchmark_network(name: str, sigma: float = 3.0, seed: int = 0) -> AffordanceNetwork:
    """A ground truth as in the paper's procedure: known structure and sensors, Dirichlet(1) CPTs."""
    return random_cpts(benchmark_structure(name, sigma), np.random.default_rng(seed))


def sample_values(network: AffordanceNetwork, n: int, rng: np.random.Generator,
                  given: dict | None = None) -> np.ndarray:
    """Ancestral sampling of the hidden values, codes (n, variables); ``given`` {variable index: codes (n,)}
    fixes some (e.g. the action a robot chose and the object it chose it for), the rest follow them.
    """
    codes = np.empty((n, len(network)), dtype=np.int64)
    for i in network.topological_order():
        if given and i in given:
            codes[:, i] = given[i]
            continue
        v = network.variables[i]
        rows = v.cpt[tuple(codes[:, p] for p in network.parent_indices(i))] if v.parents else \
            np.broadcast_to(v.cpt, (n, v.card))
        u = rng.random((n, 1))
        codes[:, i] = np.minimum((np.cumsum(rows, axis=1) < u).sum(axis=1), v.card - 1)
    return codes


def sample_cases(network: AffordanceNetwork, n: int, rng: np.random.Generator,
                 labelled: tuple[str, ...] = ()) -> tuple[CaseSet, np.ndarray]:
    """Sample n trials: readings of every sensor, labels of the ``labelled`` variables.

    Variables in ``labelled`` are reported by label only (as the robot reports its action).
    Returns (cases, true hidden codes (n, variables)).
    """
    codes = sample_values(network, n, rng)
    readings, labels = {}, {}
    for i, v in enumerate(network.variables):
        if v.name in labelled:
            labels[v.name] = codes[:, i].copy()
        elif v.sensor is not None:
            noise = rng.standard_normal(n)
            readings[v.sensor.name] = v.sensor.means[codes[:, i]] + v.sensor.stddevs[codes[:, i]] * noise
        else:
            labels[v.name] = codes[:, i].copy()
    ids = [f"t{k:06d}" for k in range(n)]
    return CaseSet(network, labels, readings, ids), codes


__all__ = ["NETWORKS", "benchmark_structure", "benchmark_network", "random_cpts", "sample_values",
           "sample_cases", "sensor_name"]


def parent_weights(truth) -> list:
    """p(parent configuration) under the truth for every CPT row, shaped like the CPT without its last axis."""
    engine = truth.engine
    calibration = engine.calibrate([v.cpt for v in truth.variables], Evidence.empty(len(truth)))
    weights = []
    for i, v in enumerate(truth.variables):
        parents = truth.parent_indices(i)
        weights.append(joint_posterior(engine, calibration, parents)[0] if parents else np.ones(()))
    return weights


def weighted_rms(learned, truth, weights) -> float:
    """RMS error with each CPT row counted by how probable its parent configuration is.

    sqrt(sum_i E_pa[sum_v (learned - true)^2] / sum_i r_i): equal to the plain RMS when every
    parent configuration is equally likely; rows that (almost) never occur count (almost) nothing.
    """
    num = sum(float((w * ((a - b) ** 2).sum(axis=-1)).sum()) for a, b, w in zip(learned, truth, weights))
    den = sum(a.shape[-1] for a in truth)
    return float(np.sqrt(num / den))
