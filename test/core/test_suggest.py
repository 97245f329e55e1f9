"""Which trial to try next (core/suggest.py) against brute force, and the Dirichlet counts behind it:
learned by EM and the Discrete baseline, kept by online EM, saved in the model file."""

import itertools
import json

import numpy as np
import pytest
from scipy.stats import dirichlet, norm

from affordance_ros.core import (
    AffordanceNetwork,
    CaseSet,
    EvidenceError,
    LearningOptions,
    ModelFormatError,
    SensorModel,
    Variable,
    benchmark_network,
    fit_discrete,
    fit_em,
    sample_cases,
)
from affordance_ros.core.online import OnlineEM
from affordance_ros.core.parameters import family_counts
from affordance_ros.core.suggest import (
    Candidate,
    dirichlet_information_gain,
    dirichlet_predictive_information,
    score_trials,
    suggest_trials,
)

# equal up to floating-point rounding (the enumeration subtracts entropies of tens of nats to get a gain of
# thousandths: its last digits are rounding); any mistake in a formula is orders of magnitude larger
EXACT = dict(rel=1e-9, abs=1e-12)


def dirichlet_entropy(alpha) -> float:
    """Differential entropy of a Dirichlet (scipy), of a row of any length (a Beta for 2 values)."""
    return float(dirichlet(np.asarray(alpha, dtype=float)).entropy())


def tiny_model(rng, with_counts=True) -> AffordanceNetwork:
    """Action (2) and Object (2, seen through a sensor) -> Effect1 (3); Action, Effect1 -> Effect2 (2): an
    effect whose parent is an effect. CPTs are the means of random Dirichlet counts, as a learned model's."""
    shapes = {"Action": (2,), "Object": (2,), "Effect1": (2, 2, 3), "Effect2": (2, 3, 2)}
    counts = {name: rng.gamma(1.5, 2.0, shape) + 0.05 for name, shape in shapes.items()}
    counts["Effect1"][1, 0] = [0.3, 0.2, 0.1]  # a row seen little
    variables = [
        Variable("Action", "action", ("push", "pull"), ()),
        Variable("Object", "object", ("ball", "box"), (), SensorModel("roundness", np.array([0.0, 3.0]),
                                                                        np.array([1.0, 1.5]))),
        Variable("Effect1", "effect", ("none", "slide", "roll"), ("Action", "Object")),
        Variable("Effect2", "effect", ("quiet", "loud"), ("Action", "Effect1")),
    ]
    network = AffordanceNetwork(variables)
    cpts = {name: c / c.sum(axis=-1, keepdims=True) for name, c in counts.items()}
    return network.with_cpts(cpts, counts if with_counts else None)


CANDIDATES = [Candidate(values={"Object": "box"}), Candidate(sensors={"roundness": 1.2}), Candidate()]


def object_posterior(model, candidate) -> np.ndarray:
    prior = model["Object"].cpt
    if "Object" in candidate.values:
        return np.eye(2)[model["Object"].code(candidate.values["Object"])]
    if "roundness" in candidate.sensors:
        sensor = model["Object"].sensor
        likelihood = norm.pdf(candidate.sensors["roundness"], sensor.means, sensor.stddevs)
        return prior * likelihood / (prior * likelihood).sum()
    return prior


def brute_force(model, a: int, candidate) -> tuple[float, float]:
    """(expected entropy reduction of the Dirichlet posterior of all CPT rows, entropy of the effects) of doing
    action ``a`` on ``candidate``: for each object value (weighted by its posterior), every outcome (e1, e2)
    enumerated, the effects' Dirichlets updated by it, their total entropy measured."""
    alpha1, alpha2 = model["Effect1"].counts, model["Effect2"].counts
    mean1 = alpha1 / alpha1.sum(axis=-1, keepdims=True)
    mean2 = alpha2 / alpha2.sum(axis=-1, keepdims=True)

    def total_entropy(a1, a2):
        rows = [*a1.reshape(-1, 3), *a2.reshape(-1, 2)]
        return sum(dirichlet_entropy(row) for row in rows)

    before = total_entropy(alpha1, alpha2)
    gain, outcome = 0.0, np.zeros((3, 2))
    for o, p_object in enumerate(object_posterior(model, candidate)):
        expected_after = 0.0
        for e1, e2 in itertools.product(range(3), range(2)):
            p = mean1[a, o, e1] * mean2[a, e1, e2]
            a1, a2 = alpha1.copy(), alpha2.copy()
            a1[a, o, e1] += 1
            a2[a, e1, e2] += 1
            expected_after += p * total_entropy(a1, a2)
            outcome[e1, e2] += p_object * p
        gain += p_object * (before - expected_after)
    return gain, float(-(outcome * np.log(outcome)).sum())


def test_the_closed_form_of_one_row_is_the_expected_entropy_reduction_of_its_dirichlet():
    rng = np.random.default_rng(0)
    for r in (2, 3, 5):
        for alpha in [rng.gamma(0.7, 3.0, r) + 0.01, np.full(r, 1.0), rng.gamma(5.0, 20.0, r)]:
            p = alpha / alpha.sum()
            brute = dirichlet_entropy(alpha) - sum(p[k] * dirichlet_entropy(alpha + np.eye(r)[k]) for k in range(r))
            assert dirichlet_information_gain(alpha) == pytest.approx(brute, **EXACT)
    # rows are independent: a table of them at once
    table = rng.gamma(2.0, 1.0, (4, 3, 2))
    assert dirichlet_information_gain(table) == pytest.approx(
        np.array([dirichlet_information_gain(row) for row in table.reshape(-1, 2)]).reshape(4, 3), **EXACT)
    # a row never seen, without prior: the limit, the whole entropy of the outcome
    assert dirichlet_information_gain(np.zeros(4)) == pytest.approx(np.log(4))
    assert dirichlet_information_gain(np.zeros(2), np.array([0.9, 0.1])) == pytest.approx(
        -(0.9 * np.log(0.9) + 0.1 * np.log(0.1)))


def test_information_gain_and_predictive_entropy_equal_brute_force_enumeration():
    model = tiny_model(np.random.default_rng(1))
    scores = score_trials(model, CANDIDATES)
    assert scores.actions == ["push", "pull"] and scores.n_candidates == 3
    gains = {}
    for c, candidate in enumerate(CANDIDATES):
        for a in range(2):
            gain, entropy = brute_force(model, a, candidate)
            k = c * 2 + a
            assert scores.information_gain[k] == pytest.approx(gain, **EXACT), (c, a)
            assert scores.predictive_entropy[k] == pytest.approx(entropy, **EXACT), (c, a)
            gains[scores.actions[a], c] = gain
    best = suggest_trials(model, CANDIDATES, top=1).suggestions[0]
    assert (best.action, best.candidate) == max(gains, key=gains.get)
    assert best.action == "pull"  # what updates the little-seen row Effect1[pull, box] teaches the most


def two_draws_information(alpha) -> float:
    """I(y; y*) of two outcomes of one Dirichlet row, from their joint table: p(y, y*) = E[theta_y theta_y*]."""
    alpha = np.asarray(alpha, dtype=float)
    total = alpha.sum()
    joint = (np.outer(alpha, alpha) + np.diag(alpha)) / (total * (total + 1.0))
    p = alpha / total
    return float((joint * np.log(joint / np.outer(p, p))).sum())


def test_the_closed_form_of_predictive_information_is_the_information_between_two_draws_of_a_row():
    rng = np.random.default_rng(20)
    for r in (2, 3, 5):
        for alpha in [rng.gamma(0.7, 3.0, r) + 0.01, np.full(r, 1.0), rng.gamma(5.0, 20.0, r)]:
            assert dirichlet_predictive_information(alpha) == pytest.approx(two_draws_information(alpha), **EXACT)
    table = rng.gamma(2.0, 1.0, (4, 3, 2))
    assert dirichlet_predictive_information(table) == pytest.approx(
        np.array([two_draws_information(row) for row in table.reshape(-1, 2)]).reshape(4, 3), **EXACT)
    # it falls as 1 / alpha0^2, the gain about the parameters as 1 / alpha0: with many cases it is far smaller
    many = np.array([300.0, 200.0, 100.0])
    assert dirichlet_predictive_information(many) < dirichlet_information_gain(many) / 100
    assert dirichlet_predictive_information(np.zeros(4)) == pytest.approx(np.log(4))


def row_distributions(model, candidate, actions=(0, 1)) -> tuple[np.ndarray, np.ndarray]:
    """The distributions of the row of Effect1 (Action, Object) and of Effect2 (Action, Effect1) a trial
    updates, with every action of ``actions`` alike, by hand."""
    objects = object_posterior(model, candidate)
    effect1, effect2 = np.zeros((2, 2)), np.zeros((2, 3))
    for a in actions:
        effect1[a] += objects / len(actions)
        effect2[a] += objects @ model["Effect1"].cpt[a] / len(actions)
    return effect1, effect2


def test_predictive_information_weights_each_row_by_how_often_the_targets_use_it():
    model = tiny_model(np.random.default_rng(21))
    information = [dirichlet_predictive_information(model[name].counts) for name in ("Effect1", "Effect2")]
    for targets in (None, [Candidate(values={"Object": "ball"})], [Candidate(sensors={"roundness": 2.5}),
                                                                  Candidate()]):
        scores = score_trials(model, CANDIDATES, targets=targets)
        weights = [np.mean([row_distributions(model, t)[e] for t in (targets or CANDIDATES)], axis=0)
                   for e in range(2)]
        for c, candidate in enumerate(CANDIDATES):
            for a in range(2):
                rows = row_distributions(model, candidate, (a,))
                expected = sum((rows[e] * weights[e] * information[e]).sum() for e in range(2))
                assert scores.predictive_information[c * 2 + a] == pytest.approx(expected, **EXACT), (targets, c, a)
    # targets that are all balls: Effect1's rows of a box teach nothing about them
    balls = score_trials(model, [Candidate(values={"Object": "box"})], targets=[Candidate(values={"Object": "ball"})])
    effect2_only = [(row_distributions(model, Candidate(values={"Object": "box"}), (a,))[1]
                     * row_distributions(model, Candidate(values={"Object": "ball"}))[1] * information[1]).sum()
                    for a in range(2)]
    assert balls.predictive_information == pytest.approx(effect2_only, **EXACT)
    ranked = suggest_trials(model, CANDIDATES, criterion="predictive_information")
    assert ranked.criterion == "predictive_information" and ranked.note == ""
    own = score_trials(model, CANDIDATES).predictive_information  # the candidates are the targets
    assert [s.score for s in ranked.suggestions] == sorted(own.tolist(), reverse=True)
    assert [s.score for s in ranked.suggestions] == [s.predictive_information for s in ranked.suggestions]


def test_least_tried_counts_the_trials_behind_the_rows_a_trial_updates():
    model = tiny_model(np.random.default_rng(2))
    alpha1, alpha2 = model["Effect1"].counts, model["Effect2"].counts
    scores = score_trials(model, CANDIDATES[:1], ["pull", "push"])
    for k, a in enumerate((1, 0)):  # candidate 0: a box (Object = 1)
        effect1_rows = alpha1[a, 1].sum()
        effect2_rows = model["Effect1"].cpt[a, 1] @ alpha2[a].sum(axis=-1)  # over Effect1's prediction
        assert scores.tried[k] == pytest.approx(min(effect1_rows, effect2_rows), **EXACT)
    ranked = suggest_trials(model, CANDIDATES[:1], criterion="least_tried").suggestions
    assert [s.score for s in ranked] == sorted([-t for t in scores.tried], reverse=True)


def test_each_expected_effect_comes_with_its_spread_under_the_dirichlet_posterior():
    model = tiny_model(np.random.default_rng(3))
    suggestion = next(s for s in suggest_trials(model, CANDIDATES[:1]).suggestions if s.action == "push")
    alpha = model["Effect1"].counts[0, 1]  # push on a box: Effect1's row is known
    assert list(suggestion.effects["Effect1"].values()) == pytest.approx(alpha / alpha.sum(), **EXACT)
    assert list(suggestion.effect_stddevs["Effect1"].values()) == pytest.approx(np.sqrt(dirichlet(alpha).var()),
                                                                                **EXACT)
    assert suggestion.expected["Effect1"] == model["Effect1"].values[int(np.argmax(alpha))]
    assert set(suggestion.readings) == set()  # the tiny model's effects have no sensors
    expected = json.loads(json.dumps(suggestion.to_dict()))["expected"]["Effect1"]
    label = suggestion.expected["Effect1"]
    assert expected == {"label": label, "probability": suggestion.effects["Effect1"][label],
                        "stddev": suggestion.effect_stddevs["Effect1"][label]}


def test_the_ranking_is_best_first_and_top_keeps_the_best():
    model = tiny_model(np.random.default_rng(4))
    everything = suggest_trials(model, CANDIDATES)
    assert everything.criterion == everything.requested == "information_gain" and everything.note == ""
    assert everything.action_variable == "Action"
    assert len(everything.suggestions) == 6
    scores = [s.score for s in everything.suggestions]
    assert scores == sorted(scores, reverse=True)
    assert {(s.action, s.candidate) for s in everything.suggestions} == set(itertools.product(("push", "pull"),
                                                                                             range(3)))
    assert suggest_trials(model, CANDIDATES, top=2).suggestions == everything.suggestions[:2]
    only_pull = suggest_trials(model, CANDIDATES, actions=["pull"])
    assert {s.action for s in only_pull.suggestions} == {"pull"} and len(only_pull.suggestions) == 3
    entropy = suggest_trials(model, CANDIDATES, criterion="predictive_entropy").suggestions
    assert [s.score for s in entropy] == [s.predictive_entropy for s in entropy]


def test_without_counts_it_says_so_and_ranks_by_predictive_entropy():
    model = tiny_model(np.random.default_rng(5), with_counts=False)
    assert not model.has_counts
    for criterion in ("information_gain", "predictive_information", "least_tried"):
        answer = suggest_trials(model, CANDIDATES, criterion=criterion)
        assert answer.criterion == "predictive_entropy" and answer.requested == criterion
        assert "no Dirichlet counts" in answer.note
        assert [s.score for s in answer.suggestions] == sorted((s.predictive_entropy for s in answer.suggestions),
                                                               reverse=True)
        assert all(np.isnan(s.information_gain) and np.isnan(s.predictive_information) and np.isnan(s.tried)
                   for s in answer.suggestions)
        assert all(s.effect_stddevs == {} for s in answer.suggestions)
        first = answer.to_dict()["suggestions"][0]
        assert first["information_gain"] is None and first["predictive_information"] is None
        assert first["tried"] is None
        assert all(e["stddev"] is None for e in first["expected"].values())


@pytest.mark.parametrize("call, message", [
    (lambda m: suggest_trials(m, []), "no candidate objects"),
    (lambda m: suggest_trials(m, [Candidate(sensors={"nope": 1.0})]), "unknown sensor 'nope'"),
    (lambda m: suggest_trials(m, [Candidate(sensors={"roundness": float("nan")})]), "finite number"),
    (lambda m: suggest_trials(m, [Candidate(sensors={"roundness": True})]), "finite number"),
    (lambda m: suggest_trials(m, [Candidate(values={"Object": "cube"})]), "unknown label 'cube'"),
    (lambda m: suggest_trials(m, [Candidate(values={"Action": "push"})]), "what is being chosen"),
    (lambda m: suggest_trials(m, [Candidate(values={"Effect1": "roll"})]), "an effect"),
    (lambda m: suggest_trials(m, [Candidate()], actions=["kick"]), "unknown label 'kick'"),
    (lambda m: suggest_trials(m, [Candidate()], actions=[]), "no actions"),
    (lambda m: suggest_trials(m, [Candidate()], actions=["push", "push"]), "repeated actions"),
    (lambda m: suggest_trials(m, [Candidate()], criterion="curiosity"), "unknown criterion 'curiosity'"),
    (lambda m: suggest_trials(m, [Candidate()], top=0), "top must be"),
    (lambda m: suggest_trials(m, [{"values": {}}]), "not a Candidate"),
])
def test_bad_requests_say_what_is_wrong(call, message):
    with pytest.raises(EvidenceError, match=message):
        call(tiny_model(np.random.default_rng(6)))


def test_an_unlearned_model_cannot_suggest():
    config = tiny_model(np.random.default_rng(7)).replace_variables(
        {name: {"cpt": None, "counts": None} for name in ("Effect1", "Effect2")})
    with pytest.raises(ModelFormatError, match="learn it first"):
        suggest_trials(config, [Candidate()])


# ------------------------------------------------------------------ the counts behind a model
def unlearned(network):
    return network.replace_variables({v.name: {"cpt": None, "counts": None} for v in network.variables})


def test_em_and_discrete_models_carry_their_dirichlet_posterior():
    truth = benchmark_network("montesano", 1.0, 0)
    cases, _ = sample_cases(truth, 300, np.random.default_rng(0), labelled=("Action",))
    em, result = fit_em(unlearned(truth), cases, LearningOptions(prior=0.5))
    assert em.has_counts and len(result.counts) == len(truth)
    for v in em.variables:
        assert v.counts.shape == v.cpt.shape
        # every case counted once in every family, plus the prior on every entry
        assert v.counts.sum() == pytest.approx(300 + 0.5 * v.counts.size)
        # the CPT is the posterior mean, within EM's tolerance
        assert np.abs(v.counts / v.counts.sum(axis=-1, keepdims=True) - v.cpt).max() < 0.01
    discrete = fit_discrete(unlearned(truth), cases, prior=1.0)
    for v in discrete.variables:  # MAP values counted, plus the prior
        assert v.counts.sum() == pytest.approx(300 + v.counts.size)
        assert np.allclose(v.counts / v.counts.sum(axis=-1, keepdims=True), v.cpt, atol=1e-12)
        assert np.allclose(v.counts, np.round(v.counts))


def test_a_prior_model_adds_its_pseudo_counts():
    truth = benchmark_network("montesano", 1.0, 0)
    cases, _ = sample_cases(truth, 100, np.random.default_rng(1), labelled=("Action",))
    model, _ = fit_em(unlearned(truth), cases, LearningOptions(prior=1.0, prior_strength=40.0), prior_model=truth)
    for v in model.variables:
        assert v.counts.sum() == pytest.approx(100 + 40.0 + v.counts.size)


def test_online_em_adds_each_case_to_the_counts():
    model = tiny_model(np.random.default_rng(8))
    rng = np.random.default_rng(9)
    labels = {"Action": rng.integers(0, 2, 50), "Object": rng.integers(0, 2, 50), "Effect1": rng.integers(0, 3, 50),
              "Effect2": rng.integers(0, 2, 50)}
    cases = CaseSet(model, labels, {}, [f"t{k}" for k in range(50)])
    online = OnlineEM(model, start_weight=20).partial_fit(cases)
    refined = online.model_
    codes = np.stack([labels[n] for n in model.names], axis=1)
    for i, v in enumerate(model.variables):  # complete cases: their expected counts are their counts
        added = family_counts(codes, model.cards, i, model.parent_indices(i))
        assert refined[v.name].counts == pytest.approx(v.counts + added, **EXACT)
    without = OnlineEM(tiny_model(np.random.default_rng(8), with_counts=False), start_weight=20).partial_fit(cases)
    assert not without.model_.has_counts


def test_counts_survive_the_model_file_and_older_files_load_without_them(tmp_path):
    model = tiny_model(np.random.default_rng(10))
    model.save(tmp_path / "model.json")
    loaded = AffordanceNetwork.load(tmp_path / "model.json")
    assert loaded.has_counts
    for v in model.variables:
        assert np.array_equal(loaded[v.name].counts, v.counts)
    doc = json.loads((tmp_path / "model.json").read_text())
    assert doc["format"] == "affordance_ros/model/1"
    for variable in doc["variables"]:
        del variable["counts"]
    older = AffordanceNetwork.from_dict(doc)
    assert not older.has_counts and all(v.counts is None for v in older.variables)
    assert "counts" not in json.dumps(older.to_dict())
    # a new structure drops the counts with the CPTs
    assert not model.with_structure({v.name: v.parents for v in model.variables}).has_counts


@pytest.mark.parametrize("counts, message", [
    ([[1.0, 2.0, 3.0]], r"'counts' have shape \[1, 3\], expected the cpt's \[2, 2, 3\]"),
    (np.full((2, 2, 3), -1.0).tolist(), "finite and >= 0"),
    (np.full((2, 2, 3), np.inf).tolist(), "finite and >= 0"),
    ([[1.0], [2.0, 3.0]], "'counts' must be nested lists of numbers"),
])
def test_bad_counts_in_a_model_file_say_what_is_wrong(counts, message):
    doc = tiny_model(np.random.default_rng(11)).to_dict()
    next(v for v in doc["variables"] if v["name"] == "Effect1")["counts"] = counts
    with pytest.raises(ModelFormatError, match=message):
        AffordanceNetwork.from_dict(doc)


def test_counts_need_a_cpt():
    doc = tiny_model(np.random.default_rng(12)).to_dict()
    effect = next(v for v in doc["variables"] if v["name"] == "Effect2")
    del effect["cpt"]
    with pytest.raises(ModelFormatError, match="'counts' need a 'cpt'"):
        AffordanceNetwork.from_dict(doc)
