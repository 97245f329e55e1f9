"""`--out` of the `affordance-ros` commands never replaces recorded data, and Ctrl-C leaves no part of a file."""

import sqlite3

import pytest
from conftest import CLI, interrupted
from test_cli import montesano_csv, run  # noqa: F401  (the fixture)

from affordance_ros.core import benchmark_network
from affordance_ros.data.formats import export_model


@pytest.fixture
def recorded(montesano_csv, tmp_path):  # noqa: F811
    """A folder of recorded data (a case database, cases CSV files, a bag, notes), a model and its BIF export."""
    conn = sqlite3.connect(tmp_path / "cases.db")
    conn.execute("CREATE TABLE cases (trial_id, action)")
    conn.commit()
    conn.close()
    (tmp_path / "cases.csv").write_bytes(montesano_csv.read_bytes())
    (tmp_path / "other.csv").write_text("trial_id,Action\nt1,grasp\n")
    (tmp_path / "robot_bag").mkdir()
    (tmp_path / "robot_bag" / "robot_bag.mcap").write_bytes(b"\x89MCAP0\r\n" + bytes(range(256)))
    (tmp_path / "notes.txt").write_text("the robot's calibration\n")
    truth = benchmark_network("montesano", sigma=1.0, seed=3)
    truth.save(tmp_path / "model.json")
    export_model(truth, "bif", tmp_path / "model.bif")
    return tmp_path


def snapshot(folder):
    """Every file and folder under ``folder``, with its bytes (None for a folder)."""
    return {p.relative_to(folder): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


LEARN = ["learn", "--config", "montesano", "--cases"]
THE_CASES = "is the cases it learns from (--cases): write the model to another file (e.g. --out model.json)"
NOT_A_MODEL = "not a model: learn replaces only a model or configuration JSON; write the model to another file"


@pytest.mark.parametrize("args, message", [
    (LEARN + ["{d}/cases.db", "--out", "{d}/cases.db"], f"--out '{{d}}/cases.db' {THE_CASES}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/cases.csv"], f"--out '{{d}}/cases.csv' {THE_CASES}"),
    (LEARN + ["{d}/robot_bag", "--out", "{d}/robot_bag"], f"--out '{{d}}/robot_bag' {THE_CASES}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/cases.db"],
     f"--out '{{d}}/cases.db' is an SQLite database (a case database or a bag's storage), {NOT_A_MODEL}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/other.csv"], f"--out '{{d}}/other.csv' is a CSV file, {NOT_A_MODEL}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/robot_bag/robot_bag.mcap"],
     f"--out '{{d}}/robot_bag/robot_bag.mcap' is an MCAP bag file, {NOT_A_MODEL}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/notes.txt"],
     f"--out '{{d}}/notes.txt' is an existing file, {NOT_A_MODEL}"),
    (LEARN + ["{d}/cases.csv", "--out", "{d}/robot_bag"],
     "--out '{d}/robot_bag' is a directory: name the model file to write (e.g. --out {d}/robot_bag/model.json)"),
    (["import-model", "{d}/model.bif", "--config", "montesano", "--out", "{d}/model.bif"],
     "--out '{d}/model.bif' is the network it imports"),
    (["import-model", "{d}/model.bif", "--config", "montesano", "--out", "{d}/cases.db"],
     "--out '{d}/cases.db' is an SQLite database (a case database or a bag's storage), not a model: import-model "
     "replaces only a model or configuration JSON"),
    (["export-model", "{d}/model.json", "--format", "bif", "--out", "{d}/model.json"],
     "--out '{d}/model.json' is the model itself: write the export to another file (e.g. --out model.bif)"),
    (["export-model", "{d}/model.json", "--format", "bif", "--out", "{d}/other.csv"],
     "--out '{d}/other.csv' is a CSV file: export-model replaces only a file named as an export (.bif, "),
    (["simulate", "--scenario", "montesano", "--trials", "10", "--out", "{d}/cases.db"],
     "'{d}/cases.db' exists already; simulate writes a new file"),
    (["simulate", "--scenario", "hands", "--out", "{d}/cases.csv"], "'{d}/cases.csv' exists already"),
    # the file asked for, not the temporary one beside it ("No such file or directory: '/proc/.o.json.zggd77jo'")
    (LEARN + ["{d}/cases.csv", "--out", "{d}/notes.txt/model.json"],
     "cannot write {d}/notes.txt/model.json: {d}/notes.txt is a file, not a folder"),
    (["simulate", "--scenario", "hands", "--out", "/proc/cases.csv"],
     "cannot write /proc/cases.csv: no file can be made in /proc (No such file or directory)"),
])
def test_out_refuses_recorded_data_in_one_line_and_changes_nothing(recorded, args, message):
    before = snapshot(recorded)
    out = run(*[a.format(d=recorded) for a in args])
    command = args[0]
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"affordance-ros {command}: error: {message.format(d=recorded)}"), out.stderr
    assert snapshot(recorded) == before


def test_learn_import_model_and_export_model_replace_their_earlier_output(recorded):
    for args in (LEARN + [recorded / "cases.csv", "--out", recorded / "model.json"],
                 LEARN + [recorded / "cases.csv", "--out", recorded / "model.json"],
                 ["export-model", recorded / "model.json", "--out", recorded / "model.bif"],
                 ["import-model", recorded / "model.bif", "--config", "montesano", "--out", recorded / "model.json"]):
        out = run(*args)
        assert out.returncode == 0, out.stderr


def test_ctrl_c_leaves_no_part_of_a_simulated_file(recorded):
    before = snapshot(recorded)

    def writing():  # simulate's temporary file beside --out has its first rows
        return any(p.name.startswith(".new.csv.") and p.stat().st_size > 0 for p in recorded.iterdir())

    status, _, stderr = interrupted([CLI, "simulate", "--scenario", "montesano", "--trials", "300000",
                                     "--out", recorded / "new.csv"], writing)
    assert status == 130 and stderr.splitlines()[-1] == "affordance-ros simulate: interrupted", stderr
    assert snapshot(recorded) == before  # no new.csv, no temporary file, the rest byte for byte
