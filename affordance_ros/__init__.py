"""affordance_ros: learn object affordances with Bayesian networks and Gaussian sensor models.

``affordance_ros.core`` is the pure probabilistic library (numpy/scipy, no ROS);
the node, storage and tools build on it. ``affordance_ros.TrialPublisher`` is the robot-side
helper that keeps each trial until the learner confirms it (loaded on first use: importing the
core loads no ROS module).
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"


def __getattr__(name):
    if name == "TrialPublisher":
        from .nodes.trial_publisher import TrialPublisher
        return TrialPublisher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _add_generated_interfaces() -> None:
    """Python started in the source tree (e.g. the repository root) imports this package from there,
    where the generated interfaces (msg, srv, action) are not: find the installed package on
    sys.path and add its directory to ``__path__``, so that ``affordance_ros.srv`` and the rest
    come from the installation (as pkgutil.extend_path does for namespace packages)."""
    here = _os.path.realpath(_os.path.dirname(__file__))
    if _os.path.isdir(_os.path.join(here, "msg")):
        return  # the installed package: the generated interfaces are here
    for entry in _sys.path:
        candidate = _os.path.join(entry or _os.getcwd(), __name__)
        if (_os.path.realpath(candidate) != here and _os.path.isdir(_os.path.join(candidate, "msg"))
                and candidate not in __path__):
            __path__.append(candidate)
            return


_add_generated_interfaces()
