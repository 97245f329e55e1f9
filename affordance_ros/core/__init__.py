"""The probabilistic core: model, exact inference, structure and parameter learning.

Pure numpy/scipy; nothing here imports ROS. Typical use::

    from affordance_ros.core import AffordanceNetwork, AffordanceLearner, CaseSet, predict
    config = AffordanceNetwork.load("config.json")
    cases = CaseSet.from_csv(config, "cases.csv")
    model = AffordanceLearner(structure="k2").fit(config, cases).model_
    predict(model, ["action"], sensors={"obj_vel": 7.1}, values={"Shape": "box"})

The names below are loaded from their modules on first use (PEP 562), so that a command which only
predicts does not pay for what learning needs (scipy.special alone takes longer to import than a
prediction takes).
"""

import importlib

# The function, loaded now: a name loaded later would lose to the submodule of the same name, which the
# import system sets on the package when the submodule is first imported.
from .predict import predict as predict

# public name -> the core module that defines it
_EXPORTS = {
    "CaseEvidence": "cases", "CaseSet": "cases",
    "AffordanceError": "errors", "DataError": "errors", "EvidenceError": "errors", "ModelFormatError": "errors",
    "Evidence": "evidence",
    "benchmark_network": "ground_truth", "benchmark_structure": "ground_truth", "sample_cases": "ground_truth",
    "AffordanceLearner": "learner", "LearnResult": "learner", "format_arcs": "learner",
    "FORMAT": "network", "FORMAT_VECTOR": "network", "GROUPS": "network", "SENSOR_GROUPS": "network",
    "AffordanceNetwork": "network", "SensorModel": "network", "Variable": "network",
    "SCORES": "options", "STRUCTURES": "options", "LearningOptions": "options",
    "EMResult": "em", "fit_discrete": "parameters", "fit_em": "parameters", "log_likelihood": "parameters",
    "ActionRanking": "predict", "BatchPrediction": "predict", "Prediction": "predict", "ReadingPrediction": "predict",
    "STRATEGIES": "predict", "gittins_index": "predict", "predict_batch": "predict", "predict_readings": "predict",
    "rank_actions": "predict",
    "LearnProgress": "progress", "LearningCancelled": "progress",
}

__all__ = sorted([*_EXPORTS, "predict"])


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # (the next look-up does not come here)
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
