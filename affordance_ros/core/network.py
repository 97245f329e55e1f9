"""The affordance network: discrete variables, their DAG, CPTs and Gaussian sensor models.

One class serves as both configuration (what to learn: CPTs, arcs or sensor
parameters left out) and learned model (everything present). The JSON form is the
``affordance_ros/model/1`` schema documented in the README, or ``affordance_ros/model/2``
when a sensor is a vector sensor (several readings at once); a model whose sensors are
all 1-D is still written as /1, so that earlier versions read it (unless it carries the optional
``counts``, which versions before them refuse as an unknown key).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from .errors import EvidenceError, ModelFormatError, did_you_mean
from .gaussian import log_density, mixture_weights
from .inference import JunctionTree
from .number_checks import is_finite_number

FORMAT = "affordance_ros/model/1"
# /1 plus vector sensors ("names", "means" (card, d), "covariances" (card, d, d)).
FORMAT_VECTOR = "affordance_ros/model/2"
FORMATS = (FORMAT, FORMAT_VECTOR)
_CASES = ": cases, to learn a model from (affordance-ros learn --cases FILE --config CONFIG --out model.json)"
_NETWORK = ": another tool's network, to make a model of with a configuration (affordance-ros import-model)"
# what a file given as a model or configuration may be instead, told by how it starts: (starts, kind, advice)
OTHER_KINDS = (
    ((b"SQLite format 3\x00",), "an SQLite database (the node's cases, or a bag's)", _CASES),
    ((b"\x89MCAP",), "an MCAP bag", _CASES),
    ((b"network ", b"// Bayesian"), "a BIF network", _NETWORK),
    ((b"<?xml",), "an XML file (an XMLBIF network?)", _NETWORK),
    ((b"BAYES", b"MARKOV"), "a UAI network", _NETWORK),
    ((b"\x89PNG", b"%PDF", b"<svg"), "a picture", ""),
)
COVARIANCE_TYPES = ("auto", "full", "diag")
GROUPS = ("action", "object", "effect")
# The groups seen through sensors whose readings the robot publishes (object features, effects).
SENSOR_GROUPS = ("object", "effect")
# The readings a sensor accepts when its configuration gives no 'valid_range': anything a physical
# sensor can report in any unit, far below the values that overflow a Gaussian log-likelihood (~1e154).
DEFAULT_VALID_RANGE = (-1e9, 1e9)
_NORMALISATION_TOLERANCE = 1e-6


def out_of_range(sensor_name: str, reading: float, bounds: tuple[float, float]) -> str:
    """What is wrong with a reading outside its sensor's valid_range (``SensorModel.bounds``): the node's
    intake, a file's cases and a query say the same.
    """
    low, high = bounds
    return (f"reading of sensor '{sensor_name}' is {reading:g}, outside its valid_range [{low:g}, {high:g}] "
            "(set 'valid_range' in the sensor's configuration if such readings are real)")


@dataclass(frozen=True, eq=False)
class SensorModel:
    """Gaussian readings of the hidden variable a sensor observes: one Gaussian per value.

    ``means``/``stddevs`` are None while they are still to be fitted from readings;
    ``max_components`` bounds the BIC search when the variable's values are not configured;
    ``valid_range`` (low, high): the readings the robot can plausibly report, for each of its readings
    (None: ``DEFAULT_VALID_RANGE``).

    A 1-D sensor has one reading ``name`` with ``means``/``stddevs`` of shape (card,). A vector
    sensor sees the variable through several readings ``names`` at once (e.g. six shape
    descriptors, or the dx and dy of a displacement): one multivariate Gaussian per value, with
    ``means`` (card, d) and ``covariances`` (card, d, d). A sensor given with ``names`` of one
    reading is stored as a 1-D one. ``means`` etc. are None while they are still to be fitted;
    ``max_components`` bounds the BIC search when the variable's values are not configured, and
    ``covariance_type`` ("full", "diag" or "auto": chosen by BIC) is what a fit of a vector sensor uses.
    ``cluster_by`` (variable names, e.g. the action and the tool): fit the sensor per condition of the
    experiment instead (``core.sensors.fit_conditional_sensor``): two values per combination of those
    variables' values seen in the cases, a robust centre with a core and a wide Gaussian.
    """

    name: str | None = None
    means: np.ndarray | None = None
    stddevs: np.ndarray | None = None
    max_components: int = 6
    valid_range: tuple[float, float] | None = None
    names: tuple[str, ...] | None = None
    covariances: np.ndarray | None = None
    covariance_type: str = "auto"
    cluster_by: tuple[str, ...] = ()

    def __post_init__(self):
        names = self.names
        if names is None:
            names = (self.name,)
        elif isinstance(names, str):
            names = (names,)
        names = tuple(names)
        set_ = lambda field, value: object.__setattr__(self, field, value)  # noqa: E731
        set_("names", names)
        set_("cluster_by", (self.cluster_by,) if isinstance(self.cluster_by, str) else tuple(self.cluster_by))
        if self.name is None:
            set_("name", names[0] if len(names) == 1 else "+".join(str(n) for n in names))
        if len(names) == 1 and self.covariances is not None and self.stddevs is None:
            # one reading given the vector way: keep it as a 1-D sensor
            cov = np.asarray(self.covariances, dtype=float)
            set_("stddevs", np.sqrt(cov.reshape(-1)) if cov.size else cov.reshape(-1))
            set_("covariances", None)
            if self.means is not None:
                set_("means", np.asarray(self.means, dtype=float).reshape(-1))
        if len(names) > 1:
            if self.means is not None:
                set_("means", np.asarray(self.means, dtype=float))
            if self.covariances is not None:
                set_("covariances", np.asarray(self.covariances, dtype=float))

    @property
    def dim(self) -> int:
        """How many readings the sensor reports at once."""
        return len(self.names)

    @property
    def fitted(self) -> bool:
        """Whether the means and stddevs are known."""
        return self.means is not None

    @property
    def bounds(self) -> tuple[float, float]:
        """The readings accepted: ``valid_range``, else ``DEFAULT_VALID_RANGE``."""
        return self.valid_range if self.valid_range is not None else DEFAULT_VALID_RANGE

    @property
    def vector(self) -> bool:
        """Whether the sensor reports several readings at once."""
        return self.dim > 1

    def component_means(self) -> np.ndarray:
        """Means as (card, d), for 1-D and vector sensors alike."""
        return np.asarray(self.means, dtype=float).reshape(-1, self.dim)

    def component_covariances(self) -> np.ndarray:
        """Covariances as (card, d, d), for 1-D and vector sensors alike."""
        if self.vector:
            return self.covariances
        return (np.asarray(self.stddevs, dtype=float) ** 2).reshape(-1, 1, 1)

    def component_stddevs(self) -> np.ndarray:
        """Standard deviation of each reading under each value, (card, d)."""
        return np.sqrt(np.diagonal(self.component_covariances(), axis1=1, axis2=2))

    def log_likelihood(self, readings: np.ndarray) -> np.ndarray:
        """Log p(readings | value) as an array (K, card); a reading that is NaN is marginalised out.

        ``readings``: (K,) for a 1-D sensor, (K, d) for a vector sensor (columns in ``names`` order).
        Rows with no reading at all are 0 (no evidence).
        """
        if not self.fitted:
            raise ModelFormatError(f"sensor '{self.name}' has no means/stddevs yet: fit it first")
        return log_density(np.asarray(readings, dtype=float).reshape(-1, self.dim), self.component_means(),
                           self.component_covariances())

    def mixture_weights(self, readings: np.ndarray) -> np.ndarray:
        """p(value) that explains ``readings`` best with the Gaussians held fixed (EM on the weights only);
        rows without any reading are skipped. ``readings`` as for ``log_likelihood``.
        """
        x = np.asarray(readings, dtype=float).reshape(-1, self.dim)
        return mixture_weights(self.log_likelihood(x[np.any(np.isfinite(x), axis=1)]))


@dataclass(frozen=True, eq=False)
class Variable:
    """A discrete variable of the network, in the group action, object or effect.

    ``counts`` (shaped like ``cpt``, optional): the Dirichlet posterior of the CPT, what the learner saw:
    the expected counts of the cases it learned from plus the prior's pseudo-counts. The CPT is their mean
    (within EM's tolerance; online EM's CPT weighs recent cases more). None: not known (an imported model).

    ``draws`` (S, *cpt shape) and ``prior`` (shaped like ``cpt``), optional: S draws of the exact posterior of
    the CPT given the cases (with the readings as what they are, noisy evidence of the hidden values), each as
    the counts of the cases' values imputed in one sweep of ``core.posterior``'s sampler, and the prior's
    pseudo-counts. A CPT drawn from Dirichlet(draw + prior) is a draw of the posterior; the spread of the
    answers under them is what answers' standard deviations and credible intervals say. None: not known (a
    model learned before them, or imported).
    """

    name: str
    group: str
    values: tuple[str, ...] | None
    parents: tuple[str, ...] | None = None
    sensor: SensorModel | None = None
    cpt: np.ndarray | None = None
    counts: np.ndarray | None = None
    draws: np.ndarray | None = None
    prior: np.ndarray | None = None

    @property
    def card(self) -> int:
        """Number of values."""
        if self.values is None:
            raise ModelFormatError(f"variable '{self.name}' has no values yet: fit its sensor first")
        return len(self.values)

    def code(self, label: str) -> int:
        """Index of a label; EvidenceError naming the allowed labels if unknown."""
        try:
            return self.values.index(label)
        except ValueError:
            raise EvidenceError(
                f"unknown label '{label}' for variable '{self.name}'{did_you_mean(label, self.values)}; "
                f"expected one of {list(self.values)}{self._reading_hint(label)}") from None

    def _reading_hint(self, label: str) -> str:
        """For a number given as a label of a variable with a sensor: where its readings go instead ('nan' is no
        reading: a missing entry, perhaps).
        """
        try:
            reading = float(label)
        except (TypeError, ValueError):
            return ""
        if self.sensor is None or not np.isfinite(reading):
            return ""
        names = " or ".join(f"'{name}'" for name in self.sensor.names)
        return f" ('{label}' is a number: a reading of {self.name}'s sensor goes under the sensor's name, {names})"


class NetworkFile:
    """The JSON document and file of an ``AffordanceNetwork`` (the ``affordance_ros/model`` schema):
    ``to_dict``/``from_dict``, ``save``/``load``.
    """

    @property
    def has_vector_sensors(self) -> bool:
        """Whether any sensor reports several readings at once (the model file is then /2)."""
        return any(v.sensor is not None and v.sensor.vector for v in self.variables)

    def to_dict(self) -> dict:
        """The JSON document: format /1, or /2 when a sensor is a vector sensor."""
        doc = {"format": FORMAT_VECTOR if self.has_vector_sensors else FORMAT,
               "variables": [_variable_dict(v) for v in self.variables], "metadata": self.metadata}
        if self.learning:
            doc["learning"] = self.learning
        if self.structures:
            doc["structures"] = [{"weight": self.structures[0].weight},
                                 *({"weight": m.weight, "variables": [_member_variable_dict(v) for v in
                                                                      m.network.variables]}
                                   for m in self.structures[1:])]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping) -> "AffordanceNetwork":
        """The network of a JSON document; ModelFormatError for anything off the schema."""
        return _network_of(doc)

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON (``model_text``) atomically: readers see the old file or the new."""
        with written_atomically(path) as f:
            f.write(model_text(self))

    @classmethod
    def load(cls, path: str | os.PathLike, what: str = "model file") -> "AffordanceNetwork":
        """Read a model or configuration file (``what``: for the messages), every field checked."""
        path = Path(path)
        doc = _read_json(path, what)
        try:
            return cls.from_dict(doc)
        except ModelFormatError as exc:
            raise ModelFormatError(f"'{path}': {exc}") from None


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
        _validate(self)
        if self.structures:
            _validate_structures(self)
        # every reading name -> the variable its sensor observes
        self.sensor_variable = {r: v.name for v in self.variables if v.sensor
                                for r in v.sensor.names}
        self._engine = None

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
        order = _topological_order(self.names, {v.name: v.parents for v in self.variables})
        return [self._index[n] for n in order]

    @property
    def engine(self):
        """The compiled exact-inference engine (a junction tree), built once per structure."""
        if self._engine is None:
            if not self.parameterised:
                raise ModelFormatError("the network has no learned parameters yet: learn it first")
            self._engine = junction_tree(self)
        return self._engine

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


@dataclass(frozen=True, eq=False)
class WeightedNetwork:
    """One structure of a model's sample (``AffordanceNetwork.structures``): a network with the model's variables,
    values and sensors, its own parents, CPTs and posterior draws, and its posterior probability ``weight``.
    """

    weight: float
    network: AffordanceNetwork


def _network_of(doc: Mapping) -> AffordanceNetwork:
    """``_network_from_document``, with every error of a malformed document a ModelFormatError."""
    try:
        return _network_from_document(doc)
    except ModelFormatError:
        raise
    except RecursionError:
        raise ModelFormatError("the document is nested too deeply to be a model") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        # e.g. a name that is a list (unhashable): whatever the schema's checks did not name
        raise ModelFormatError(f"malformed model ({type(exc).__name__}: {_clipped(exc)})") from None


def _read_json(path: Path, what: str):
    """The JSON document of file ``path``; ModelFormatError saying what it is instead when it is
    not JSON.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"cannot read {what} '{path}': {exc.strerror}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelFormatError(_other_kind(path, data, what)
                               or f"'{path}' is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # json.JSONDecodeError, and numbers too long to convert
        raise ModelFormatError(_other_kind(path, data, what)
                               or f"'{path}' is not valid JSON: {_clipped(exc)}") from None
    except RecursionError:
        raise ModelFormatError(f"'{path}' is not a model: its JSON is nested too deeply") from None


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


# ------------------------------------------------------------------ validation
def _network_from_document(doc: Mapping) -> AffordanceNetwork:
    if not isinstance(doc, Mapping):
        raise ModelFormatError("a model must be a JSON object with 'format' and 'variables'")
    if doc.get("format") not in FORMATS:
        raise ModelFormatError(f"'format' is {doc.get('format')!r}, expected one of {list(FORMATS)}")
    unknown = set(doc) - {"format", "variables", "metadata", "learning", "structures"}
    if unknown:
        raise ModelFormatError(f"unknown top-level keys {sorted(unknown)}")
    raw = doc.get("variables")
    if not isinstance(raw, list):
        raise ModelFormatError("'variables' must be a list")
    network = AffordanceNetwork([_variable_from_dict(d, i) for i, d in enumerate(raw)],
                                _mapping(doc.get("metadata"), "metadata"), _mapping(doc.get("learning"), "learning"))
    if doc.get("structures") is not None:
        network = network.with_structures(_members_from_document(network, doc["structures"]))
    if network.has_vector_sensors and doc["format"] != FORMAT_VECTOR:
        raise ModelFormatError(f"a sensor with several 'names' needs 'format' {FORMAT_VECTOR!r}")
    return network


def _validate(network: "AffordanceNetwork") -> None:
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
                if p not in network._index:
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
    if len(network._index) != len(network.variables):
        raise ModelFormatError(f"repeated variable names in {list(network.names)}")
    if network.structure_known:
        _topological_order(network.names, {v.name: v.parents for v in network.variables})
    _validate_draw_counts(network)

MEMBER_KEYS = ("parents", "cpt", "counts", "draws", "prior")  # what a structure of a sample has of its own


def _members_from_document(network: AffordanceNetwork, raw) -> list:
    """The ``WeightedNetwork`` members of a document's "structures": the first is ``network`` itself (its weight
    only), every other the network's variables with its own parents, CPTs and draws.
    """
    if not isinstance(raw, list) or not raw or not all(isinstance(m, Mapping) for m in raw):
        raise ModelFormatError("'structures' must be a non-empty list of objects, each with a 'weight'")
    members = []
    for k, m in enumerate(raw):
        where = f"structures[{k}]"
        unknown = set(m) - {"weight", "variables"}
        if unknown or "weight" not in m or (k > 0) != ("variables" in m):
            raise ModelFormatError(f"{where}: expected {{'weight'}} for the first structure (the model's own) and "
                                   f"{{'weight', 'variables'}} for the others, got keys {sorted(m)}")
        if not is_finite_number(m["weight"]) or not 0 < m["weight"] <= 1:
            raise ModelFormatError(f"{where}: 'weight' must be a number in (0, 1], got {m['weight']!r}")
        if k == 0:
            members.append(WeightedNetwork(float(m["weight"]), AffordanceNetwork(network.variables)))
            continue
        own = m["variables"]
        if not isinstance(own, list) or len(own) != len(network) or not all(isinstance(d, Mapping) for d in own):
            raise ModelFormatError(f"{where}: 'variables' must list the {len(network)} variables, each an object")
        changes = {}
        for v, d in zip(network.variables, own):
            unknown = set(d) - {"name", *MEMBER_KEYS}
            if d.get("name") != v.name or unknown:
                raise ModelFormatError(f"{where}: expected variable '{v.name}' with keys among "
                                       f"{['name', *MEMBER_KEYS]}, got {d.get('name')!r} with {sorted(d)}")
            if not isinstance(d.get("parents"), list) or not all(isinstance(p, str) for p in d["parents"]):
                raise ModelFormatError(f"{where}: variable '{v.name}': 'parents' must be a list of variable names")
            changes[v.name] = {"parents": tuple(d["parents"]),
                               **{key: _number_array(d.get(key), f"{where}: variable '{v.name}'", key)
                                  for key in MEMBER_KEYS[1:]}}
        members.append(WeightedNetwork(float(m["weight"]),
                                       AffordanceNetwork([dataclasses.replace(v, **changes[v.name])
                                                          for v in network.variables])))
    return members


def _member_variable_dict(v: Variable) -> dict:
    """A variable's entry in a structure of the sample: what differs between structures (``MEMBER_KEYS``)."""
    whole = _variable_dict(v)
    return {"name": v.name, **{key: whole[key] for key in MEMBER_KEYS if key in whole}}


def _validate_structures(network: "AffordanceNetwork") -> None:
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


def _validate_cluster_by(network: "AffordanceNetwork", v: Variable, where: str) -> None:
    cluster_by = v.sensor.cluster_by
    if not cluster_by or v.sensor.fitted:
        return
    if v.values is not None:
        raise ModelFormatError(f"{where}: with sensor 'cluster_by' leave 'values' out: they are the conditions found "
                               "in the cases")
    for n in cluster_by:
        if n not in network._index:
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

def _validate_cpt(network: "AffordanceNetwork", v: Variable, where: str) -> None:
    if v.parents is None:
        raise ModelFormatError(f"{where}: a 'cpt' needs 'parents'")
    if v.values is None:
        raise ModelFormatError(f"{where}: a 'cpt' needs 'values'")
    shape = tuple(len(network.variables[network._index[p]].values or ()) for p in v.parents) + (len(v.values),)
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


def _validate_draw_counts(network: "AffordanceNetwork") -> None:
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


# ------------------------------------------------------------- (de)serial.
def current_umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (elsewhere: set and restore it)
    os.umask(mask)
    return mask


def model_text(network: AffordanceNetwork) -> str:
    """The model file's JSON: indented by one space, but every variable's posterior ``draws`` on one
    line (they are most of the numbers: one a line would make the file several times larger), and each other
    structure of the sample one line a variable.
    """
    doc = network.to_dict()
    draws = {}
    for j, variable in enumerate(doc["variables"]):
        if "draws" in variable:
            draws[f"@draws {j}@"] = json.dumps(variable["draws"], separators=(",", ":"))
            variable["draws"] = f"@draws {j}@"
    for k, member in enumerate(doc.get("structures", [])[1:]):
        for j, variable in enumerate(member["variables"]):
            draws[f"@structure {k} {j}@"] = json.dumps(variable, separators=(",", ":"))
            member["variables"][j] = f"@structure {k} {j}@"
    text = json.dumps(doc, indent=1)
    for mark, array in draws.items():
        text = text.replace(json.dumps(mark), array, 1)
    return text


def write_json_atomic(path: str | os.PathLike, doc) -> None:
    """Write ``doc`` as JSON to ``path`` atomically, with the permissions of a new file (0666 & ~umask)."""
    with written_atomically(path) as f:
        json.dump(doc, f, indent=1)


@contextlib.contextmanager
def written_atomically(path: str | os.PathLike, newline: str | None = None, exclusive: bool = False):
    """A text file to write that becomes ``path`` when the block ends: written beside it, synced, renamed over it
    (readers see the old file or the new one, never half). On any exception, Ctrl-C included, ``path`` is left as
    it was and the temporary file removed. The permissions are a new file's (0666 & ~umask). ``exclusive``: never
    over a file: FileExistsError if ``path`` exists when the block ends (made meanwhile by another program too).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:  # named after the file asked for, not the temporary one beside it
        why = (f"{path.parent} is a file, not a folder" if path.parent.is_file()
               else f"no file can be made in {path.parent} ({exc.strerror})")
        raise OSError(exc.errno, f"cannot write {path}: {why}") from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes it 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            _link_new(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _other_kind(path: Path, data: bytes, what: str) -> str:
    """For a file that is not JSON: what it is instead, when its start tells (a cases CSV: 'trial_id' in its first
    line; else ``OTHER_KINDS``), and what to do with it ('' when its start does not tell).
    """
    start = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if b"trial_id" in start.split(b"\n", 1)[0]:
        return f"'{path}' is a cases CSV file, not a {what} (a JSON file){_CASES}"
    for starts, kind, advice in OTHER_KINDS:
        if start.startswith(starts):
            return f"'{path}' is {kind}, not a {what} (a JSON file){advice}"
    return ""


def _link_new(tmp: str, path: Path) -> None:
    """Give the file ``tmp`` the name ``path`` unless that names a file already (FileExistsError), in one step: a
    hard link (os.replace would replace a file made since the caller looked); then ``tmp`` goes.
    """
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{path} exists already") from None
    except OSError as exc:  # a file system without hard links: look, then rename (another program may come between)
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, f"{path} exists already") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _clipped(exc: BaseException, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def _mapping(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelFormatError(f"'{what}' must be a JSON object")
    return dict(value)


def _variable_from_dict(d, i: int) -> Variable:
    if not isinstance(d, Mapping):
        raise ModelFormatError(f"variables[{i}] must be a JSON object")
    name = d.get("name")
    where = f"variable '{name}'" if isinstance(name, str) else f"variables[{i}]"
    unknown = set(d) - {"name", "group", "values", "parents", "cpt", "counts", "draws", "prior", "sensor"}
    if unknown:
        raise ModelFormatError(f"{where}: unknown keys {sorted(unknown)}")
    values = d.get("values")
    if values is not None:
        if not isinstance(values, list):
            raise ModelFormatError(f"{where}: 'values' must be a list of strings")
        values = tuple(values)
    parents = d.get("parents")
    if parents is not None:
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            raise ModelFormatError(f"{where}: 'parents' must be a list of variable names")
        parents = tuple(parents)
    cpt, counts, draws, prior = (_number_array(d.get(key), where, key) for key in ("cpt", "counts", "draws", "prior"))
    sensor = d.get("sensor")
    if sensor is not None:
        sensor = _sensor_from_dict(sensor, where)
    return Variable(name=name, group=d.get("group"), values=values, parents=parents, sensor=sensor, cpt=cpt,
                    counts=counts, draws=draws, prior=prior)


def _number_array(value, where: str, key: str) -> np.ndarray | None:
    if value is None:
        return None
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelFormatError(f"{where}: '{key}' must be nested lists of numbers of equal lengths") from None


def _variable_dict(v: Variable) -> dict:
    d = {"name": v.name, "group": v.group, "values": list(v.values) if v.values is not None else None}
    if v.parents is not None:
        d["parents"] = list(v.parents)
    if v.cpt is not None:
        d["cpt"] = v.cpt.tolist()
    if v.counts is not None:
        d["counts"] = v.counts.tolist()
    if v.draws is not None:
        d["draws"] = _compact(v.draws)
    if v.prior is not None:
        d["prior"] = _compact(v.prior)
    d["sensor"] = None if v.sensor is None else _sensor_dict(v.sensor)
    return d


def _compact(array: np.ndarray) -> list:
    """Nested lists of whole numbers (written without '.0') where every entry is one, as counts are: a model's
    posterior draws are most of its file.
    """
    whole = np.round(array)
    if np.array_equal(whole, array) and np.abs(array).max(initial=0) < 2 ** 53:
        return whole.astype(np.int64).tolist()
    return array.tolist()


def _sensor_dict(sensor: SensorModel) -> dict:
    """A 1-D sensor: "name", "means", "stddevs"; a vector sensor: "names", "means", "covariances", and its
    "covariance_type" while it is to be fitted; "cluster_by" when it has one.
    """
    s = {"names": list(sensor.names)} if sensor.vector else {"name": sensor.name}
    if sensor.fitted and sensor.vector:
        s.update(means=sensor.means.tolist(), covariances=sensor.covariances.tolist())
    elif sensor.fitted:
        s.update(means=sensor.means.tolist(), stddevs=sensor.stddevs.tolist())
    else:
        s["max_components"] = sensor.max_components
        if sensor.vector:
            s["covariance_type"] = sensor.covariance_type
    if sensor.cluster_by:  # fitted too: a model read back predicts and learns on as the one that was saved
        s["cluster_by"] = list(sensor.cluster_by)
    if sensor.valid_range is not None:
        s["valid_range"] = list(sensor.valid_range)
    return s


def _sensor_from_dict(s, where: str) -> SensorModel:
    if not isinstance(s, Mapping):
        raise ModelFormatError(f"{where}: 'sensor' must be a JSON object or null")
    valid_range = s.get("valid_range")
    if valid_range is not None:
        if (not isinstance(valid_range, list) or len(valid_range) != 2
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in valid_range)):
            raise ModelFormatError(f"{where}: sensor 'valid_range' must be [low, high], two numbers")
        valid_range = (float(valid_range[0]), float(valid_range[1]))
    unknown = set(s) - {"name", "names", "means", "stddevs", "covariances", "max_components", "covariance_type",
                        "valid_range", "cluster_by"}
    if unknown:
        raise ModelFormatError(f"{where}: unknown sensor keys {sorted(unknown)}")
    names = s.get("names")
    if names is not None:
        if "name" in s:
            raise ModelFormatError(f"{where}: give the sensor 'name' (one reading) or 'names', not both")
        if not isinstance(names, list) or not names:
            raise ModelFormatError(f"{where}: sensor 'names' must be a non-empty list of reading names")
        names = tuple(names)
    vector = names is not None and len(names) > 1
    cluster_by = s.get("cluster_by", [])
    if not isinstance(cluster_by, list) or any(not isinstance(n, str) or not n for n in cluster_by):
        raise ModelFormatError(f"{where}: sensor 'cluster_by' must be a list of variable names")
    arrays = {}
    for field in ("means", "stddevs", "covariances"):
        if s.get(field) is not None:
            try:
                arr = np.asarray(s[field], dtype=float)
            except (TypeError, ValueError):
                raise ModelFormatError(f"{where}: sensor '{field}' must be (nested) lists of numbers") from None
            arrays[field] = arr if vector else arr.reshape(-1)
    return SensorModel(name=s.get("name"), names=names, max_components=s.get("max_components", 6),
                       covariance_type=s.get("covariance_type", "auto"), valid_range=valid_range,
                       cluster_by=tuple(cluster_by), **arrays)


def _topological_order(names: Sequence[str], parents: Mapping[str, Sequence[str]]) -> list[str]:
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
