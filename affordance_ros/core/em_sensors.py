"""Sensor models re-estimated inside EM (``LearningOptions.fit_sensors``): an M-step hook of
``core.em.ExpectationMaximisation``, for sensor models known only roughly.
"""

from __future__ import annotations

import numpy as np

from .cases import CaseSet
from .inference import JunctionTreeEStep
from .network import AffordanceNetwork, SensorModel

EMPTY = 1e-9          # a value with less posterior weight than this keeps its old Gaussian
FLOOR_SHARE = 1e-3    # a stddev is at least this share of the spread of the means (at least 1)


class SensorFit:
    """Every sensor's Gaussians re-estimated from the posterior-weighted moments of its readings,
    which the E-step gathers (``JunctionTreeEStep`` with ``readings``); the E-step then holds the
    cases' evidence under the new sensors. ``network``: the model, its sensors as last re-estimated.
    """

    def __init__(self, network: AffordanceNetwork, cases: CaseSet):
        self.network = network
        self.cases = cases

    def readings(self) -> dict:
        """What the E-step weights, by variable index (``sensor_features``)."""
        return {self.network.index(var): sensor_features(x)
                for var, x in self.cases.sensor_readings(self.network).items()}

    def m_step(self, estep: JunctionTreeEStep) -> float:
        """Re-estimate from ``estep.moments`` and give ``estep`` the evidence under the new sensors;
        the RMS change of the means and stddevs.
        """
        self.network, change = reestimate_sensors(self.network, estep.moments)
        estep.use_evidence(self.cases.evidence(self.network))
        return change


def sensor_features(x: np.ndarray) -> np.ndarray:
    """What the E-step weights by the posterior of a sensor's variable to re-estimate the sensor.

    1-D readings (K,): returned as they are (the E-step forms [1, y, y^2]). Vector readings
    (K, d): [1, y, vec(y y^T)] per case, (K, 1 + d + d^2); a case with a missing reading
    contributes zeros (the vector sensor is re-estimated from complete readings).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return x
    complete = np.all(np.isfinite(x), axis=1)
    y = np.where(complete[:, None], x, 0.0)
    outer = (y[:, :, None] * y[:, None, :]).reshape(len(y), -1)
    return np.concatenate([complete[:, None].astype(float), y, outer], axis=1)


def reestimate_sensors(network: AffordanceNetwork,
                       moments: dict) -> tuple[AffordanceNetwork, float]:
    """Gaussian M-step per sensor from posterior-weighted reading moments, and the RMS change."""
    changes, diffs = {}, []
    for i, m in moments.items():
        v = network.variables[i]
        reestimate = reestimate_vector_sensor if v.sensor.vector else reestimate_scalar_sensor
        sensor, diff = reestimate(v.sensor, m)
        changes[v.name] = {"sensor": sensor}
        diffs.append(diff)
    change = float(np.sqrt(np.mean(np.concatenate(diffs) ** 2))) if diffs else 0.0
    return network.replace_variables(changes), change


def reestimate_scalar_sensor(old: SensorModel,
                             moments: np.ndarray) -> tuple[SensorModel, np.ndarray]:
    """Weighted means and stddevs of a 1-D sensor from moments (3, card): sum w, w y, w y^2."""
    w, wy, wy2 = moments
    weight = np.maximum(w, 1e-12)
    means = np.where(w > EMPTY, wy / weight, old.means)
    var = np.where(w > EMPTY, wy2 / weight - means ** 2, old.stddevs ** 2)
    floor = FLOOR_SHARE * max(float(np.ptp(old.means)), 1.0)
    stddevs = np.sqrt(np.maximum(var, floor ** 2))
    sensor = SensorModel(old.name, means, stddevs, old.max_components)
    return sensor, np.concatenate([means - old.means, stddevs - old.stddevs])


def reestimate_vector_sensor(old: SensorModel,
                             moments: np.ndarray) -> tuple[SensorModel, np.ndarray]:
    """Weighted means and covariances of a vector sensor from moments (1 + d + d^2, card)."""
    d = old.dim
    w = moments[0]
    weight = np.maximum(w, 1e-12)
    means = np.where(w[:, None] > EMPTY, moments[1:1 + d].T / weight[:, None], old.means)
    second = moments[1 + d:].T.reshape(-1, d, d) / weight[:, None, None]
    covs = second - means[:, :, None] * means[:, None, :]
    floor = np.diag((FLOOR_SHARE * np.maximum(np.ptp(old.means, axis=0), 1.0)) ** 2)
    covs = np.where(w[:, None, None] > EMPTY, 0.5 * (covs + np.swapaxes(covs, 1, 2)) + floor,
                    old.covariances)
    sensor = SensorModel(names=old.names, means=means, covariances=covs,
                         max_components=old.max_components, covariance_type=old.covariance_type)
    stddevs = np.sqrt(np.diagonal(covs, axis1=1, axis2=2))
    return sensor, np.concatenate([(means - old.means).ravel(),
                                   (stddevs - old.component_stddevs()).ravel()])


__all__ = ["SensorFit", "reestimate_sensors", "sensor_features"]
