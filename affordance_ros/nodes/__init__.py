"""The ROS 2 nodes: the learner (a lifecycle node), the simulated robot, the bag player and recorder.

They need rclpy and this package's generated interfaces (``affordance_ros.msg``, ``.srv``, ``.action``),
which only the CMake build makes (colcon, or tools/setup_env.sh's venv); ``pip install .`` has neither,
and importing this package then says what to install.
"""

from importlib.util import find_spec

from .. import install_hint

for _module in ("rclpy", "affordance_ros.msg"):
    if find_spec(_module) is None:
        raise ModuleNotFoundError(f"affordance_ros.nodes: {install_hint(_module)}", name=_module)
