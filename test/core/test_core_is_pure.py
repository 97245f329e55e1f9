"""The core must stay a plain numpy/scipy library: no ROS anywhere in it."""

import ast
import subprocess
import sys
from pathlib import Path

import affordance_ros.core

CORE = Path(affordance_ros.core.__file__).parent
ROS_MODULES = ("rclpy", "rosidl", "rcl_interfaces", "std_msgs", "builtin_interfaces", "affordance_ros.msg",
               "affordance_ros.srv", "rosbags")


def test_no_ros_import_in_the_core_sources():
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                assert not name.startswith(ROS_MODULES), f"{path.name} imports {name}"


def test_importing_the_core_loads_no_ros_module():
    code = ("import sys, affordance_ros.core, affordance_ros.core.online; "
            "print(sorted(m for m in sys.modules if m.startswith(%r)))" % (ROS_MODULES,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
