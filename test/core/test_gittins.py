"""The optimistic strategy's Gittins index (``core.predict.gittins_index``, Brezzi & Lai's closed form) against the
exact index of a Beta(a, b) arm, computed here by calibration: backward induction over the Beta posteriors to come,
against a known arm paying ``lam`` a trial, bisected on ``lam`` until trying the arm and retiring are worth the same."""

import importlib

import numpy as np
import pytest

from affordance_ros.core import AffordanceLearner, AffordanceNetwork, CaseSet, SensorModel, Variable, rank_actions
from affordance_ros.core.predict import OPTIMISTIC_HORIZON, gittins_index

predict_module = importlib.import_module("affordance_ros.core.predict")   # (core's ``predict`` is the function)


def exact_gittins_index(a: int, b: int, horizon: float, depth: int = 1500, tol: float = 1e-5) -> float:
    """The Gittins index of a Bernoulli arm with a Beta(a, b) posterior, discount 1 - 1 / horizon; beyond ``depth``
    more trials the arm's value is taken as if its mean were known (gamma^depth < 1e-3 at horizon 200)."""
    gamma = 1.0 - 1.0 / horizon

    def worth_trying(lam: float) -> bool:
        retire = lam / (1.0 - gamma)
        mean = (a + np.arange(depth + 1)) / (a + b + depth)
        value = np.maximum(retire, mean / (1.0 - gamma))
        for d in range(depth - 1, -1, -1):      # the posteriors after d more trials: Beta(a + i, b + d - i)
            mean = (a + np.arange(d + 1)) / (a + b + d)
            value = mean + gamma * (mean * value[1:] + (1.0 - mean) * value[:-1])
            if d:
                value = np.maximum(retire, value)
        return bool(value[0] > retire)

    low, high = a / (a + b), 1.0
    while high - low > tol:
        middle = (low + high) / 2.0
        low, high = (middle, high) if worth_trying(middle) else (low, middle)
    return (low + high) / 2.0


def beta_spread(a: int, b: int) -> tuple[float, float]:
    mean = a / (a + b)
    return mean, float(np.sqrt(mean * (1.0 - mean) / (a + b + 1)))


def test_the_exact_index_matches_gittins_tables():
    """The calibration above against the tabulated index of a uniform prior (Gittins, Glazebrook & Weber 2011):
    0.7029 at discount 0.9, 0.8699 at 0.99."""
    assert exact_gittins_index(1, 1, horizon=10, depth=300) == pytest.approx(0.7029, abs=2e-4)
    assert exact_gittins_index(1, 1, horizon=100, depth=1500) == pytest.approx(0.8699, abs=2e-4)


@pytest.mark.parametrize("a, b, tolerance", [
    (1, 1, 0.12), (2, 1, 0.12), (1, 5, 0.12), (3, 3, 0.12), (2, 8, 0.12), (8, 2, 0.12),
    (7, 13, 0.075), (10, 10, 0.075), (15, 5, 0.075), (14, 26, 0.04), (50, 50, 0.02), (20, 180, 0.02)])
def test_the_closed_form_is_near_the_exact_index_at_horizon_200(a, b, tolerance):
    """As docs/benchmarks/decisions.md says: within 0.12 from the first trial,
    0.075 from a + b = 20, 0.04 from 40, 0.02 from 100; and above the mean, less so the more trials are behind it."""
    mean, stddev = beta_spread(a, b)
    closed = float(gittins_index(mean, stddev, OPTIMISTIC_HORIZON))
    exact = exact_gittins_index(a, b, OPTIMISTIC_HORIZON)
    assert abs(closed - exact) <= tolerance, (closed, exact)
    assert closed > mean and exact > mean
    more = beta_spread(10 * a, 10 * b)
    assert float(gittins_index(*more)) - more[0] < closed - mean


def test_a_probability_known_exactly_scores_its_mean():
    mean = np.array([0.0, 0.3, 1.0, 0.5])
    np.testing.assert_array_equal(gittins_index(mean, np.zeros(4)), mean)


def two_action_model(tried: dict) -> AffordanceNetwork:
    """Action -> Outcome, learned from ``tried``: action -> (trials, successes); the outcome seen through a sensor
    whose readings leave no doubt."""
    config = AffordanceNetwork([
        Variable("Action", "action", tuple(tried), (), None, None),
        Variable("Outcome", "effect", ("fail", "success"), ("Action",),
                 SensorModel("outcome", np.array([0.0, 5.0]), np.array([0.3, 0.3])), None)])
    actions, readings = [], []
    for action, (trials, successes) in tried.items():
        actions += [action] * trials
        readings += [5.0] * successes + [0.0] * (trials - successes)
    columns = {"Action": actions, "outcome": readings}
    cases = CaseSet.from_columns(config, columns, [str(k) for k in range(len(actions))])
    return AffordanceLearner(structure="fixed", seed=3, posterior_draws=200).fit(config, cases).model_


def test_optimistic_tries_an_action_barely_tried_before_one_known_slightly_better():
    """push: 300 trials, 60 % success; lift: 2 trials, 1 success. Expected takes push, optimistic lift (it might be
    far better); once lift has 300 trials behind it at 55 %, optimistic takes push too."""
    barely = two_action_model({"push": (300, 180), "lift": (2, 1)})
    assert rank_actions(barely, {"Outcome": "success"}).actions[0] == "push"
    ranking = rank_actions(barely, {"Outcome": "success"}, strategy="optimistic", rng=0)
    assert ranking.actions == ["lift", "push"] and not ranking.tied
    probability = dict(zip(ranking.actions, ranking.probabilities))
    assert probability["lift"] < probability["push"]
    known = two_action_model({"push": (300, 180), "lift": (300, 165)})
    assert rank_actions(known, {"Outcome": "success"}, strategy="optimistic", rng=0).actions == ["push", "lift"]


def test_optimistic_scores_are_the_gittins_index_of_the_draws_mean_and_stddev(monkeypatch):
    """rank_actions' optimistic scores: gittins_index of the mean and standard deviation of the posterior draws
    (caught as core.predict's spread returns them)."""
    model = two_action_model({"push": (40, 25), "lift": (6, 3)})
    spreads, spread = [], predict_module.spread

    def caught(draws, *args, **kwargs):
        spreads.append(spread(draws, *args, **kwargs))
        return spreads[-1]

    monkeypatch.setattr(predict_module, "spread", caught)
    ranking = rank_actions(model, {"Outcome": "success"}, strategy="optimistic", rng=0)
    (mean, stddev, _) = spreads[0]     # (the first: the draws' own; the tie rule's batches follow)
    monkeypatch.undo()
    order = [["push", "lift"].index(a) for a in ranking.actions]
    np.testing.assert_allclose(ranking.scores, gittins_index(mean, stddev)[order], rtol=1e-12)
