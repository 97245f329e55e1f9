"""Where things are: the installed package's data (share/affordance_ros) and the per-user ROS home.

Found without importing ROS, so that every layer may use it.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = "affordance_ros"


def share_directory() -> Path:
    """share/affordance_ros of the installed package (ament index, else next to the Python package), or the
    checkout's root when the package is imported from a source checkout (PYTHONPATH=<checkout>)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError, OSError):
        pass
    here = Path(__file__).resolve()
    # <prefix>/lib/pythonX.Y/site-packages/affordance_ros/share.py -> <prefix>/share/affordance_ros
    installed = here.parents[4] / "share" / PACKAGE if len(here.parents) > 4 else None
    checkout = here.parents[1]
    if (installed is None or not installed.is_dir()) and (checkout / "package.xml").is_file():
        return checkout
    return installed if installed is not None else checkout


def default_config_path() -> Path:
    """The configuration the learner node and the command line use when none is given."""
    return share_directory() / "config" / "montesano.json"


def shipped_configurations() -> dict[str, Path]:
    """The configurations installed with the package, by name: {"hands": .../hands.json, ...}."""
    return {path.stem: path for path in sorted(default_config_path().parent.glob("*.json"))}


def configuration_file(given: str | Path) -> Path:
    """A configuration as the command line's ``--config`` and the node's ``config_path`` take it: the file at
    ``given``, else the shipped configuration of that name (``tools``; a folder named so, as the checkout's
    ``tools/``, is never a configuration). ``given`` itself when it is neither (reading it says why)."""
    path = Path(given)
    if path.is_file():
        return path
    return shipped_configurations().get(str(given), path)


def ros_home() -> Path:
    """$ROS_HOME, else ~/.ros (where ROS 2 keeps logs and other per-user state)."""
    return Path(os.path.expanduser(os.environ.get("ROS_HOME") or "~/.ros"))


def default_database_path() -> Path:
    """The learner node's case database when its database_path parameter is left empty."""
    return ros_home() / PACKAGE / "cases.db"


def default_model_path() -> Path:
    """The learner node's model file when its model_path parameter is left empty."""
    return ros_home() / PACKAGE / "model.json"


def msg_directory() -> Path:
    """The package's .msg files: installed in share/affordance_ros/msg, or msg/ of a source checkout."""
    candidates = [share_directory() / "msg", Path(__file__).resolve().parents[1] / "msg"]
    for directory in candidates:
        if (directory / "Action.msg").is_file() and (directory / "Features.msg").is_file():
            return directory
    raise FileNotFoundError(f"the {PACKAGE} message definitions (Action.msg, Features.msg) are in none of "
                            f"{[str(c) for c in candidates]}; is {PACKAGE} installed?")
