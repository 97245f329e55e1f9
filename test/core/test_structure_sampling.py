"""The posterior over structures (core.structure_sampling) and the answers averaged over it (core.posterior_answers):
the sampler against the exact posterior of a network small enough to enumerate its structures, the averaged answers
against brute-force enumeration under every structure, learning against a known truth, the model file, online
updates, predict_batch against predict on random structures, and ties within the draws' noise."""

import itertools
import math

import numpy as np
import pytest
from helpers import brute_force_joint
from scipy.special import logsumexp

from affordance_ros.core import (
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    LearningOptions,
    ModelFormatError,
    SensorModel,
    Variable,
    benchmark_network,
    predict,
    predict_batch,
    rank_actions,
    sample_cases,
)
from affordance_ros.core.cases import CaseEvidence
from affordance_ros.core.ground_truth import random_cpts, sample_values
from affordance_ros.core.network import WeightedNetwork
from affordance_ros.core.online import OnlineEM
from affordance_ros.core.posterior_answers import StructureAverage, averaged_draws, draw_sets
from affordance_ros.core.structure_sampling import log_marginal, sample_structures

pytestmark = pytest.mark.posterior


# ------------------------------------------------------------------ the sampler against the exact posterior
def three_labels():
    """Action -> E1 -> E2, every value given by label: the imputed values are the cases themselves."""
    variables = [Variable("A", "action", ("a0", "a1"), ()), Variable("E1", "effect", ("x0", "x1"), ("A",)),
                 Variable("E2", "effect", ("y0", "y1"), ("E1",))]
    truth = AffordanceNetwork(variables).with_cpts({"A": np.array([0.5, 0.5]), "E1": np.array([[0.8, 0.2], [0.3, 0.7]]),
                                                    "E2": np.array([[0.75, 0.25], [0.35, 0.65]])})
    return truth


def exact_arc_probabilities(codes, cards, arc_prior):
    """Every DAG the groups allow (A into E1 and E2, E1 and E2 either way or not at all), scored exactly."""
    odds = math.log(arc_prior / (1 - arc_prior))
    candidates = {1: [(), (0,), (2,), (0, 2)], 2: [(), (0,), (1,), (0, 1)]}
    scores, structures = [], []
    for p1, p2 in itertools.product(candidates[1], candidates[2]):
        if 2 in p1 and 1 in p2:
            continue   # a cycle
        structure = ((), p1, p2)
        total = 0.0
        for child, parents in enumerate(structure):
            shape = [cards[a] for a in (*parents, child)]
            flat = np.ravel_multi_index(tuple(codes[:, a] for a in (*parents, child)), shape)
            counts = np.bincount(flat, minlength=math.prod(shape)).reshape(shape)
            total += log_marginal(counts, np.ones(shape)) + odds * len(parents)
        scores.append(total)
        structures.append(structure)
    weights = np.exp(np.array(scores) - logsumexp(scores))
    out = {}
    for w, structure in zip(weights, structures):
        for child, parents in enumerate(structure):
            for parent in parents:
                out[parent, child] = out.get((parent, child), 0.0) + w
    return out


@pytest.mark.parametrize("arc_prior", [0.5, 0.8])
def test_the_sampler_draws_the_exact_posterior_over_structures_of_complete_data(arc_prior):
    truth = three_labels()
    cases, codes = sample_cases(truth, 30, np.random.default_rng(3), labelled=truth.names)
    config = truth.replace_variables({v.name: {"cpt": None, "parents": None} for v in truth.variables})
    observed = CaseEvidence(cases, config)
    options = LearningOptions(posterior_draws=1600, arc_prior=arc_prior, seed=4)

    def uniform(net):
        return net.with_cpts({v.name: np.full([net[p].card for p in v.parents] + [v.card], 1 / v.card)
                              for v in net.variables})

    sample = sample_structures(config, observed, options, {"empty": ((), (), ()), "full": ((), (0,), (0, 1))},
                               uniform, lambda child, parents: np.ones([2] * (len(parents) + 1)))
    exact = exact_arc_probabilities(codes, config.cards, arc_prior)
    drawn = sample.arc_probabilities()
    for arc in set(exact) | set(drawn):
        assert abs(drawn.get(arc, 0.0) - exact.get(arc, 0.0)) < 0.06, (arc, drawn, exact)
    assert sample.disagreement < 0.15


# ------------------------------------------------------------------ answers against brute force
@pytest.fixture(scope="module")
def averaged_model():
    """A model averaged over several structures: montesano at sigma 3, 120 trials (the cases do not settle it)."""
    truth = benchmark_network("montesano", 3.0, 5).replace_variables({"Action": {"sensor": None}})
    config = truth.replace_variables({v.name: {"cpt": None, "parents": None} for v in truth.variables})
    cases, _ = sample_cases(truth, 120, np.random.default_rng(5), labelled=("Action",))
    model = AffordanceLearner(structure="average", posterior_draws=12, seed=1).fit(config, cases).model_
    assert len(model.members) > 2
    return truth, model


def evidence_rows(model, values, sensors):
    """Per variable a (card,) log-likelihood row of one case (None: not observed)."""
    rows = [None] * len(model)
    for name, label in values.items():
        with np.errstate(divide="ignore"):
            rows[model.index(name)] = np.log(np.eye(model[name].card)[model[name].code(label)])
    for reading, x in sensors.items():
        var, sensor = model.sensor(reading)
        rows[model.index(var.name)] = sensor.log_likelihood(np.array([x]))[0]
    return rows


def brute_marginal(network, rows, name):
    joint, _ = brute_force_joint(network, rows)
    i = network.index(name)
    return joint.sum(axis=tuple(a for a in range(len(network)) if a != i))


ASKED = [({"Action": "tap", "Shape": "box", "Size": "big"}, {}, "ObjVel"),
         ({"Action": "grasp"}, {"color": 11.0, "size": 4.2}, "Contact"),
         ({}, {"obj_vel": 9.0, "contact": 1.0}, "Action"),
         ({"Shape": "circle"}, {"obj_hand_vel": 3.0}, "HandVel")]


@pytest.mark.parametrize("values, sensors, query", ASKED)
def test_the_probability_is_the_weighted_average_of_every_structures_by_enumeration(averaged_model, values, sensors,
                                                                                     query):
    _, model = averaged_model
    rows = evidence_rows(model, values, sensors)
    expected = sum(m.weight * brute_marginal(m.network, rows, query) for m in model.members)
    got = predict(model, [query], sensors, values, uncertainty=False).marginals[query]
    np.testing.assert_allclose(list(got.values()), expected, atol=1e-9)


@pytest.mark.parametrize("values, sensors, query", ASKED)
def test_every_pooled_draw_is_one_structures_answer_under_one_of_its_cpt_sets_by_enumeration(averaged_model, values,
                                                                                            sensors, query):
    """The pooled draws are, as a multiset, every member's answer under each of its CPT sets: members grouped by the
    families the query needs answer together, and each draw is normalised on its own."""
    _, model = averaged_model
    rows = evidence_rows(model, values, sensors)
    expected = []
    for member, sets in zip(model.members, draw_sets(model.members)[0]):
        for s in range(len(sets[0])):
            network = member.network.with_cpts({v.name: sets[i][s] for i, v in enumerate(member.network.variables)})
            expected.append(brute_marginal(network, rows, query))
    likelihoods = {i: np.exp(row - row.max())[None] for i, row in enumerate(rows) if row is not None}
    hard = [model.index(name) for name in values]
    drawn = averaged_draws(model, [model.index(query)], likelihoods, hard)[0]      # (card, S)
    key = lambda column: tuple(np.round(column, 9))  # noqa: E731
    assert sorted(map(key, drawn.T)) == sorted(map(key, np.array(expected)))
    groups = StructureAverage.of(model).groups([model.index(query)], hard, likelihoods)
    assert len(groups) <= len(model.members) and sum(g.weight for g in groups) == pytest.approx(1.0)


def test_the_interval_comes_from_the_pooled_draws(averaged_model):
    _, model = averaged_model
    values = {"Action": "tap", "Shape": "box", "Size": "big"}
    answer = predict(model, ["ObjVel"], values=values)
    likelihoods = {model.index(n): np.eye(model[n].card)[[model[n].code(v)]] for n, v in values.items()}
    drawn = averaged_draws(model, [model.index("ObjVel")], likelihoods, list(likelihoods))[0]
    for k, label in enumerate(model["ObjVel"].values):
        low, high = answer.intervals["ObjVel"][label]
        inside = np.mean((drawn[k] >= low - 1e-12) & (drawn[k] <= high + 1e-12))
        assert 0.85 <= inside <= 0.95
        assert answer.stddevs["ObjVel"][label] == pytest.approx(np.std(drawn[k], ddof=1))


# ------------------------------------------------------------------ learning against a known truth
def test_with_every_value_seen_the_sample_holds_the_truths_arcs_and_few_others():
    truth = benchmark_network("montesano", 1.0, 2).replace_variables({"Action": {"sensor": None}})
    config = truth.replace_variables({v.name: {"cpt": None, "parents": None} for v in truth.variables})
    cases, _ = sample_cases(truth, 3000, np.random.default_rng(2), labelled=truth.names)
    learner = AffordanceLearner(structure="average", seed=2).fit(config, cases)
    probabilities = learner.model_.arc_probabilities()
    into_effects = [(a, b) for a, b in truth.arcs if truth[a].group != "effect"]   # (no equivalent reversal)
    assert np.mean([probabilities.get(arc, 0.0) for arc in into_effects]) >= 0.9, probabilities
    others = [p for arc, p in probabilities.items() if arc not in truth.arcs and arc[::-1] not in truth.arcs]
    assert sum(others) <= 2.0, probabilities
    assert learner.result_.structures is not None and learner.model_.metadata["learned"]["structure"] == "average"


def test_the_default_learner_averages_and_a_single_structure_says_its_intervals_assume_it():
    truth = benchmark_network("simple", 1.0, 0)
    config = truth.replace_variables({v.name: {"cpt": None, "parents": None} for v in truth.variables})
    cases, _ = sample_cases(truth, 200, np.random.default_rng(0))
    assert LearningOptions().structure == "average"
    assert LearningOptions(method="discrete").structure == "k2"
    averaged = AffordanceLearner(structure="average").fit(config, cases).model_
    single = AffordanceLearner(structure="k2", posterior_draws=20).fit(config, cases).model_
    assert averaged.metadata["learned"]["intervals_assume_structure"] is False
    assert single.metadata["learned"]["intervals_assume_structure"] is True
    assert len(single.members) == 1 and single.members[0].weight == 1.0
    with pytest.raises(ModelFormatError, match="prior"):
        LearningOptions(structure="average", prior=0)


# ------------------------------------------------------------------ the model file and online updates
def test_a_sample_of_structures_round_trips_through_the_model_file(averaged_model, tmp_path):
    _, model = averaged_model
    model.save(tmp_path / "m.json")
    loaded = AffordanceNetwork.load(tmp_path / "m.json")
    assert [m.weight for m in loaded.members] == pytest.approx([m.weight for m in model.members])
    assert [m.network.arcs for m in loaded.members] == [m.network.arcs for m in model.members]
    ask = dict(values={"Action": "tap"}, sensors={"size": 9.0})
    assert predict(loaded, ["Contact"], **ask) == predict(model, ["Contact"], **ask)


def test_a_damaged_sample_of_structures_is_a_model_format_error_naming_it(averaged_model, tmp_path):
    _, model = averaged_model
    doc = model.to_dict()
    doc["structures"][1]["weight"] = 0.9
    with pytest.raises(ModelFormatError, match="sum to 1"):
        AffordanceNetwork.from_dict(doc)
    doc = model.to_dict()
    doc["structures"][1]["variables"][0]["name"] = "Nope"
    with pytest.raises(ModelFormatError, match=r"structures\[1\]"):
        AffordanceNetwork.from_dict(doc)
    doc = model.to_dict()
    doc["structures"][1]["variables"][4]["parents"] = ["Nope"]
    with pytest.raises(ModelFormatError, match="Nope"):
        AffordanceNetwork.from_dict(doc)


def test_online_updates_count_every_case_in_every_structures_draws_and_keep_the_structures_and_weights():
    """Two structures: after 200 cases each one's draws counted every case, and the structures and weights are those
    the learn drew."""
    truth = three_labels()
    wrong = truth.with_structure({"E1": (), "E2": ()}).with_cpts(
        {"A": np.array([0.5, 0.5]), "E1": np.array([0.55, 0.45]), "E2": np.array([0.55, 0.45])})
    members = []
    for network, weight in ((wrong, 0.7), (truth, 0.3)):
        draws = {v.name: (np.repeat((v.cpt * 20)[None], 4, axis=0), np.ones(v.cpt.shape)) for v in network.variables}
        members.append(WeightedNetwork(weight, network.with_cpts(network.cpts(), None, draws)))
    model = members[0].network.with_structures(members)
    before = [m.network.variables[1].draws[0].sum() for m in model.members]
    cases, _ = sample_cases(truth, 200, np.random.default_rng(1), labelled=truth.names)
    online = OnlineEM(model)
    online.partial_fit(cases)
    updated = online.model_
    assert [m.network.arcs for m in updated.members] == [m.network.arcs for m in model.members]
    assert [m.weight for m in updated.members] == [0.7, 0.3]
    for m, total in zip(updated.members, before):
        assert m.network.variables[1].draws[0].sum() == pytest.approx(total + 200)


# ------------------------------------------------------------------ predict_batch equals predict
def random_structure(config, rng, max_parents):
    """Any DAG the default groups allow (actions, then objects, then effects; within a group any order), each
    variable with up to ``max_parents`` parents among those before it."""
    rank = {"action": 0, "object": 1, "effect": 2}
    order = sorted(rng.permutation(len(config)), key=lambda i: rank[config.variables[i].group])
    parents = {}
    for pos, i in enumerate(order):
        before = [config.names[j] for j in order[:pos]]
        k = int(rng.integers(0, min(len(before), max_parents) + 1))
        parents[config.names[i]] = tuple(rng.choice(before, size=k, replace=False)) if k else ()
    return config.with_structure(parents)


def with_random_draws(network, rng, n_draws):
    cpts = random_cpts(network, rng)
    draws = {v.name: (rng.integers(0, 30, size=(n_draws, *v.cpt.shape)).astype(float), np.ones(v.cpt.shape))
             for v in cpts.variables}
    return cpts.with_cpts(cpts.cpts(), None, draws)


def random_case(truth, rng):
    """One case's evidence: each variable given by label, by a reading, or not at all."""
    codes = sample_values(truth, 1, rng)[0]
    values, sensors = {}, {}
    for i, v in enumerate(truth.variables):
        how = rng.integers(3)
        if how == 0:
            values[v.name] = v.values[codes[i]]
        elif how == 1 and v.sensor is not None:
            sensors[v.sensor.name] = float(v.sensor.means[codes[i]] + rng.normal() * v.sensor.stddevs[codes[i]])
    return values, sensors


@pytest.mark.parametrize("seed", range(12))
def test_predict_batch_answers_as_predict_one_case_at_a_time_on_random_structures(seed):
    rng = np.random.default_rng([seed, 38])
    config = benchmark_network("montesano", 3.0, seed)
    max_parents = int(rng.integers(1, 5))
    networks = [with_random_draws(random_structure(config, rng, max_parents), rng, 5) for _ in range(1 + seed % 3)]
    weights = rng.dirichlet(np.ones(len(networks)))
    model = networks[0] if len(networks) == 1 else networks[0].with_structures(
        [WeightedNetwork(float(w), n) for w, n in zip(weights / weights.sum(), networks)])
    cases = [random_case(networks[0], rng) for _ in range(6)]
    for query in ([n] for n in config.names):
        cases_here = [(v, s) for v, s in cases if query[0] not in v]
        if not cases_here:
            continue
        names = sorted({n for v, _ in cases_here for n in v} | {n for _, s in cases_here for n in s})
        columns = {n: [({**v, **s}).get(n) for v, s in cases_here] for n in names}
        sensors = {n: c for n, c in columns.items() if n not in config.names}
        values = {n: c for n, c in columns.items() if n in config.names}
        for uncertainty in (False, True):
            batch = predict_batch(model, query, sensors, values, uncertainty=uncertainty)
            for k, (v, s) in enumerate(cases_here):
                one = predict(model, query, s, v, uncertainty=uncertainty)
                np.testing.assert_allclose(batch.marginals[query[0]][k], list(one.marginals[query[0]].values()),
                                           atol=1e-9)
                if uncertainty:
                    np.testing.assert_allclose(batch.intervals[query[0]][k],
                                               list(one.intervals[query[0]].values()), atol=1e-9)


def test_predict_batch_answers_with_every_object_variable_given_when_an_object_has_an_object_parent():
    """The refusal the issue found: Shape -> Size, every object variable given by label."""
    truth = benchmark_network("montesano", 1.0, 9010)
    config = truth.with_structure({**{v.name: v.parents for v in truth.variables}, "Size": ("Shape",)})
    model = with_random_draws(config, np.random.default_rng(0), 4)
    values = {"Action": ["tap", "grasp"], "Color": ["blue", "green1"], "Shape": ["box", "circle"],
              "Size": ["big", "small"]}
    for uncertainty in (False, True):
        batch = predict_batch(model, ["ObjVel"], values=values, uncertainty=uncertainty)
        for k in range(2):
            one = predict(model, ["ObjVel"], values={n: c[k] for n, c in values.items()}, uncertainty=uncertainty)
            np.testing.assert_allclose(batch.marginals["ObjVel"][k], list(one.marginals["ObjVel"].values()))


# ------------------------------------------------------------------ ties within the draws' noise
def test_two_actions_on_the_same_data_tie_for_every_strategy_and_each_is_chosen_about_half_the_time():
    """'tap' and 'touch' saw the same trials: expected ties exactly, optimistic and cautious within the draws' noise;
    every strategy chooses each about as often."""
    config = AffordanceNetwork([Variable("Action", "action", ("grasp", "tap", "touch"), ()),
                                Variable("Moved", "effect", ("no", "yes"), ("Action",),
                                         SensorModel("moved", np.array([0.0, 5.0]), np.array([3.0, 3.0])))])
    rng = np.random.default_rng(0)
    moved = np.where(rng.random(40) < 0.6, 5.0, 0.0) + rng.normal(0, 3, 40)
    actions = np.array(["grasp"] * 40 + ["tap"] * 40 + ["touch"] * 40)
    readings = np.concatenate([np.where(rng.random(40) < 0.3, 5.0, 0.0) + rng.normal(0, 3, 40), moved, moved])
    cases = CaseSet.from_columns(config, {"Action": list(actions), "moved": list(readings)})
    model = AffordanceLearner(structure="fixed", posterior_draws=50).fit(config, cases).model_
    for strategy in ("expected", "optimistic", "cautious", "thompson"):
        first = [rank_actions(model, {"Moved": "yes"}, strategy=strategy, rng=seed) for seed in range(60)]
        chosen = [r.actions[0] for r in first]
        assert set(chosen) == {"tap", "touch"}, (strategy, chosen)
        assert 15 <= chosen.count("tap") <= 45, (strategy, chosen.count("tap"))
        if strategy != "thompson":
            assert all(r.tied for r in first), strategy


def test_a_clearly_better_action_is_not_tied_by_the_noise_rule():
    config = AffordanceNetwork([Variable("Action", "action", ("a", "b"), ()),
                                Variable("Moved", "effect", ("no", "yes"), ("Action",))])
    cases = CaseSet.from_columns(config, {"Action": ["a"] * 60 + ["b"] * 60,
                                          "Moved": ["yes"] * 50 + ["no"] * 10 + ["yes"] * 20 + ["no"] * 40})
    model = AffordanceLearner(structure="fixed", posterior_draws=50).fit(config, cases).model_
    for strategy in ("optimistic", "cautious"):
        ranking = rank_actions(model, {"Moved": "yes"}, strategy=strategy, rng=0)
        assert ranking.actions[0] == "a" and not ranking.tied


def testdraw_sets_pool_every_imputation_in_proportion_to_its_structures_weight(averaged_model):
    _, model = averaged_model
    sets = draw_sets(model.members)[0]
    sizes = np.array([len(s[0]) for s in sets], dtype=float)
    np.testing.assert_allclose(sizes / sizes.sum(), [m.weight for m in model.members], atol=0.02)


def test_a_query_the_evidence_alone_answers_has_every_draw_alike(averaged_model):
    """Shape asked with Shape given: no family is needed, every structure and draw answers 1 for the label."""
    _, model = averaged_model
    answer = predict(model, ["Shape"], values={"Shape": "box"})
    assert answer.marginals["Shape"] == {"circle": 0.0, "box": 1.0}
    assert answer.intervals["Shape"]["box"] == (1.0, 1.0) and answer.stddevs["Shape"]["box"] == 0.0
