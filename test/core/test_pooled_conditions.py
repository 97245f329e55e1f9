"""Conditions that borrow strength (core/conditions.py): the pooled centres are the random-effects posterior
mean, they recover known condition means better than the cell means with few trials per cell, a condition
never seen is predicted from its coarser ones, terms that do not help are dropped (fewer values), a
condition of few entities is less certain than its trials say, and a reading beyond the training range goes
to the condition it lies towards."""

import itertools

import numpy as np
import pytest

from affordance_ros.core import AffordanceLearner, AffordanceNetwork, predict
from affordance_ros.core.conditions import (
    ENTITY_SHARES,
    MAX_SWEEPS,
    START_STRENGTH,
    STRENGTHS,
    FoldErrors,
    PooledCentres,
    all_terms,
    centre_uncertainty,
    choose_strengths,
    condition_spreads,
    distinct_conditions,
    entities_per_group,
    entity_folds,
    estimated_entity_share,
    fit_conditional_sensor,
    fold_splits,
    group_centres,
    own_condition_prior,
    own_condition_support,
)
from affordance_ros.core.evaluation import evaluate, transfer_indices
from affordance_ros.core.gaussian import log_density
from affordance_ros.core.scenarios import scenario_cases, simulate
from affordance_ros.core.sensors import condition_columns
from affordance_ros.share import share_directory

CARDS = (4, 3, 2)     # action, hand, object


def additive_data(rng, trials: int, noise: float = 2.0, skip=None):
    """Readings (n, 2) of every condition of CARDS, ``trials`` each: a centre that is the action's effect plus
    the hand's within the action plus the object's within the action, plus a small interaction; and the true
    centres of every condition (G, 2). ``skip``: a condition (codes) without trials."""
    action = rng.normal(0.0, 6.0, (4, 2))
    hand = rng.normal(0.0, 2.0, (4, 3, 2))
    thing = rng.normal(0.0, 2.0, (4, 2, 2))
    interaction = rng.normal(0.0, 0.3, (*CARDS, 2))
    grid = np.array(list(itertools.product(*(range(c) for c in CARDS))))
    truth = action[grid[:, 0]] + hand[grid[:, 0], grid[:, 1]] + thing[grid[:, 0], grid[:, 2]] + interaction[
        grid[:, 0], grid[:, 1], grid[:, 2]]
    rows = np.array([g for g in grid for _ in range(trials) if skip is None or tuple(g) != tuple(skip)])
    index = np.ravel_multi_index(rows.T, CARDS)
    return rows, truth[index] + rng.normal(0.0, noise, (len(rows), 2)), truth


def test_pooled_centres_are_the_random_effects_posterior_mean():
    """Against the mixed model written out: centre = grand mean + one effect per term and level, each effect's
    variance a trial's over the term's strength, a condition's observed centre as precise as its trials; the
    posterior mean with a flat grand mean solves the penalised least squares below."""
    rng = np.random.default_rng(0)
    grid = np.array(list(itertools.product(*(range(c) for c in CARDS))))
    seen = grid[rng.random(len(grid)) < 0.7]
    centres, counts = rng.normal(0.0, 5.0, (len(seen), 2)), rng.integers(1, 12, len(seen)).astype(float)
    terms = all_terms(3)
    strengths = [0.5, 2.0, np.inf, 1.0, 8.0, np.inf, 4.0]
    pooled = PooledCentres.fit(seen, centres, 1.0 / counts, terms, strengths)

    def design(conditions):
        blocks = []
        for term in terms:
            levels = np.array(list(itertools.product(*(range(CARDS[j]) for j in term))))
            blocks.append(np.all(conditions[:, None, list(term)] == levels[None], axis=2).astype(float))
        return np.hstack([np.ones((len(conditions), 1)), *blocks])

    penalty = np.concatenate([[0.0], *[np.full(np.prod([CARDS[j] for j in t]), s) for t, s in zip(terms, strengths)]])
    kept = np.isfinite(penalty)
    x = design(seen)[:, kept]
    beta = np.linalg.solve(x.T @ (counts[:, None] * x) + np.diag(penalty[kept]), x.T @ (counts[:, None] * centres))
    np.testing.assert_allclose(pooled.predict(grid), design(grid)[:, kept] @ beta, atol=1e-8)
    assert pooled.variables() == (0, 1, 2)
    # one term: each centre its own shrunk towards the mean by n / (n + strength)
    alone = PooledCentres.fit(np.arange(3)[:, None], np.array([[0.0], [3.0], [9.0]]), np.array([1 / 4, 1 / 4, 1 / 4]),
                              [(0,)], [2.0])
    np.testing.assert_allclose(alone.predict(np.arange(3)[:, None])[:, 0], 4.0 + 4 / 6 * np.array([-4.0, -1.0, 5.0]))


def test_shrinkage_recovers_known_condition_means_better_than_the_cell_mean():
    """24 conditions of three trials each, Gaussian noise, effects that share structure: over 20 data sets the
    pooled centres are nearer the true centres than the cell means (the mean of a condition's own trials)."""
    pooled, cell = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        rows, x, truth = additive_data(rng, trials=3)
        fit = fit_conditional_sensor(x, rows, CARDS, rng)
        grid = np.array(list(itertools.product(*(range(c) for c in CARDS))))
        kept = list(fit.variables)
        index = np.ravel_multi_index(grid[:, kept].T, [CARDS[j] for j in kept]) if kept else np.zeros(len(grid), int)
        seen, means, _, _ = group_centres(x, rows, 0.0)
        assert len(seen) == len(grid)
        pooled.append(np.sqrt(np.mean(np.sum((fit.means[index] - truth) ** 2, axis=1))))
        cell.append(np.sqrt(np.mean(np.sum((means - truth) ** 2, axis=1))))
    pooled, cell = np.array(pooled), np.array(cell)
    assert pooled.mean() < 0.9 * cell.mean() and np.mean(pooled < cell) >= 0.9


def _hands_truth() -> tuple[dict, np.ndarray]:
    big = simulate("hands_shared", 2000, seed=99)
    keys = np.array(list(zip(big["Action"], big["Hand"], big["Object"])), dtype=object)
    y = np.stack([big["dx"], big["dy"]], axis=1)
    return {tuple(k): y[np.all(keys == k, axis=1)].mean(axis=0) for k in {tuple(k) for k in keys}}


def test_on_the_hand_postures_with_shared_structure_pooling_beats_the_conditions_own_centres():
    """Ten trials a condition, heavy tails, outliers: on six data sets the pooled centres are nearer the
    simulator's expectations than each condition's own robust centre (no pooling) and than its plain mean."""
    config = AffordanceNetwork.load(share_directory() / "config" / "hands.json")
    truth = _hands_truth()
    names = ("Action", "Hand", "Object")
    cards = [config[n].card for n in names]
    errors = []
    for seed in range(6):
        cases = scenario_cases(config, simulate("hands_shared", 10, seed))
        rows = condition_columns(config, names, cases.readings, cases.labels)
        x = np.stack([cases.readings["dx"], cases.readings["dy"]], axis=1)
        fit = fit_conditional_sensor(x, rows, cards, np.random.default_rng(seed))
        seen, own, _, _ = group_centres(x, rows, fit.trim)
        _, plain, _, _ = group_centres(x, rows, 0.0)
        true = np.array([truth[tuple(config[n].values[c] for n, c in zip(names, row))] for row in seen])
        kept = list(fit.variables)
        pooled = fit.means[np.ravel_multi_index(seen[:, kept].T, [cards[j] for j in kept])]
        errors.append([np.sqrt(np.mean(np.sum((a - true) ** 2, axis=1))) for a in (pooled, own, plain)])
    pooled, own, plain = np.array(errors).mean(axis=0)
    assert pooled < 0.9 * own and pooled < 0.6 * plain


def test_a_condition_never_seen_is_predicted_from_its_coarser_conditions():
    """20 data sets, each without any trial of one condition: its values are there all the same, their centre
    from its action's hand and its action's object, on average far nearer the truth than its action's mean."""
    errors = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        skip = tuple(int(rng.integers(c)) for c in CARDS)
        rows, x, truth = additive_data(rng, trials=6, skip=skip)
        fit = fit_conditional_sensor(x, rows, CARDS, rng)
        assert fit.variables == (0, 1, 2) and len(fit.means) == 2 * 24      # every combination has values
        missing = np.ravel_multi_index(skip, CARDS)
        errors.append([np.linalg.norm(fit.means[missing] - truth[missing]),
                       np.linalg.norm(x[rows[:, 0] == skip[0]].mean(axis=0) - truth[missing])])
    ours, action = np.array(errors).T
    assert ours.mean() < 0.7 * action.mean() and np.mean(ours < action) >= 0.75


def test_a_variable_that_does_not_matter_is_dropped_and_its_conditions_merged():
    rng = np.random.default_rng(5)
    rows, x, _ = additive_data(rng, trials=8, noise=2.0)
    x = x - np.array([np.mean(x[(rows[:, 0] == a) & (rows[:, 1] == h) & (rows[:, 2] == o)], axis=0) for a, h, o in
                      rows]) + np.array([np.mean(x[(rows[:, 0] == a) & (rows[:, 1] == h)], axis=0) for a, h, _ in rows])
    fit = fit_conditional_sensor(x, rows, CARDS, rng)      # the object's conditions all have their hand's centre
    assert fit.variables == (0, 1) and fit.means.shape == (2 * 12, 2)
    assert all(np.isinf(s) for term, s in fit.strengths.items() if 2 in term)


def entity_data(rng, sizes, entity_sd: float, trials: int = 60, noise: float = 0.3):
    """Readings of objects in groups of ``sizes`` objects: the group's centre, the object's own deviation
    (``entity_sd``), a trial's noise; (readings, group of each, object of each)."""
    groups = np.repeat(np.arange(len(sizes)), sizes)
    objects = np.repeat(np.arange(len(groups)), trials)
    centres = rng.normal(0.0, 2.0, (len(sizes), 2))
    offsets = rng.normal(0.0, entity_sd, (len(groups), 2))
    return centres[groups[objects]] + offsets[objects] + rng.normal(0.0, noise, (len(objects), 2)), \
        groups[objects], objects


def test_a_condition_of_few_entities_is_less_certain_than_its_trials_say():
    """Objects deviate from their group's centre far more than their trials from them (an entity share of
    (3 / 0.3)^2 = 100): the share is estimated and chosen well above none, and a group of two objects (120
    trials) is pulled towards the others more than a group of ten; without such deviations, no share."""
    np.testing.assert_allclose(centre_uncertainty(np.array([30.0, 240.0]), np.array([1, 8]), 0.5),
                               [1 / 30 + 0.5, 1 / 240 + 0.5 / 8])
    rng = np.random.default_rng(1)
    x, group, objects = entity_data(rng, [2, 2, 2, 10, 10], entity_sd=3.0)
    assert 30 < estimated_entity_share(x, group, objects) < 300
    fit = fit_conditional_sensor(x, group[:, None], [5], rng, groups=objects)
    assert fit.entity_share >= 1.0
    plain = np.array([x[group == g].mean(axis=0) for g in range(5)])
    moved = np.linalg.norm(fit.means[:5] - plain, axis=1) / np.linalg.norm(plain - fit.means[:5].mean(0), axis=1)
    assert moved[:3].min() > 1.5 * moved[3:].max()
    x, group, objects = entity_data(rng, [2, 2, 2, 10, 10], entity_sd=0.0)
    assert estimated_entity_share(x, group, objects) < 0.05
    assert fit_conditional_sensor(x, group[:, None], [5], rng, groups=objects).entity_share <= 0.1


def test_spreads_of_their_own_where_trials_say_so_under_one_wide_value():
    rng = np.random.default_rng(11)
    which = np.repeat([0, 1, 2, 3], [200, 200, 4, 200])
    scale = np.array([1.0, 3.0, 3.0, 8.0])[which]
    residuals = rng.normal(0.0, 1.0, (len(which), 2)) * scale[:, None]
    folds = rng.permutation(len(which)) % 5
    variances, wide = condition_spreads(residuals, which, 5, folds)
    np.testing.assert_allclose(np.sqrt(variances[:2, 0]), [1.0, 3.0], rtol=0.2)   # many trials: their own
    pooled = np.sqrt(variances[4, 0])                                             # no trials: the pooled one
    own = 1.4826 * np.median(np.abs(residuals[which == 2, 0]))                  # four trials: between the two
    assert 1.0 < pooled < 3.0 and min(own, pooled) < np.sqrt(variances[2, 0]) < max(own, pooled)
    np.testing.assert_allclose(wide, 4.0 * variances[4])                          # one wide value, 4 x the pooled
    np.testing.assert_allclose(variances[3], wide)                                # no core broader than it


def test_a_reading_beyond_the_training_range_goes_to_the_condition_it_lies_towards():
    """Draws that move an object 5 cm give or take 1, pushes 8 cm give or take 3: a draw of 20 cm (a tool's,
    longer than the hands that taught the model) is a draw. With wide values of each condition's own (before)
    the pushes' broader one explained it: a draw taken for a push."""
    rng = np.random.default_rng(3)
    which = np.repeat([0, 1], 60)
    noise = np.where(which == 0, 1.0, 3.0)[:, None] * rng.normal(0.0, 1.0, (len(which), 2))
    x = np.where(which[:, None] == 0, [0.0, -5.0], [0.0, 8.0]) + noise
    fit = fit_conditional_sensor(x, which[:, None], [2], rng)
    assert fit.covariances[0, 1, 1] < fit.covariances[1, 1, 1]                    # the draws' core narrower
    np.testing.assert_allclose(fit.covariances[2], fit.covariances[3])            # one wide value
    components = log_density(np.array([[0.0, -20.0], [3.0, -16.0]]), fit.means, fit.covariances)   # (2, 4)
    condition = np.logaddexp(np.log(0.9) + components[:, :2], np.log(0.1) + components[:, 2:])
    assert np.all(condition[:, 0] > condition[:, 1] + 5.0)


def test_learned_on_hands_the_tools_actions_are_told_by_their_direction():
    """The transfer scenario (tools longer than any hand, moving objects two to three times as far), one data
    set: learned on the hand postures, the tools' actions are recognised from their displacements (accuracy
    94.6 %, log-loss 0.22; with wide values of each condition's own 80.8 % and 0.61: the tools' far draws and
    taps went to the broadest conditions)."""
    config = AffordanceNetwork.load(share_directory() / "config" / "transfer.json")
    cases = scenario_cases(config, simulate("transfer", 10, 2), extra=("manipulator_id", "kind"))
    result = evaluate(config, cases, lambda cfg, train: AffordanceLearner().fit(cfg, train).model_,
                      transfer_indices(cases.extra["kind"], "hand"), ["Action"], baselines={})
    metrics = result.targets[0].metrics["ours"]
    assert metrics["cases"] == 240 and metrics["accuracy"] > 0.9 and metrics["log_loss"] < 0.35


def test_each_cpt_row_points_at_its_own_condition():
    prior = own_condition_prior([4, 3, 2], [0, 1, 2], [4, 3, 2], 1.0)
    assert prior.shape == (4, 3, 2, 48)
    own = np.ravel_multi_index((2, 1, 0), (4, 3, 2))
    np.testing.assert_allclose(prior[2, 1, 0, [own, own + 24]], [0.9, 0.1])
    assert prior[2, 1, 0].sum() == pytest.approx(1.0)
    # the object not a parent: a row is every object's condition alike
    rows = own_condition_prior([4, 3], [0, 1, None], [4, 3, 2], 1.0)
    np.testing.assert_allclose(rows[2, 1, [own, own + 1]], [0.45, 0.45])


def test_each_cpt_row_may_be_non_zero_on_its_own_core_and_every_wide_value():
    support = own_condition_support([4, 3, 2], [0, 1, 2], [4, 3, 2])
    assert support.shape == (4, 3, 2, 48) and support.dtype == bool
    own = np.ravel_multi_index((2, 1, 0), (4, 3, 2))
    assert np.flatnonzero(support[2, 1, 0, :24]).tolist() == [own] and support[..., 24:].all()
    # the object not a parent: both objects' conditions of the row's action and hand
    rows = own_condition_support([4, 3], [0, 1, None], [4, 3, 2])
    assert np.flatnonzero(rows[2, 1, :24]).tolist() == [own, own + 1] and rows[..., 24:].all()


def test_learned_rows_keep_their_mass_on_their_own_condition_and_predict_near_its_centre():
    """Where an object's mobility is its own (tools_unseen), trials of very mobile objects lie far out in their
    condition's tail, nearer another condition's core; EM must not move the row's mass there (structural
    zeros): no row puts anything on another condition's core, every row keeps most of its mass on its own
    condition's values (the rest on the broad wide values that take the outliers), and the predicted
    displacement stays near the condition's pooled centre (before: 3-22 % of a row on other cores, 71 % its
    own at least, the prediction pulled to the middle by 5 % of the centre's distance on average)."""
    config = AffordanceNetwork.load(share_directory() / "config" / "tools.json")
    model = AffordanceLearner().fit(config, scenario_cases(config, simulate("tools_unseen", 10, seed=0),
                                                           extra=("object_id",))).model_
    effect = model["Effect"]
    kept = list(effect.sensor.cluster_by)
    assert set(kept) <= set(effect.parents)
    cards = [model[n].card for n in kept]
    rows, n_conditions = effect.cpt.reshape(-1, effect.card), effect.card // 2
    configurations = np.indices([model[p].card for p in effect.parents]).reshape(len(effect.parents), -1).T
    drifts, centres = [], []
    for row, codes in zip(rows, configurations):
        own = np.ravel_multi_index([codes[effect.parents.index(n)] for n in kept], cards)
        assert row[:n_conditions].sum() - row[own] == 0.0
        assert row[own] + row[own + n_conditions] > 0.85
        answer = predict(model, ["Effect"], values={p: model[p].values[c] for p, c in zip(effect.parents, codes)})
        predicted = np.array([answer.readings["dx"]["mean"], answer.readings["dy"]["mean"]])
        drifts.append(np.linalg.norm(predicted - effect.sensor.means[own]))
        centres.append(np.linalg.norm(effect.sensor.means[own]))
    assert np.mean(drifts) < 0.04 * np.mean(centres)


def test_a_learned_model_predicts_an_unseen_condition_from_its_coarser_ones():
    """The hand postures without any trial of (pull, bent, ball): the model still predicts that condition's
    displacement near the simulator's expectation (its CPT row points at its own values, whose centre the
    pooling predicted), far nearer than the mean of all conditions."""
    config = AffordanceNetwork.load(share_directory() / "config" / "hands.json")
    columns = simulate("hands_shared", 10, seed=4)
    keep = [k for k, key in enumerate(zip(columns["Action"], columns["Hand"], columns["Object"]))
            if key != ("pull", "bent", "ball")]
    columns = {name: [column[k] for k in keep] for name, column in columns.items()}
    model = AffordanceLearner().fit(config, scenario_cases(config, columns)).model_
    answer = predict(model, ["Effect"], values={"Action": "pull", "Hand": "bent", "Object": "ball"})
    predicted = np.array([answer.readings["dx"]["mean"], answer.readings["dy"]["mean"]])
    true = _hands_truth()[("pull", "bent", "ball")]
    overall = np.array([np.mean(columns["dx"]), np.mean(columns["dy"])])
    assert np.linalg.norm(predicted - true) < 3.0 and np.linalg.norm(predicted - true) < 0.3 * np.linalg.norm(
        overall - true)


def _slow_fold_errors(x, conditions, folds, trim, terms, entity, strengths, share):
    """The held-out squared error of every fold, one ``PooledCentres.fit`` per fold (the form before batching)."""
    out = []
    for train, test in fold_splits(folds):
        seen, centres, counts, which = group_centres(x[train], conditions[train], trim)
        entities = None if entity is None else entities_per_group(which, entity[train], len(seen))
        pooled = PooledCentres.fit(seen, centres, centre_uncertainty(counts, entities, share), terms, strengths)
        out.append(np.sum((x[test] - pooled.predict(conditions[test])) ** 2))
    return np.array(out)


def _slow_strengths(x, conditions, folds, trim, terms, entity):
    """``choose_strengths``' coordinate descent, every choice's error by ``_slow_fold_errors``."""
    grids = [STRENGTHS] * len(terms) + [ENTITY_SHARES if entity is not None else ENTITY_SHARES[:1]]
    share = 0.0 if entity is None else estimated_entity_share(x, distinct_conditions(conditions)[1], entity)
    at = [STRENGTHS.index(START_STRENGTH)] * len(terms) + [
        int(np.argmin(np.abs(np.log1p(np.array(ENTITY_SHARES)) - np.log1p(share))))]

    def cost(p):
        return _slow_fold_errors(x, conditions, folds, trim, terms, entity, [STRENGTHS[i] for i in p[:-1]],
                                 ENTITY_SHARES[p[-1]]).sum()

    for _ in range(MAX_SWEEPS):
        changed = False
        for t, grid in enumerate(grids):
            best = min(([*at[:t], i, *at[t + 1:]] for i in range(len(grid))), key=cost)
            if cost(best) < cost(at) - 1e-9 * abs(cost(at)):
                at, changed = best, True
        if not changed:
            break
    return tuple(STRENGTHS[i] for i in at[:-1]), ENTITY_SHARES[at[-1]]


@pytest.mark.parametrize("with_entities", [True, False])
def test_the_batched_cross_validation_of_the_strengths_equals_one_fit_per_fold(with_entities):
    """The strengths' cross-validation solves every fold and every choice of a coordinate in one batched call
    (folds padded to the most conditions): the same errors as one ``PooledCentres.fit`` per fold, and the same
    choice of strengths and entity share."""
    rng = np.random.default_rng(5)
    rows, x, _ = additive_data(rng, 4)
    keep = rng.random(len(rows)) < 0.8                     # folds with different conditions seen and asked
    rows, x = rows[keep], x[keep]
    entity = rows[:, 2] * 3 + rng.integers(0, 3, len(rows)) if with_entities else None
    folds = np.stack([entity_folds(len(x), entity, np.random.default_rng(r)) for r in range(3)])
    terms = all_terms(3)
    errors = FoldErrors(x, rows, folds, 0.1, terms, entity)
    choices = [[4.0] * 7, [0.25, 1.0, 64.0, 2.0, np.inf, 8.0, 16.0], [np.inf] * 6 + [0.5]]
    shares = [0.0, 0.3, 3.0]
    batched = errors.per_fold_of_many(choices, shares)
    for got, strengths, share in zip(batched, choices, shares):
        np.testing.assert_allclose(got, _slow_fold_errors(x, rows, folds, 0.1, terms, entity, strengths,
                                                          share if with_entities else 0.0), rtol=1e-9)
    assert choose_strengths(x, rows, folds, 0.1, terms, entity) == _slow_strengths(x, rows, folds, 0.1, terms, entity)
