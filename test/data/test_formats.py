"""BIF in and out: a known file read exactly, our models written and read back unchanged."""

import numpy as np
import pytest

from affordance_ros.core import AffordanceNetwork, ModelFormatError, benchmark_network, predict
from affordance_ros.data.formats import (
    export_model,
    import_model,
    read_bif,
    read_uai,
    read_xmlbif,
    write_bif,
    write_uai,
)
from affordance_ros.share import default_config_path

ASIA_PART = """network unknown {
}
variable asia {
  type discrete [ 2 ] { yes, no };
}
variable tub {
  type discrete [ 2 ] { yes, no };
}
variable "either one" {
  property weight = 2 ;
  type discrete [ 3 ] { a, b, c };
}
probability ( asia ) {
  table 0.01, 0.99;
}
probability ( tub | asia ) {
  (yes) 0.05, 0.95;
  (no) 0.01, 0.99;
}
// a comment
probability ( "either one" | asia, tub ) {
  (yes, yes) 0.2, 0.3, 0.5;
  default 0.1, 0.1, 0.8;
}
"""


def test_a_known_file_is_read_exactly():
    net = read_bif(ASIA_PART)
    assert net.names == ("asia", "tub", "either one")
    assert net["tub"].parents == ("asia",) and net["tub"].values == ("yes", "no")
    np.testing.assert_allclose(net["asia"].cpt, [0.01, 0.99])
    np.testing.assert_allclose(net["tub"].cpt, [[0.05, 0.95], [0.01, 0.99]])
    either = net["either one"].cpt
    np.testing.assert_allclose(either[0, 0], [0.2, 0.3, 0.5])
    np.testing.assert_allclose(either[1, 1], [0.1, 0.1, 0.8])  # from the default row
    assert {v.group for v in net.variables} == {"object"}


def test_a_table_with_parents_has_the_child_slowest():
    text = ASIA_PART.replace("(yes) 0.05, 0.95;\n  (no) 0.01, 0.99;", "table 0.05, 0.01, 0.95, 0.99;")
    np.testing.assert_allclose(read_bif(text)["tub"].cpt, [[0.05, 0.95], [0.01, 0.99]])


def test_our_model_goes_out_and_comes_back_with_the_same_answers(tmp_path):
    model = benchmark_network("montesano", sigma=1.0, seed=3)
    write_bif(model, tmp_path / "m.bif")
    back = read_bif(tmp_path / "m.bif", groups={v.name: v.group for v in model.variables})
    assert back.names == model.names and [v.values for v in back.variables] == [v.values for v in model.variables]
    for v, w in zip(model.variables, back.variables):
        assert v.parents == w.parents
        np.testing.assert_allclose(v.cpt, w.cpt, rtol=0, atol=1e-15)
    a = predict(model.replace_variables({v.name: {"sensor": None} for v in model.variables}), ["action"],
                values={"ObjVel": "fast", "Shape": "box"})
    b = predict(back, ["action"], values={"ObjVel": "fast", "Shape": "box"})
    assert a.marginals["Action"] == pytest.approx(b.marginals["Action"], abs=1e-12)


@pytest.mark.parametrize("broken, message", [
    (ASIA_PART.replace("(no) 0.01, 0.99;", ""), "no row"),
    (ASIA_PART.replace("(no) 0.01, 0.99;", "(no) 0.5, 0.2;"), "sum to 1"),
    (ASIA_PART.replace("(no) 0.01, 0.99;", "(maybe) 0.5, 0.5;"), "unknown parent values"),
    (ASIA_PART.replace("tub | asia", "tub | nope"), "unknown parent 'nope'"),
    (ASIA_PART.replace("table 0.01, 0.99;", "table 0.01, 0.98, 0.01;"), "3 numbers, expected 2"),
    ("variable x {\n type discrete [ 2 ] { a, b };\n}\n", "no probability block"),
])
def test_broken_files_say_what_is_wrong(broken, message):
    with pytest.raises(ModelFormatError, match=message):
        read_bif(broken)


# ------------------------------------------------------------------ XMLBIF and UAI, import/export

XMLBIF_PART = """<?xml version="1.0"?>
<BIF VERSION="0.3">
<NETWORK>
<NAME>part</NAME>
<VARIABLE TYPE="nature"><NAME>asia</NAME><OUTCOME>yes</OUTCOME><OUTCOME>no</OUTCOME></VARIABLE>
<VARIABLE TYPE="nature"><NAME>tub</NAME><OUTCOME>yes</OUTCOME><OUTCOME>no</OUTCOME>
  <PROPERTY>position = (0, 0)</PROPERTY></VARIABLE>
<DEFINITION><FOR>asia</FOR><TABLE>0.01 0.99</TABLE></DEFINITION>
<DEFINITION><FOR>tub</FOR><GIVEN>asia</GIVEN><TABLE>0.05 0.95 0.01 0.99</TABLE></DEFINITION>
</NETWORK>
</BIF>
"""

UAI_PART = """BAYES
2
2 3
2
1 0
2 0 1

2
 0.25 0.75
6
 0.1 0.2 0.7
 0.5 0.5 0.0
"""


SPEC_UAI = """BAYES
4
2 2 2 2
4
1 0
2 0 1
2 0 2
3 1 2 3

2
0.2 0.8
4
0.6 0.4 0.3 0.7
4
0.25 0.75 0.75 0.25
8
1.0 0.0 0.35 0.65 0.8 0.2 0.0 1.0
"""


def test_uai_tables_are_in_the_specifications_order_last_increment_first(tmp_path):
    net = read_uai(SPEC_UAI, names=list("ABCD"))
    assert net["D"].parents == ("B", "C")
    np.testing.assert_allclose(net["D"].cpt, [[[1.0, 0.0], [0.35, 0.65]], [[0.8, 0.2], [0.0, 1.0]]])
    written, spec = write_uai(net).split(), SPEC_UAI.split()
    assert written[0] == "BAYES" and [float(x) for x in written[1:]] == [float(x) for x in spec[1:]]


def test_known_xmlbif_and_uai_files_are_read_exactly():
    net = read_xmlbif(XMLBIF_PART)
    assert net.names == ("asia", "tub") and net["tub"].parents == ("asia",)
    np.testing.assert_allclose(net["tub"].cpt, [[0.05, 0.95], [0.01, 0.99]])
    uai = read_uai(UAI_PART, names=["A", "B"], values={"B": ["x", "y", "z"]})
    assert uai["B"].parents == ("A",) and uai["A"].values == ("0", "1") and uai["B"].values == ("x", "y", "z")
    np.testing.assert_allclose(uai["B"].cpt, [[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    np.testing.assert_allclose(read_uai(UAI_PART)["V0"].cpt, [0.25, 0.75])


@pytest.mark.parametrize("fmt", ["bif", "xmlbif", "uai"])
def test_export_then_import_gives_the_same_model_and_answers(tmp_path, fmt):
    model = benchmark_network("montesano", sigma=1.0, seed=3)
    config = AffordanceNetwork.load(default_config_path())
    path = tmp_path / f"m.{'xml' if fmt == 'xmlbif' else fmt}"
    export_model(model, fmt, path)
    back = import_model(path, config)
    assert back.names == model.names
    for v, w in zip(model.variables, back.variables):
        assert (w.values, w.parents, w.group) == (v.values, v.parents, v.group)
        assert (w.sensor and w.sensor.name) == (config[v.name].sensor and config[v.name].sensor.name)
        np.testing.assert_allclose(w.cpt, v.cpt, rtol=0, atol=1e-12)
    assert back.metadata["imported"]["format"] == fmt
    for query, evidence in ((["action"], {"ObjVel": "fast", "Shape": "box"}), (["effect"], {"Action": "tap"})):
        ours, theirs = predict(model, query, values=evidence), predict(back, query, values=evidence)
        for name, dist in ours.marginals.items():
            np.testing.assert_allclose(list(theirs.marginals[name].values()), list(dist.values()), atol=1e-12)
    # with the sensors of the configuration, the imported model takes readings as the original does
    readings = {"obj_vel": 9.1, "size": 0.3}
    np.testing.assert_allclose(list(predict(back, ["action"], sensors=readings).marginals["Action"].values()),
                               list(predict(model, ["action"], sensors=readings).marginals["Action"].values()))


def test_import_reorders_labels_to_the_configuration_and_says_what_does_not_fit(tmp_path):
    model = benchmark_network("montesano", sigma=1.0, seed=3)
    doc = model.to_dict()
    size = next(v for v in doc["variables"] if v["name"] == "Size")
    size["values"] = size["values"][::-1]  # the file has Size's labels in another order
    size["cpt"] = size["cpt"][::-1]
    size["sensor"]["means"] = size["sensor"]["means"][::-1]
    for v in doc["variables"]:
        if "Size" in v["parents"]:
            axis = v["parents"].index("Size")
            v["cpt"] = np.flip(np.asarray(v["cpt"]), axis=axis).tolist()
    reordered = AffordanceNetwork.from_dict(doc)
    write_bif(reordered, tmp_path / "r.bif")
    back = import_model(tmp_path / "r.bif", AffordanceNetwork.load(default_config_path()))
    for v, w in zip(model.variables, back.variables):
        assert w.values == v.values
        np.testing.assert_allclose(w.cpt, v.cpt, atol=1e-12)

    config = AffordanceNetwork.load(default_config_path())
    small = AffordanceNetwork([v for v in config.variables if v.name != "Color"])
    with pytest.raises(ModelFormatError, match=r"not configured \['Color'\]"):
        import_model(tmp_path / "r.bif", small)
    other = config.replace_variables({"Shape": {"values": ("round", "square"),
                                                "sensor": config["Shape"].sensor}})
    with pytest.raises(ModelFormatError, match="labels"):
        import_model(tmp_path / "r.bif", other)
    with pytest.raises(ModelFormatError, match="give --format"):
        import_model(tmp_path / "r.txt", config)


@pytest.mark.parametrize("text, message", [
    ("<BIF><NETWORK><VARIABLE><NAME>a</NAME></VARIABLE></NETWORK></BIF>", "no <OUTCOME>"),
    ("<BIF><NETWORK><VARIABLE><NAME>a</NAME><OUTCOME>x</OUTCOME></VARIABLE></NETWORK></BIF>", "no <DEFINITION>"),
    ("<BIF><NETWORK><VARIABLE><NAME>a</NAME><OUTCOME>x</OUTCOME><OUTCOME>y</OUTCOME></VARIABLE>"
     "<DEFINITION><FOR>a</FOR><TABLE>0.5</TABLE></DEFINITION></NETWORK></BIF>", "1 numbers, expected 2"),
    ("<BIF><NETWORK", "not a readable XMLBIF"),
])
def test_broken_xmlbif_says_what_is_wrong(text, message):
    with pytest.raises(ModelFormatError, match=message):
        read_xmlbif(text)


@pytest.mark.parametrize("text, message", [
    ("MARKOV\n1\n2\n1\n1 0\n2 0.5 0.5\n", "only BAYES"),
    ("BAYES\n2\n2 2\n1\n1 0\n2 0.5 0.5\n", r"\[1\] have no function"),
    ("BAYES\n1\n2\n1\n1 0\n2 0.5\n", "ends early"),
    ("BAYES\n1\n2\n1\n1 0\n2 0.5 0.7\n", "sum to 1"),
])
def test_broken_uai_says_what_is_wrong(text, message):
    with pytest.raises(ModelFormatError, match=message):
        read_uai(text)


def _pyagrum():
    return pytest.importorskip("pyagrum", reason="pyAgrum is a benchmark-only extra (tools/setup_bench.sh)")


@pytest.mark.parametrize("fmt, suffix", [("bif", ".bif"), ("xmlbif", ".bifxml")])
def test_pyagrum_reads_our_files_with_the_same_cpts_and_posteriors(tmp_path, fmt, suffix):
    gum = _pyagrum()
    model = benchmark_network("montesano", sigma=1.0, seed=3)
    path = tmp_path / f"m{suffix}"
    export_model(model, fmt, path)
    bn = gum.loadBN(str(path))
    names = model.names if fmt != "uai" else [bn.variable(i).name() for i in range(len(model))]
    assert sorted(bn.variable(n).name() for n in names) == sorted(names)
    for v, name in zip(model.variables, names):
        variable = bn.variable(name)
        if fmt != "uai":
            assert [variable.label(j) for j in range(variable.domainSize())] == list(v.values)  # label order kept
        parents = [bn.variable(p).name() for p in bn.parents(name)]
        expected = [names[model.index(p)] for p in v.parents]
        assert sorted(parents) == sorted(expected)
        table = bn.cpt(name)
        order = [table.variable(k).name() for k in range(table.nbrDim())]  # aGrUM: the child first
        ours = np.moveaxis(v.cpt, -1, 0)  # (child, parents...)
        ours = np.transpose(ours, [([name] + expected).index(n) for n in order])
        theirs = np.asarray(table.toarray()).transpose(range(table.nbrDim())[::-1])  # toarray: the last first
        np.testing.assert_allclose(theirs, ours, atol=1e-12)
    engine = gum.LazyPropagation(bn)
    evidence = {"ObjVel": "fast", "Shape": "box"}
    engine.setEvidence({names[model.index(k)]: model[k].values.index(x) for k, x in evidence.items()})
    engine.makeInference()
    ours = predict(model, ["Action"], values=evidence).marginals["Action"]
    np.testing.assert_allclose(engine.posterior(names[model.index("Action")]).toarray(), list(ours.values()),
                               atol=1e-9)


@pytest.mark.parametrize("fmt, reader", [("bif", "BIFReader"), ("xmlbif", "XMLBIFReader")])
def test_pgmpy_reads_our_files_with_the_same_posteriors(tmp_path, fmt, reader):
    readers = pytest.importorskip("pgmpy.readwrite", reason="pgmpy is a benchmark-only extra (tools/setup_bench.sh)")
    from pgmpy.inference import VariableElimination

    model = benchmark_network("montesano", sigma=1.0, seed=3)
    path = tmp_path / f"m.{fmt}"
    export_model(model, fmt, path)
    bn = getattr(readers, reader)(str(path)).get_model()
    assert set(bn.nodes()) == set(model.names) and set(bn.edges()) == set(model.arcs)
    for v in model.variables:
        assert bn.get_cpds(v.name).state_names[v.name] == list(v.values)  # label order kept
    evidence = {"ObjVel": "fast", "Shape": "box"}
    theirs = VariableElimination(bn).query(["Action"], evidence=evidence, show_progress=False)
    ours = predict(model, ["Action"], values=evidence).marginals["Action"]
    np.testing.assert_allclose([theirs.get_value(Action=a) for a in ours], list(ours.values()), atol=1e-9)
