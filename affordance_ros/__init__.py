"""affordance_ros: learn object affordances with Bayesian networks and Gaussian sensor models.

``affordance_ros.core`` is the pure probabilistic library (numpy/scipy, no ROS);
the node, storage and tools build on it. ``affordance_ros.TrialPublisher`` is the robot-side
helper that keeps each trial until the learner confirms it (loaded on first use: importing the
core loads no ROS module).
"""

__version__ = "0.1.0"


def __getattr__(name):
    if name == "TrialPublisher":
        from .nodes.trial_publisher import TrialPublisher
        return TrialPublisher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
