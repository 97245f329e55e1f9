"""The scenario bench's comparison with a reference run (affordance_ros_bench.compare): a figure of ours that got
worse on every data set by more than its spread is shown, one that moved either way by chance is not, nor one
that got better; a figure the run lost is shown; runs of other sizes are not compared."""

import math

import pytest

compare = pytest.importorskip("affordance_ros_bench.compare")

SIZES = {"repeats": 3, "folds": 3, "objects_left_out": 3, "montesano_trials": 300, "transfer_repeats": 10}


def results(figures: dict, seeds=(0, 1, 2), sizes=None) -> dict:
    """A scenario_results.json's content: ``figures`` {(setting, figure): ours on every seed}, with a baseline."""
    out = {"seeds": {}, "sizes": dict(sizes or SIZES), "results": {}}
    for (setting, figure), values in figures.items():
        out["results"].setdefault(setting, {})[figure] = [{"ours": v, "majority": 0.5} for v in values]
        out["seeds"][setting] = list(seeds)
    return out


REFERENCE = {("hands 10-fold", "Action accuracy"): [0.94, 0.95, 0.93],
             ("hands 10-fold", "Action log_loss"): [0.20, 0.19, 0.21],
             ("hands 10-fold", "Effect log_density"): [-4.60, -4.70, -4.50],
             ("transfer learn on hands, test on tools", "Action accuracy"): [0.87, 0.88, 0.86],
             ("tools 10-fold", "Effect rmse_dx"): [3.40, 3.50, 3.30]}


def changed(**moves) -> dict:
    """The reference with some figures' per-seed values replaced: moves {short name: values}."""
    names = {"accuracy": ("hands 10-fold", "Action accuracy"), "log_loss": ("hands 10-fold", "Action log_loss"),
             "density": ("hands 10-fold", "Effect log_density"),
             "transfer": ("transfer learn on hands, test on tools", "Action accuracy"),
             "rmse_dx": ("tools 10-fold", "Effect rmse_dx")}
    return {key: moves.get(next((n for n, k in names.items() if k == key), ""), values)
            for key, values in REFERENCE.items()}


def worse_figures(run: dict) -> list:
    return [(c.setting, c.figure) for c in compare.figure_changes(run, results(REFERENCE)) if c.worse]


def test_the_same_run_has_nothing_worse():
    assert worse_figures(results(REFERENCE)) == []


def test_a_figure_worse_on_every_data_set_is_shown_whichever_way_is_worse():
    run = results(changed(log_loss=[0.22, 0.21, 0.235], density=[-4.75, -4.86, -4.64], rmse_dx=[3.45, 3.56, 3.34]))
    assert worse_figures(run) == [("hands 10-fold", "Action log_loss"), ("hands 10-fold", "Effect log_density"),
                                  ("tools 10-fold", "Effect rmse_dx")]


def test_a_trade_shows_the_use_that_lost_and_the_one_that_gained():
    """The transfer's accuracy up on every data set, the hand postures' down on every one: the one is worse beyond
    its noise, the other better (the lines say both)."""
    run = results(changed(transfer=[0.92, 0.93, 0.91], accuracy=[0.92, 0.935, 0.915]))
    changes = compare.figure_changes(run, results(REFERENCE))
    lines, worse = compare.report(changes, "docs/bench/scenario_quick_results.json")
    assert worse and lines[0].endswith("5 figures of ours, 1 worse beyond their noise, 1 better beyond it")
    assert lines[1].startswith("  worse: hands 10-fold: Action accuracy 0.9400 -> 0.9233")
    assert lines[2].startswith("  better: transfer learn on hands, test on tools: Action accuracy 0.8700 -> 0.9200")


def test_a_move_within_the_noise_of_the_data_sets_is_not_worse():
    """Worse on two data sets, better on the third, the mean worse by less than 2.92 standard errors (t, 2 degrees
    of freedom, one-sided 5 %)."""
    run = results(changed(accuracy=[0.93, 0.96, 0.925]))
    change = next(c for c in compare.figure_changes(run, results(REFERENCE)) if c.figure == "Action accuracy"
                  and c.setting == "hands 10-fold")
    assert change.worse_by > 0 and not change.worse


def test_floating_point_differences_are_no_difference():
    run = results(changed(accuracy=[0.94 - 1e-12, 0.95 - 1e-12, 0.93 - 1e-12]))
    assert worse_figures(run) == []


def test_a_figure_the_run_lost_is_shown():
    run = results(changed())
    del run["results"]["tools 10-fold"], run["seeds"]["tools 10-fold"]
    change = [c for c in compare.figure_changes(run, results(REFERENCE)) if c.worse]
    assert [(c.setting, c.figure) for c in change] == [("tools 10-fold", "Effect rmse_dx")]
    assert math.isnan(change[0].run) and change[0].line() == "tools 10-fold: Effect rmse_dx 3.4000, not in the run"


def test_one_data_set_shows_every_worsening_beyond_the_tolerance():
    run = results({key: values[:1] for key, values in changed(density=[-4.61, -4.7, -4.5]).items()}, seeds=(0,))
    changes = compare.figure_changes(run, results(REFERENCE))
    assert [c.figure for c in changes if c.worse] == ["Effect log_density"]
    assert "one data set: no noise to measure" in next(c.line() for c in changes if c.worse)


def test_runs_of_other_sizes_or_data_sets_are_not_compared():
    with pytest.raises(ValueError, match="not of the same size"):
        compare.figure_changes(results(REFERENCE, sizes={**SIZES, "repeats": 10}), results(REFERENCE))
    with pytest.raises(ValueError, match="no data set of 'hands 10-fold' in common"):
        compare.figure_changes(results(REFERENCE, seeds=(5, 6, 7)), results(REFERENCE))
