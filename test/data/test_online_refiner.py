"""OnlineRefiner: online learning on top of core.online.OnlineEM (no ROS)."""

from dataclasses import replace

import numpy as np
import pytest

from affordance_ros.core import AffordanceError, AffordanceLearner, benchmark_network
from affordance_ros.core.ground_truth import benchmark_structure, sample_values
from affordance_ros.data.current_model import OnlineRefiner, model_weight
from affordance_ros.data.training_cases import cases_marker
from affordance_ros.data.trial import Trial, case_set

TRUTH = benchmark_network("montesano", 1.0, 0)


def records(n, seed, prefix):
    rng = np.random.default_rng(seed)
    codes = sample_values(TRUTH, n, rng)
    out = []
    for k in range(n):
        parts = {"object": {}, "effect": {}}
        for i, v in enumerate(TRUTH.variables):
            if v.group in parts:
                parts[v.group][v.sensor.name] = float(v.sensor.means[codes[k, i]] + rng.standard_normal())
        action = TRUTH["Action"].values[codes[k, 0]]
        out.append(Trial(f"{prefix}{k}", action, parts["object"], parts["effect"]).to_record("Action"))
    return out


@pytest.fixture(scope="module")
def learned():
    config = benchmark_structure("montesano", 1.0)
    model = AffordanceLearner(structure="k2").fit(config, case_set(config, records(200, 1, "a"))).model_
    model.metadata["cases"] = cases_marker("cases.db", 200, 200, "a199")
    return model


def test_updates_refine_the_model_and_say_so(learned):
    online = OnlineRefiner(learned)
    assert online.model is learned and online.num_cases == 200 and not online.unsaved
    new = records(30, 2, "b")
    for k, record in enumerate(new, start=201):
        online.update(k, record)
    model = online.model
    assert online.model is model  # built once per batch of updates
    assert model.metadata["online"]["updates"] == 30 and model.metadata["online"]["num_cases"] == 230
    assert model.metadata["cases"] == {"database": "cases.db", "count": 230, "last_id": 230, "last_trial_id": "b29"}
    assert model.metadata["learned"] == learned.metadata["learned"] and "online" not in learned.metadata
    assert model.arcs == learned.arcs
    change = max(float(np.abs(model[v.name].cpt - learned[v.name].cpt).max()) for v in learned.variables)
    assert 1e-3 < change < 0.5  # refined, not replaced
    assert online.unsaved
    # what the model is worth: its cases and online updates; a restart goes on from there
    assert model_weight(model) == 230
    assert OnlineRefiner(model).updates == 30


def test_a_case_the_model_cannot_use_changes_nothing(learned):
    online = OnlineRefiner(learned)
    online.update(201, records(1, 3, "c")[0])
    model = online.model
    bad = records(1, 4, "d")[0]
    bad = replace(bad, object_features={**bad.object_features, "weight": 2.0})
    with pytest.raises(AffordanceError, match="weight"):
        online.update(202, bad)
    assert online.model is model and online.num_cases == 201 and online.cases["last_trial_id"] == "c0"


def test_the_weight_of_a_model_learned_with_a_prior(learned):
    carried = learned.with_cpts(learned.cpts())
    carried.metadata = {"learned": {**learned.metadata["learned"], "num_cases": 50, "prior_strength": 120.0}}
    assert model_weight(carried) == 170.0


def test_the_dirichlet_counts_grow_by_each_stored_case_and_carry_over_a_save(learned, tmp_path):
    online = OnlineRefiner(learned)
    assert learned.has_counts
    for k, record in enumerate(records(20, 3, "c"), start=201):
        online.update(k, record)
    refined = online.model
    for v in learned.variables:  # every case counted once in every family (its expected counts sum to 1)
        assert refined[v.name].counts.sum() == pytest.approx(v.counts.sum() + 20)
    refined.save(tmp_path / "model.json")
    again = OnlineRefiner(type(learned).load(tmp_path / "model.json"))  # e.g. the node restarted
    again.update(221, records(1, 4, "d")[0])
    for v in learned.variables:
        assert again.model[v.name].counts.sum() == pytest.approx(v.counts.sum() + 21)
