"""affordance_ros: learn object affordances with Bayesian networks and Gaussian sensor models.

``affordance_ros.core`` is the pure probabilistic library (numpy/scipy, no ROS);
the node, storage and tools build on it. ``affordance_ros.TrialPublisher`` is the robot-side
helper that keeps each trial until the learner confirms it, ``affordance_ros.AffordanceClient`` the
planner-side one that asks the learner (its errors ``LearnerUnavailable`` and ``LearnerRefused``); they
are loaded on first use: importing the core loads no ROS module.

What each install holds (docs/install.md): ``pip install .`` the core, data and tools layers;
the ``bags`` extra reading and writing rosbag2 bags; the CMake build (colcon, or tools/setup_env.sh's
venv) also the generated interfaces (``affordance_ros.msg``, ``.srv``, ``.action``) and the nodes.
"""

import pkgutil as _pkgutil

_ROS = ("needs ROS 2 (rclpy) and this package built by CMake, which generates its messages: in a ROS 2 "
        "workspace `colcon build` it, or run ./demo.sh once for a venv with ROS 2 from PyPI (docs/install.md)")

# top-level module -> what to install when it is missing
_INSTALL_HINTS = {
    "rclpy": _ROS,
    "affordance_ros.msg": _ROS,
    "affordance_ros.srv": _ROS,
    "affordance_ros.action": _ROS,
    "rosbags": ("reading and writing rosbag2 bags needs rosbags (it has no rosdep key): "
                "pip install 'affordance_ros[bags]', or pip install rosbags"),
    "matplotlib": "drawing needs matplotlib: pip install matplotlib (ROS: the rosdep key python3-matplotlib)",
    "sklearn": "the scikit-learn baselines need scikit-learn: pip install 'affordance_ros[eval]'",
}


def install_hint(missing: str | None) -> str | None:
    """What to install for a missing module (``ModuleNotFoundError.name``); None when it is not an optional
    part of this package (then the error is a bug, not a missing install)."""
    for module, hint in _INSTALL_HINTS.items():
        if missing == module or (missing or "").startswith(module + "."):
            return hint
    return None


_ROS_EXPORTS = {"TrialPublisher": "robot.trial_publisher", "AffordanceClient": "planner.affordance_client",
                "LearnerUnavailable": "planner.calls", "LearnerRefused": "planner.calls"}


def __getattr__(name):
    if name in _ROS_EXPORTS:
        import importlib
        return getattr(importlib.import_module(f".nodes.{_ROS_EXPORTS[name]}", __name__), name)
    if name == "STRATEGIES":  # rank_actions' strategies (a planner's choice; the core, no ROS)
        from .core.predict import STRATEGIES
        return STRATEGIES
    if name == "__version__":  # setup.cfg's, from the installed metadata (the one place it is written)
        from importlib.metadata import version
        return version(__name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Python started in the source tree (the repository root) imports this package from there, where the generated
# interfaces (msg, srv, action) are not: the standard library's idiom for a package split over several directories
# adds the installed one, found on sys.path, to __path__.
__path__ = _pkgutil.extend_path(__path__, __name__)
