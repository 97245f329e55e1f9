"""The simulated robot's world: by default every action and every kind of object about equally often, as an
experimenter puts them in front of a robot; the ground truth's own draws (some kinds and actions almost never) as
design 'truth'."""

import numpy as np
import pytest

from affordance_ros.core import benchmark_network, predict
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.worlds import DESIGNS, NetworkWorld, Rounds, designed

TRUTH = benchmark_network("montesano", 1.0, 0)  # the simulated robot's: Size=big p 0.0001, Action=touch p 0.0115
OBJECTS = ["Color", "Shape", "Size"]


def counts(codes, names):
    """How often each combination of ``names``' values comes in ``codes`` (trials, variables): every one."""
    cards = [TRUTH[name].card for name in names]
    index = np.ravel_multi_index(tuple(codes[:, TRUTH.index(name)] for name in names), cards)
    return np.bincount(index, minlength=int(np.prod(cards)))


def test_rounds_draw_every_choice_as_often_as_any_other_to_one():
    rng, rounds = np.random.default_rng(0), Rounds(7)
    drawn = np.concatenate([rounds.draw(n, rng) for n in (3, 0, 11, 1, 40, 7)])
    for k in range(1, len(drawn) + 1):
        seen = np.bincount(drawn[:k], minlength=7)
        assert seen.max() - seen.min() <= 1, (k, seen)
    assert len(drawn) == 62 and not np.array_equal(drawn[:7], drawn[7:14])  # (each round in an order of its own)


@pytest.mark.parametrize("seed", range(5))
def test_by_default_every_action_and_every_kind_of_object_come_within_a_factor_of_2_over_1000_trials(seed):
    world = NetworkWorld(TRUTH)
    assert world.design == DESIGNS[0] == "balanced"
    codes = world.trials(1000, np.random.default_rng(seed))
    for names in (["Action"], OBJECTS, *[[name] for name in OBJECTS], ["Action", *OBJECTS]):
        seen = counts(codes, names)
        assert seen.min() > 0 and seen.max() <= 2 * seen.min(), (names, seen)
    # what an action does to an object stays the truth's: p(ObjVel | Action, Shape, Size) as the CPT says
    objvel = TRUTH["ObjVel"]
    moving = codes[:, TRUTH.index("ObjVel")] == objvel.code("fast")
    grasp_small_box = (codes[:, [TRUTH.index(n) for n in ("Action", "Shape", "Size")]] == [0, 1, 0]).all(axis=1)
    p = objvel.cpt[0, 1, 0, objvel.code("fast")]
    assert abs(moving[grasp_small_box].mean() - p) < 4 * np.sqrt(p * (1 - p) / grasp_small_box.sum()) + 0.02


def test_the_objects_in_view_come_every_kind_alike_by_default_and_as_the_truth_draws_them_by_design_truth():
    rng = np.random.default_rng(1)
    balanced = NetworkWorld(TRUTH).objects(24 * 40, rng).kinds
    assert np.bincount(balanced, minlength=24).tolist() == [40] * 24
    drawn = NetworkWorld(TRUTH, design="truth").objects(960, rng).kinds
    big = np.unravel_index(drawn, [4, 2, 3])[2] == TRUTH["Size"].code("big")
    assert big.sum() <= 3  # (p 0.0001 by the truth's CPT)


def test_design_truth_keeps_the_ground_truths_own_draws():
    kept = NetworkWorld(TRUTH, design="truth").trials(500, np.random.default_rng(7))
    np.testing.assert_array_equal(kept, sample_values(TRUTH, 500, np.random.default_rng(7)))
    assert designed(TRUTH, "truth") is TRUTH
    assert counts(kept, ["Size"])[TRUTH["Size"].code("big")] <= 2 and counts(kept, ["Action"])[2] <= 20


def test_the_designed_network_is_the_truth_with_uniform_actions_and_objects():
    world = designed(TRUTH)
    for v, t in zip(world.variables, TRUTH.variables):
        if v.group in ("action", "object"):
            np.testing.assert_allclose(v.cpt, np.full(t.cpt.shape, 1.0 / t.card))
        else:
            np.testing.assert_array_equal(v.cpt, t.cpt)
    # a question about a big object: the truth of the world the robot shows
    answer = predict(world, ["Size"], sensors={"obj_vel": 9.7})
    assert answer.marginals["Size"]["big"] > 0.2 > predict(TRUTH, ["Size"], sensors={"obj_vel": 9.7}).marginals[
        "Size"]["big"]
    with pytest.raises(ValueError, match=r"design 'even' is not one of \['balanced', 'truth'\]"):
        designed(TRUTH, "even")
    # (a design chooses the actions and the objects: an object that follows an effect cannot be chosen)
    follows = TRUTH.replace_variables({"Color": {"parents": ("Contact",), "cpt": np.full((2, 4), 0.25)}})
    with pytest.raises(ValueError, match="Color depends on Contact: give design 'truth'"):
        designed(follows)
