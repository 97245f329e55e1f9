"""How affordance_ros is packaged, checked on the install under test (./test.sh: .venv, pip or colcon).

setup.cfg is the one source of the Python package's metadata, console scripts and data files: `pip install .`
reads it, and so does the CMake build (tools/setup_cfg_to_cmake.py). package.xml declares the same version
and, by rosdep keys, the same run-time dependencies. What only some commands need (rclpy, rosbags,
matplotlib, scipy) is imported when they run, and its absence is one line saying what to install.
"""

import ast
import configparser
import importlib.metadata
import importlib.util
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy as np
import pytest
from conftest import CLI

import affordance_ros
from affordance_ros.core import benchmark_network, sample_cases
from affordance_ros.share import share_directory

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(affordance_ros.__file__).resolve().parent
SHARE = share_directory()
PREFIX = SHARE.parents[1]
# Only the CMake build (colcon, tools/setup_env.sh) generates the interfaces; then the console scripts
# are also where `ros2 run` looks.
BUILT_BY_CMAKE = importlib.util.find_spec("affordance_ros.msg") is not None
GENERATED = ("msg", "srv", "action")


def setup_cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO_ROOT / "setup.cfg")
    return parser


def lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]


def console_scripts() -> dict[str, str]:
    """name -> module:function, from setup.cfg."""
    entries = lines(setup_cfg()["options.entry_points"]["console_scripts"])
    return dict((part.strip() for part in entry.split("=")) for entry in entries)


def requirements() -> dict[str, list[str]]:
    """setup.cfg's requirements: '' -> install_requires, then each extra."""
    cfg = setup_cfg()
    found = {"": lines(cfg["options"]["install_requires"])}
    found.update({extra: lines(value) for extra, value in cfg["options.extras_require"].items()})
    return found


def package_xml(path: Path = REPO_ROOT / "package.xml") -> ElementTree.Element:
    return ElementTree.parse(path).getroot()


def run_dependencies() -> set[str]:
    root = package_xml()
    return {e.text for tag in ("depend", "exec_depend") for e in root.iter(tag)}


# --- one version, one list of executables --------------------------------------------------------

def test_setup_cfg_package_xml_and_the_install_carry_one_version():
    version = setup_cfg()["metadata"]["version"]
    assert package_xml().findtext("version") == version
    assert package_xml(SHARE / "package.xml").findtext("version") == version
    assert importlib.metadata.version("affordance_ros") == version == affordance_ros.__version__


def test_the_installed_metadata_is_setup_cfgs():
    # the CMake build installs what `setup.py egg_info` writes, a pip install what the wheel carries
    distribution = importlib.metadata.distribution("affordance_ros")
    installed = {ep.name: ep.value for ep in distribution.entry_points if ep.group == "console_scripts"}
    assert installed == console_scripts()
    declared = {(req, extra) for extra, reqs in requirements().items() for req in reqs}
    requires = set()
    for line in distribution.requires:
        name, _, marker = line.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        requires.add((name.strip(), extra.group(1) if extra else ""))
    assert requires == declared


def _check_launcher(path: Path, entry_point: str):
    assert path.is_file(), f"{path} missing"
    assert path.stat().st_mode & stat.S_IXUSR, f"{path} is not executable"
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("#!")
    if first == "#!/bin/sh":  # long/spaced interpreter path: exec'ed via sh
        interpreter = text.splitlines()[1].split('"')[1]
    else:
        interpreter = first[2:].strip()
    assert os.access(interpreter, os.X_OK), f"{path}: interpreter {interpreter} not found"
    module, func = entry_point.split(":")
    assert f"from {module} import {func}\n" in text
    assert f"sys.exit({func}())" in text
    compile(text, str(path), "exec")


@pytest.mark.parametrize("name", list(console_scripts()))
def test_every_console_script_is_installed(name):
    _check_launcher(PREFIX / "bin" / name, console_scripts()[name])  # where pip puts it
    if BUILT_BY_CMAKE:  # where `ros2 run affordance_ros <name>` looks (setup.cfg's [install] install_scripts)
        _check_launcher(PREFIX / "lib" / "affordance_ros" / name, console_scripts()[name])


def test_launcher_interpreter_is_this_environment():
    # In the venv the launchers must use the venv's python (not the base one).
    if sys.prefix == sys.base_prefix or Path(sys.prefix).resolve() != PREFIX.resolve():
        pytest.skip("not a venv install")
    first = (PREFIX / "bin" / "affordance-ros").read_text().splitlines()[0]
    assert first in (f"#!{PREFIX}/bin/python", f"#!{sys.prefix}/bin/python", "#!/bin/sh")


def test_cmakelists_keeps_no_second_list_of_executables_or_data_files():
    cmake = (REPO_ROOT / "CMakeLists.txt").read_text()
    for name, entry_point in console_scripts().items():
        assert not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", cmake), f"CMakeLists.txt names {name}"
        assert entry_point.split(":")[0] not in cmake, f"CMakeLists.txt names {entry_point}"
    for source in lines(setup_cfg()["options.data_files"]["share/affordance_ros/launch"]):
        assert source.split("/")[0] + "/" not in cmake, f"CMakeLists.txt installs {source} itself"


def test_every_data_file_of_setup_cfg_is_installed():
    for destination, value in setup_cfg()["options.data_files"].items():
        for pattern in lines(value):
            sources = sorted(REPO_ROOT.glob(pattern))
            assert sources, f"setup.cfg data file {pattern} matches nothing"
            for source in sources:
                installed = PREFIX / destination / source.name
                assert installed.is_file(), f"{installed} missing"
                assert installed.read_bytes() == source.read_bytes(), f"{installed} differs from {source}"


# --- the Python package: its modules and nothing else ---------------------------------------------

def test_every_folder_of_the_package_is_a_package():
    # (setuptools' find_packages skips a folder without __init__.py: its modules would not be installed)
    for folder in [REPO_ROOT / "affordance_ros", *(REPO_ROOT / "affordance_ros").rglob("*/")]:
        if "__pycache__" not in folder.parts and any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py"


def test_the_installed_package_is_the_source_trees_modules():
    source = {p.relative_to(REPO_ROOT / "affordance_ros") for p in (REPO_ROOT / "affordance_ros").rglob("*.py")
              if "__pycache__" not in p.parts}
    installed = {p.relative_to(PACKAGE) for p in PACKAGE.rglob("*.py")
                 if "__pycache__" not in p.parts and p.relative_to(PACKAGE).parts[0] not in GENERATED}
    assert installed == source


def test_the_package_carries_no_benchmark():
    # the benchmarks are benchmarks/, a distribution of their own (affordance-ros-bench), not in the package
    assert not [p for p in PACKAGE.rglob("*.py") if "bench" in p.relative_to(PACKAGE).parts]
    assert importlib.util.find_spec("affordance_ros.tools.bench") is None
    commands = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=60)
    assert commands.returncode == 0 and "bench" not in commands.stdout


@pytest.mark.skipif(importlib.metadata.distribution("affordance_ros").read_text("RECORD") is None,
                    reason="only a pip (wheel) install has a RECORD; ./test.sh's pip install runs this")
def test_a_pip_install_holds_the_package_its_scripts_and_its_data_only():
    allowed = re.compile(r"(affordance_ros/.*\.py|affordance_ros/.*\.pyc|affordance_ros-[^/]+\.dist-info/.*"
                         r"|(\.\./)+bin/[\w-]+|(\.\./)+share/(affordance_ros|ament_index)/.*)$")
    files = [str(f) for f in importlib.metadata.files("affordance_ros")]
    assert [f for f in files if not allowed.match(f)] == []
    assert not BUILT_BY_CMAKE


# --- dependencies: what the installed package imports is declared ----------------------------------

# Third-party (not ROS) modules the package may import: (PyPI distribution, rosdep key or None: there is none).
# A ROS 2 package is imported under its own name, which package.xml declares.
THIRD_PARTY = {
    "numpy": ("numpy", "python3-numpy"),
    "scipy": ("scipy", "python3-scipy"),
    "matplotlib": ("matplotlib", "python3-matplotlib"),
    "rosbags": ("rosbags", None),
    "sklearn": ("scikit-learn", "python3-sklearn"),
}
# ROS 2 packages the PyPI wheels lack: only the launch files (run by `ros2 launch`) import them
NOT_ON_PYPI = {"launch", "launch_ros"}


def imported_modules(paths) -> dict[str, list[str]]:
    """Top-level module -> the files importing it, of every import that is not the standard library's
    or this package's."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "affordance_ros":
                    found.setdefault(top, []).append(path.name)
    return found


def installed_sources():
    return [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in GENERATED]


def test_every_import_of_the_installed_package_is_declared_in_setup_cfg_and_package_xml():
    required = set(requirements()[""])
    extras = {req for extra, reqs in requirements().items() if extra for req in reqs}
    ros = run_dependencies()
    imported = imported_modules(installed_sources())
    for module, files in imported.items():
        if module not in THIRD_PARTY:
            assert module in ros, (f"{module} (imported by {files}) is declared nowhere: a ROS 2 package is an "
                                   "exec_depend of package.xml; anything else a requirement of setup.cfg, "
                                   "and in THIRD_PARTY here")
            continue
        distribution, rosdep_key = THIRD_PARTY[module]
        if distribution in required:
            assert rosdep_key in ros, f"{module}: setup.cfg requires {distribution}, package.xml lacks {rosdep_key}"
        else:
            assert distribution in extras, f"{module} (imported by {files}) is not in setup.cfg"
            # package.xml has no optional dependencies: an extra is installed with pip (docs/install.md)
            assert rosdep_key not in ros, f"{rosdep_key} is an optional extra, not an exec_depend"
    # and nothing is declared that is not needed
    python_keys = {key for _, key in THIRD_PARTY.values() if key}
    assert {key for key in ros if key.startswith("python3-")} <= python_keys
    for requirement in required:
        module = next(m for m, (distribution, _) in THIRD_PARTY.items() if distribution == requirement)
        assert module in imported, f"setup.cfg requires {requirement}, which nothing imports"


def test_what_has_no_rosdep_key_is_an_extra_the_docs_name():
    extras = {req: extra for extra, reqs in requirements().items() if extra for req in reqs}
    install = (REPO_ROOT / "docs" / "install.md").read_text()
    for module, (distribution, rosdep_key) in THIRD_PARTY.items():
        if rosdep_key is None:
            assert distribution in extras, f"{distribution} has no rosdep key: it must be an extra of setup.cfg"
            assert f"affordance_ros[{extras[distribution]}]" in install, f"docs/install.md: {extras[distribution]}"


def test_the_launch_files_imports_are_exec_depends():
    imported = imported_modules(sorted((SHARE / "launch").glob("*.launch.py")))
    assert set(imported) == NOT_ON_PYPI and NOT_ON_PYPI <= run_dependencies()
    assert "ros2launch" in run_dependencies()  # `ros2 launch`


def test_the_venv_pins_every_requirement_and_ros_package():
    # what tools/setup_env.sh and tools/setup_bench.sh install: the same versions every time
    pinned = {}
    for name in ("requirements-ros.txt", "requirements-bench.txt"):
        for line in lines((REPO_ROOT / name).read_text()):
            project, _, version = line.partition("==")
            if version:
                pinned[project.strip().lower().replace("_", "-")] = name
    for extra, reqs in requirements().items():
        for requirement in reqs:
            where = "requirements-bench.txt" if extra in ("bench", "eval") else "requirements-ros.txt"
            assert pinned.get(requirement.lower()) == where, f"{requirement} (setup.cfg) is not pinned in {where}"
    ros_packages = {m for m in imported_modules(installed_sources()) if m not in THIRD_PARTY}
    for package in ros_packages:
        wheel = "ros-" + package.replace("_", "-")
        assert pinned.get(wheel) == "requirements-ros.txt", f"{package}: {wheel} is not pinned in requirements-ros.txt"


# --- what only some commands need is imported by them, and its absence says what to install ----------

def import_profile(*argv, block=()):
    """Run `affordance-ros ARGV` under `python -X importtime` (with the modules in ``block`` missing):
    the process and the top-level modules it imported."""
    code = ("import sys\n"
            f"for name in {block!r}:\n"
            "    sys.modules[name] = None  # as if it were not installed\n"
            "from affordance_ros.tools.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    result = subprocess.run([sys.executable, "-P", "-X", "importtime", "-c", code, *map(str, argv)],
                            capture_output=True, text=True, timeout=120)
    modules = {line.split("|")[2].strip().split(".")[0] for line in result.stderr.splitlines()
               if line.startswith("import time:") and "cumulative" not in line}
    result.stderr = "\n".join(line for line in result.stderr.splitlines() if not line.startswith("import time:"))
    return result, modules


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.json"
    benchmark_network("montesano", 1.0, 0).save(path)
    return path


@pytest.mark.parametrize("argv", [["--help"], ["predict", "--query", "action", "--sensor", "obj_vel=7.2"]],
                         ids=["help", "predict"])
def test_help_and_predict_import_no_ros_rosbags_matplotlib_or_scipy(argv, model):
    # (scipy.special alone takes longer to import than the whole of `affordance-ros predict` may take to start;
    # `affordance-ros-bench startup` measures the time)
    if argv[0] == "predict":
        argv = [*argv, "--model", model]
    result, modules = import_profile(*argv)
    assert result.returncode == 0, result.stderr
    assert modules & {"rclpy", "rosbags", "matplotlib", "scipy"} == set()
    if argv == ["--help"]:  # the list of commands needs nothing but Python: it starts at once
        assert "numpy" not in modules and "learn " in result.stdout and "simulate " in result.stdout


def test_no_command_lists_the_commands_and_a_command_mistyped_says_which_exist():
    listed = subprocess.run([CLI], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 2 and listed.stderr == ""
    assert [line.split()[0] for line in listed.stdout.splitlines() if line.startswith("  ")] == [
        "learn", "predict", "suggest", "import", "export", "replay", "record", "call", "export-model", "import-model",
        "show", "evaluate", "simulate"]
    assert max(map(len, listed.stdout.splitlines())) <= 100
    typo = subprocess.run([CLI, "lern"], capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2 and "invalid choice: 'lern'" in typo.stderr and len(typo.stderr.splitlines()) == 1


def test_without_rosbags_csv_files_work_and_bags_say_to_install_the_bags_extra(tmp_path, model):
    cases, _ = sample_cases(benchmark_network("montesano", 1.0, 0), 200, np.random.default_rng(0),
                            labelled=("Action",))
    cases.to_csv(tmp_path / "cases.csv")
    config = SHARE / "config" / "montesano.json"
    for argv in (["learn", "--cases", tmp_path / "cases.csv", "--config", config, "--out", tmp_path / "learned.json"],
                 ["import", tmp_path / "cases.csv", "--db", tmp_path / "cases.db"],
                 ["export", tmp_path / "cases.db", "--out", tmp_path / "again.csv"]):
        result, modules = import_profile(*argv, block=("rosbags",))
        assert result.returncode == 0, result.stderr
    (tmp_path / "robot.mcap").write_bytes(b"")
    for argv in (["export", tmp_path / "cases.db", "--out", tmp_path / "bag"],
                 ["import", tmp_path / "robot.mcap", "--db", tmp_path / "cases.db"]):
        result, _ = import_profile(*argv, block=("rosbags",))
        assert result.returncode == 2
        assert result.stderr.count("\n") == 0 and "pip install 'affordance_ros[bags]'" in result.stderr, \
            result.stderr


def test_a_source_checkout_on_pythonpath_finds_its_configurations(tmp_path):
    """PYTHONPATH=<checkout>, nothing installed there and no ament index: the checkout's config/ (the command line's
    help lists the shipped configurations, so it failed with an IndexError before)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    script = ("import affordance_ros.share as s, affordance_ros.tools.cli as c; print(s.__file__); "
              "print(s.default_config_path()); print(sorted(s.shipped_configurations()))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    module, config, shipped = done.stdout.splitlines()
    assert Path(module).resolve() == REPO_ROOT / "affordance_ros" / "share.py"
    assert Path(config) == REPO_ROOT / "config" / "montesano.json" and Path(config).is_file()
    assert "'tools'" in shipped and "'montesano'" in shipped


@pytest.mark.parametrize("argv", [["call", "predict", "--query", "action"], ["record", "BAG", "--trials", "1"],
                                  ["replay", "BAG"]], ids=["call", "record", "replay"])
def test_without_ros_the_ros_commands_say_what_to_install(argv, tmp_path):
    result, _ = import_profile(*[tmp_path / "bag" if arg == "BAG" else arg for arg in argv], block=("rclpy",))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 0, result.stderr  # one line
    assert "needs ROS 2" in result.stderr and "colcon build" in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["learner_node", "simulated_robot"])
def test_without_ros_the_node_executables_say_what_to_install(name):
    module, func = console_scripts()[name].split(":")
    code = f"import sys; sys.modules['rclpy'] = None; from {module} import {func}; sys.exit({func}())"
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert result.stderr.startswith(f"{name}: error: needs ROS 2") and "colcon build" in result.stderr, result.stderr
    if importlib.util.find_spec("rclpy") is None:  # (pip install .: the installed executable itself)
        result = subprocess.run([PREFIX / "bin" / name], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr



# Runs an installed executable with an import that stalls (prints 'importing', then sleeps) at MODULE: Ctrl-C
# then comes while the executable starts, as it does when a user presses it in the second numpy, scipy or
# rclpy take to import.
STALLED_START = """
import importlib.abc, os, runpy, sys, time
class Stall(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            os.write(1, b"importing\\n")
            for _ in range(600):  # (not one sleep(60): a SIGINT handled just before the sleep began would not end it)
                time.sleep(0.1)
sys.meta_path.insert(0, Stall())
sys.argv = [SCRIPT, *ARGS]
runpy.run_path(SCRIPT, run_name="__main__")
"""


@pytest.mark.parametrize("name, args, module, message, status", [
    ("affordance-ros", ["learn", "--help"], "affordance_ros.core", "affordance-ros learn: interrupted", 130),
    # a node's module is stalled at its package, which a pip install without ROS 2 imports too (and stops at)
    ("learner_node", [], "affordance_ros.nodes", "learner_node: interrupted", 0),
    ("simulated_robot", [], "affordance_ros.nodes", "simulated_robot: interrupted", 0),
    ("replay", ["bag"], "affordance_ros.tools.replay", "replay: interrupted", 130),
])
def test_ctrl_c_while_an_executable_starts_is_one_line(name, args, module, message, status):
    """One line, not the traceback of the import it cut (the scripts import their module inside their handling):
    a command exits 130 as when interrupted later, a node 0 as every stop of a node."""
    script = PREFIX / "bin" / name
    code = STALLED_START.replace("MODULE", repr(module)).replace("SCRIPT", repr(str(script))).replace("ARGS",
                                                                                                      repr(args))
    process = subprocess.Popen([sys.executable, "-P", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout.readline() == "importing\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert err == f"{message}\n" and process.returncode == status, (process.returncode, err)


def test_the_package_under_test_is_the_installed_one():
    assert PACKAGE != REPO_ROOT / "affordance_ros"


def test_python_m_pytest_from_the_repository_root_tests_the_install():
    """`python -m pytest` puts the current folder first on sys.path: from the repository root the tests imported
    the source tree (without the generated interfaces; test_interfaces said so, after the whole run). pytest
    without a path read no test/pytest.ini (no time limits, the 'ros' marker unknown) and ran every test."""
    user = {name: value for name, value in os.environ.items() if name != "PYTHONSAFEPATH"}  # (test.sh sets it)
    pytest_here = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    ran = subprocess.run([*pytest_here, "test/test_packaging.py", "-k", "package_under_test_is_the_installed"],
                         cwd=REPO_ROOT, env=user, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and "1 passed" in ran.stdout, ran.stdout[-3000:]
    bare = subprocess.run(pytest_here, cwd=REPO_ROOT, env=user, capture_output=True, text=True, timeout=300)
    assert bare.returncode == 2, bare.stdout[-3000:]
    assert "run `pytest test` (or a test file in it), or ./test.sh" in bare.stdout + bare.stderr

# --- the install under test is the one test.sh was asked for -------------------------------------

@pytest.mark.skipif("AFFORDANCE_ROS_TEST_INSTALL" not in os.environ, reason="run by ./test.sh")
def test_the_install_under_test_is_the_one_asked_for():
    kind, prefix = os.environ["AFFORDANCE_ROS_TEST_INSTALL"], Path(os.environ["AFFORDANCE_ROS_TEST_PREFIX"])
    assert PREFIX.resolve() == prefix.resolve(), kind
    assert PACKAGE.is_relative_to(prefix.resolve()), kind
    assert Path(shutil.which("affordance-ros")).parent.resolve() == (prefix / "bin").resolve(), kind
    assert BUILT_BY_CMAKE == (kind != "pip")


def test_ci_runs_the_readmes_test_command_and_it_tests_every_install():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert re.search(r"^exec \./test\.sh$", ci, re.MULTILINE), ci
    assert "\n./test.sh " in (REPO_ROOT / "README.md").read_text()
    # without arguments (as CI and the README run it) every install; with arguments, .venv only
    script = (REPO_ROOT / "test.sh").read_text()
    assert re.search(r'if \[ \$# -eq 0 \]; then INSTALL="\$\{AFFORDANCE_ROS_TEST_INSTALL:-all\}"', script), script



def test_test_sh_help_is_its_own_and_the_readme_names_the_quick_run():
    """./test.sh --help says what the script runs and how long each part takes (not pytest's help), and builds
    nothing; --quick runs the core, data and layers tests; the README names both."""
    helped = subprocess.run(["bash", str(REPO_ROOT / "test.sh"), "--help"], capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0 and helped.stderr == "", helped.stderr
    assert helped.stdout.startswith("usage: ./test.sh [--quick]"), helped.stdout[:200]
    for part in ("venv", "pip", "colcon", "--quick"):
        assert re.search(rf"^ +(?:\./test\.sh )?{re.escape(part)} .*\bmin\b", helped.stdout, re.MULTILINE), part
    script = (REPO_ROOT / "test.sh").read_text()
    assert "QUICK_PATHS=(test/core test/data test/test_layers.py)" in script
    readme = (REPO_ROOT / "README.md").read_text()
    assert "\n./test.sh --quick " in readme and "\n./test.sh --help " in readme

def _collected(*args: str) -> set[str]:
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {line for line in result.stdout.splitlines() if "::" in line}


@pytest.mark.skipif(not BUILT_BY_CMAKE or os.environ.get("AFFORDANCE_ROS_TEST_INSTALL") == "colcon",
                    reason="collecting the node tests needs ROS 2; about test.sh, not the install: .venv's run does it")
def test_under_all_every_test_runs_against_one_install_at_least():
    # test.sh's selections under `all` (CI): pip the tests without ROS of core, data, tools and the layers;
    # colcon the nodes and interfaces; .venv the docs, the layers and the tests of core/data/tools needing ROS
    script = (REPO_ROOT / "test.sh").read_text()
    assert '"$venv/bin/python" test/core test/data test/tools test/test_layers.py \\\n    -- -m "not ros"' in script
    assert "test/nodes test/test_interfaces.py \\\n      test/test_packaging.py --" in script
    assert "test/test_docs.py test/test_layers.py test/test_packaging.py --" in script
    assert "test/core test/data test/tools -- -m ros" in script
    assert 'pytest_on "$@" test/bench --' in script
    everything = _collected("test")  # ids relative to test/ (pytest.ini's folder)
    without_ros = _collected("test", "-m", "not ros")
    core_data_tools = ("core/", "data/", "tools/")
    pip = {t for t in without_ros if t.startswith((*core_data_tools, "test_layers.py"))}
    colcon = {t for t in everything if t.startswith(("nodes/", "test_interfaces.py", "test_packaging.py"))}
    venv = {t for t in everything if t.startswith(("test_docs.py", "test_layers.py", "test_packaging.py"))}
    venv |= {t for t in everything - without_ros if t.startswith(core_data_tools)}
    venv |= {t for t in everything if t.startswith("bench/")}
    assert len(everything) > 500 and len(pip) > 300 and len(colcon) > 100 and len(venv) > 50
    assert everything - (pip | colcon | venv) == set()


@pytest.mark.skipif(not BUILT_BY_CMAKE, reason="only the CMake build makes type support libraries")
def test_the_venv_builds_no_cpp_type_support_and_colcon_all_of_it():
    # tools/setup_env.sh's venv has no rclcpp to use the C++ type support: leaving it out halves its build
    cpp = sorted(p.name for p in (PREFIX / "lib").glob("libaffordance_ros__rosidl_typesupport*cpp.so"))
    if (PREFIX / "pyvenv.cfg").is_file():
        assert cpp == []
    else:
        assert cpp == [f"libaffordance_ros__rosidl_typesupport_{ts}cpp.so"
                       for ts in ("", "fastrtps_", "introspection_")]


def test_a_second_set_up_of_the_venv_with_nothing_changed_does_nothing():
    # test.sh has just run tools/setup_env.sh for the venv install; the demo runs it again each time
    if os.environ["AFFORDANCE_ROS_TEST_INSTALL"] != "venv" or not (PREFIX / "pyvenv.cfg").is_file():
        pytest.skip("about the venv that tools/setup_env.sh makes")
    again = subprocess.run([str(REPO_ROOT / "tools" / "setup_env.sh")], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stderr == "setup_env: affordance_ros in .venv is up to date (no input of its build changed since " \
                           "it was installed)\n"


def build_inputs(root: Path) -> dict[str, str]:
    """`tools/setup_env.sh --print-inputs` in the checkout ``root``: path -> sha256 of each input of the venv's
    build, what decides whether its install is up to date."""
    result = subprocess.run(["bash", str(root / "tools" / "setup_env.sh"), "--print-inputs"], cwd=root,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return {path: digest for digest, path in (line.split("  ", 1) for line in result.stdout.splitlines())}


@pytest.mark.parametrize("git", [True, False], ids=["git checkout", "no git (a tarball)"])
def test_the_venv_is_rebuilt_after_an_edit_to_any_file_the_build_reads_and_only_then(tmp_path, git):
    # tools/setup_env.sh hashes every file of the checkout but those the build never reads: a folder that no list
    # names counts too (its hand-kept list missed tools/setup_cfg_to_cmake.py, which CMakeLists.txt runs)
    if git and shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "checkout"
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "tools" / "setup_env.sh", root / "tools")
    read = ["CMakeLists.txt", "README.md", "setup.cfg", "affordance_ros/__init__.py", "affordance_ros/nodes/x.py",
            "msg/A.msg", "new_folder/data.yaml", "tools/setup_cfg_to_cmake.py"]
    not_read = ["test/test_x.py", "docs/x.md", ".ci/run", "test.sh", "demo.sh", "requirements-bench.txt",
                "benchmarks/pyproject.toml", "benchmarks/affordance_ros_bench/x.py",
                "tools/setup_bench.sh", "affordance_ros/__pycache__/x.cpython-311.pyc", ".venv/bin/python",
                "build/CMakeCache.txt", "install/setup.bash", "log/setup_env/x.log"]
    for name in read + not_read:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / ".gitignore").write_text(".venv/\nbuild/\ninstall/\nlog/\n__pycache__/\n")
    if git:
        def run_git(*args):
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", "-c", "commit.gpgsign=false",
                            *args], cwd=root, check=True, capture_output=True, timeout=60)
        run_git("init", "-q")
        run_git("add", ".")
        run_git("rm", "-q", "--cached", "new_folder/data.yaml")  # untracked: counts as well
        run_git("commit", "-q", "-m", "a checkout")
    inputs = build_inputs(root)
    assert sorted(inputs) == sorted([*read, "tools/setup_env.sh"])
    # touched, or an edit to what the build never reads: up to date
    os.utime(root / "affordance_ros" / "__init__.py", (1e9, 1e9))
    (root / "test" / "test_x.py").write_text("edited")
    (root / "docs" / "new.md").write_text("new")
    assert build_inputs(root) == inputs
    # an edit in a folder no list names, a new module, a removed one: rebuilt
    (root / "new_folder" / "data.yaml").write_text("edited")
    edited = build_inputs(root)
    assert edited.keys() == inputs.keys() and edited["new_folder/data.yaml"] != inputs["new_folder/data.yaml"]
    (root / "affordance_ros" / "nodes" / "y.py").write_text("")
    assert build_inputs(root).keys() == inputs.keys() | {"affordance_ros/nodes/y.py"}
    (root / "affordance_ros" / "nodes" / "x.py").unlink()
    assert build_inputs(root).keys() == inputs.keys() - {"affordance_ros/nodes/x.py"} | {"affordance_ros/nodes/y.py"}


def test_every_file_the_build_reads_or_installs_is_an_input_of_the_venv_build():
    inputs = build_inputs(REPO_ROOT)
    data_files = [path.relative_to(REPO_ROOT).as_posix() for patterns in setup_cfg()["options.data_files"].values()
                  for pattern in lines(patterns) for path in REPO_ROOT.glob(pattern)]
    modules = [path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "affordance_ros").rglob("*.py")
               if "__pycache__" not in path.parts]
    read = ["CMakeLists.txt", "package.xml", "setup.py", "setup.cfg", "pyproject.toml", "README.md",
            "requirements-ros.txt", "tools/setup_env.sh", "tools/fix_wheel_cmake_paths.py",
            "tools/setup_cfg_to_cmake.py"]
    assert len(data_files) > 15 and len(modules) > 50
    assert set(read + data_files + modules) - inputs.keys() == set()
    assert [path for path in inputs if path.startswith(("test/", "docs/", "."))] == []
