"""Structure that finds what drives effects on the tools scenario; evaluation baselines on tiny data."""

import json

import numpy as np
import pytest

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseEvidence,
    CaseSet,
    DataError,
    LearningOptions,
    Variable,
)
from affordance_ros.core.evaluation import (
    Inputs,
    evaluate,
    group_indices,
    kfold_indices,
    label_baseline,
    reading_baseline,
    transfer_indices,
)
from affordance_ros.core.parameters import fit_em
from affordance_ros.core.scenarios import scenario_cases, simulate
from affordance_ros.core.structure import structural_em
from affordance_ros.share import share_directory

TOOLS_CONFIG = share_directory() / "config" / "tools.json"
EFFECT_PARENTS = {"Action", "Tool", "Shape"}  # what drives the displacement in the simulation


@pytest.fixture(scope="module")
def tools():
    """config/tools.json with the effect's values one mixture of all its readings (the paper's way: the
    structure search decides its parents), and the tools scenario's cases."""
    doc = json.loads(TOOLS_CONFIG.read_text())
    effect = next(v for v in doc["variables"] if v["name"] == "Effect")
    effect["sensor"] = {"names": ["dx", "dy"], "max_components": 16, "covariance_type": "full"}
    config = AffordanceNetwork.from_dict(doc)
    return config, scenario_cases(config, simulate("tools", seed=3))


def effect_parents(model):
    return set(model["Effect"].parents)


def test_k2_on_map_assignments_misses_the_shape_but_the_recommended_learning_finds_every_effect_parent(tools):
    config, cases = tools
    paper = AffordanceLearner(score="k2", prior=1.0, structural_em=0, fit_sensors=False).fit(config, cases).model_
    assert "Shape" not in effect_parents(paper)          # MAP assignments blur the shape's effect away
    learner = AffordanceLearner()                          # config/tools.json's learning block: cv score + SEM
    model = learner.fit(config, cases).model_
    assert effect_parents(model) == EFFECT_PARENTS
    assert model["Action"].parents == ()                   # nothing points into the experiment's input
    assert not {("Tool", "Shape"), ("Shape", "Tool")} & set(model.arcs)   # independent by design
    assert model.metadata["learned"]["structural_em_rounds"] >= 1


def test_with_values_per_condition_the_effect_has_the_variables_that_matter_as_parents_and_no_more_values():
    config = AffordanceNetwork.load(TOOLS_CONFIG)             # the effect's values per (Action, Tool, Shape)
    cases = scenario_cases(config, simulate("tools", seed=3), extra=("object_id",))
    model = AffordanceLearner().fit(config, cases).model_
    effect = model["Effect"]
    assert set(effect.parents) == EFFECT_PARENTS == set(effect.sensor.cluster_by)
    # two values (a core, a wide one) per parent configuration: the CPT is square in what the parents tell apart
    assert effect.card == 2 * 4 * 3 * model["Shape"].card
    assert model["Action"].parents == () and not {("Tool", "Shape"), ("Shape", "Tool")} & set(model.arcs)


def test_structural_em_alone_recovers_the_shape_from_a_structure_without_it(tools):
    config, cases = tools
    fixed = config.with_structure({"Effect": ("Action", "Tool")})
    start = AffordanceLearner(structure="fixed").fit(fixed, cases).model_
    assert effect_parents(start) == {"Action", "Tool"}
    options = LearningOptions(score="cv", prior=0.01, structural_em=3, em_acceleration="none",
                              forbidden_group_arcs=(("effect", "action"), ("effect", "object"), ("object", "action")))
    observed = CaseEvidence(cases, start)
    model, result, rounds = structural_em(start, observed, lambda net: fit_em(net, observed, options)[0], options)
    assert effect_parents(model) == EFFECT_PARENTS and rounds >= 1


# ------------------------------------------------------------------ baselines on hand-computed data
def tiny():
    """6 training cases: a label cell (Hand), a class (Action) and one reading input x, a reading target y."""
    cells_train = np.array([[0], [0], [0], [1], [1], [1]])
    x_train = np.array([[0.0], [1.0], [5.0], [0.0], [4.0], [6.0]])
    y_action = np.array([0, 0, 1, 1, 1, 0])
    y_read = np.array([[1.0], [3.0], [8.0], [2.0], [4.0], [9.0]])
    cells_test = np.array([[0], [1]])
    x_test = np.array([[4.5], [0.4]])
    return Inputs(cells_train, cells_test, x_train, x_test, cell_cards=(2,)), y_action, y_read


def test_label_baselines_by_hand():
    inputs, y, _ = tiny()
    # majority: training frequencies with add-one: class 0 3/6 -> (3+1)/(6+2)
    np.testing.assert_allclose(label_baseline("majority", inputs, y, 2), [[0.5, 0.5], [0.5, 0.5]])
    # cell frequencies, the global frequency as one pseudo-case: cell 0 has (2, 1) -> (2.5, 1.5)/4
    np.testing.assert_allclose(label_baseline("cell_mean", inputs, y, 2), [[2.5 / 4, 1.5 / 4], [1.5 / 4, 2.5 / 4]])
    # nearest centroid within the cell: cell 0 centroids 0.5 (class 0), 5 (class 1): 4.5 is class 1;
    # cell 1: class 0 centroid 6, class 1 centroid 2: 0.4 is class 1
    p = label_baseline("nearest_centroid", inputs, y, 2)
    assert p.argmax(1).tolist() == [1, 1]
    # pooled within-class variance about the global class centroids (2 and 10/3): used as the softmax scale
    var = np.mean((inputs.x_train[:, 0] - np.array([7 / 3, 3.0])[y]) ** 2)
    d0, d1 = (4.5 - 0.5) ** 2, (4.5 - 5.0) ** 2
    assert p[0, 1] == pytest.approx(1 / (1 + np.exp(-0.5 * (d0 - d1) / var)))


def test_reading_baselines_by_hand():
    inputs, _, y = tiny()
    mean, var = reading_baseline("majority", inputs, y)
    np.testing.assert_allclose(mean, [[4.5], [4.5]])
    np.testing.assert_allclose(var, [[np.var(y)], [np.var(y)]])
    mean, var = reading_baseline("cell_mean", inputs, y)
    np.testing.assert_allclose(mean, [[4.0], [5.0]])
    # pooled within-cell variance: residuals (-3, -1, 4) and (-3, -1, 4), 6 - 2 degrees of freedom
    np.testing.assert_allclose(var, [[52 / 4], [52 / 4]])
    # nearest centroid over groups: objects A (x 0, 1), B (x 5) in cell 0; C (x 0, 4), D (x 6) in cell 1
    grouped = Inputs(inputs.cells_train, inputs.cells_test, inputs.x_train, inputs.x_test,
                     np.array(["A", "A", "B", "C", "C", "D"], dtype=object), inputs.cell_cards)
    mean, _ = reading_baseline("nearest_centroid", grouped, y)
    np.testing.assert_allclose(mean, [[8.0], [3.0]])   # 4.5 is nearest B (5); 0.4 nearest C (centroid 2)


def test_features_are_the_cells_one_hot_then_the_readings():
    inputs, _, _ = tiny()
    train, test = inputs.features()
    np.testing.assert_array_equal(train, [[1, 0, 0], [1, 0, 1], [1, 0, 5], [0, 1, 0], [0, 1, 4], [0, 1, 6]])
    np.testing.assert_array_equal(test, [[1, 0, 4.5], [0, 1, 0.4]])
    unknown = Inputs(np.array([[-1], [1]]), np.array([[0]]), np.zeros((2, 0)), np.zeros((1, 0)), cell_cards=(2,))
    np.testing.assert_array_equal(unknown.features()[0], [[0, 0], [0, 1]])     # a missing label: all zeros


def test_folds():
    folds = kfold_indices(23, 5, seed=1)
    assert sorted(np.concatenate(folds).tolist()) == list(range(23)) and {len(f) for f in folds} == {4, 5}
    names, folds = group_indices(["b", "a", "b", "c"])
    assert names == ["a", "b", "c"] and [f.tolist() for f in folds] == [[1], [0, 2], [3]]
    assert [f.tolist() for f in transfer_indices(["hand", "tool", "hand", "tool"], "hand")] == [[1, 3]]
    with pytest.raises(DataError, match="needs both"):
        transfer_indices(["hand", "hand"], "hand")


def test_evaluate_scores_ours_and_every_baseline_on_the_same_folds():
    rng = np.random.default_rng(0)
    config = AffordanceNetwork([Variable("Action", "action", ("a", "b"), None, None),
                                Variable("Size", "object", ("s", "l"), None, None)])
    n = 200
    size = rng.integers(0, 2, n)
    action = np.where(rng.random(n) < 0.9, size, 1 - size)     # the action mostly follows the size
    cases = CaseSet(config, {"Action": action, "Size": size}, {})
    fitted = []

    def fit(cfg, train):
        fitted.append(train.n_cases)
        return AffordanceLearner(structure="fixed").fit(cfg.with_structure({"Action": ("Size",)}), train).model_

    result = evaluate(config, cases, fit, kfold_indices(n, 4), ["Action"])
    assert fitted == [150] * 4
    m = result.targets[0].metrics
    assert m["ours"]["accuracy"] == pytest.approx(np.mean(action == size))
    assert m["cell_mean"]["accuracy"] == m["ours"]["accuracy"]       # the same lookup table
    assert m["majority"]["accuracy"] < 0.6 and m["ours"]["log_loss"] < m["majority"]["log_loss"]
