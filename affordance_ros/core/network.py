"""The affordance network: discrete variables, their DAG, CPTs and Gaussian sensor models, and a sample of structures.

One class serves as both configuration (what to learn: CPTs, arcs or sensor parameters left out) and learned model
(everything present). Its parts are ``core.variables``'; what makes it valid, ``core.model_checks``; its JSON file,
``core.model_file``.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from .errors import EvidenceError, ModelFormatError, did_you_mean
from .inference import JunctionTree
from .model_checks import check_network, check_structures, topological_names
from .model_file import (
    FORMAT,
    FORMAT_VECTOR,
    NetworkFile,
    current_umask,
    model_text,
    write_json_atomic,
    written_atomically,
)
from .variables import (
    COVARIANCE_TYPES,
    DEFAULT_VALID_RANGE,
    GROUPS,
    SENSOR_GROUPS,
    SensorModel,
    Variable,
    WeightedNetwork,
    out_of_range,
    posterior_mean,
)


class AffordanceNetwork(NetworkFile):
    """Variables in a fixed order, validated on construction; immutable by convention.

    Use ``with_structure``/``with_cpts`` to derive new networks; the JSON file is ``NetworkFile``'s.
    """

    def __init__(self, variables: Sequence[Variable], metadata: Mapping | None = None,
                 learning: Mapping | None = None, structures: Sequence["WeightedNetwork"] = ()):
        self.variables: tuple[Variable, ...] = tuple(variables)
        self.metadata = dict(metadata or {})
        self.learning = dict(learning or {})
        self.names: tuple[str, ...] = tuple(v.name for v in self.variables)
        self._index = {name: i for i, name in enumerate(self.names)}
        self.structures: tuple[WeightedNetwork, ...] = tuple(structures)
        check_network(self)
        if self.structures:
            check_structures(self)
        # every reading name -> the variable its sensor observes
        self.sensor_variable = {r: v.name for v in self.variables if v.sensor
                                for r in v.sensor.names}
        self._engine = None
        self._derived: dict = {}

    # ----------------------------------------------------------------- access
    def __len__(self) -> int:
        return len(self.variables)

    def __getitem__(self, name: str) -> Variable:
        return self.variables[self.index(name)]

    def index(self, name: str) -> int:
        """Position of a variable; EvidenceError naming the variables if unknown."""
        try:
            return self._index[name]
        except KeyError:
            raise EvidenceError(f"unknown variable '{name}'{did_you_mean(name, self.names)}; "
                                f"the network has {list(self.names)}") from None

    @property
    def cards(self) -> tuple[int, ...]:
        """Number of values of every variable, in network order."""
        return tuple(v.card for v in self.variables)

    @property
    def structure_known(self) -> bool:
        """Whether every variable has its parents."""
        return all(v.parents is not None for v in self.variables)

    @property
    def parameterised(self) -> bool:
        """Whether the structure, every CPT and every sensor model are known."""
        return self.structure_known and all(
            v.cpt is not None and (v.sensor is None or v.sensor.fitted) for v in self.variables)

    @property
    def arcs(self) -> list[tuple[str, str]]:
        """(parent, child) pairs, in network order."""
        return [(p, v.name) for v in self.variables for p in (v.parents or ())]

    def parent_indices(self, i: int) -> tuple[int, ...]:
        """Positions of the parents of the ``i``-th variable."""
        return tuple(self._index[p] for p in self.variables[i].parents)

    def ancestors(self, name: str) -> set[str]:
        """The variables from which a path of arcs leads to variable ``name``."""
        found, todo = set(), list(self[name].parents or ())
        while todo:
            parent = todo.pop()
            if parent not in found:
                found.add(parent)
                todo.extend(self[parent].parents or ())
        return found

    def group(self, group: str) -> list[str]:
        """Names of the variables in ``group`` (action, object or effect)."""
        if group not in GROUPS:
            raise EvidenceError(f"unknown group '{group}'{did_you_mean(group, GROUPS)}; "
                                f"expected one of {list(GROUPS)}")
        return [v.name for v in self.variables if v.group == group]

    def sensor(self, sensor_name: str) -> tuple[Variable, SensorModel]:
        """(variable, sensor model) of a reading name: a 1-D sensor's, or one of a vector's."""
        try:
            var = self[self.sensor_variable[sensor_name]]
        except KeyError:
            raise unknown_sensor(self, sensor_name) from None
        return var, var.sensor

    def resolve_query(self, query: Iterable[str]) -> list[str]:
        """Variable names for a query of names and groups, in network order, without repeats."""
        if isinstance(query, str):  # (its letters would be taken for names: "unknown variable 'A'")
            raise EvidenceError(f"the query is the string {query!r}: give a list of variable names "
                                f"or groups, e.g. [{query!r}]")
        wanted = set()
        for item in query:
            if item in GROUPS:
                wanted.update(self.group(item))
            elif item in self._index:
                wanted.add(item)
            else:
                near = did_you_mean(item, [*GROUPS, *self.names])
                raise EvidenceError(f"unknown variable '{item}'{near}; the network has "
                                    f"{list(self.names)}, and the groups are {list(GROUPS)}")
        if not wanted:
            raise EvidenceError("empty query: name at least one variable or group")
        return [n for n in self.names if n in wanted]

    def topological_order(self) -> list[int]:
        """Variable positions, every parent before its children."""
        order = topological_names(self.names, {v.name: v.parents for v in self.variables})
        return [self._index[n] for n in order]

    @property
    def engine(self):
        """The compiled exact-inference engine (a junction tree), built once per structure."""
        if self._engine is None:
            if not self.parameterised:
                raise ModelFormatError("the network has no learned parameters yet: learn it first")
            self._engine = junction_tree(self)
        return self._engine

    def derived(self, what: str, build):
        """``build()``, made once per network and kept with it: what answers derive from a model and reuse (the
        CPT sets of its posterior draws, its structures' groups per query).
        """
        found = self._derived.get(what)
        if found is None:
            found = self._derived[what] = build()
        return found

    # -------------------------------------------------------------- derivation
    def replace_variables(self, changes: Mapping[str, Mapping]) -> "AffordanceNetwork":
        """A new network with fields of some variables replaced, e.g. {"Size": {"cpt": ...}}."""
        # (a variable's fields and the changes as keywords: dataclasses.replace's result, at half its cost)
        variables = [Variable(**{**vars(v), **changes[v.name]}) if v.name in changes else v for v in self.variables]
        return AffordanceNetwork(variables, self.metadata, self.learning)

    def with_structure(self, parents: Mapping[str, Sequence[str]]) -> "AffordanceNetwork":
        """Set every variable's parents; CPTs and their counts are dropped (they no longer fit)."""
        dropped = {"cpt": None, "counts": None, "draws": None, "prior": None}
        return AffordanceNetwork([Variable(**{**vars(v), **dropped, "parents": tuple(parents.get(v.name, ()))})
                                  for v in self.variables], self.metadata, self.learning)

    def with_cpts(self, cpts: Mapping[str, np.ndarray],
                  counts: Mapping[str, np.ndarray] | None = None,
                  draws: Mapping[str, tuple] | None = None) -> "AffordanceNetwork":
        """A new network with these CPTs (by variable name), the Dirichlet ``counts`` behind them
        and their posterior ``draws`` {name: (draws, prior)} (a variable given a CPT without counts
        or draws has none: old ones would not fit).
        """
        counts, draws = counts or {}, draws or {}
        return self.replace_variables(
            {n: {"cpt": np.asarray(c, dtype=float), "counts": _floats(counts.get(n)),
                 "draws": _floats(draws.get(n, (None,))[0]),
                 "prior": _floats(draws.get(n, (None, None))[1])}
             for n, c in cpts.items()})

    def with_posterior(self, draws: Mapping[str, tuple]) -> "AffordanceNetwork":
        """A new network with these posterior ``draws`` {name: (draws, prior)}, each CPT and its counts the posterior
        mean they give (``variables.posterior_mean``): a structure of a sample, as a learn or an online update makes it.
        """
        means = {name: posterior_mean(d, a) for name, (d, a) in draws.items()}
        return self.with_cpts({name: cpt for name, (_, cpt) in means.items()},
                              {name: counts for name, (counts, _) in means.items()}, draws)

    @property
    def has_counts(self) -> bool:
        """Whether every CPT carries its Dirichlet posterior counts (``Variable.counts``)."""
        return all(v.counts is not None for v in self.variables)

    def cpts(self) -> dict[str, np.ndarray]:
        """{variable: CPT} (None where not learned)."""
        return {v.name: v.cpt for v in self.variables}

    # ------------------------------------------------------- sample of structures
    @property
    def members(self) -> tuple["WeightedNetwork", ...]:
        """The structures answers average over, most probable first, each with its weight: ``structures``, or this
        network alone (a model learned with one structure, or by an earlier version, is a sample of one).
        """
        return self.structures or (WeightedNetwork(1.0, self),)

    def with_structures(self, members: Sequence["WeightedNetwork"]) -> "AffordanceNetwork":
        """The network of ``members``' first (its variables) with ``members`` as its sample of structures."""
        first = members[0].network
        return AffordanceNetwork(first.variables, self.metadata, self.learning,
                                 members if len(members) > 1 else ())

    def arc_probabilities(self) -> dict[tuple[str, str], float]:
        """{(parent, child): the share of the sample's weight whose structure has that arc}: 1.0 for every arc of a
        model with one structure.
        """
        out: dict = {}
        for member in self.members:
            for arc in member.network.arcs:
                out[arc] = out.get(arc, 0.0) + member.weight
        return out


def _floats(array) -> np.ndarray | None:
    return None if array is None else np.asarray(array, dtype=float)


_TREES: dict = {}


_MAX_TREES = 64


def junction_tree(network: AffordanceNetwork) -> JunctionTree:
    """The junction tree of ``network``'s structure, compiled once for all networks with the same variables, values
    and parents (the CPTs are passed to each of its calls): online learning makes a new network per case.
    """
    key = tuple((v.name, len(v.values), v.parents) for v in network.variables)
    found = _TREES.get(key)
    if found is None:
        if len(_TREES) >= _MAX_TREES:
            _TREES.pop(next(iter(_TREES)))
        found = _TREES[key] = JunctionTree(network)
    return found


def unknown_sensor(network: AffordanceNetwork, name: str) -> EvidenceError:
    """The error for a reading name that no sensor of ``network`` has; it names the one meant, if one is near."""
    known = sorted(network.sensor_variable)
    return EvidenceError(f"unknown sensor '{name}'{did_you_mean(name, known)}; the network has {known}")


__all__ = ["COVARIANCE_TYPES", "DEFAULT_VALID_RANGE", "FORMAT", "FORMAT_VECTOR", "GROUPS", "SENSOR_GROUPS",
           "AffordanceNetwork", "SensorModel", "Variable", "WeightedNetwork", "current_umask", "junction_tree",
           "model_text", "out_of_range", "unknown_sensor", "write_json_atomic", "written_atomically"]
