"""The executables' command lines, as a user types them: a mistake is one line and exit status 2, --help lists
the parameters the node declares, and a node that cannot start says why once, at the right severity."""

import os
import shutil
import signal
import subprocess

import pytest
import rclpy.context
import rclpy.node
from conftest import CLI, NodeProcess, exit_status, wait_for
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from test_docs import declared

from affordance_ros.nodes.command_line import check_command_line, declared_parameters
from affordance_ros.nodes.learner.learner_node import LearnerNode
from affordance_ros.nodes.learner.parameters import declare_learner_parameters
from affordance_ros.nodes.simulation.simulated_robot import SimulatedRobot, declare_robot_parameters
from affordance_ros.share import share_directory

LIB = share_directory().parents[1] / "lib" / "affordance_ros"


def run(*command, timeout=60):
    return subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("executable", ["learner_node", "simulated_robot"])
@pytest.mark.parametrize("args, message", [
    (["--ros-args", "-p", "count=3"],
     "error: --ros-args: couldn't parse parameter override rule: '-p count=3' "
     "(a parameter is set with -p NAME:=VALUE)"),
    (["--config", "x.json"], "error: unrecognized arguments: --config x.json; the node takes ROS arguments only"),
    (["-p", "count:=3"], "e.g. {exe} --ros-args -p count:=3"),
    (["--ros-args", "-p", "cuont:=3"], "error: -p cuont:=3: {node} has no parameter 'cuont'"),
    (["--ros-args", "--params-file", "/nowhere/params.yaml"],
     "error: --ros-args: couldn't parse params file: '--params-file /nowhere/params.yaml'"),
    (["--ros-args", "--log-level", "loud"], "(--log-level takes debug, info, warn, error or fatal)"),
])
def test_a_mistake_on_the_command_line_is_one_line_and_exit_2(executable, args, message):
    out = run(LIB / executable, *args)
    node = {"learner_node": "affordance_learner"}.get(executable, executable)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"{executable}: ") and message.format(exe=executable, node=node) in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stdout == ""


@pytest.mark.parametrize("executable, args, message", [
    ("learner_node", ["-p", "online_learning:=maybe"],
     "error: parameter 'online_learning' is a bool, but it was given 'maybe', a string; "),
    ("learner_node", ["-p", "database_path:=5"],
     "error: parameter 'database_path' is a string, but it was given '5', an int "
     "(quote it to make it a string: -p database_path:=\"'5'\"); "),
    ("simulated_robot", ["-p", "count:=abc"], "error: parameter 'count' is an int, but it was given 'abc', a string; "),
    ("learner_node", ["--params-file", "{params}"],
     "error: parameter 'online_learning' is a bool, but it was given '1', an int"),
    ("simulated_robot", ["-p", "spool_limit:=0"],
     "error: parameter 'spool_limit' is 0; it must be from 1 to 100000000"),
    ("simulated_robot", ["-p", "spool_limit:=99999999999"],
     "error: parameter 'spool_limit' is 99999999999; it must be from 1 to 100000000"),
    ("learner_node", ["-p", "max_pending_trials:=-3"],
     "error: parameter 'max_pending_trials' is -3; it must be from 1 to 10000000"),
])
def test_a_value_of_the_wrong_type_or_out_of_range_is_one_line_and_exit_2(executable, args, message, tmp_path):
    """rclpy raises these from the node's constructor, as a traceback of some 30 lines unless the node checks
    first; an integer out of its declared range the same."""
    params = tmp_path / "params.yaml"
    params.write_text("affordance_learner:\n  ros__parameters:\n    online_learning: 1\n")
    out = run(LIB / executable, "--ros-args", *[a.format(params=params) for a in args])
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"{executable}: {message}") and f"{executable} --help lists" in out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stdout == ""


def test_a_parameter_named_like_an_option_is_suggested():
    out = run(LIB / "learner_node", "--config", "x.json")
    assert "e.g. learner_node --ros-args -p config_path:=x.json (learner_node --help lists the parameters)" in \
        out.stderr
    out = run(LIB / "learner_node", "--ros-args", "-p", "affordance_learner:confg_path:=x.json")
    assert "has no parameter 'confg_path' (did you mean config_path?)" in out.stderr


@pytest.mark.parametrize("executable, node_class", [("learner_node", LearnerNode),
                                                    ("simulated_robot", SimulatedRobot)])
def test_help_lists_every_declared_parameter_with_its_description_and_starts_nothing(executable, node_class, tmp_path,
                                                                                      monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))  # (where a learner that started would put its database)
    parameters = declared(node_class)
    for name in list(tmp_path.iterdir()):
        shutil.rmtree(name)
    for flag in ("--help", "-h"):
        out = run(LIB / executable, flag)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        assert out.stdout.startswith(f"usage: {executable} [--help] [--ros-args")
        text = " ".join(out.stdout.split())
        for name, (_, _, description) in parameters.items():
            assert f" {name} (" in text and " ".join(description.split()) in text, name
        assert not any(tmp_path.iterdir())  # no node ran: no database


@pytest.mark.parametrize("node_class, declare", [(LearnerNode, declare_learner_parameters),
                                                  (SimulatedRobot, declare_robot_parameters)])
def test_the_check_reads_the_declarations_a_node_makes_without_making_a_node(node_class, declare, monkeypatch):
    """A node is a DDS participant, and Fast DDS deleting one can hang: the check before the node starts makes
    none (rclpy.init or a Node would fail here), yet reads each parameter as the node declares it."""
    real = {name: (kind, default) for name, (kind, default, _) in declared(node_class).items()}

    def refused(*args, **kwargs):
        raise AssertionError("the command line check made a context or a node")
    monkeypatch.setattr(rclpy.context.Context, "init", refused)
    monkeypatch.setattr(rclpy.node.Node, "__init__", refused)
    recorded = declared_parameters(node_class.__name__, declare)
    assert {p.name: (p.type, p.default) for p in recorded} == {
        name: ({"integer": "int"}.get(kind, kind), default) for name, (kind, default) in real.items()}
    name = recorded[0].name
    check_command_line("prog", "node", declare, "", ["prog", "--ros-args", "-p", f"{name}:=[1, 2]"])  # type: later
    with pytest.raises(SystemExit):
        check_command_line("prog", "node", declare, "", ["prog", "--ros-args", "-p", "no_such_parameter:=1"])


def test_the_tools_check_their_ros_arguments_too(tmp_path):
    for command in ([LIB / "replay", tmp_path / "bag"], [LIB / "record", tmp_path / "bag"],
                    [CLI, "call", "predict", "--query", "action"], [CLI, "replay", tmp_path / "bag"]):
        out = run(*command, "--ros-args", "-p", "x=1")
        assert out.returncode == 2, out.stderr
        assert "--ros-args: couldn't parse parameter override rule: '-p x=1'" in out.stderr
        assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr


def start(tmp_path, *ros_args):
    return NodeProcess([str(LIB / "learner_node"), "--ros-args", *ros_args], tmp_path / "learner.log",
                       env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1"))


def test_a_learner_that_cannot_start_says_why_once_at_fatal(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "affordance_ros/model/1", "variables": []}')
    learner = start(tmp_path, "-p", f"config_path:={bad}", "-p", f"database_path:={tmp_path / 'c.db'}")
    assert exit_status(learner, 60) == 1
    lines = [line for line in (tmp_path / "learner.log").read_text().splitlines() if "no variables" in line]
    assert len(lines) == 1 and lines[0].startswith("[FATAL]"), lines


def test_a_database_path_where_no_file_can_be_made_is_one_fatal_line_naming_the_parameter(tmp_path):
    learner = start(tmp_path, "-p", "database_path:=/proc/cases.db")  # it named only '/proc/cases.db.lock'
    assert exit_status(learner, 60) == 1
    lines = [line for line in (tmp_path / "learner.log").read_text().splitlines() if "cases.db" in line]
    assert len(lines) == 1 and lines[0].startswith("[FATAL]"), lines
    assert "database_path '/proc/cases.db': cannot make or lock its lock file /proc/cases.db.lock (No such file " \
        "or directory): is the folder writable?" in lines[0]


def test_a_configure_that_fails_on_request_is_one_error(ros, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "affordance_ros/model/1", "variables": []}')
    learner = start(tmp_path, "-r", "__ns:=/command_line_test", "-p", "autostart:=false", "-p", f"config_path:={bad}",
                    "-p", f"database_path:={tmp_path / 'c.db'}")
    try:
        assert not ros.call(ChangeState, "/command_line_test/affordance_learner/change_state",
                            transition=Transition(id=Transition.TRANSITION_CONFIGURE)).success
        wait_for(lambda: "no variables" in (tmp_path / "learner.log").read_text(), what="the error logged")
    finally:
        learner.send_signal(signal.SIGINT)
        assert exit_status(learner, 30) == 0
    lines = [line for line in (tmp_path / "learner.log").read_text().splitlines() if "no variables" in line]
    assert len(lines) == 1 and lines[0].startswith("[ERROR]") and "configure failed" in lines[0], lines

