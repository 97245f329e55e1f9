"""The node executables, ``learner_node`` and ``simulated_robot``: the node's main(), or without ROS 2 one line
naming what to install and exit status 2, as ``replay`` and ``record`` say it (``affordance_ros.nodes`` cannot
even be imported then, so its modules cannot say it themselves)."""

from __future__ import annotations

import importlib
import sys

from .. import install_hint


def learner_node() -> int:
    return run_node("learner_node")


def simulated_robot() -> int:
    return run_node("simulated_robot")


def run_node(name: str) -> int:
    """main() of ``affordance_ros.nodes.<name>``, the module of the executable ``name``."""
    try:
        main = importlib.import_module(f"..nodes.{name}", __package__).main
    except ModuleNotFoundError as exc:
        if install_hint(exc.name) is None:
            raise
        print(f"{name}: error: {install_hint(exc.name)}", file=sys.stderr)
        return 2
    return main()
