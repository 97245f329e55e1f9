"""`affordance-ros` export-model, import-model, show, help texts and pipes, as a user runs them."""

import json
import os
import subprocess

import pytest
from conftest import CLI
from test_cli import files, run  # noqa: F401  (the fixture)

from affordance_ros.core import AffordanceNetwork, LearningOptions, predict
from affordance_ros.share import default_config_path
from affordance_ros.tools.commands import LEARN_OPTIONS


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
                           ("import-model", "groups, sensors"), ("call", "running learner node"),
                           ("simulate", "Write simulated trials to a CSV file")):
        out = run(command, "--help")
        assert out.returncode == 0 and words in " ".join(out.stdout.split()), out.stdout
    learn = " ".join(run("learn", "--help").stdout.split())
    for option in ("--max-iter MAX_ITER EM stops", "--seed SEED seed of", "--score {k2,bdeu,bic,cv} structure score",
                   "--max-parents MAX_PARENTS at most", "--mcmc-samples MCMC_SAMPLES structures"):
        assert option in learn, option
    assert "--model MODEL a model file" in " ".join(run("predict", "--help").stdout.split())
    assert "--seed SEED seed of the random draws" in " ".join(run("simulate", "--help").stdout.split())
    top = " ".join(run("--help").stdout.split())
    assert "simulate write simulated trials to a CSV file: the simulated robot's or a scenario's" in top
    scenarios = " ".join(run("simulate", "--help").stdout.split())
    assert "{montesano,tools,hands,hands_shared,tools_unseen,transfer}" in scenarios, scenarios


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
    script = (f"set -o pipefail; '{CLI}' learn --cases '{tmp / 'cases.csv'}' --config '{tmp / 'config.json'}' "
              f"--out '{tmp / 'piped.json'}' | head -c 10")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout == "learned fr" and (tmp / "piped.json").is_file()  # (the model is written before the report)


@pytest.mark.parametrize("command, written", [
    (["learn", "--cases", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--out", "{out}/model.json"],
     "model.json"),
    (["import", "{tmp}/cases.csv", "--config", "{tmp}/config.json", "--db", "{out}/cases.db"], "cases.db"),
    (["simulate", "--scenario", "montesano", "--trials", "50", "--out", "{out}/simulated.csv"], "simulated.csv"),
])
def test_a_reader_gone_before_the_first_line_does_not_stop_the_work(files, tmp_path, command, written):  # noqa: F811
    tmp, _ = files
    read_end, write_end = os.pipe()
    os.close(read_end)  # (every write to stdout fails: EPIPE)
    try:
        out = subprocess.run([CLI, *(a.format(tmp=tmp, out=tmp_path) for a in command)], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})
    finally:
        os.close(write_end)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert (tmp_path / written).stat().st_size > 0


def test_a_missing_configuration_is_called_a_configuration(files):  # noqa: F811
    tmp, _ = files
    out = run("learn", "--cases", tmp / "cases.csv", "--config", tmp / "nope.json", "--out", tmp / "x.json")
    assert out.returncode == 2
    assert f"cannot read configuration '{tmp / 'nope.json'}'" in out.stderr and "model file" not in out.stderr


def test_export_model_xmlbif_advises_the_extension_pyagrum_opens(files, tmp_path):  # noqa: F811
    tmp, truth = files
    truth.save(tmp / "truth.json")
    for name in ("m.xml", "m.xmlbif"):
        out = run("export-model", tmp / "truth.json", "--out", tmp_path / name)
        assert out.returncode == 0 and (tmp_path / name).is_file(), out.stderr
        assert out.stderr.strip() == ("affordance-ros export-model: note: pyAgrum opens XMLBIF files only when they "
                                      f"are named *.bifxml (pgmpy reads any name): --out {tmp_path / 'm.bifxml'}")
    out = run("export-model", tmp / "truth.json", "--format", "xmlbif", "--out", tmp_path / "m.bifxml")
    assert out.returncode == 0 and out.stderr == ""
    assert "xmlbif (.bifxml/" in " ".join(run("export-model", "--help").stdout.split())
    gum = pytest.importorskip("pyagrum", reason="pyAgrum is a benchmark-only extra (tools/setup_bench.sh)")
    assert gum.loadBN(str(tmp_path / "m.bifxml")).size() == len(truth)
    for name in ("m.xml", "m.xmlbif"):  # what the advice is for
        with pytest.raises(Exception, match="extension .* unknown"):
            gum.loadBN(str(tmp_path / name))


def test_predict_top_k_shows_the_most_probable_labels_of_a_long_marginal(tmp_path):
    out = run("simulate", "--scenario", "hands", "--repeats", "4", "--out", tmp_path / "hands.csv")
    assert out.returncode == 0, out.stderr
    out = run("learn", "--cases", tmp_path / "hands.csv", "--config", "hands", "--ignore-columns", "object_id",
              "--out", tmp_path / "model.json")
    assert out.returncode == 0, out.stderr
    model = AffordanceNetwork.load(tmp_path / "model.json")
    effects = len(model["Effect"].values)
    assert effects > 20
    ask = ["predict", "--model", tmp_path / "model.json", "--query", "Effect", "--query", "Action", "--value",
           "Hand=bent", "--readings"]
    direct = predict(model, ["Effect", "Action"], values={"Hand": "bent"})
    whole = json.loads(run(*ask, "--top", "0").stdout)
    assert len(whole["marginals"]["Effect"]) == effects and "omitted" not in whole
    for top, shown in ((None, 10), ("3", 3)):
        answer = json.loads(run(*ask, *(["--top", top] if top else [])).stdout)
        best = sorted(direct.marginals["Effect"].items(), key=lambda item: -item[1])[:shown]
        assert list(answer["marginals"]["Effect"]) == [label for label, _ in best]
        assert list(answer["marginals"]["Effect"].values()) == pytest.approx([p for _, p in best])
        assert answer["omitted"]["Effect"]["labels"] == effects - shown
        assert answer["omitted"]["Effect"]["probability"] == pytest.approx(1 - sum(p for _, p in best))
        mixture = answer["mixtures"]["Effect"]
        assert mixture["labels"] == [label for label, _ in best]
        assert mixture["weights"] == pytest.approx([p for _, p in best])
        assert len(mixture["means"]) == len(mixture["covariances"]) == shown
        assert mixture["means"][0] == pytest.approx(whole["mixtures"]["Effect"]["means"][
            model["Effect"].values.index(best[0][0])])
        assert answer["readings"] == whole["readings"]  # (of the whole mixture)
        for key in ("stddevs", "intervals"):  # how sure, of the labels shown
            assert list(answer[key]["Effect"]) == [label for label, _ in best]
            assert answer[key]["Effect"] == {label: whole[key]["Effect"][label] for label, _ in best}
            assert list(answer[key]["Action"]) == list(answer["marginals"]["Action"])
        assert answer["support"] == whole["support"]
        if top is None:  # 4 labels: all, in the model's order
            assert list(answer["marginals"]["Action"]) == list(model["Action"].values)
            assert set(answer["omitted"]) == {"Effect"}
    bad = run(*ask, "--top", "-1")
    assert bad.returncode == 2 and "must be >= 0 (0: every label), got -1" in bad.stderr
