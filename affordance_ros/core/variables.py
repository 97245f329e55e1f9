"""The parts of an affordance network: its variables, their sensor models, and one weighted structure of a sample.

A ``Variable`` is discrete, in the group action, object or effect, with its parents and CPT once known; a
``SensorModel`` says how the readings that observe it are spread for each of its values (one Gaussian per value, or
a multivariate one for a vector sensor). ``core.network`` puts them together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import EvidenceError, ModelFormatError, did_you_mean
from .gaussian import log_density, mixture_weights

COVARIANCE_TYPES = ("auto", "full", "diag")

GROUPS = ("action", "object", "effect")
# The groups seen through sensors whose readings the robot publishes (object features, effects).
# The groups seen through sensors whose readings the robot publishes (object features, effects).
SENSOR_GROUPS = ("object", "effect")
# The readings a sensor accepts when its configuration gives no 'valid_range': anything a physical
# sensor can report in any unit, far below the values that overflow a Gaussian log-likelihood (~1e154).
DEFAULT_VALID_RANGE = (-1e9, 1e9)


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
    the counts of the cases' values imputed in one sweep of ``core.posterior_sampling``'s sampler, and the prior's
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


@dataclass(frozen=True, eq=False)
class WeightedNetwork:
    """One structure of a model's sample (``AffordanceNetwork.structures``): a network with the model's variables,
    values and sensors, its own parents, CPTs and posterior draws, and its posterior probability ``weight``.
    """

    weight: float
    network: object   # an AffordanceNetwork (core.network, which imports this module)


def posterior_mean(draws: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(counts, CPT) a variable's posterior ``draws`` (S, *CPT shape) and ``prior`` give: the counts their mean plus
    the prior, the CPT those counts normalised (a row without any: flat). What a structure of a sample holds.
    """
    counts = np.asarray(draws, dtype=float).mean(axis=0) + prior
    total = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts, np.where(total > 0, counts / total, 1.0 / counts.shape[-1])


__all__ = ["COVARIANCE_TYPES", "DEFAULT_VALID_RANGE", "GROUPS", "SENSOR_GROUPS", "SensorModel", "Variable",
           "WeightedNetwork", "out_of_range", "posterior_mean"]
