"""Command-line helpers shared by the tools: ROS arguments, the --qos-depth option."""

from __future__ import annotations

import argparse
from typing import Sequence


def split_ros_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(own arguments, ROS arguments): everything from --ros-args to a lone '--' (or the end) is ROS's."""
    own, ros, inside = [], [], False
    for arg in argv:
        if arg == "--ros-args":
            inside = True
            ros.append(arg)
        elif inside and arg == "--":
            inside = False
        elif inside:
            ros.append(arg)
        else:
            own.append(arg)
    return own, ros


def qos_depth(text: str) -> int:
    """argparse type of --qos-depth: a whole number >= 0 (0: keep all)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: keep all), got {text}")
    return value
