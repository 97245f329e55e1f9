"""The installed `affordance-ros` command, run as a user runs it (a subprocess, exit codes, stderr)."""

import json
import re
import subprocess
import time

import numpy as np
import pytest
from conftest import CLI, interrupted

from affordance_ros.core import AffordanceNetwork, benchmark_network, benchmark_structure, sample_cases
from affordance_ros.share import default_config_path


def run(*args):
    assert CLI, "affordance-ros is not installed (conftest.CLI: in the bin/ of the install under test, or on PATH)"
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    truth = benchmark_network("montesano", sigma=1.0, seed=3)
    cases, _ = sample_cases(truth, 3000, np.random.default_rng(0), labelled=("Action",))
    cases.to_csv(tmp / "cases.csv")
    config = benchmark_structure("montesano", sigma=1.0).to_dict()
    for v in config["variables"]:
        del v["parents"]
    (tmp / "config.json").write_text(json.dumps(config))
    return tmp, truth


def test_learn_then_predict(files):
    tmp, truth = files
    out = run("learn", "--cases", tmp / "cases.csv", "--config", tmp / "config.json",
              "--structure", "k2", "--out", tmp / "model.json")
    assert out.returncode == 0, out.stderr
    assert "learned from 3000 cases" in out.stdout
    model = AffordanceNetwork.load(tmp / "model.json")
    assert model.parameterised and ("Action", "ObjVel") in model.arcs

    out = run("predict", "--model", tmp / "model.json", "--query", "action",
              "--sensor", "obj_vel=10.2", "--sensor", "hand_vel=0.3", "--value", "Shape=box")
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert set(answer) == {"marginals", "most_probable", "joint_probability", "stddevs", "intervals", "support"}
    assert list(answer["marginals"]["Action"]) == ["grasp", "tap", "touch"]
    assert sum(answer["marginals"]["Action"].values()) == pytest.approx(1.0)
    assert answer["most_probable"]["Action"] == max(answer["marginals"]["Action"],
                                                    key=answer["marginals"]["Action"].get)

    out = run("predict", "--model", tmp / "model.json", "--query", "effect", "--value", "Action=grasp")
    answer = json.loads(out.stdout)
    assert list(answer["marginals"]) == ["ObjVel", "ObjHandVel", "HandVel", "Contact"]
    assert 0 < answer["joint_probability"] <= 1


@pytest.mark.parametrize("args, message", [
    (["predict", "--model", "{tmp}/model.json", "--query", "Nope"], "unknown variable 'Nope'"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "obj_vel=fast"], "must be a number"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "obj_vel=9,7"],
     "--sensor obj_vel=9,7: the reading must be a number; write '.' as the decimal point"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "obj_vel=nan"], "finite"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "Shape"], "NAME=VALUE"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "Shape=cube"], "unknown label 'cube'"),
    # names are case-sensitive: what was meant is named (--query action, the group, is taken; --value action=... not)
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "action=tap"],
     "unknown variable 'action' (did you mean 'Action'? names are case-sensitive)"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "Obj_Vel=9.7"],
     "unknown sensor 'Obj_Vel' (did you mean 'obj_vel'? names are case-sensitive)"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "Shape=Box"],
     "unknown label 'Box' for variable 'Shape' (did you mean 'box'? names are case-sensitive)"),
    # a name wrong by a letter, substituted too
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "sise=0.1"],
     "unknown sensor 'sise' (did you mean 'size'?)"),
    (["predict", "--model", "{tmp}/corrupt.json", "--query", "action"], "not valid JSON"),
    (["predict", "--model", "{tmp}/config.json", "--query", "action"],
     "has no learned CPTs (a configuration?): learn a model with it first"),
    # a file of the wrong kind says what it is (not only "not valid JSON: Expecting value: ...", or for the model
    # given as cases "expected a rosbag2 bag (directory, .db3 or .mcap), a .csv file or ...")
    (["predict", "--model", "{tmp}/cases.csv", "--query", "action"], "is a cases CSV file, not a model file"),
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/cases.csv", "--out", "{tmp}/x.json"],
     "is a cases CSV file, not a configuration"),
    (["learn", "--cases", "{tmp}/model.json", "--config", "{tmp}/config.json", "--out", "{tmp}/x.json"],
     "it is a JSON file (a model or configuration?), not cases"),
    (["evaluate", "--cases", "{tmp}/model.json", "--config", "{tmp}/config.json"],
     "is a JSON file (a model or configuration?), not cases"),
    # a prior model that would not be used (refused, not learned without it saying nothing)
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--prior-model", "{tmp}/model.json",
      "--out", "{tmp}/x.json"], "prior_strength is 0: it would not be used"),
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--prior-model", "{tmp}/model.json",
      "--prior-strength", "10", "--method", "discrete", "--out", "{tmp}/x.json"], "a prior model is used by EM only"),
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--prior-model", "{tmp}/config.json",
      "--prior-strength", "10", "--out", "{tmp}/x.json"], "has no learned CPTs (a configuration?)"),
    (["learn", "--cases", "{tmp}/missing.csv", "--config", "{tmp}/config.json", "--out", "{tmp}/x.json"],
     "does not exist"),
    (["learn", "--cases", "{tmp}/empty.csv", "--config", "{tmp}/config.json", "--out", "{tmp}/x.json"], "no cases"),
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--structure", "fixed",
      "--out", "{tmp}/x.json"], "needs 'parents'"),
])
def test_user_mistakes_give_one_line_and_exit_2(files, args, message):
    tmp, _ = files
    if not (tmp / "model.json").exists():
        test_learn_then_predict(files)
    (tmp / "corrupt.json").write_text("{not json")
    (tmp / "empty.csv").write_text("trial_id,Action\n")
    out = run(*[a.format(tmp=tmp) for a in args])
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, command, message", [
    (["learn", "--cases", "c.csv", "--config", "montesano", "--out", "m.json", "--effects"], "learn",
     "unrecognized arguments: --effects"),
    (["learn", "--cases", "c.csv", "--config", "montesano"], "learn", "the following arguments are required: --out"),
    (["learn", "--cases", "c.csv", "--config", "montesano", "--out", "m.json", "--structure", "K2"], "learn",
     "argument --structure: invalid choice: 'K2'"),
    (["simulate", "--scenario", "montesano", "--out", "c.csv", "--trials", "many"], "simulate",
     "argument --trials: 'many' is not a whole number"),
    (["call", "predict", "--query", "action", "--bogus"], "call predict", "unrecognized arguments: --bogus"),
    (["predict", "--model", "m.json", "--query", "action", "--ros-args"], "predict", "--ros-args is for replay"),
])
def test_option_mistakes_are_one_line_naming_the_subcommand(args, command, message):
    out = run(*args)
    prog = f"affordance-ros {command}".strip()
    assert out.returncode == 2 and out.stdout == ""
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"{prog}: error: {message}"), out.stderr
    if "--ros-args" not in args:  # (a mistake argparse does not see)
        assert out.stderr.endswith(f" (see {prog} --help)\n")


@pytest.mark.parametrize("executable, args, message", [
    ("replay", ["bag", "--rate", "fast"], "argument --rate: 'fast' is not a number"),
    ("record", ["bag", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_the_ros_executables_say_option_mistakes_in_one_line(capsys, executable, args, message):
    from affordance_ros.tools import record, replay
    with pytest.raises(SystemExit) as stopped:
        {"replay": replay, "record": record}[executable].main(args)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == f"{executable}: error: {message} (see {executable} --help)\n"


def test_help_is_the_whole_usage_on_stdout():
    out = run("learn", "--help")
    assert out.returncode == 0 and out.stderr == ""
    assert out.stdout.startswith("usage: affordance-ros learn [-h] --cases CASES") and "--structure" in out.stdout


def test_every_command_says_what_it_does_above_its_options():
    import argparse

    from affordance_ros.tools.commands import build_parser
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    undescribed = [name for name, parser in commands.items() if not (parser.description or "").strip()]
    assert len(commands) >= 13 and not undescribed


def test_the_list_of_commands_says_which_need_ros_2():
    # (it said every command worked "without ROS running", and listed replay, record and call)
    listed = run()
    said = " ".join(listed.stdout.split())
    assert "without ROS running" not in said and "every command works without ROS but replay, record and call, " \
        "which need ROS 2" in said, listed.stdout
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert {name for name, line in rows.items() if "(needs ROS 2)" in line} == {"replay", "record", "call"}, rows


def test_call_takes_the_services_names_as_well():
    # select-action and suggest are select_action and suggest_trial in the services and AffordanceClient
    from affordance_ros.tools.commands import build_parser
    parser = build_parser()
    for typed, service in (("select_action", "select-action"), ("select-action", "select-action")):
        assert parser.parse_args(["call", typed, "--effect", "ObjVel=fast"]).service == service
    for typed in ("suggest_trial", "suggest"):
        assert parser.parse_args(["call", typed, "--candidate", "size=0.1"]).service == "suggest"
    listed = " ".join(run("call", "--help").stdout.split())
    assert "select-action (select_action)" in listed and "suggest (suggest_trial)" in listed, listed


def test_import_refuses_a_foreign_database_without_touching_it(files, tmp_path):
    import sqlite3
    tmp, _ = files
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE accounts (name, balance)")
    conn.commit()
    conn.close()
    before = foreign.read_bytes()
    out = run("import", tmp / "cases.csv", "--db", foreign, "--config", tmp / "config.json")
    assert out.returncode != 0 and "something else" in out.stderr, out.stderr
    assert foreign.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]


@pytest.fixture(scope="module")
def montesano_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("montesano") / "cases.csv"
    out = run("simulate", "--scenario", "montesano", "--trials", "3000", "--seed", "4", "--out", path)
    assert out.returncode == 0, out.stderr
    return path


@pytest.mark.parametrize("command, ready", [
    (["learn", "--cases", "{csv}", "--config", "montesano", "--structure", "mcmc", "--mcmc-samples", "10000000",
      "--progress", "--out", "{tmp}/model.json"], "learn: structure"),
    (["evaluate", "--cases", "{csv}", "--config", "montesano", "--folds", "1000", "--baselines", "majority",
      "--progress"], "evaluate: "),
])
def test_ctrl_c_is_one_line_and_exit_status_130(montesano_csv, tmp_path, command, ready):
    args = [a.format(csv=montesano_csv, tmp=tmp_path) for a in command]
    status, _, stderr = interrupted([CLI, *args], ready)
    assert status == 130, stderr
    assert "Traceback" not in stderr and stderr.splitlines()[-1] == f"affordance-ros {command[0]}: interrupted"
    assert not (tmp_path / "model.json").exists()


def test_learn_progress_shows_the_steps_of_learning_a_line_a_second(montesano_csv, tmp_path):
    started = time.monotonic()
    out = run("learn", "--cases", montesano_csv, "--config", "montesano", "--structure", "mcmc", "--mcmc-samples",
              "30000", "--progress", "--out", tmp_path / "model.json")
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    phases = [line.split(",")[0].split(" (")[0] for line in lines]
    assert [phase for i, phase in enumerate(phases) if i == 0 or phase != phases[i - 1]][:3] == [
        "learn: sensors", "learn: structure", "learn: parameters"], lines  # (a phase repeats on a slow machine)
    assert any(re.fullmatch(r"learn: structure, step \d+, score -\d+\.\d{3} \(\d+\.\d s\)", line) for line in lines)
    assert any(re.fullmatch(r"learn: parameters, EM iteration \d+, log-likelihood -\d+\.\d{3} \(\d+\.\d s\)", line)
               for line in lines), lines
    assert "nan" not in out.stderr
    assert len(lines) <= 3 + elapsed  # in a log: at every change of phase, else at most a line a second


def test_config_names_a_shipped_configuration_and_errors_say_where_they_are(montesano_csv, tmp_path):
    (tmp_path / "montesano").mkdir()  # a folder named as a shipped configuration (the checkout's tools/) is not one
    out = subprocess.run([CLI, "learn", "--cases", montesano_csv, "--config", "montesano", "--out", "model.json"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and (tmp_path / "model.json").is_file(), out.stderr
    shipped = default_config_path().parent
    for command in (["learn", "--cases", montesano_csv, "--out", "x.json"],
                    ["evaluate", "--cases", montesano_csv]):
        out = subprocess.run([CLI, *map(str, command), "--config", "config/tools.json"], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path)
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
        assert (f"cannot read configuration 'config/tools.json': no such file; the shipped configurations are hands, "
                f"montesano, tools, transfer (in {shipped}): name one (--config hands)") in out.stderr
        assert "model file" not in out.stderr
    (tmp_path / "broken.json").write_text("{")
    out = run("evaluate", "--cases", montesano_csv, "--config", tmp_path / "broken.json")
    assert out.returncode == 2 and "not valid JSON" in out.stderr
    out = run("evaluate", "--cases", montesano_csv, "--config", tmp_path)  # a folder
    assert out.returncode == 2 and f"cannot read configuration '{tmp_path}': a folder, not a configuration file; " \
        "the shipped configurations are" in out.stderr, out.stderr


@pytest.mark.ros
def test_ctrl_c_is_how_record_stops_it_closes_the_bag_and_exits_0(tmp_path):
    status, stdout, stderr = interrupted([CLI, "record", tmp_path / "bag", "--storage", "mcap"], "record: recording")
    assert status == 0 and "Traceback" not in stderr, stderr
    assert "record: wrote 0 messages" in stdout and (tmp_path / "bag" / "metadata.yaml").is_file()
