"""The posterior of the CPTs a learn draws (core/posterior_sampling.py) against brute force, and what answers and
rankings make of it: the imputation of hidden values against enumeration of the joint, the draws against the exact
posterior by enumeration of every imputation of a tiny network's cases, online updates, models without draws,
strategies."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
from helpers import brute_force_joint, random_network
from scipy.special import gammaln

from affordance_ros.core import (
    STRATEGIES,
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    EvidenceError,
    ModelFormatError,
    SensorModel,
    Variable,
    benchmark_network,
    predict,
    predict_batch,
    rank_actions,
    sample_cases,
)
from affordance_ros.core.evidence import Evidence
from affordance_ros.core.inference import JunctionTree
from affordance_ros.core.online import OnlineEM
from affordance_ros.core.posterior_answers import has_draws, spread, support
from affordance_ros.core.posterior_sampling import dirichlet_rows, impute

pytestmark = pytest.mark.posterior


def one_case_evidence(network, rng):
    """Evidence of one random case: some labels, some readings (log-likelihood rows), some nothing."""
    log_lik = []
    for v in network.variables:
        roll = rng.random()
        if roll < 0.25:
            row = np.full(v.card, -np.inf)
            row[rng.integers(v.card)] = 0.0
        elif roll < 0.6:
            row = rng.normal(0, 1.5, v.card)
        else:
            row = None
        log_lik.append(row)
    return log_lik


def as_evidence(log_lik, n_cases):
    likelihoods = tuple(None if row is None else np.tile(np.exp(row - row.max()), (n_cases, 1)) for row in log_lik)
    return Evidence(likelihoods, np.zeros(n_cases))


@pytest.mark.parametrize("seed", range(4))
def test_imputed_values_follow_the_exact_joint_posterior_of_a_case(seed):
    """impute draws every variable jointly from p(values | evidence): the frequencies of 40000 draws of one case
    against enumeration of the joint, within 4.5 binomial standard errors in every joint state (and 3 draws: a
    state of probability 1e-6 seen once is no error)."""
    rng = np.random.default_rng(seed)
    network = random_network(rng, n_vars=6, max_card=3)
    log_lik = one_case_evidence(network, rng)
    exact, _ = brute_force_joint(network, log_lik)
    k = 40000
    codes = impute(JunctionTree(network), [v.cpt for v in network.variables], as_evidence(log_lik, k), rng)
    seen = np.bincount(np.ravel_multi_index(codes.T, network.cards), minlength=exact.size) / k
    tolerance = 4.5 * np.sqrt(exact.ravel() * (1 - exact.ravel()) / k) + 3 / k
    assert np.all(np.abs(seen - exact.ravel()) <= tolerance)


def test_each_case_may_have_cpts_of_its_own():
    """impute(per_case=True): case k under CPTs k, as if each were imputed under its own network."""
    rng = np.random.default_rng(7)
    network = random_network(rng, n_vars=5, max_card=3)
    other = random_network(np.random.default_rng(7), n_vars=5, max_card=3)
    other = AffordanceNetwork([dataclasses.replace(v, cpt=dirichlet_rows(np.ones_like(v.cpt), rng))
                               for v in other.variables])
    log_lik = one_case_evidence(network, rng)
    k = 30000
    cpts = [np.stack([a.cpt, b.cpt] * (k // 2)) for a, b in zip(network.variables, other.variables)]
    codes = impute(JunctionTree(network), cpts, as_evidence(log_lik, k), rng, per_case=True)
    for start, net in ((0, network), (1, other)):
        exact, _ = brute_force_joint(net, log_lik)
        seen = np.bincount(np.ravel_multi_index(codes[start::2].T, net.cards), minlength=exact.size) / (k // 2)
        assert np.all(np.abs(seen - exact.ravel()) <= 4.5 * np.sqrt(exact.ravel() * (1 - exact.ravel()) / (k // 2))
                      + 3 / (k // 2))


# ------------------------------------------------------------ a tiny network, its posterior by enumeration
SIGMA = 3.0


def tiny_config():
    """Action (labelled) and X (an object seen through a sensor) cause Y (an effect seen through a sensor)."""
    sensor = lambda name: SensorModel(name, np.array([0.0, 5.0]), np.array([SIGMA, SIGMA]))  # noqa: E731
    return AffordanceNetwork([
        Variable("Action", "action", ("a", "b"), ()),
        Variable("X", "object", ("x0", "x1"), (), sensor("x")),
        Variable("Y", "effect", ("y0", "y1"), ("Action", "X"), sensor("y"))])


def tiny_cases():
    actions = ["a", "a", "b", "a", "b", "b", "a"]
    x = [0.3, 4.1, 2.2, 5.5, -1.0, 2.8, 1.9]
    y = [4.6, 0.2, 2.6, 5.2, 3.9, 0.4, 2.4]
    return CaseSet.from_columns(tiny_config(), {"Action": actions, "x": x, "y": y})


def exact_posterior_samples(n_samples, rng):
    """Samples of (theta_X (2,), theta_Y (2, 2, 2)) from the exact posterior given ``tiny_cases``, prior Dirichlet(1):
    every imputation z of the hidden X and Y of all cases enumerated, weighed by p(z, readings) = the Dirichlet-
    multinomial marginal likelihood of its counts times the readings' densities, then a z drawn by weight and the
    CPTs from Dirichlet(counts(z) + 1)."""
    cases = tiny_cases()
    actions = np.array([0, 0, 1, 0, 1, 1, 0])
    x, y = cases.readings["x"], cases.readings["y"]
    n = len(actions)
    states = np.array(list(itertools.product(range(2), repeat=2 * n)))       # (4^n, 2n): X of each case, Y of each
    zx, zy = states[:, :n], states[:, n:]
    log_read = lambda r, z: -0.5 * ((r - 5.0 * z) / SIGMA) ** 2                 # noqa: E731 (up to a constant)
    counts_x = np.stack([(zx == 0).sum(1), (zx == 1).sum(1)], axis=1)         # (Z, 2)
    counts_y = np.zeros((len(states), 2, 2, 2))
    for k in range(n):
        counts_y[np.arange(len(states)), actions[k], zx[:, k], zy[:, k]] += 1
    def log_dirmult(counts):   # noqa: E306 (rows on the last axis, prior 1)
        r = counts.shape[-1]
        return (gammaln(r) - gammaln(r + counts.sum(-1)) + gammaln(1 + counts).sum(-1)).reshape(len(counts), -1).sum(1)
    log_w = log_dirmult(counts_x) + log_dirmult(counts_y) + log_read(x, zx).sum(1) + log_read(y, zy).sum(1)
    w = np.exp(log_w - log_w.max())
    chosen = rng.choice(len(states), size=n_samples, p=w / w.sum())
    return dirichlet_rows(counts_x[chosen] + 1.0, rng), dirichlet_rows(counts_y[chosen] + 1.0, rng), w


@pytest.fixture(scope="module")
def tiny_model():
    return AffordanceLearner(structure="fixed", posterior_draws=3000).fit(tiny_config(), tiny_cases()).model_


def reference_answers(theta_x, theta_y, reading):
    """Under each sampled CPT set: p(X=x1), p(Y=y1 | Action, X) for every action and X, and p(Y=y1 | Action=a,
    the X reading ``reading``) (nonlinear in the CPTs)."""
    like = np.exp(-0.5 * ((reading - np.array([0.0, 5.0])) / SIGMA) ** 2)
    px = theta_x * like
    px /= px.sum(1, keepdims=True)
    return {"X": theta_x[:, 1], "Y|a,x0": theta_y[:, 0, 0, 1], "Y|b,x1": theta_y[:, 1, 1, 1],
            "Y|a,reading": (px * theta_y[:, 0, :, 1]).sum(1)}


def model_answers(model, reading):
    ask = lambda query, **evidence: predict(model, [query], **evidence)  # noqa: E731
    return {"X": ask("X"), "Y|a,x0": ask("Y", values={"Action": "a", "X": "x0"}),
            "Y|b,x1": ask("Y", values={"Action": "b", "X": "x1"}),
            "Y|a,reading": ask("Y", values={"Action": "a"}, sensors={"x": reading})}


def test_the_draws_are_the_exact_posterior_of_the_cpts_by_enumeration(tiny_model):
    """Seven cases of a network whose object and effect are seen at sigma 3 (values 5 apart): the standard deviation
    and the 90 % interval of four answers (linear and nonlinear in the CPTs) under the learned model's draws, against
    100000 samples of the exact posterior (every imputation of the 14 hidden values enumerated). EM's expected counts
    taken as a Dirichlet miss by more than the tolerance allowed here."""
    rng = np.random.default_rng(0)
    theta_x, theta_y, _ = exact_posterior_samples(100_000, rng)
    reference = reference_answers(theta_x, theta_y, 2.0)
    got = model_answers(tiny_model, 2.0)
    em_x = dirichlet_rows(np.tile(tiny_model["X"].counts, (100_000, 1)), rng)
    em_y = dirichlet_rows(np.tile(tiny_model["Y"].counts, (100_000, 1, 1, 1)), rng)
    em = reference_answers(em_x, em_y, 2.0)
    misses = []
    for name, samples in reference.items():
        var = "X" if name == "X" else "Y"
        label = "x1" if var == "X" else "y1"
        sd = np.std(samples, ddof=1)
        low, high = np.quantile(samples, [0.05, 0.95])
        answer = got[name]
        assert answer.stddevs[var][label] == pytest.approx(sd, rel=0.08), name
        assert answer.intervals[var][label] == pytest.approx((low, high), abs=0.025), name
        misses.append(abs(np.std(em[name], ddof=1) / sd - 1))
    assert max(misses) > 0.15   # the expected counts are measurably off: the tolerances above can tell


def test_support_is_the_trials_behind_a_dirichlet_answer_of_seen_trials():
    """support: n trials seen outright (a row from Dirichlet(counts) with counts summing to n plus a prior worth
    nothing) give support n; a certain answer infinite support."""
    rng = np.random.default_rng(1)
    counts = np.array([12.0, 5.0, 3.0])      # 20 trials
    draws = dirichlet_rows(np.tile(counts, (400_000, 1)), rng).T
    mean, stddev, _ = spread(draws)
    assert support(mean, stddev) == pytest.approx(20.0, rel=0.02)
    assert support(np.array([1.0, 0.0]), np.array([0.0, 0.0])) == math.inf


# ------------------------------------------------------------------ learned models
@pytest.fixture(scope="module")
def montesano():
    truth = benchmark_network("montesano", 1.0, 3).replace_variables({"Action": {"sensor": None}})
    config = truth.replace_variables({v.name: {"cpt": None} for v in truth.variables})
    cases, _ = sample_cases(truth, 400, np.random.default_rng(3), labelled=("Action",))
    return truth, config, cases


def test_online_updates_count_every_case_in_every_draw_and_do_not_make_the_answers_surer(montesano):
    """After a learn on 100 cases and online updates with 300 more, every draw holds 400 cases' counts; the answers'
    standard deviations are no smaller (within 10 %) than a learn on all 400 gives: stale draws claim no more
    certainty than there is. The file keeps the draws and how many online updates they had."""
    truth, config, cases = montesano
    start = AffordanceLearner(structure="fixed").fit(config, cases.take(slice(0, 100))).model_
    online = OnlineEM(start, start_weight=100)
    for k in range(100, 400, 10):
        online.partial_fit(cases.take(slice(k, k + 10)))
    updated = online.model_
    assert updated.metadata["posterior"]["online_updates"] == 300
    for v in updated.variables:
        assert np.allclose(v.draws.reshape(len(v.draws), -1).sum(1), 400)
        assert np.array_equal(v.prior, start[v.name].prior)
    learned = AffordanceLearner(structure="fixed").fit(config, cases).model_
    values = {"Action": ["grasp", "tap", "touch"] * 4, "Shape": ["circle", "box"] * 6}
    ratio = [np.median(predict_batch(updated, [e], values=values).stddevs[e]
                       / predict_batch(learned, [e], values=values).stddevs[e]) for e in truth.group("effect")]
    assert min(ratio) > 0.9, ratio


def test_the_draws_round_trip_through_the_model_file_and_damaged_draws_are_a_model_format_error(montesano, tmp_path):
    _, config, cases = montesano
    model = AffordanceLearner(structure="fixed", posterior_draws=20).fit(config, cases.take(slice(0, 50))).model_
    model.save(tmp_path / "model.json")
    loaded = AffordanceNetwork.load(tmp_path / "model.json")
    assert has_draws(loaded) and loaded.metadata["posterior"]["draws"] == 20
    one = {"sensors": {"size": 4.0}, "values": {"Action": "tap"}}
    assert predict(loaded, ["effect"], **one) == predict(model, ["effect"], **one)
    doc = loaded.to_dict()
    size = doc["variables"][3]
    for change, message in (({"draws": []}, "S >= 1 draws"),
                            ({"draws": [[[-1, 0, 0]] * 1] * 20}, "expected [S, 3]"),
                            ({"prior": [1.0, 1.0]}, "'prior' has shape"),
                            ({"prior": None}, "give both 'draws' and 'prior'"),
                            ({"draws": [[-1.0, 2.0, 3.0]] * 20}, "finite and >= 0"),
                            ({"draws": size["draws"][:5]}, "differ in number")):
        broken = {**doc, "variables": [*doc["variables"][:3], {**size, **change}, *doc["variables"][4:]]}
        with pytest.raises(ModelFormatError, match=message.replace("[", r"\[")):
            AffordanceNetwork.from_dict(broken)
    without = {**doc, "variables": [{k: x for k, x in v.items() if k not in ("draws", "prior")}
                                    for v in doc["variables"]]}
    AffordanceNetwork.from_dict(without)          # (a model of a version before the draws)
    partly = {**doc, "variables": [without["variables"][0], *doc["variables"][1:]]}
    with pytest.raises(ModelFormatError, match=r"variables \['Action'\] have no 'draws'"):
        AffordanceNetwork.from_dict(partly)


def test_a_model_without_draws_answers_nan_and_the_strategies_that_need_them_say_so(montesano):
    _, config, cases = montesano
    model = AffordanceLearner(structure="fixed", posterior_draws=0).fit(config, cases.take(slice(0, 60))).model_
    assert not has_draws(model) and "posterior" not in model.metadata
    answer = predict(model, ["ObjVel"], values={"Action": "tap"})
    assert all(math.isnan(x) for x in answer.stddevs["ObjVel"].values()) and math.isnan(answer.support["ObjVel"])
    assert answer.to_dict()["stddevs"]["ObjVel"]["fast"] is None
    assert answer.to_dict()["intervals"]["ObjVel"]["fast"] == [None, None]
    batch = predict_batch(model, ["effect"], values={"Action": ["tap", "grasp"]})
    assert np.isnan(batch.intervals["Contact"]).all() and batch.intervals["Contact"].shape == (2, 2, 2)
    ranking = rank_actions(model, {"ObjVel": "fast"})
    assert ranking.strategy == "expected" and ranking.scores == ranking.probabilities
    assert all(math.isnan(x) for x in ranking.stddevs)
    for strategy in STRATEGIES[1:]:
        with pytest.raises(ModelFormatError, match=f"strategy '{strategy}' needs the posterior of the CPTs, and the "
                                                   "model has no posterior draws"):
            rank_actions(model, {"ObjVel": "fast"}, strategy=strategy)
    with pytest.raises(EvidenceError, match=r"unknown strategy 'optimist'.*did you mean 'optimistic'"):
        rank_actions(model, {"ObjVel": "fast"}, strategy="optimist")


def test_each_strategy_ranks_by_its_score_and_thompson_draws_reproducibly(montesano):
    _, config, cases = montesano
    model = AffordanceLearner(structure="fixed").fit(config, cases.take(slice(0, 80))).model_
    ask = dict(effects={"ObjVel": "fast"}, sensors={"size": 9.0, "shape": 0.5})
    rankings = {s: rank_actions(model, **ask, strategy=s, rng=1) for s in STRATEGIES}
    expected = rankings["expected"]
    by_action = {s: dict(zip(r.actions, zip(r.probabilities, r.intervals, r.scores))) for s, r in rankings.items()}
    for strategy, ranking in rankings.items():
        # (the actions tied within the draws' noise come first, in random order; the others by their score)
        assert ranking.strategy == strategy and (ranking.tied or ranking.scores == sorted(ranking.scores, reverse=True))
        assert set(ranking.actions) == set(expected.actions)
        for action, (p, (low, high), score) in by_action[strategy].items():
            assert 0.0 <= low <= high <= 1.0
            assert score == {"expected": p, "cautious": low}.get(strategy, score)
            assert strategy != "optimistic" or score >= low   # (its Gittins index, exactly: test_gittins.py)
            assert by_action["expected"][action][:2] == (p, (low, high))
    assert rank_actions(model, **ask, strategy="thompson", rng=5) == rank_actions(model, **ask, strategy="thompson",
                                                                                  rng=np.random.default_rng(5))
    draws = {tuple(rank_actions(model, **ask, strategy="thompson", rng=seed).scores) for seed in range(6)}
    assert len(draws) > 1   # a new draw each time


def test_actions_tied_at_the_top_come_in_random_order_and_say_so(montesano):
    """Shape does not cause HandVel: with a model whose HandVel has no parents every action ties; ties come in an
    order drawn by the rng, and tied is true only when the top ones tie."""
    _, config, cases = montesano
    fixed = config.with_structure({"HandVel": [], "ObjVel": ["Action"], "Contact": ["Action"]})
    model = AffordanceLearner(structure="fixed").fit(fixed, cases.take(slice(0, 100))).model_
    orders = {tuple(rank_actions(model, {"HandVel": "fast"}, rng=seed).actions) for seed in range(12)}
    assert len(orders) > 1 and all(rank_actions(model, {"HandVel": "fast"}, rng=s).tied for s in range(3))
    assert not rank_actions(model, {"ObjVel": "fast"}, rng=0).tied


def test_suggested_trials_say_how_sure_as_predict_does(montesano):
    """score_trials' effect standard deviations are those of the posterior draws, as predict_batch gives them for the
    same trials (before, the Dirichlet of the counts with the parents held fixed: 0.82-0.88 of the spread for an
    effect whose parent is an effect, ObjHandVel here)."""
    from affordance_ros.core.suggest import Candidate, score_trials

    _, config, cases = montesano
    model = AffordanceLearner(structure="fixed").fit(config, cases.take(slice(0, 150))).model_
    candidates = [Candidate(sensors={"size": 9.5, "shape": 0.3}), Candidate(values={"Shape": "box", "Size": "small"})]
    scores = score_trials(model, candidates)
    actions = model["Action"].values
    values = {"Action": list(actions) * 2, "Shape": [None] * 3 + ["box"] * 3, "Size": [None] * 3 + ["small"] * 3}
    sensors = {"size": [9.5] * 3 + [None] * 3, "shape": [0.3] * 3 + [None] * 3}
    for name in model.group("effect"):
        np.testing.assert_allclose(scores.effect_stddevs[name], predict_batch(model, [name], sensors, values)
                                   .stddevs[name], rtol=1e-9)
