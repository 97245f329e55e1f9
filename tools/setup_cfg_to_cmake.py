"""What CMakeLists.txt installs of setup.cfg: the console scripts, their ament directory, the data files.

setup.cfg is the one list of the package's executables and data files (`pip install .` reads it); the CMake
build, which must generate the interfaces (an ament_python package cannot), reads it through this script
instead of keeping a second list. setuptools parses the file, as `pip install .` would (globs expanded).

Usage (CMake runs it at configure time, in the source directory):
    python tools/setup_cfg_to_cmake.py OUTPUT.cmake
writes ``set()`` commands for AFFORDANCE_ROS_CONSOLE_SCRIPTS (``name=module:function`` items),
AFFORDANCE_ROS_SCRIPT_DIR (setup.cfg's [install] install_scripts below ``$base/``: lib/affordance_ros) and
AFFORDANCE_ROS_DATA_FILES (``destination=source`` items, sources relative to the source directory).
"""

import configparser
import sys

from setuptools.config.setupcfg import read_configuration

SETUP_CFG = "setup.cfg"


def cmake_list(name: str, items) -> str:
    for item in items:
        if any(c in item for c in ';"\\$'):
            sys.exit(f"setup_cfg_to_cmake: {item!r} in {SETUP_CFG} has a character CMake lists cannot hold")
    quoted = "".join(f'\n  "{item}"' for item in items)
    return f"set({name}{quoted}\n)\n"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    options = read_configuration(SETUP_CFG)["options"]
    scripts = [entry.replace(" ", "") for entry in options.get("entry_points", {}).get("console_scripts", [])]
    if not scripts:
        sys.exit(f"setup_cfg_to_cmake: {SETUP_CFG} has no [options.entry_points] console_scripts")
    data_files = [f"{destination}={source}" for destination, sources in options.get("data_files", [])
                  for source in sources]
    raw = configparser.ConfigParser(interpolation=None)
    raw.read(SETUP_CFG)
    script_dir = raw.get("install", "install_scripts", fallback="")
    if not script_dir.startswith("$base/"):
        sys.exit(f"setup_cfg_to_cmake: {SETUP_CFG} [install] install_scripts must be $base/lib/<package> "
                 f"(as in every ament_python package), not {script_dir!r}")
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        out.write(f"# Generated from {SETUP_CFG} by tools/setup_cfg_to_cmake.py: do not edit.\n")
        out.write(cmake_list("AFFORDANCE_ROS_CONSOLE_SCRIPTS", scripts))
        out.write(cmake_list("AFFORDANCE_ROS_SCRIPT_DIR", [script_dir.removeprefix("$base/")]))
        out.write(cmake_list("AFFORDANCE_ROS_DATA_FILES", data_files))


if __name__ == "__main__":
    main()
