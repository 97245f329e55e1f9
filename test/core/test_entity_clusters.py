"""Descriptor clusters that carry over to new entities (core/sensors.py): units, not repeated readings; their
number by the effect of held-out entities (one unless held-out entities tell the numbers apart); a search
that ends at max_components says so; the shape is a parent of the effect only where it carries over to
unseen objects; the scenarios against the cell mean and gradient boosting."""

import json

import numpy as np
import pytest

from affordance_ros.core import AffordanceLearner, AffordanceNetwork
from affordance_ros.core.evaluation import evaluate, group_indices, hand_written_baselines, kfold_indices
from affordance_ros.core.scenarios import MANIPULATOR_DESCRIPTORS, scenario_cases, simulate
from affordance_ros.core.sensors import (
    Units,
    choose_by_held_out_effect,
    fit_sensors,
    fit_vector_sensor,
    sensor_units,
)
from affordance_ros.share import share_directory

CONFIG = share_directory() / "config"


def test_units_are_the_distinct_readings_with_their_entities():
    x = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [np.nan, 1.0], [3.0, 4.0], [5.0, 6.0]])
    units = sensor_units(x, None)
    np.testing.assert_array_equal(units.points, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(units.of_case, [0, 0, 1, -1, 1, 2])
    np.testing.assert_array_equal(units.entity, [0, 1, 2])
    units = sensor_units(x, ["a", "a", "b", "b", "b", "a"])
    np.testing.assert_array_equal(units.entity, [0, 1, 0])          # (5, 6) is a view of entity a
    assert units.kind == "entities"


def simulated_entities(n_entities: int, carries_over: bool, seed: int, views: int = 2, trials: int = 8):
    """Entities seen through ``views`` 2-D descriptor readings each, ``trials`` 1-D effects each. Carried over:
    three well-apart descriptor groups (entity i in group i % 3) whose effects are 0, 4, 8 (trial noise 1).
    Not: descriptors uniform in a square and every entity's effect its own (N(0, 3²)): no grouping predicts
    a new entity's effect."""
    rng = np.random.default_rng(seed)
    group = np.arange(n_entities) % 3
    if carries_over:
        centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])[group] + 0.3 * rng.standard_normal((n_entities, 2))
        own_effect = np.array([0.0, 4.0, 8.0])[group]
    else:
        centres = rng.uniform(0, 3, (n_entities, 2))
        own_effect = 3.0 * rng.standard_normal(n_entities)
    points = np.repeat(centres, views, axis=0) + 0.1 * rng.standard_normal((n_entities * views, 2))
    entity = np.repeat(np.arange(n_entities), views)
    of_case = rng.integers(0, views, n_entities * trials) + views * np.repeat(np.arange(n_entities), trials)
    effect = own_effect[entity[of_case]] + rng.standard_normal(len(of_case))
    return Units(points, of_case, entity, "entities"), effect[:, None]


def chosen_numbers(n_entities: int, carries_over: bool, n_seeds: int = 60) -> list[int]:
    out = []
    for seed in range(n_seeds):
        units, effect = simulated_entities(n_entities, carries_over, seed)
        no_companions = np.zeros((len(effect), 0), dtype=np.int64)
        out.append(choose_by_held_out_effect(units, range(1, 7), effect, no_companions, "full",
                                             np.random.default_rng(seed))[0])
    return out


@pytest.mark.parametrize("n_entities", [6, 10])
def test_the_number_of_clusters_is_one_unless_held_out_entities_tell_the_numbers_apart(n_entities):
    """Known truth, 60 data sets each: where every entity's effect is its own, one cluster but in at most 5
    (the test's 5 % level, and a few left to the one-standard-error rule's chance); where three descriptor
    groups carry their effects over, more than one always and mostly three. The one-standard-error rule alone,
    against the smallest of six noisy errors, grouped 7 of 60 such sets of 10 entities (11 of 60 of 6)."""
    own = chosen_numbers(n_entities, carries_over=False)
    assert sum(k > 1 for k in own) <= 5
    carried = chosen_numbers(n_entities, carries_over=True)
    assert all(k > 1 for k in carried) and sum(k == 3 for k in carried) >= 50


def test_three_entities_each_unlike_the_others_are_one_cluster():
    """Three entities in three groups: a held-out one has no group in training, so nothing carries over that
    held-out effects could show; one cluster (the one-standard-error rule alone made 21 of 60 more)."""
    assert sum(k == 1 for k in chosen_numbers(3, carries_over=True)) >= 57


@pytest.fixture(scope="module")
def hands_of_the_transfer():
    config = AffordanceNetwork.load(CONFIG / "transfer.json")
    cases = scenario_cases(config, simulate("transfer", 10, 0), extra=("manipulator_id", "kind"))
    return config, cases.take(np.flatnonzero(cases.extra["kind"] == "hand"))


def test_repeated_views_run_bic_to_its_cap_but_units_give_a_few_clusters(hands_of_the_transfer):
    """Three hand postures seen through three views each in 240 trials: BIC on every reading counts each
    repeat as new evidence and ends at max_components; the hands' clusters chosen by their held-out effect
    are few (the distinct views, or the hands themselves when the cases name them)."""
    config, hands = hands_of_the_transfer
    x = np.stack([hands.readings[n] for n in MANIPULATOR_DESCRIPTORS], axis=1)
    assert len(np.unique(x, axis=0)) == 9
    means, _, _, _ = fit_vector_sensor(x, None, 6, "auto", np.random.default_rng(0))
    assert len(means) == 6                                       # 6 of 6
    by_views = fit_sensors(config, hands.readings, hands.labels, 0)
    by_hands = fit_sensors(config, hands.readings, hands.labels, 0, hands.extra["manipulator_id"])
    assert 1 <= by_hands.network["Manipulator"].card <= by_views.network["Manipulator"].card <= 3
    assert not by_views.warnings and not by_hands.warnings


def test_bic_at_max_components_is_a_warning_that_says_what_to_change(tmp_path):
    doc = json.loads((CONFIG / "tools.json").read_text())
    doc["learning"].pop("entity_column")
    next(v for v in doc["variables"] if v["name"] == "Shape")["sensor"]["max_components"] = 2
    config = AffordanceNetwork.from_dict(doc)
    learner = AffordanceLearner(structural_em=0).fit(config, scenario_cases(config, simulate("tools", 3, seed=0)))
    warning, = learner.result_.warnings
    assert "'Shape': BIC on every reading chose 2 values, the most its sensor's 'max_components' allows" in warning
    assert "raise 'max_components'" in warning and "'entity_column'" in warning
    assert learner.model_.metadata["learned"]["warnings"] == [warning]


def test_a_missing_entity_column_is_said(hands_of_the_transfer):
    config, hands = hands_of_the_transfer
    plain = hands.take(np.arange(hands.n_cases))
    plain.extra.clear()
    learner = AffordanceLearner(structural_em=0).fit(config, plain)
    assert any("'entity_column' names 'manipulator_id', a column these cases do not have" in w
               for w in learner.result_.warnings)


def test_the_shape_is_a_parent_of_the_effect_only_where_it_carries_over_to_unseen_objects():
    """The tools scenario: an object's effect follows its shape, and the shape becomes a parent of the effect;
    tools_unseen: each object's effect is its own (shape does not carry over to a new object), and holding
    out whole objects the shape is left out: the effect has two values per (action, tool), not 190."""
    config = AffordanceNetwork.load(CONFIG / "tools.json")
    for scenario, carries_over in (("tools", True), ("tools_unseen", False)):
        cases = scenario_cases(config, simulate(scenario, 10, seed=1), extra=("object_id",))
        model = AffordanceLearner().fit(config, cases).model_
        effect = model["Effect"]
        assert ("Shape" in effect.parents) is carries_over, scenario
        if not carries_over:
            assert set(effect.parents) == {"Action", "Tool"} and effect.card == 2 * 12


def _rmse(result, method: str) -> float:
    return result.targets[0].metrics[method]["euclidean_rmse"]


def test_on_hand_postures_whose_effects_share_structure_the_pooled_model_beats_the_cell_mean_and_boosting():
    sklearn = pytest.importorskip("affordance_ros.tools.baselines")
    config = AffordanceNetwork.load(CONFIG / "hands.json")
    baselines = {**hand_written_baselines(), "gradient_boosting": sklearn.sklearn_baselines()["gradient_boosting"]}
    learner = AffordanceLearner()
    for seed in (0, 1):
        cases = scenario_cases(config, simulate("hands_shared", 10, seed))
        result = evaluate(config, cases, lambda cfg, train: learner.fit(cfg, train).model_,
                          kfold_indices(cases.n_cases, 10, seed), ["Effect"], baselines=baselines)
        assert _rmse(result, "ours") < min(_rmse(result, "cell_mean"), _rmse(result, "gradient_boosting")), seed
        metrics = result.targets[0].metrics
        assert metrics["ours"]["log_density"] > max(m["log_density"] for k, m in metrics.items() if k != "ours")


def test_where_shape_does_not_carry_over_the_pooled_model_beats_boosting_left_one_object_out():
    """tools_unseen, 4 trials of every condition, each object left out in turn: gradient boosting, given the
    shape descriptors, predicts new objects worse than ours; ours is within 3 % of the (action, tool) cell mean
    (which here is the right model) and far ahead of it in log-density."""
    sklearn = pytest.importorskip("affordance_ros.tools.baselines")
    config = AffordanceNetwork.load(CONFIG / "tools.json")
    cases = scenario_cases(config, simulate("tools_unseen", 4, 0), extra=("object_id",))
    baselines = {**hand_written_baselines(), "gradient_boosting": sklearn.sklearn_baselines()["gradient_boosting"]}
    learner = AffordanceLearner()
    result = evaluate(config, cases, lambda cfg, train: learner.fit(cfg, train).model_,
                      group_indices(cases.extra["object_id"])[1], ["Effect"], groups=cases.extra["object_id"],
                      baselines=baselines)
    assert _rmse(result, "ours") < _rmse(result, "gradient_boosting")
    assert _rmse(result, "ours") < 1.03 * _rmse(result, "cell_mean")
    metrics = result.targets[0].metrics
    assert metrics["ours"]["log_density"] > metrics["cell_mean"]["log_density"] + 0.3
