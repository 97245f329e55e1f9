"""`affordance-ros simulate` and `affordance-ros evaluate`, run as a user runs them."""

import csv
import json

import pytest
from test_cli import run

from affordance_ros.core import AffordanceNetwork, predict
from affordance_ros.core.evaluation import BASELINES
from affordance_ros.share import share_directory
from affordance_ros.tools.baselines import STRONG_BASELINES

METHODS = ("ours", *BASELINES, *STRONG_BASELINES)

CONFIG = share_directory() / "config"


@pytest.fixture(scope="module")
def hands_csv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evaluate")
    out = run("simulate", "--scenario", "hands", "--out", tmp / "hands.csv", "--repeats", "6", "--seed", "2")
    assert out.returncode == 0, out.stderr
    return tmp / "hands.csv"


def test_simulate_writes_every_trial_with_an_object_id(tmp_path):
    out = run("simulate", "--scenario", "tools", "--out", tmp_path / "tools.csv", "--repeats", "2")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "tools.csv").open()))
    assert len(rows) == 3 * 11 * 4 * 2
    assert len({r["object_id"] for r in rows}) == 11 and {r["Tool"] for r in rows} == {"stick", "hook", "rake"}
    assert all(0.0 <= float(r["circleness"]) <= 1.0 for r in rows)
    # the config reads it (the object_id column named as extra) and learns from it
    out = run("learn", "--cases", tmp_path / "tools.csv", "--config", CONFIG / "tools.json",
              "--out", tmp_path / "m.json")
    assert out.returncode == 2 and "column 'object_id' is neither a variable" in out.stderr
    assert "leave it out with --ignore-columns object_id" in out.stderr  # what to do about it
    out = run("learn", "--cases", tmp_path / "tools.csv", "--config", CONFIG / "tools.json",
              "--out", tmp_path / "m.json", "--ignore-columns", "object_id")
    assert out.returncode == 0, out.stderr
    assert "Shape->Effect" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--scenario", "montesano", "--trials", "-3"], "argument --trials: must be >= 1, got -3"),
    (["--scenario", "montesano", "--trials", "0"], "argument --trials: must be >= 1, got 0"),
    (["--scenario", "hands", "--repeats", "0"], "argument --repeats: must be >= 1, got 0"),
    (["--scenario", "tools", "--trials", "10"],  # it wrote 1320 trials, --trials silently ignored
     "--trials is not for the 'tools' scenario: give --repeats (trials of every combination)"),
    (["--scenario", "montesano", "--repeats", "3"], "--repeats is not for the 'montesano' scenario: give --trials"),
])
def test_simulate_refuses_a_size_it_cannot_use_in_one_line(args, message, tmp_path):
    out = run("simulate", *args, "--out", tmp_path / "s.csv")  # (--trials -3: one line, not numpy's traceback)
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    assert not (tmp_path / "s.csv").exists()


def test_evaluate_k_fold_prints_a_table_and_writes_json_and_figures(hands_csv, tmp_path):
    out = run("evaluate", "--cases", hands_csv, "--config", CONFIG / "hands.json", "--folds", "3",
              "--targets", "Action", "Effect", "--out", tmp_path / "eval", "--groups", "object_id")
    assert out.returncode == 0, out.stderr
    assert "3-fold cross-validation, 144 cases" in out.stdout
    for metric in ("accuracy", "log-loss", "RMSE dx", "log-density"):
        assert metric in out.stdout
    doc = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    assert set(doc["targets"]) == {"Action", "Effect"} and doc["methods"] == list(METHODS)
    assert set(doc["targets"]["Action"]["metrics"]) == set(METHODS)
    # logistic regression predicts labels only: the labels' table has its column, the readings' table none
    assert set(doc["targets"]["Effect"]["metrics"]) == set(METHODS) - {"logistic_regression"}
    tables = out.stdout.split("\n\n")[1:]
    assert [t.splitlines()[1].split()[-1] for t in tables] == ["regression", "forest"], out.stdout
    assert all(len(line) <= 100 for line in out.stdout.splitlines() if not line.startswith("wrote ")), out.stdout
    assert 0.5 < doc["targets"]["Action"]["metrics"]["ours"]["accuracy"] <= 1.0
    assert doc["targets"]["Effect"]["metrics"]["ours"]["rmse"] < doc["targets"]["Effect"]["metrics"]["majority"]["rmse"]
    assert (tmp_path / "eval" / "Action_confusion.png").stat().st_size > 1000
    assert (tmp_path / "eval" / "Effect_predicted_vs_true.png").stat().st_size > 1000


def test_evaluate_compares_with_the_baselines_asked_for_only(hands_csv, tmp_path):
    out = run("evaluate", "--cases", hands_csv, "--config", CONFIG / "hands.json", "--folds", "2",
              "--targets", "Action", "--ignore-columns", "object_id", "--baselines", "random_forest", "majority",
              "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "evaluation.json").read_text())
    assert doc["methods"] == ["ours", "random_forest", "majority"]
    assert set(doc["targets"]["Action"]["metrics"]) == {"ours", "random_forest", "majority"}


def test_evaluate_leave_one_group_out(hands_csv):
    out = run("evaluate", "--cases", hands_csv, "--config", CONFIG / "hands.json", "--leave-out", "object_id",
              "--targets", "Effect")
    assert out.returncode == 0, out.stderr
    assert "leave one object_id out (2 folds)" in out.stdout


@pytest.mark.parametrize("args,message", [
    (["--leave-out", "nope"], "no column 'nope'"),
    (["--targets", "Nope"], "unknown variable 'Nope'"),
    (["--folds", "1"], "at least 2 folds"),
    (["--baselines", "majority", "xgboost"], "--baselines: no baseline 'xgboost'; choose from majority, cell_mean, "
                                             "nearest_centroid, knn, gradient_boosting, random_forest, "
                                             "logistic_regression"),
])
def test_evaluate_mistakes_are_one_line_errors(hands_csv, args, message):
    out = run("evaluate", "--cases", hands_csv, "--config", CONFIG / "hands.json", "--ignore-columns", "object_id",
              *args)
    assert out.returncode == 2 and message in out.stderr, out.stderr


def test_predict_json_has_the_predicted_readings(hands_csv, tmp_path):
    model = tmp_path / "hands_model.json"
    out = run("learn", "--cases", hands_csv, "--config", CONFIG / "hands.json", "--out", model,
              "--ignore-columns", "object_id")
    assert out.returncode == 0, out.stderr
    out = run("predict", "--model", model, "--query", "Effect", "--value", "Action=push", "--value", "Hand=straight",
              "--value", "Object=ball", "--readings")
    answer = json.loads(out.stdout)
    direct = predict(AffordanceNetwork.load(model), ["Effect"], values={"Action": "push", "Hand": "straight",
                                                                      "Object": "ball"})
    assert answer["readings"]["dy"]["mean"] == pytest.approx(direct.readings["dy"]["mean"])
    assert answer["readings"]["dy"]["mean"] > 5.0 > abs(answer["readings"]["dx"]["mean"])   # pushed away
    assert answer["mixtures"]["Effect"]["names"] == ["dx", "dy"]


def test_evaluate_reports_the_euclidean_and_the_per_coordinate_rmse_and_defines_them(hands_csv, tmp_path):
    out = run("evaluate", "--cases", hands_csv, "--config", "hands", "--folds", "3", "--targets", "Effect",
              "--ignore-columns", "object_id", "--out", tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.split()[1:3] for line in out.stdout.splitlines() if line.startswith("Effect")]
    assert rows[:4] == [["RMSE", "Euclidean"], ["RMSE", "per"], ["RMSE", "dx"], ["RMSE", "dy"]], out.stdout
    metrics = json.loads((tmp_path / "evaluation.json").read_text())["targets"]["Effect"]["metrics"]
    for method in metrics:  # every case has both readings: Euclidean = sqrt(2) x per coordinate
        m = metrics[method]
        assert m["euclidean_rmse"] == pytest.approx(2 ** 0.5 * m["rmse"])
        assert m["rmse"] ** 2 == pytest.approx((m["rmse_dx"] ** 2 + m["rmse_dy"] ** 2) / 2)
    help_text = " ".join(run("evaluate", "--help").stdout.split())
    assert ("'RMSE Euclidean' is the root mean square of the Euclidean distance between a case's predicted and "
            "true readings") in help_text
    assert "'RMSE per coord.' is the root mean square over every single reading" in help_text


def test_evaluate_learns_on_one_group_and_tests_on_another(tmp_path):
    """The transfer scenario: learn on the hand postures, predict the tools through the same descriptors."""
    out = run("simulate", "--scenario", "transfer", "--out", tmp_path / "transfer.csv", "--repeats", "4")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader((tmp_path / "transfer.csv").open()))
    assert {r["kind"] for r in rows} == {"hand", "tool"} and len({r["manipulator_id"] for r in rows}) == 6
    out = run("evaluate", "--cases", tmp_path / "transfer.csv", "--config", "transfer", "--train-on", "kind=hand",
              "--groups", "manipulator_id", "--targets", "Action", "Effect", "--out", tmp_path / "eval")
    assert out.returncode == 0, out.stderr
    assert "learn on kind=hand (96 cases), test on the others, 192 cases" in out.stdout
    doc = json.loads((tmp_path / "eval" / "evaluation.json").read_text())
    assert doc["targets"]["Effect"]["metrics"]["ours"]["cases"] == 96        # the tools only
    assert doc["targets"]["Action"]["metrics"]["ours"]["accuracy"] > 0.5
    out = run("evaluate", "--cases", tmp_path / "transfer.csv", "--config", "transfer", "--train-on", "kind",
              "--ignore-columns", "manipulator_id")
    assert out.returncode == 2 and "--train-on kind: give COLUMN=VALUE" in out.stderr


def test_learn_prints_a_warning_when_bic_reaches_max_components(tmp_path):
    config = json.loads((CONFIG / "tools.json").read_text())
    config["learning"].pop("entity_column")
    config["learning"]["structural_em"] = 0
    next(v for v in config["variables"] if v["name"] == "Shape")["sensor"]["max_components"] = 2
    (tmp_path / "tools2.json").write_text(json.dumps(config))
    assert run("simulate", "--scenario", "tools", "--out", tmp_path / "tools.csv", "--repeats", "3").returncode == 0
    out = run("learn", "--cases", tmp_path / "tools.csv", "--config", tmp_path / "tools2.json", "--out",
              tmp_path / "m.json", "--ignore-columns", "object_id")
    assert out.returncode == 0, out.stderr
    assert ("affordance-ros learn: warning: 'Shape': BIC on every reading chose 2 values, the most its sensor's "
            "'max_components' allows") in out.stderr
    assert json.loads((tmp_path / "m.json").read_text())["metadata"]["learned"]["warnings"]
