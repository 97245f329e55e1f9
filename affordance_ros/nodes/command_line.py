"""The command line of the node executables (learner_node, simulated_robot), checked before rclpy starts.

rclpy reads what follows ``--ros-args`` and ignores the rest: a parameter rule without its colon
(``-p config_path=x.json``) ended in a traceback of rcl's, ``--config x.json`` and a parameter the
node does not declare (``-p confg_path:=x.json``) were silently ignored, and ``--help`` started the
node. ``check_command_line`` makes each one line on stderr and exit status 2 (as argparse does) and
``--help`` print the parameters from the descriptors the node declares (``declared_parameters``). A value
of the wrong type or out of its range is found as the node declares its parameters (``values_checked``).

None of it makes a node of its own: a node is a DDS participant, and Fast DDS deleting one can hang.
"""

from __future__ import annotations

import difflib
import re
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

from rcl_interfaces.msg import ListParametersResult, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.parameter import Parameter
from rclpy.utilities import remove_ros_args

# ROS's own parameters, declared by every node (listed apart in --help)
ROS_PARAMETERS = ("use_sim_time", "start_type_description_service")
USAGE = "usage: {prog} [--help] [--ros-args [-p NAME:=VALUE ...] [--params-file FILE] [-r FROM:=TO ...]]"
# how rcl's messages about a rule it cannot parse go on: where in its sources, and its lexer's state
_RCL_DETAIL = re.compile(r"(\. Error: Expected lexeme.*|, at /\S+:\d+)", re.S)
_HINTS = {"parameter override rule": "a parameter is set with -p NAME:=VALUE",
          "remap rule": "a name is remapped with -r FROM:=TO",
          "log level": "--log-level takes debug, info, warn, error or fatal"}
_TYPES = {Parameter.Type.BOOL: "bool", Parameter.Type.INTEGER: "int", Parameter.Type.DOUBLE: "double",
          Parameter.Type.STRING: "string"}


@dataclass(frozen=True)
class DeclaredParameter:
    """One parameter as the node declares it: its type, default and descriptor's text."""

    name: str
    type: str
    default: object
    description: str
    constraints: str
    read_only: bool


def check_command_line(prog: str, node_name: str, declare: Callable, description: str,
                       argv: Sequence[str] | None = None) -> None:
    """Check the command line ``argv`` (default ``sys.argv``) of the executable ``prog`` before rclpy starts.

    ``--help`` prints the usage, ``description``'s first line and the parameters ``declare(node)`` declares,
    then exits 0. ROS arguments rcl cannot parse, arguments that are not ROS arguments and ``-p`` rules for
    parameters the node does not declare each exit with status 2 after one line on stderr. (A value of the
    wrong type is found as the node itself declares its parameters: ``values_checked``.)
    """
    argv = list(sys.argv if argv is None else argv)
    if "--help" in argv[1:] or "-h" in argv[1:]:
        print(help_text(prog, description, declared_parameters(node_name, declare)))
        raise SystemExit(0)
    problem = ros_arguments_problem(argv[1:])
    if problem:
        _fail(prog, problem)
    own = remove_ros_args(argv)[1:]
    if own:
        _fail(prog, f"unrecognized arguments: {' '.join(own)}; the node takes ROS arguments only, e.g. "
                    f"{_instead(prog, own, [p.name for p in declared_parameters(node_name, declare)])} "
                    f"({prog} --help lists the parameters)")
    rules = parameter_rules(argv, node_name)
    if rules:
        names = [p.name for p in declared_parameters(node_name, declare)] + list(ROS_PARAMETERS)
        for name, rule in rules:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                _fail(prog, f"-p {rule}: {node_name} has no parameter '{name}'"
                            + (f" (did you mean {close[0]}?)" if close else "") + f"; {prog} --help lists them")


class CommandLineError(Exception):
    """A mistake on the command line found as the node starts, as its one line for stderr (exit status 2)."""


def values_checked(prog: str, make_node: Callable):
    """``make_node()``, or CommandLineError when rclpy refuses a value the command line (``-p`` or
    ``--params-file``) gives a parameter as the node declares it: of the wrong type, or an integer out of its
    declared range (rclpy's own error is a traceback of some 30 lines)."""
    try:
        return make_node()
    except InvalidParameterTypeException as exc:
        problem = _type_problem(str(exc.args[0]))
    except InvalidParameterValueException as exc:
        problem = _value_problem(str(exc.args[0]))
    raise CommandLineError(_error_line(prog, f"{problem}; {prog} --help lists the parameters and their types"))


def _type_problem(text: str) -> str:
    """rclpy's "Trying to set parameter 'x' to 'v' of type 'STRING', expecting type 'BOOL'" as the check says it."""
    found = re.match(r"Trying to set parameter '(.*)' to '(.*)' of type '(\w+)', expecting type '(\w+)'", text)
    if not found:
        return text
    name, value, given, expected = found.groups()
    hint = ""
    if expected == "DOUBLE" and given == "INTEGER":
        hint = f" (write it with a decimal point: {name}:={value}.0)"
    elif expected == "STRING":
        hint = f" (quote it to make it a string: -p {name}:=\"'{value}'\")"
    return (f"parameter '{name}' is {_a(_type_name(expected))}, but it was given '{value}', "
            f"{_a(_type_name(given))}{hint}")


def _value_problem(text: str) -> str:
    """rclpy's "Invalid parameter value (0) for parameter. Reason: Parameter x out of range. Min: 1, Max: 9, value:
    0" as the check says it."""
    found = re.search(r"Parameter (\S+) out of range\. Min: (\S+), Max: (\S+), value: ([^:]+)", text)
    if not found:
        return text.replace("Invalid parameter value", "invalid value", 1)
    name, low, high, value = found.groups()
    return f"parameter '{name}' is {value}; it must be from {low} to {high}"


def _type_name(rcl_type: str) -> str:
    """A parameter type as --help names it (rcl's 'BOOL', 'INTEGER', ...)."""
    try:
        return _TYPES.get(Parameter.Type[rcl_type], rcl_type.lower())
    except KeyError:
        return rcl_type.lower()


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def ros_arguments_problem(ros_args: Sequence[str]) -> str:
    """What is wrong with ROS arguments (``--ros-args ...``, as rclpy.init takes them) that rcl cannot parse,
    in one line; '' when it can."""
    try:
        remove_ros_args(["ros_args", *ros_args])
    except _rclpy.RCLInvalidROSArgsError as exc:
        text = _RCL_DETAIL.sub("", str(exc)).replace("Failed to parse ROS arguments: ", "").strip()
        hint = next((h for kind, h in _HINTS.items() if kind in text), "")
        return f"--ros-args: {text[0].lower()}{text[1:]}" + (f" ({hint})" if hint else "")
    except _rclpy.UnknownROSArgsError as exc:
        return (f"--ros-args: unknown ROS arguments {exc} (ROS arguments are -p NAME:=VALUE, --params-file FILE, "
                "-r FROM:=TO, --log-level LEVEL, ...; put the program's own before --ros-args)")
    return ""


def parameter_rules(argv: Sequence[str], node_name: str) -> list[tuple[str, str]]:
    """(parameter name, rule) of every ``-p``/``--param`` rule of ``argv``'s ROS arguments for the node
    ``node_name`` (without a node prefix, or with its own)."""
    rules, inside = [], False
    for arg, following in zip(argv, [*argv[1:], ""]):
        if arg == "--ros-args":
            inside = True
        elif arg == "--":
            inside = False
        elif inside and arg in ("-p", "--param"):
            target, _, _ = following.partition(":=")
            prefix, _, name = target.rpartition(":")
            if prefix in ("", node_name):
                rules.append((name, following))
    return rules


def declared_parameters(node_name: str, declare: Callable) -> list[DeclaredParameter]:
    """The parameters ``declare(node)`` declares (ROS's own left out), read from a ``DeclarationRecorder``."""
    recorder = DeclarationRecorder(node_name)
    declare(recorder)
    return [DeclaredParameter(name, _TYPES.get(parameter.type_, parameter.type_.name.lower()), parameter.value,
                              descriptor.description, descriptor.additional_constraints, descriptor.read_only)
            for name, (parameter, descriptor) in recorder.declared.items()]


class DeclarationRecorder:
    """What a node's parameter declarations need of a Node, without one: each parameter with its default and
    descriptor, in order. Callbacks on set parameters are not called (nothing is set)."""

    def __init__(self, node_name: str, namespace: str = "/"):
        self.node_name, self.namespace = node_name, namespace
        self.declared: dict[str, tuple[Parameter, ParameterDescriptor]] = {}

    def declare_parameter(self, name: str, value=None, descriptor: ParameterDescriptor | None = None,
                          ignore_override: bool = False) -> Parameter:
        if name in self.declared or name in ROS_PARAMETERS:
            raise ValueError(f"parameter '{name}' is already declared")
        parameter = Parameter(name, value=value)
        self.declared[name] = parameter, descriptor or ParameterDescriptor()
        return parameter

    def get_parameter(self, name: str) -> Parameter:
        return self.declared[name][0]

    def describe_parameter(self, name: str) -> ParameterDescriptor:
        return self.declared[name][1]

    def list_parameters(self, prefixes: Sequence[str], depth: int) -> ListParametersResult:
        return ListParametersResult(names=[name for name in self.declared
                                           if not prefixes or any(name.startswith(p) for p in prefixes)])

    def add_on_set_parameters_callback(self, callback: Callable) -> None:
        pass

    def add_pre_set_parameters_callback(self, callback: Callable) -> None:
        pass

    def get_name(self) -> str:
        return self.node_name

    def get_namespace(self) -> str:
        return self.namespace


def help_text(prog: str, description: str, parameters: Sequence[DeclaredParameter]) -> str:
    """--help: the usage, what the executable is, and every parameter with its type, default and meaning."""
    lines = [USAGE.format(prog=prog), "", description.strip().split("\n")[0], "",
             "parameters (--ros-args -p NAME:=VALUE, or in a --params-file; docs/parameters.md):"]
    for p in parameters:
        default = '""' if p.default == "" else str(p.default).lower() if isinstance(p.default, bool) else p.default
        lines.append(f"  {p.name} ({p.type}, default {default}"
                     + ("" if p.read_only else "; can be changed while the node runs") + ")")
        text = p.description + (f" [{p.constraints}]" if p.constraints else "")
        lines += textwrap.wrap(text, width=100, initial_indent=" " * 6, subsequent_indent=" " * 6)
    lines += ["", f"and ROS's own: {', '.join(ROS_PARAMETERS)}"]
    return "\n".join(lines)


def _instead(prog: str, own: Sequence[str], names: Sequence[str]) -> str:
    """What to write instead of arguments that are not ROS arguments: ``own`` after --ros-args when they are
    ROS rules, a parameter for an option named like one (``--config x.json``: ``-p config_path:=x.json``)."""
    if any(":=" in arg for arg in own):
        return f"{prog} --ros-args {' '.join(own)}"
    match = difflib.get_close_matches(own[0].lstrip("-"), names, n=1) if own[0].startswith("-") else []
    return f"{prog} --ros-args -p " + (f"{match[0]}:={own[1] if len(own) > 1 else 'VALUE'}" if match else "NAME:=VALUE")


def _error_line(prog: str, message: str) -> str:
    return f"{prog}: error: {message}"


def _fail(prog: str, message: str) -> NoReturn:
    print(_error_line(prog, message), file=sys.stderr)
    raise SystemExit(2)
