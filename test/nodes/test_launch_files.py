"""The launch files cannot run here (no launch package on PyPI): check what can be checked without it."""

import ast

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
    assert {"autostart", "seed", "truth_seed", "wait_for", "count", "rate", "sigma"} <= demo
