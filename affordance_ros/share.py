"""Where the installed package keeps its data (share/affordance_ros), found without importing ROS."""

from __future__ import annotations

from pathlib import Path

PACKAGE = "affordance_ros"


def share_directory() -> Path:
    """share/affordance_ros of the installed package (ament index, else next to the Python package)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError, OSError):
        # <prefix>/lib/pythonX.Y/site-packages/affordance_ros/share.py -> <prefix>/share/affordance_ros
        return Path(__file__).resolve().parents[4] / "share" / PACKAGE


def default_config_path() -> Path:
    """The configuration the learner node uses when its config_path parameter is left empty."""
    return share_directory() / "config" / "montesano.json"


def msg_directory() -> Path:
    """The package's .msg files: installed in share/affordance_ros/msg, or msg/ of a source checkout."""
    candidates = [share_directory() / "msg", Path(__file__).resolve().parents[1] / "msg"]
    for directory in candidates:
        if (directory / "Action.msg").is_file() and (directory / "Features.msg").is_file():
            return directory
    raise FileNotFoundError(f"the {PACKAGE} message definitions (Action.msg, Features.msg) are in none of "
                            f"{[str(c) for c in candidates]}; is {PACKAGE} installed?")
