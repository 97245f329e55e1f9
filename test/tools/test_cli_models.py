"""`affordance-ros` export-model, import-model, show, help texts and pipes, as a user runs them."""

import subprocess

import pytest
from test_cli import EXE, files, run  # noqa: F401  (the fixture)

from affordance_ros.core import AffordanceNetwork, LearningOptions, predict
from affordance_ros.share import default_config_path
from affordance_ros.tools.cli import LEARN_OPTIONS


@pytest.mark.parametrize("fmt, name", [("bif", "m.bif"), ("xmlbif", "m.xml"), ("uai", "m.uai")])
def test_export_then_import_model(files, fmt, name):  # noqa: F811
    tmp, truth = files
    truth.save(tmp / "truth.json")
    out = run("export-model", tmp / "truth.json", "--format", fmt, "--out", tmp / name)
    assert out.returncode == 0, out.stderr
    assert f"to {tmp / name} ({fmt}" in out.stdout
    back = run("import-model", tmp / name, "--config", default_config_path(), "--out", tmp / f"{name}.json")
    assert back.returncode == 0, back.stderr
    model = AffordanceNetwork.load(tmp / f"{name}.json")
    assert [v.values for v in model.variables] == [v.values for v in truth.variables]
    evidence = {"obj_vel": 9.5, "size": 0.2}
    expected = predict(truth, ["action"], sensors=evidence).marginals["Action"]
    assert predict(model, ["action"], sensors=evidence).marginals["Action"] == pytest.approx(expected, abs=1e-12)


def test_show_draws_png_and_svg_and_says_what_is_wrong(files):  # noqa: F811
    tmp, truth = files
    truth.save(tmp / "truth.json")
    out = run("show", tmp / "truth.json", "--out", tmp / "m.png", "--cpts")
    assert out.returncode == 0, out.stderr
    assert (tmp / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = run("show", tmp / "config.json", "--out", tmp / "c.svg")  # a configuration: its variables, no arcs
    assert out.returncode == 0, out.stderr
    svg = (tmp / "c.svg").read_text()
    assert "<svg" in svg and "ObjVel" in svg and "object features" in svg
    for args, message in ((["--out", tmp / "m.gif"], ".png, .svg or .pdf"),
                          (["--out", tmp / "c.png", "--cpts"], "no CPTs")):
        source = tmp / ("truth.json" if "--cpts" not in args else "config.json")
        bad = run("show", source, *args)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.splitlines()) == 1, bad.stderr


def test_help_describes_every_command_and_option():
    for command, words in (("learn", "Learn a model"), ("predict", "posterior of the query variables"),
                           ("show", "Draw the network"), ("export-model", "another tool's format"),
                           ("import-model", "groups, sensors"), ("call", "running learner node")):
        out = run(command, "--help")
        assert out.returncode == 0 and words in " ".join(out.stdout.split()), out.stdout
    learn = " ".join(run("learn", "--help").stdout.split())
    for option in ("--max-iter MAX_ITER EM stops", "--seed SEED seed of", "--score {k2,bdeu,bic,cv} structure score",
                   "--max-parents MAX_PARENTS at most", "--mcmc-samples MCMC_SAMPLES structures"):
        assert option in learn, option
    assert "--model MODEL a model file" in " ".join(run("predict", "--help").stdout.split())


def test_learn_options_take_help_choices_and_defaults_from_learning_options():
    learn = " ".join(run("learn", "--help").stdout.split())
    for name in LEARN_OPTIONS:
        option = LearningOptions.describe(name)
        flag = f"--{name.replace('_', '-')}"
        choices = f" {{{','.join(option.choices)}}}" if option.choices else ""
        metavar = "" if option.type is bool else choices or f" {name.upper()}"
        default = str(option.default).lower() if option.type is bool else option.default
        assert f"{flag}{metavar} {option.help} (default: the configuration's, else {default})" in learn, name


def test_a_closed_pipe_is_not_an_error(files):  # noqa: F811
    tmp, _ = files
    script = (f"set -o pipefail; '{EXE}' learn --cases '{tmp / 'cases.csv'}' --config '{tmp / 'config.json'}' "
              f"--out '{tmp / 'piped.json'}' | head -c 10")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout == "learned fr"


def test_a_missing_configuration_is_called_a_configuration(files):  # noqa: F811
    tmp, _ = files
    out = run("learn", "--cases", tmp / "cases.csv", "--config", tmp / "nope.json", "--out", tmp / "x.json")
    assert out.returncode == 2
    assert f"cannot read configuration '{tmp / 'nope.json'}'" in out.stderr and "model file" not in out.stderr
