"""The layers, checked on the installed sources: data flows one way, core -> data -> nodes -> tools.

- ``core``: plain numpy/scipy, no ROS (and no rosbags), nothing from the other layers, no import
  inside a function, and no import cycle between its modules;
- ``data``: no rclpy or generated interfaces (it may read bags with the pure-Python rosbags), nothing
  from ``nodes`` or ``tools``;
- ``nodes``: nothing from ``tools``; by side, ``learner/``, ``robot/`` and ``planner/``, none of which imports
  another (what they share is ``nodes/contract.py``: the wire between them), and ``simulation/``, the simulated
  robot that is its own planner, which nothing of ``nodes/`` imports; at most ``MAX_FLAT_NODES`` modules beside
  them, which import no folder of ``nodes/``.

No import circle anywhere in the package (imports for type checking and inside functions included), and no
constructor with more than ``MAX_REQUIRED_PARAMETERS`` required parameters.

And inside them: no module and no test reads another module's private names; an endpoint of a
node (a class given the node) uses only rclpy's API of it; the classes of data/, nodes/ and tools/
declare every attribute in ``__init__``; no class of any layer is longer than ``MAX_CLASS_LINES``.
"""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import affordance_ros
import affordance_ros.core

PACKAGE = Path(affordance_ros.__file__).parent
CORE = Path(affordance_ros.core.__file__).parent
ROS_MODULES = ("rclpy", "rosidl", "rcl_interfaces", "std_msgs", "builtin_interfaces", "affordance_ros.msg",
               "affordance_ros.srv", "rosbags")
RCLPY_MODULES = tuple(m for m in ROS_MODULES if m != "rosbags")
LAYERS = ("core", "data", "nodes", "tools")
TESTS = Path(__file__).parent
GENERATED = ("msg", "srv", "action")  # the interfaces rosidl generates
MAX_CLASS_LINES = {"ModelManager": 150}  # and 200 for every other class
NODES = PACKAGE / "nodes"
SIDES = ("learner", "robot", "planner")  # the three programs of nodes/, which talk only over ROS
COMPOSED = ("simulation",)  # folders of nodes/ that put sides together (as a program does)
MAX_FLAT_NODES = 6  # modules of nodes/ beside its folders, __init__ included
MAX_REQUIRED_PARAMETERS = 5


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


def test_learning_loads_no_scipy_stats(tmp_path):
    """scipy.stats takes seconds to import (2.5-4 s on a busy 2-core machine): learning, the learner node's worker
    included, does without it."""
    code = ("import sys; from affordance_ros.tools.cli import main\n"
            "for scenario, ignored in (('montesano', []), ('hands', ['--ignore-columns', 'object_id'])):\n"
            "    assert main(['simulate', '--scenario', scenario, '--out', scenario + '.csv']) == 0\n"
            "    assert main(['learn', '--cases', scenario + '.csv', '--config', scenario, '--out', scenario + '.json',"
            " *ignored]) == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


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


def folder_of(path: Path) -> str | None:
    """The folder of nodes/ that ``path`` sits in (None: flat in nodes/)."""
    parts = path.relative_to(NODES).parts
    return parts[0] if len(parts) > 1 else None


def test_no_side_of_the_nodes_imports_another_and_the_contract_imports_none():
    offences = []
    for path in sources("nodes"):
        where = folder_of(path)
        # a side imports no other folder, a flat module (the contract among them) none; a composed folder the sides
        forbidden = {folder for folder in (*SIDES, *COMPOSED) if folder != where}
        if where in COMPOSED:
            forbidden -= set(SIDES)
        for name, line, _ in imports(path):
            parts = name.split(".")
            if parts[:2] == ["affordance_ros", "nodes"] and len(parts) > 2 and parts[2] in forbidden:
                offences.append(f"{path.relative_to(NODES)}:{line} imports {name}")
    assert offences == []


def test_the_nodes_hold_their_sides_as_folders_with_few_modules_beside_them():
    assert sorted(p.name for p in NODES.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == sorted(
        (*SIDES, *COMPOSED))
    flat = sorted(p.name for p in NODES.glob("*.py"))
    assert "contract.py" in flat and len(flat) <= MAX_FLAT_NODES, flat


def module_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, every import counted (at the top, for type checking, inside a
    function); ``from package import module`` is an import of that module."""
    def name_of(path):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    files = {name_of(p): p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in GENERATED}
    graph = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names)
        graph[module] = {target for target in targets if target in files and target != module}
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One circle of imports in ``graph`` (the modules in order, the first repeated at the end), [] if none."""
    state, trail = {}, []

    def visit(module):
        state[module] = "open"
        trail.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return trail[trail.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[module] = "done"
        trail.pop()
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_the_package_has_no_import_cycle():
    cycle = import_cycle(module_graph())
    assert cycle == [], f"import cycle: {' -> '.join(cycle)}"


def test_the_cycle_check_finds_a_cycle_through_a_type_checking_import():
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def required_parameters(function: ast.FunctionDef) -> int:
    """The parameters of a method that a caller must give (``self`` not counted)."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    return (len(positional) - len(arguments.defaults) - 1
            + sum(default is None for default in arguments.kw_defaults))


def test_no_constructor_takes_more_than_five_required_parameters():
    """Collaborators go in as objects: a constructor that needs more than a few things is given them grouped.
    (Records, dataclasses holding values and made by the code that computes them, are not counted.)"""
    crowded = []
    for path in PACKAGE.rglob("*.py"):
        for cls in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(cls, ast.ClassDef):
                for function in cls.body:
                    if (isinstance(function, ast.FunctionDef) and function.name == "__init__"
                            and required_parameters(function) > MAX_REQUIRED_PARAMETERS):
                        crowded.append(f"{path.relative_to(PACKAGE)}: {cls.name} {required_parameters(function)}")
    assert crowded == []


def test_at_most_three_modules_sit_flat_in_the_package():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 3, flat


def test_no_test_calls_a_private_method_or_attribute_of_a_node():
    # what a node does is tested through its topics and services, or on the ROS-free class it wires
    private = re.compile(r"\b(?:node|learner|robot|recorder|player)\._[a-z]\w*")
    for path in Path(__file__).parent.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            assert not private.search(line), f"{path.name}:{number}: {line.strip()}"


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_definitions(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, variables, its own attributes (``self._x = ...``),
    arguments, import aliases."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
              and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    return {name for name in names if private(name)}


def our_imports(tree: ast.AST) -> set[str]:
    """The names a module binds by importing from affordance_ros or from a test module (conftest, ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("affordance_ros")
                                                 or (TESTS / f"{node.module}.py").exists()):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                         if alias.name.startswith("affordance_ros"))
    return names


def private_reads(tree: ast.AST, ours: set[str]) -> list[tuple[int, str, str]]:
    """(line, private name, what) for every private name of another module that ``tree`` imports or reads:
    ``from x import _y``, ``x._y`` on a module or class imported from affordance_ros, and ``obj._y`` (also by
    getattr/setattr/monkeypatch.setattr) of a private name this module does not define but one in ``ours`` does."""
    own, imported, found = private_definitions(tree), our_imports(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [(node.lineno, a.name, f"imports {a.name}") for a in node.names if private(a.name)]
        elif isinstance(node, ast.Attribute) and private(node.attr):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if (isinstance(value, ast.Name) and value.id in imported) or (node.attr not in own and node.attr in ours):
                found.append((node.lineno, node.attr, f"reads {ast.unparse(node)}"))
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            name = node.args[1].value
            function = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if (function in ("getattr", "setattr", "hasattr", "delattr") and isinstance(name, str) and private(name)
                    and name not in own and name in ours):
                found.append((node.lineno, name, f"reads {ast.unparse(node)[:60]}"))
    return found


def test_no_module_and_no_test_reads_another_modules_private_names():
    files = {f"affordance_ros/{p.relative_to(PACKAGE)}": p for p in sorted(PACKAGE.rglob("*.py"))
             if p.relative_to(PACKAGE).parts[0] not in GENERATED}
    files.update({f"test/{p.relative_to(TESTS)}": p for p in sorted(TESTS.rglob("*.py"))})
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in files.items()}
    ours = set().union(*(private_definitions(tree) for tree in trees.values()))
    offences = {(name, private_name): f"{name}:{line} {what}" for name, tree in trees.items()
                for line, private_name, what in private_reads(tree, ours)}
    assert sorted(offences.values()) == []


def test_the_private_name_check_sees_each_form():
    tree = ast.parse("from .dds import _env\nfrom ..core import inference\ninference._triangulate()\n"
                     "worker._pool.kill()\ngetattr(store, '_conn')\nstore._lock = None\nself._mine = 1\n")
    assert sorted(name for _, name, _ in private_reads(tree, {"_pool", "_conn", "_lock", "_triangulate"})) == [
        "_conn", "_env", "_lock", "_pool", "_triangulate"]


def node_attributes(tree: ast.AST) -> set[str]:
    """The attributes read of ``node`` or ``self.node``."""
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and (
        (isinstance(n.value, ast.Name) and n.value.id == "node")
        or (isinstance(n.value, ast.Attribute) and n.value.attr == "node"
            and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"))}


def test_an_endpoint_uses_only_the_rclpy_api_of_its_node():
    LifecycleNode = pytest.importorskip("rclpy.lifecycle").LifecycleNode
    # (the node modules themselves, those defining a Node class, may read their own node's attributes)
    api = set(dir(LifecycleNode))
    for path in sources("nodes"):
        tree = ast.parse(path.read_text(), str(path))
        if any(isinstance(n, ast.ClassDef) and any(getattr(b, "id", "").endswith("Node") for b in n.bases)
               for n in ast.walk(tree)):
            continue
        assert sorted(node_attributes(tree) - api) == [], f"nodes/{path.name} reads attributes of its node"


def classes(layers=("data", "nodes", "tools")):
    for layer in layers:
        for path in sources(layer):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    yield f"{layer}/{path.relative_to(PACKAGE / layer)}", node


def attributes_set(function: ast.AST) -> set[str]:
    """The names ``self.<name> = ...`` assigns in ``function``."""
    return {n.attr for n in ast.walk(function) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
            and isinstance(n.value, ast.Name) and n.value.id == "self"}


def test_every_attribute_is_declared_in_init():
    for where, cls in classes():
        methods = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        assigned = {f.name: attributes_set(f) for f in methods}
        if "__init__" in assigned:
            later = {f"{attr} (in {name})" for name, attrs in assigned.items() for attr in attrs - assigned["__init__"]}
            assert sorted(later) == [], f"{where}: {cls.name} sets attributes it does not declare in __init__"


def test_no_class_is_longer_than_its_limit():
    for where, cls in classes(LAYERS):
        lines = cls.end_lineno - cls.lineno + 1
        assert lines <= MAX_CLASS_LINES.get(cls.name, 200), f"{where}: {cls.name} is {lines} lines long"
