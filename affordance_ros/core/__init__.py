"""The probabilistic core: model, exact inference, structure and parameter learning.

Pure numpy/scipy; nothing here imports ROS. Typical use::

    from affordance_ros.core import AffordanceNetwork, AffordanceLearner, CaseSet, predict
    config = AffordanceNetwork.load("config.json")
    cases = CaseSet.from_csv(config, "cases.csv")
    model = AffordanceLearner(structure="k2").fit(config, cases).model_
    predict(model, ["action"], sensors={"obj_vel": 7.1}, values={"Shape": "box"})
"""

from .cases import CaseEvidence, CaseSet
from .errors import AffordanceError, DataError, EvidenceError, ModelFormatError
from .evidence import Evidence
from .ground_truth import benchmark_network, benchmark_structure, sample_cases
from .learner import AffordanceLearner, LearnResult, format_arcs
from .network import FORMAT, FORMAT_VECTOR, GROUPS, SENSOR_GROUPS, AffordanceNetwork, SensorModel, Variable
from .options import SCORES, STRUCTURES, LearningOptions
from .parameters import EMResult, fit_discrete, fit_em, log_likelihood
from .predict import (
    ActionRanking,
    BatchPrediction,
    Prediction,
    ReadingPrediction,
    predict,
    predict_batch,
    predict_readings,
    rank_actions,
)
from .progress import LearningCancelled

__all__ = [
    "ActionRanking", "AffordanceError", "AffordanceLearner", "AffordanceNetwork", "BatchPrediction", "CaseEvidence",
    "CaseSet",
    "DataError", "EMResult", "Evidence", "EvidenceError", "FORMAT", "FORMAT_VECTOR", "GROUPS", "LearnResult",
    "LearningCancelled", "LearningOptions", "ModelFormatError", "Prediction", "ReadingPrediction", "SCORES",
    "SENSOR_GROUPS", "STRUCTURES", "SensorModel", "Variable", "benchmark_network", "benchmark_structure",
    "fit_discrete", "fit_em", "format_arcs", "log_likelihood", "predict", "predict_batch",
    "predict_readings", "rank_actions", "sample_cases",
]
