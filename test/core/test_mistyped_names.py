"""A name or label that is wrong only in case, spaces or a letter is refused (names are case-sensitive everywhere)
and the refusal names the one meant; a name like nothing known gets no guess."""

import pytest

from affordance_ros.core import EvidenceError, benchmark_network, predict


@pytest.fixture(scope="module")
def model():
    return benchmark_network("montesano", sigma=1.0, seed=0)


@pytest.mark.parametrize("query, sensors, values, message", [
    # --value action=tap is refused naming 'Action', while --query action (the group) is taken
    (["action"], {}, {"action": "tap"}, "unknown variable 'action' (did you mean 'Action'? names are case-sensitive); "
                                        "the network has ['Action', "),
    (["ACTION"], {}, {}, "unknown variable 'ACTION' (did you mean 'action' or 'Action'? names are case-sensitive); "
                         "the network has ['Action', 'Color', 'Shape', 'Size', 'ObjVel', 'ObjHandVel', 'HandVel', "
                         "'Contact'], and the groups are ['action', 'object', 'effect']"),
    (["objvel"], {}, {}, "unknown variable 'objvel' (did you mean 'ObjVel'? names are case-sensitive)"),
    (["actions"], {}, {}, "unknown variable 'actions' (did you mean 'action'?)"),
    (["action"], {"Obj_Vel": 9.7}, {}, "unknown sensor 'Obj_Vel' (did you mean 'obj_vel'? names are case-sensitive)"),
    (["action"], {}, {"Shape": "Box"}, "unknown label 'Box' for variable 'Shape' (did you mean 'box'? names are "
                                       "case-sensitive); expected one of ['circle', 'box']"),
    (["action"], {}, {"Action": "tap "}, "unknown label 'tap ' for variable 'Action' (did you mean 'tap'? spaces are "
                                         "part of a name)"),
    (["action"], {}, {"ObjVel": "fst"}, "unknown label 'fst' for variable 'ObjVel' (did you mean 'fast'?)"),
    # a letter substituted in a short name was missed ('sise' and 'size' are only 0.75 alike by difflib's ratio)
    (["action"], {"sise": 0.1}, {}, "unknown sensor 'sise' (did you mean 'size'?)"),
    (["action"], {"sze": 0.1}, {}, "unknown sensor 'sze' (did you mean 'size'?)"),
    (["action"], {"colour": 0.1}, {}, "unknown sensor 'colour' (did you mean 'color'?)"),
    (["action"], {"obj_vell": 0.1}, {}, "unknown sensor 'obj_vell' (did you mean 'obj_vel'?)"),
    (["action"], {"sahpe": 0.1}, {}, "unknown sensor 'sahpe' (did you mean 'shape'?)"),
    (["action"], {}, {"Action": "tapp"}, "unknown label 'tapp' for variable 'Action' (did you mean 'tap'?)"),
    (["action"], {}, {"Action": "tuch"}, "unknown label 'tuch' for variable 'Action' (did you mean 'touch'?)"),
    (["Sise"], {}, {}, "unknown variable 'Sise' (did you mean 'Size'?)"),
    # a reading given as a label: where readings go
    (["action"], {}, {"Color": "4.8"}, "unknown label '4.8' for variable 'Color'; expected one of ['green1', 'green2', "
                                       "'yellow', 'blue'] ('4.8' is a number: a reading of Color's sensor goes under "
                                       "the sensor's name, 'color')"),
])
def test_a_name_wrong_in_case_spaces_or_a_letter_names_the_one_meant(model, query, sensors, values, message):
    with pytest.raises(EvidenceError) as caught:
        predict(model, query, sensors=sensors, values=values)
    assert str(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize("query, sensors, values, start", [
    (["Nope"], {}, {}, "unknown variable 'Nope'; "),
    (["Weight"], {}, {}, "unknown variable 'Weight'; "),
    (["action"], {"weight": 1.0}, {}, "unknown sensor 'weight'; "),
    (["action"], {}, {"Shape": "sphere"}, "unknown label 'sphere' for variable 'Shape'; expected one of "
                                          "['circle', 'box']"),
])
def test_a_name_like_nothing_known_gets_no_guess(model, query, sensors, values, start):
    with pytest.raises(EvidenceError) as caught:
        predict(model, query, sensors=sensors, values=values)
    assert str(caught.value).startswith(start) and "did you mean" not in str(caught.value), str(caught.value)


def test_meant_prefers_case_and_spaces_over_spelling():
    from affordance_ros.core.errors import meant
    names = ["Action", "action", "ObjVel", "ObjHandVel", "obj_vel", "Object"]
    assert meant("ACTION", names) == ["Action", "action"]
    assert meant(" ObjVel ", names) == ["ObjVel"]
    assert meant("objvel", names) == ["ObjVel"] and meant("OBJ_VEL", names) == ["obj_vel"]
    assert meant("Obj_vel ", names) == ["obj_vel"] and meant("ob_jvel", names) == ["ObjVel", "obj_vel"]
    assert meant("ObjVell", names) == ["ObjVel"] and meant("ObjVell", names, spelling=False) == []
    assert meant("object_id", names, spelling=False) == []  # a CSV's id column is not a misspelt 'Object'
    assert meant("Colour", names) == [] and meant("", names) == []
    # one letter substituted, added, left out or two swapped; every name that near; none in a name of two letters
    assert meant("Actoin", names) == ["Action"] and meant("ObjVal", names) == ["ObjVel"]
    assert meant("dz", ["dx", "dy"]) == [] and meant("dxx", ["dx", "dy"]) == ["dx"]
    assert meant("tip", ["tap", "top"]) == ["tap", "top"] and meant("tip", ["tap"], spelling=False) == []

