"""The layers, checked on the installed sources: data flows one way, core -> data -> nodes -> tools.

- ``core``: plain numpy/scipy, no ROS (and no rosbags), nothing from the other layers, no import
  inside a function, and no import cycle between its modules;
- ``data``: no rclpy or generated interfaces (it may read bags with the pure-Python rosbags), nothing
  from ``nodes`` or ``tools``;
- ``nodes``: nothing from ``tools``.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import affordance_ros
import affordance_ros.core

PACKAGE = Path(affordance_ros.__file__).parent
CORE = Path(affordance_ros.core.__file__).parent
ROS_MODULES = ("rclpy", "rosidl", "rcl_interfaces", "std_msgs", "builtin_interfaces", "affordance_ros.msg",
               "affordance_ros.srv", "rosbags")
RCLPY_MODULES = tuple(m for m in ROS_MODULES if m != "rosbags")
LAYERS = ("core", "data", "nodes", "tools")


def imports(path: Path):
    """(absolute module name, line, whether inside a function) of every import in ``path``."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(), str(path))
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
                names = [module] if node.module else [f"{module}.{a.name}" for a in node.names]
            else:
                names = [node.module]
        for name in names:
            yield name, node.lineno, id(node) in in_function


def sources(layer: str):
    return sorted((PACKAGE / layer).rglob("*.py"))


def test_no_ros_import_in_the_core_sources():
    for path in CORE.rglob("*.py"):
        for name, line, _ in imports(path):
            assert not name.startswith(ROS_MODULES), f"{path.name}:{line} imports {name}"


def test_importing_the_core_loads_no_ros_module():
    code = ("import sys, affordance_ros.core, affordance_ros.core.online; "
            "print(sorted(m for m in sys.modules if m.startswith(%r)))" % (ROS_MODULES,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_importing_the_data_layer_loads_no_rclpy():
    code = ("import sys, pkgutil, importlib, affordance_ros.data as d\n"
            "for m in pkgutil.walk_packages(d.__path__, 'affordance_ros.data.'): importlib.import_module(m.name)\n"
            "print(sorted(m for m in sys.modules if m.startswith(%r)))" % (RCLPY_MODULES,))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_each_layer_imports_only_the_layers_below_it():
    for rank, layer in enumerate(LAYERS):
        above = tuple(f"affordance_ros.{upper}" for upper in LAYERS[rank + 1:])
        for path in sources(layer):
            for name, line, _ in imports(path):
                assert not name.startswith(above), f"{layer}/{path.name}:{line} imports {name}, a layer above"
                if layer == "data":
                    assert not name.startswith(RCLPY_MODULES), f"data/{path.name}:{line} imports {name}"


def test_the_core_has_no_import_inside_a_function_and_no_cycle():
    graph = {}
    for path in CORE.rglob("*.py"):
        module = "affordance_ros.core." + path.stem
        graph[module] = set()
        for name, line, inside in imports(path):
            assert not inside, f"core/{path.name}:{line} imports {name} inside a function"
            if name.startswith("affordance_ros.core.") and path.stem != "__init__":
                graph[module].add(".".join(name.split(".")[:3]))

    def visit(module, trail):
        assert module not in trail, f"import cycle: {' -> '.join([*trail, module])}"
        for target in graph.get(module, ()):
            visit(target, [*trail, module])

    for module in graph:
        if not module.endswith("__init__"):
            visit(module, [])


def test_at_most_three_modules_sit_flat_in_the_package():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 3, flat


def test_no_test_calls_a_private_method_or_attribute_of_a_node():
    # what a node does is tested through its topics and services, or on the ROS-free class it wires
    private = re.compile(r"\b(?:node|learner|robot|recorder|player)\._[a-z]\w*")
    for path in Path(__file__).parent.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            assert not private.search(line), f"{path.name}:{number}: {line.strip()}"
