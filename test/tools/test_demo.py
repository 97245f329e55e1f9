"""The demo (what ./demo.sh runs) end to end, smaller."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import interrupted

from affordance_ros.data.storage import CaseStore

DEMO = [sys.executable, "-P", "-m", "affordance_ros.tools.demo"]


def run_demo(*argv, tmp_path, timeout=120):
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"))
    return subprocess.run([*DEMO, *map(str, argv)], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=tmp_path)


@pytest.mark.ros
def test_demo_runs_and_prints_predictions(tmp_path):
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"))
    result = subprocess.run(
        [sys.executable, "-P", "-m", "affordance_ros.tools.demo", "--trials", "80", "--rate", "200",
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "80 trials stored" in out
    assert "80 cases" in out
    for n in (1, 2, 3, 4):
        assert f"Prediction {n}:" in out
    assert out.count("<- what happened") == 2 * (1 + 4)  # each example: the action, the four effects
    assert "names the action done" in out
    assert (tmp_path / "work" / "cases.db").is_file() and (tmp_path / "work" / "model.json").is_file()
    picture = tmp_path / "work" / "model.png"
    assert f"the learned network is drawn in {picture}" in out
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "ros_home" / "affordance_ros").exists()  # nothing written to the default place


def test_demo_help_is_whole_sentences():
    result = subprocess.run([sys.executable, "-P", "-m", "affordance_ros.tools.demo", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("usage: ./demo.sh")
    description = " ".join(result.stdout.split("\n\n")[1].split())
    assert description.endswith("printed next to the ground truth."), description


def test_demo_sh_resolves_relative_paths_against_the_callers_folder(tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"))
    result = subprocess.run([str(root / "demo.sh"), "--trials", "40", "--rate", "200", "--workdir", "rel_demo"],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Learner node: cases in rel_demo/cases.db" in result.stdout
    assert (tmp_path / "rel_demo" / "cases.db").is_file() and (tmp_path / "rel_demo" / "model.png").is_file()
    assert not (root / "rel_demo").exists()


@pytest.mark.ros
def test_ctrl_c_stops_the_demo_in_one_line_with_exit_status_130(tmp_path):
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"))
    status, _, stderr = interrupted(
        [sys.executable, "-P", "-m", "affordance_ros.tools.demo", "--trials", "100000", "--rate", "50",
         "--workdir", tmp_path / "work"], "Learner node: cases in", env=env)
    assert status == 130 and stderr.strip() == "demo: interrupted", stderr
    assert (tmp_path / "work" / "cases.db").is_file()


# on PYTHONPATH: Python imports it as it starts; it stalls the import of MODULE (prints 'importing', then sleeps)
STALL = """import importlib.abc, os, time
class Stall(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            os.write(1, b"importing\\n")
            time.sleep(60)
import sys; sys.meta_path.insert(0, Stall())
"""


def test_ctrl_c_while_the_demo_starts_is_one_line_too(tmp_path):
    """The demo imports matplotlib, numpy and the core (seconds) before it runs: Ctrl-C then is one line too, not
    the traceback of the import it cut with exit status -2."""
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "stall").mkdir()
    (tmp_path / "stall" / "sitecustomize.py").write_text(STALL.replace("MODULE", repr("affordance_ros.tools.show")))
    env = dict(os.environ, ROS_HOME=str(tmp_path / "ros_home"), PYTHONPATH=str(tmp_path / "stall"))
    status, stdout, stderr = interrupted([root / "demo.sh", "--trials", "40"], "importing", cwd=tmp_path, env=env)
    demo = [line for line in stderr.splitlines() if not line.startswith("setup_env: ")]  # (its report: on stderr)
    assert status == 130 and demo == ["demo: interrupted"], (status, stderr)


@pytest.mark.parametrize("argv, says", [
    (["--picture", "x.jpg"], "./demo.sh: error: --picture x.jpg: write a .png, .svg or .pdf file"),
    (["--picture", "README.md/model.png"], "./demo.sh: error: --picture: README.md is a file, not a folder"),
    (["--workdir", "/proc/nope"], "./demo.sh: error: --workdir /proc/nope: cannot make this folder"),
    (["--workdir", "README.md"], "./demo.sh: error: --workdir: README.md is a file, not a folder"),
], ids=["picture-suffix", "picture-folder", "workdir-unmakeable", "workdir-file"])
def test_a_bad_picture_or_workdir_is_one_line_before_the_demo_starts(argv, says, tmp_path):
    (tmp_path / "README.md").write_text("a file\n")
    result = run_demo(*argv, tmp_path=tmp_path, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(says), result.stderr
    assert result.stdout == ""  # nothing started


@pytest.mark.ros
def test_a_rerun_into_a_workdir_adds_new_trials_of_the_same_settings_and_refuses_others(tmp_path):
    first = run_demo("--trials", "40", "--rate", "200", "--sigma", "1.5", "--workdir", "work", tmp_path=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "earlier runs" not in first.stdout

    other = run_demo("--trials", "40", "--rate", "200", "--workdir", "work", tmp_path=tmp_path, timeout=60)
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stdout + other.stderr
    assert other.stderr.startswith("./demo.sh: error: --workdir work: its cases.db holds 40 cases made with "
                                   "--sigma 1.5 --seed 0, not --sigma 1 --seed 0"), other.stderr
    assert other.stdout == ""

    again = run_demo("--trials", "40", "--rate", "200", "--sigma", "1.5", "--workdir", "work", tmp_path=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert ("it holds 40 cases of earlier runs with these settings already: they are learned from too, 80 cases "
            "in all") in again.stdout
    assert "  80 cases," in again.stdout  # what the learn used
    with CaseStore(tmp_path / "work" / "cases.db", read_only=True) as store:
        records = store.records()
    readings = [tuple(sorted({**r.object_features, **r.effects}.items())) for r in records]
    assert len(set(readings)) == 80  # new trials, not the first run's again
