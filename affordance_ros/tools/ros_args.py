"""Command-line helpers shared by the tools: ROS arguments, the --qos-depth option."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Callable, Sequence

from .. import install_hint
from ..core.number_checks import decimal_comma_hint
from .progress import report_line_by_line


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


def whole_number(text: str, minimum: int = 1, meaning: str = "") -> int:
    """An argparse type (as ``int`` is): a whole number >= ``minimum``; ``meaning`` says what the minimum means."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}" + (f" ({minimum}: {meaning})" if meaning else "")
                                         + f", got {text}")
    return value


def count_or_all(zero: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= 0, where 0 means ``zero`` ("keep all", "every label")."""
    return lambda text: whole_number(text, 0, zero)


qos_depth = count_or_all("keep all")  # --qos-depth of replay and record


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are one line on stderr naming the (sub)command, exit status 2:
    `affordance-ros learn: error: MESSAGE (see affordance-ros learn --help)`. Its subcommands are OneLineParsers too."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        # argparse leaves a subcommand's unknown options to the top-level parser, which names itself: refuse them here
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def run_executable(prog: str, description: str, add_arguments: Callable, run: Callable, argv=None,
                   errors: tuple[type[Exception], ...] = ()) -> int:
    """main() of a tool that is also a ROS executable: split off the ROS arguments, parse the rest,
    ``run(options, ros_args)``; ``errors`` are printed as one line and give exit status 2."""
    own, ros = split_ros_args(sys.argv[1:] if argv is None else argv)
    options = add_arguments(OneLineParser(prog=prog, description=description)).parse_args(own)
    report_line_by_line()
    if ros:
        from ..nodes.command_line import ros_arguments_problem  # (rclpy: only with ROS arguments)
        problem = ros_arguments_problem(ros)
        if problem:
            print(f"{prog}: error: {problem}", file=sys.stderr)
            return 2
    try:
        return run(options, ros)
    except errors as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # ROS or rosbags missing: say what to install
        if install_hint(exc.name) is None:
            raise
        print(f"{prog}: error: {install_hint(exc.name)}", file=sys.stderr)
        return 2


def name_value_pairs(items, what: str, error: type[Exception]) -> dict:
    """NAME=VALUE arguments (of the option ``what``) as a dict; ``error`` for a malformed one, or a name given
    twice with two values (which one was meant?)."""
    out = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise error(f"{what} '{item}' must look like NAME=VALUE")
        if out.get(name, value) != value:
            raise error(f"{what} {name} is given twice, {name}={out[name]} and {name}={value}: give it once")
        out[name] = value
    return out


def sensor_readings(items, error: type[Exception]) -> dict:
    """--sensor SENSOR=READING arguments as finite floats; ``error`` names the one that is not."""
    out = {}
    for name, text in name_value_pairs(items, "--sensor", error).items():
        try:
            out[name] = float(text)
        except ValueError:
            raise error(f"--sensor {name}={text}: the reading must be a number{decimal_comma_hint(text)}") from None
        if not math.isfinite(out[name]):
            raise error(f"--sensor {name}={text}: the reading must be a finite number")
    return out


def candidate_objects(items, error: type[Exception]) -> list:
    """--candidate arguments, each 'NAME=VALUE,NAME=VALUE' (or separated by spaces; empty: an object nothing is
    known of), as Candidates: a VALUE that is a number is a sensor reading, any other a label."""
    from ..core.suggest import Candidate  # (scipy: not at the command line's start)

    out = []
    for item in items or ():
        entries = [e for e in re.split(r"[,\s]+", item.strip()) if e]
        sensors, labels = {}, {}
        for name, text in name_value_pairs(entries, f"--candidate '{item}': entry", error).items():
            try:
                reading = float(text)
            except ValueError:
                labels[name] = text
                continue
            if not math.isfinite(reading):
                raise error(f"--candidate '{item}': {name}={text}: the reading must be a finite number")
            sensors[name] = reading
        out.append(Candidate(sensors, labels))
    return out
