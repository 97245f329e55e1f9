"""What `learn`, `evaluate`, `import` and `predict` say of data the configuration cannot use: a configured column
missing or empty, a reading outside its sensor's valid_range (each one line, exit 2, naming what to fix)."""

import csv
import json

import pytest
from test_cli import montesano_csv, run  # noqa: F401  (the fixture)

FIFTH_TRIAL = "montesano-seed4-n3000-balanced-000004"  # (montesano_csv's trial ids: scenario, seed, size, number)


def rewritten(source, target, change):
    """``source`` with ``change(header, row)`` applied to every data row (and ``change(header, None)`` returning
    the new header), written to ``target``."""
    rows = list(csv.reader(source.open()))
    header = rows[0]
    with target.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(change(header, None))
        for row in rows[1:]:
            writer.writerow(change(header, row))
    return target


def without_column(name):
    return lambda header, row: [x for h, x in zip(header, row or header) if h != name]


def emptied_column(name):
    return lambda header, row: header if row is None else ["" if h == name else x for h, x in zip(header, row)]


@pytest.mark.parametrize("change, message", [
    (without_column("Action"), "no case has data for the variable 'Action' (no column 'Action')"),
    (without_column("size"), "no case has data for the variable 'Size' (no column 'size')"),
    (emptied_column("Action"), "no case has data for the variable 'Action' (column 'Action' is empty)"),
    (emptied_column("contact"), "no case has data for the variable 'Contact' (column 'contact' is empty)"),
])
@pytest.mark.parametrize("command", ["learn", "evaluate"])
def test_a_configured_column_missing_or_empty_is_an_error_unless_allowed(montesano_csv, tmp_path, change,  # noqa: F811
                                                                         message, command):
    cases = rewritten(montesano_csv, tmp_path / "cases.csv", change)
    args = (["learn", "--out", tmp_path / "model.json"] if command == "learn"
            else ["evaluate", "--folds", "3", "--baselines", "majority"])
    out = run(*args, "--cases", cases, "--config", "montesano")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    assert out.stderr.startswith(f"affordance-ros {command}: error: {message}. Give the cases that data;")
    assert "--allow-missing" in out.stderr and len(out.stderr.splitlines()) == 1
    allowed = run(*args, "--cases", cases, "--config", "montesano", "--allow-missing")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr == (f"affordance-ros {command}: warning: {message}: learned all the same (allow_missing), "
                              "as if every case had left that data out\n")


def test_a_reading_outside_the_valid_range_names_the_sensor_the_reading_and_the_range(montesano_csv,  # noqa: F811
                                                                                      tmp_path):
    def huge(header, row):
        if row is None or row[0] != FIFTH_TRIAL:
            return row or header
        return ["1e300" if h == "size" else x for h, x in zip(header, row)]
    cases = rewritten(montesano_csv, tmp_path / "huge.csv", huge)
    expected = ("reading of sensor 'size' is 1e+300, outside its valid_range [-1e+09, 1e+09] (set 'valid_range' "
                "in the sensor's configuration if such readings are real)")
    for args in (["learn", "--out", tmp_path / "model.json"], ["import", "--db", tmp_path / "cases.db"]):
        out = run(*args[:1], *(["--cases"] if args[0] == "learn" else []), cases, *args[1:], "--config", "montesano")
        assert out.returncode == 2
        assert out.stderr == f"affordance-ros {args[0]}: error: '{cases}' line 6: {expected}\n"
    learned = run("learn", "--cases", montesano_csv, "--config", "montesano", "--out", tmp_path / "model.json")
    assert learned.returncode == 0, learned.stderr
    for reading in ("1e300", "-2e9"):
        out = run("predict", "--model", tmp_path / "model.json", "--query", "action", "--sensor", f"size={reading}")
        assert out.returncode == 2 and out.stdout == ""
        assert out.stderr == f"affordance-ros predict: error: {expected.replace('1e+300', f'{float(reading):g}')}\n"
    inside = run("predict", "--model", tmp_path / "model.json", "--query", "action", "--sensor", "size=1e9")
    assert inside.returncode == 0 and json.loads(inside.stdout)["most_probable"]


@pytest.mark.parametrize("column, value, expected", [
    ("size", "nan", "reading of sensor 'size' is nan, expected a finite number (leave it out when it is missing)"),
    ("size", "abc", "reading 'abc' of sensor 'size' is not a number"),
    ("size", "1,5", "reading '1,5' of sensor 'size' is not a number; write '.' as the decimal point"),
    ("Action", "jump", "unknown label 'jump' for variable 'Action'; expected one of ['grasp', 'tap', 'touch']"),
])
def test_a_bad_row_is_named_by_its_line_in_the_file(montesano_csv, tmp_path, column, value, expected):  # noqa: F811
    def changed(header, row):
        if row is None or row[0] != FIFTH_TRIAL:
            return row or header
        return [value if h == column else x for h, x in zip(header, row)]
    cases = rewritten(montesano_csv, tmp_path / "bad.csv", changed)
    out = run("learn", "--cases", cases, "--config", "montesano", "--out", tmp_path / "model.json")
    assert out.returncode == 2
    assert out.stderr == f"affordance-ros learn: error: '{cases}' line 6: {expected}\n"  # (row 5 after the header)


@pytest.mark.parametrize("body", ["", "\n\n"])
def test_learning_or_evaluating_on_a_csv_file_with_a_header_but_no_rows_names_the_file(tmp_path, body):
    cases = tmp_path / "cases.csv"
    cases.write_text("trial_id,Action,color,shape,size,obj_vel,obj_hand_vel,hand_vel,contact\n" + body)
    out = run("learn", "--cases", cases, "--config", "montesano", "--out", tmp_path / "model.json")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    assert out.stderr == f"affordance-ros learn: error: no cases to learn from: '{cases}' has a header but no rows\n"
    out = run("evaluate", "--cases", cases, "--config", "montesano")  # it said "10 folds of 0 cases: need 2 <= ..."
    assert out.returncode == 2
    assert out.stderr == (f"affordance-ros evaluate: error: no cases to evaluate on: '{cases}' has a header but no "
                          "rows\n")


def test_a_column_named_as_a_variable_but_for_case_is_said_not_to_be_left_out(montesano_csv, tmp_path):  # noqa: F811
    cases = rewritten(montesano_csv, tmp_path / "lower.csv",
                      lambda header, row: row or ["action" if h == "Action" else h for h in header])
    out = run("learn", "--cases", cases, "--config", "montesano", "--out", tmp_path / "model.json")
    assert out.returncode == 2
    assert out.stderr == (f"affordance-ros learn: error: '{cases}': column 'action': did you mean 'Action'? "
                          "(names are case-sensitive)\n")


def test_import_and_export_skip_the_columns_named_with_ignore_columns(tmp_path):
    simulated = tmp_path / "hands.csv"
    assert run("simulate", "--scenario", "hands", "--repeats", "1", "--out", simulated).returncode == 0
    out = run("import", simulated, "--db", tmp_path / "cases.db", "--config", "hands")
    assert out.returncode == 2 and out.stderr.endswith("leave it out with --ignore-columns object_id\n")
    out = run("import", simulated, "--db", tmp_path / "cases.db", "--config", "hands", "--ignore-columns", "object_id")
    assert out.returncode == 2 and out.stderr.endswith("Leave those columns out (--ignore-columns Hand Object).\n")
    ignored = ("--ignore-columns", "object_id", "Hand", "Object")
    out = run("import", simulated, "--db", tmp_path / "cases.db", "--config", "hands", *ignored)
    assert out.returncode == 0 and "added 24 cases" in out.stdout, out.stderr
    out = run("export", simulated, "--out", tmp_path / "exported.csv", "--config", "hands", *ignored)
    assert out.returncode == 0 and "wrote 24 cases" in out.stdout, out.stderr
    assert next(csv.reader((tmp_path / "exported.csv").open())) == [
        "trial_id", "Action", "dx", "dy", "finger_flexion", "object_circleness"]


def test_a_name_given_twice_with_two_values_is_refused_and_max_iter_is_at_least_one(tmp_path):
    simulated = tmp_path / "cases.csv"
    assert run("simulate", "--scenario", "montesano", "--trials", "200", "--out", simulated).returncode == 0
    assert run("learn", "--cases", simulated, "--config", "montesano", "--out", tmp_path / "m.json").returncode == 0
    # not the last one used, silently
    for option, first, second in (("--sensor", "size=1", "size=2"), ("--value", "Shape=box", "Shape=sphere")):
        out = run("predict", "--model", tmp_path / "m.json", "--query", "action", option, first, option, second)
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
        assert f"{option} {first.split('=')[0]} is given twice, {first} and {second}: give it once" in out.stderr
    twice = ("--sensor", "size=1", "--sensor", "size=1")
    out = run("predict", "--model", tmp_path / "m.json", "--query", "action", *twice)
    assert out.returncode == 0, out.stderr  # the same twice: nothing to choose
    out = run("learn", "--cases", simulated, "--config", "montesano", "--out", tmp_path / "m0.json", "--max-iter", "0")
    assert out.returncode == 2 and "'max_iter' must be an integer >= 1, got 0" in out.stderr, out.stderr
    assert not (tmp_path / "m0.json").exists()  # it learned '1 EM iterations, NOT converged'


def test_simulated_data_sets_have_trial_ids_of_their_own(tmp_path):
    for seed, name in ((1, "seed1"), (2, "seed2"), (1, "seed1_again")):
        out = run("simulate", "--scenario", "montesano", "--trials", "30", "--seed", seed,
                  "--out", tmp_path / f"{name}.csv")
        assert out.returncode == 0, out.stderr
    out = run("import", tmp_path / "seed1.csv", tmp_path / "seed2.csv", "--db", tmp_path / "two.db")
    assert out.returncode == 0, out.stderr
    assert "in all: added 60 cases to" in out.stdout and "(0 were there already)" in out.stdout
    assert next(csv.DictReader((tmp_path / "seed2.csv").open()))["trial_id"] == "montesano-seed2-n30-balanced-000000"
    # the same data set again: the same trials, the same ids
    assert (tmp_path / "seed1_again.csv").read_text() == (tmp_path / "seed1.csv").read_text()
    # the ground truth's own draws: another data set (the trials and ids simulate made before the balanced design)
    out = run("simulate", "--scenario", "montesano", "--trials", "30", "--seed", 1, "--design", "truth",
              "--out", tmp_path / "drawn.csv")
    assert out.returncode == 0, out.stderr
    assert next(csv.DictReader((tmp_path / "drawn.csv").open()))["trial_id"] == "montesano-seed1-n30-000000"
    out = run("simulate", "--scenario", "hands", "--design", "truth", "--out", tmp_path / "hands.csv")
    assert out.returncode == 2 and "--design is for the 'montesano' scenario" in out.stderr, out.stderr


def test_import_warns_of_stored_trials_whose_data_differ(tmp_path):
    def moved(header, row):
        if row is None or row[0] not in ("montesano-seed0-n30-balanced-000004", "montesano-seed0-n30-balanced-000007"):
            return row or header
        return [repr(float(x) + 1.0) if h == "size" else x for h, x in zip(header, row)]
    simulated, db = tmp_path / "cases.csv", tmp_path / "cases.db"
    assert run("simulate", "--scenario", "montesano", "--trials", "30", "--out", simulated).returncode == 0
    assert run("import", simulated, "--db", db).returncode == 0
    out = run("import", rewritten(simulated, tmp_path / "moved.csv", moved), "--db", db)
    assert out.returncode == 0 and "added 0 cases" in out.stdout and "(30 were there already)" in out.stdout
    assert out.stderr == (f"affordance-ros import: warning: 2 cases of {tmp_path / 'moved.csv'} have the trial_id of a "
                          f"stored case whose action or readings differ; {db} keeps the stored ones\n")
    assert run("import", simulated, "--db", db).stderr == ""


@pytest.mark.parametrize("separator, name", [(";", "semicolons"), ("\t", "tabs")])
def test_a_csv_file_separated_by_semicolons_or_tabs_says_so(montesano_csv, tmp_path, separator, name):  # noqa: F811
    """A spreadsheet's export in a locale with decimal commas: the error says what to fix, not only "the header
    needs a 'trial_id' column, has ['trial_id;Action;color;...']"."""
    cases = tmp_path / "spreadsheet.csv"
    cases.write_text(montesano_csv.read_text().replace(",", separator))
    out = run("learn", "--cases", cases, "--config", "montesano", "--out", tmp_path / "model.json")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    assert out.stderr == (f"affordance-ros learn: error: '{cases}' separates its columns by {name}; a cases CSV "
                          "separates them by commas: save it again with ',' as the separator (and '.' as the decimal "
                          "point)\n")


def test_cases_of_another_configuration_are_said_to_be_so(tmp_path):
    """The tools' trials learned with --config montesano: the error says that the configuration is not theirs, not
    only "column 'object_id' is neither ..." or, with it left out, "unknown label 'tap_left' for variable 'Action'"."""
    cases = tmp_path / "tools.csv"
    assert run("simulate", "--scenario", "tools", "--repeats", "1", "--out", cases).returncode == 0
    out = run("learn", "--cases", cases, "--config", "montesano", "--ignore-columns", "object_id",
              "--out", tmp_path / "model.json")
    assert out.returncode == 2 and not (tmp_path / "model.json").exists()
    others = ("Tool tool_elongation tool_hook tool_width convexity eccentricity compactness circleness squareness "
              "elongatedness dx dy")
    assert out.stderr == (
        f"affordance-ros learn: error: '{cases}': 12 of its 14 columns are neither variables nor sensors of the "
        f"configuration ({others.replace(' ', ', ')}): were the cases made with another configuration? This one has "
        "the variables ['Action', 'Color', 'Shape', 'Size', 'ObjVel', 'ObjHandVel', 'HandVel', 'Contact'] and the "
        "sensors ['color', 'contact', 'hand_vel', 'obj_hand_vel', 'obj_vel', 'shape', 'size']; else, if they are not "
        f"variables (ids, notes), leave them out with --ignore-columns {others}\n")
    out = run("learn", "--cases", cases, "--config", "tools", "--ignore-columns", "object_id",
              "--out", tmp_path / "model.json")
    assert out.returncode == 0, out.stderr
