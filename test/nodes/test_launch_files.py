"""The launch files cannot run here (no launch package on PyPI): check what can be checked without it."""

import ast
import runpy
import sys
import types

import pytest
from rclpy.parameter import Parameter

from affordance_ros.share import share_directory

SHARE = share_directory()
LIB = SHARE.parents[1] / "lib" / "affordance_ros"


def keyword_strings(tree, name):
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            for kw in node.keywords if kw.arg == name and isinstance(kw.value, ast.Constant)]


def test_launch_files_are_installed_and_name_installed_executables():
    for launch_file in ("learner.launch.py", "demo.launch.py"):
        path = SHARE / "launch" / launch_file
        tree = ast.parse(path.read_text(), filename=str(path))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)
        assert set(keyword_strings(tree, "package")) == {"affordance_ros"}
        for executable in keyword_strings(tree, "executable"):
            assert (LIB / executable).is_file(), executable
    demo = ast.parse((SHARE / "launch" / "demo.launch.py").read_text())
    assert {"learner_node", "simulated_robot"} >= set(keyword_strings(demo, "executable"))
    # the files they refer to are installed too
    assert (SHARE / "config" / "learner.params.yaml").is_file()
    assert (SHARE / "config" / "montesano.json").is_file()


def test_params_file_names_every_declared_parameter(ros):
    import yaml
    params = yaml.safe_load((SHARE / "config" / "learner.params.yaml").read_text())
    learner = ros.learner()
    declared = set(learner.list_parameters([], 0).names) - {"use_sim_time", "start_type_description_service"}
    assert set(params["affordance_learner"]["ros__parameters"]) == declared
    for name in declared:
        assert learner.describe_parameter(name).description, name


def declared_arguments(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    names = [node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", "") == "DeclareLaunchArgument" and node.args
             and isinstance(node.args[0], ast.Constant)]
    table = [elt.elts[0].value for node in ast.walk(tree) if isinstance(node, ast.Tuple) and len(node.elts) == 4
             and isinstance(node.elts[0], ast.Constant) and isinstance(node.elts[0].value, str)
             for elt in [node]]
    return set(names) | set(table)


def test_launch_files_take_the_lifecycle_diagnostics_and_robot_parameters():
    learner = declared_arguments(SHARE / "launch" / "learner.launch.py")
    assert {"autostart", "diagnostics_period", "params_file", "namespace"} <= learner
    demo = declared_arguments(SHARE / "launch" / "demo.launch.py")
    assert {"autostart", "seed", "truth_seed", "design", "wait_for", "count", "rate", "sigma"} <= demo


# --- running the launch files' own code, with launch and launch_ros stood in for ----------------------

class _Recorded:
    """A stand-in for a launch class: records what it was made with."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


_STAND_INS = {
    "launch": ["LaunchDescription"],
    "launch.actions": ["DeclareLaunchArgument", "IncludeLaunchDescription"],
    "launch.launch_description_sources": ["PythonLaunchDescriptionSource"],
    "launch.substitutions": ["LaunchConfiguration", "PathJoinSubstitution"],
    "launch_ros.actions": ["Node"],
    "launch_ros.parameter_descriptions": ["ParameterValue"],
    "launch_ros.substitutions": ["FindPackageShare"],
}


def launch_entities(name, monkeypatch):
    """The entities generate_launch_description() of an installed launch file returns."""
    classes = {}
    for module_name, names in _STAND_INS.items():
        module = types.ModuleType(module_name)
        for class_name in names:
            classes[class_name] = type(class_name, (_Recorded,), {})
            setattr(module, class_name, classes[class_name])
        monkeypatch.setitem(sys.modules, module_name, module)
    namespace = runpy.run_path(str(SHARE / "launch" / name))
    description = namespace["generate_launch_description"]()
    return description.args[0]


def kind(entity) -> str:
    return type(entity).__name__


def configuration(value) -> str | None:
    """The launch argument a substitution reads, if it is LaunchConfiguration(NAME)."""
    return value.args[0] if kind(value) == "LaunchConfiguration" else None


PARAMETER_TYPES = {bool: Parameter.Type.BOOL, int: Parameter.Type.INTEGER, float: Parameter.Type.DOUBLE,
                   str: Parameter.Type.STRING}


def parse_default(text: str, value_type):
    return {"true": True, "false": False}[text] if value_type is bool else value_type(text)


@pytest.mark.parametrize("launch_file", ["learner.launch.py", "demo.launch.py"])
def test_every_launch_argument_reaches_a_declared_node_parameter_of_its_type(launch_file, ros, monkeypatch):
    entities = launch_entities(launch_file, monkeypatch)
    declared = {e.args[0]: e.kwargs.get("default_value") for e in entities if kind(e) == "DeclareLaunchArgument"}
    # what the executables run (the robot waiting for a node that never comes: it publishes nothing)
    nodes = {"learner_node": ros.learner, "simulated_robot": lambda: ros.robot(wait_for="nobody_here")}
    used = set()
    for entity in entities:
        if kind(entity) == "Node":
            node = nodes[entity.kwargs["executable"]]()
            used.add(configuration(entity.kwargs.get("namespace", "")))
            used.update(configuration(a) for a in entity.kwargs.get("arguments", []))
            for parameters in entity.kwargs["parameters"]:
                if kind(parameters) == "LaunchConfiguration":  # a parameters file
                    used.add(configuration(parameters))
                    continue
                for name, value in parameters.items():
                    assert kind(value) == "ParameterValue", f"{launch_file}: {name} is not typed (ParameterValue)"
                    argument, value_type = configuration(value.args[0]), value.kwargs["value_type"]
                    assert argument in declared, f"{launch_file}: {name} reads the undeclared argument {argument}"
                    assert node.has_parameter(name), f"{launch_file}: {node.get_name()} declares no {name}"
                    assert node.get_parameter(name).type_ == PARAMETER_TYPES[value_type], (launch_file, name)
                    parse_default(declared[argument], value_type)  # the default is a value of that type
                    used.add(argument)
        elif kind(entity) == "IncludeLaunchDescription":
            included_path = entity.args[0].args[0].args[0]  # PathJoinSubstitution([share, 'launch', FILE])
            included = launch_entities(included_path[-1], monkeypatch)
            included_arguments = {e.args[0] for e in included if kind(e) == "DeclareLaunchArgument"}
            for name, value in entity.kwargs["launch_arguments"]:
                assert name in included_arguments, f"{launch_file} passes {included_path[-1]} an unknown {name}"
                used.add(configuration(value))
    assert set(declared) <= used, f"{launch_file}: arguments that reach no node: {set(declared) - used}"
