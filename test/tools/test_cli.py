"""The installed `affordance-ros` command, run as a user runs it (a subprocess, exit codes, stderr)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from affordance_ros.core import AffordanceNetwork, benchmark_network, benchmark_structure, sample_cases

EXE = shutil.which("affordance-ros", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def run(*args):
    assert EXE, "affordance-ros is not installed next to this Python"
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, timeout=120)


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
    assert set(answer) == {"marginals", "most_probable", "joint_probability"}
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
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--sensor", "obj_vel=nan"], "finite"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "Shape"], "NAME=VALUE"),
    (["predict", "--model", "{tmp}/model.json", "--query", "action", "--value", "Shape=cube"], "unknown label 'cube'"),
    (["predict", "--model", "{tmp}/corrupt.json", "--query", "action"], "not valid JSON"),
    (["predict", "--model", "{tmp}/config.json", "--query", "action"], "learn it first"),
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
