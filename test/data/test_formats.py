"""BIF in and out: a known file read exactly, our models written and read back unchanged."""

import numpy as np
import pytest

from affordance_ros.core import ModelFormatError, benchmark_network, predict
from affordance_ros.data.formats import read_bif, write_bif

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
