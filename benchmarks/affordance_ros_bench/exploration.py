"""Active exploration against random and round-robin trials: learning curves, and the time of a ranking.

    affordance-ros-bench exploration [--quick] [--reps N] [--jobs N] [--out DIR]

Two worlds (``core.worlds``): the montesano ground truth (a new one per seed; learned with its structure
fixed and its sensors known: the CPTs are learned) and the tools scenario (config/tools.json and its learning
block: sensors, effects per condition, structure and CPTs learned). A run does up to 400 trials, one at a
time. Before each the robot sees ``CANDIDATES`` objects as the world brings them, and picks the trial:

- active: ``core.suggest.suggest_trials`` by ``predictive_information`` (EPIG) on the current model, about the
  effects of the ``TARGETS`` objects the robot saw last; before the first model, the learner node's round robin
  over (action, candidate);
- parameter gain: the same by ``information_gain`` (about the CPT parameters);
- random: a random action on the first candidate (the objects come at random);
- round robin: every (action, kind of object) of the world in turn, in an order drawn per seed, the object
  fetched whatever the candidates (a systematic design an experimenter sets up by hand).

Learning in the loop, as the learner node does with ``online_learning`` and a ``~/learn`` every 25 trials:
a learn from every trial so far after each 25 trials, and online EM (``core.online``) after every trial in
between. At 25, 50, 100, 150, ..., 400 trials the model just learned is scored on two sets of 1000 held-out
trials, every action as likely: objects as they come, and every kind of object alike (the same for the tools
scenario, whose kinds come alike): the held-out predictive log-density of the effects, log p(effect readings |
action, object readings), and the RMSE of the effect readings it predicts.

On montesano, ``allocation_bound`` says how far any choice of trials could take the CPTs: an oracle that knows
how often the held-out trials use each CPT row and gives the rows the trials that lower the expected held-out
log-loss most, against random trials, from the expected excess log-loss of a row after n trials.
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from scipy.special import entr
from scipy.stats import binom

from affordance_ros.core import (
    AffordanceError,
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    benchmark_network,
    predict_batch,
)
from affordance_ros.core.ground_truth import sample_values
from affordance_ros.core.online import OnlineEM
from affordance_ros.core.suggest import Candidate, suggest_trials
from affordance_ros.core.worlds import NetworkWorld, Objects, ScenarioWorld
from affordance_ros.share import share_directory

from .report import machine_line, markdown_table, output_dir, pyplot, write_results

WORLDS = ("montesano", "tools")
STRATEGIES = ("active", "parameter_gain", "random", "round_robin")
CRITERIA = {"active": "predictive_information", "parameter_gain": "information_gain"}
CANDIDATES = 4
TARGETS = 100  # the objects seen last, whose effects predictive_information is about
LEARN_EVERY = 25
CHECKPOINTS = (25, 50, 100, 150, 200, 250, 300, 350, 400)
QUICK_CHECKPOINTS = (25, 50, 100)
HELD_OUT = 1000
GOAL = (300, 150)  # active should reach random's log-density after 300 trials within 150
TESTS = {"natural": "objects as they come", "balanced": "every kind of object alike"}
METRICS = [f"{key}_{test}" for key in ("log_density", "rmse") for test in TESTS]


class Setting:
    """A world, the configuration learned in it, and how a learn goes."""

    def __init__(self, world: str, seed: int):
        self.name = world
        if world == "montesano":
            truth = benchmark_network("montesano", 1.0, seed).replace_variables({"Action": {"sensor": None}})
            self.truth = truth
            self.world = NetworkWorld(truth, design="truth")  # (the design of docs/bench/exploration_results.json)
            self.config = truth.replace_variables({v.name: {"cpt": None} for v in truth.variables})
            # (no posterior draws: the curves score point predictions, and suggest_trials' gain uses the counts)
            self.learner = AffordanceLearner(structure="fixed", posterior_draws=0)
        else:
            self.truth = None
            self.world = ScenarioWorld(world)
            config = AffordanceNetwork.load(share_directory() / "config" / f"{world}.json")
            # the robot chooses the action for the object in view: in its trials they are dependent, though the
            # action causes nothing of the object; no arc between them, as between the action and the effects
            forbidden = [*config.learning["forbidden_group_arcs"], ["action", "object"]]
            self.config = AffordanceNetwork(config.variables, config.metadata,
                                            {**config.learning, "forbidden_group_arcs": forbidden})
            self.learner = AffordanceLearner(posterior_draws=0)
        self.effects = [r for name in self.config.group("effect") for r in self.config[name].sensor.names]

    def columns(self, objects: Objects, actions, effects: dict) -> dict:
        return {self.world.action_variable: list(actions), **objects.readings, **effects}

    def learn(self, columns: dict) -> AffordanceNetwork:
        n = len(columns[self.world.action_variable])
        return self.learner.fit(self.config, CaseSet.from_columns(self.config, columns, [str(k) for k in range(n)])
                                ).model_


class Explorer:
    """One strategy's choice of trials: ``choose(objects, model)`` -> (action, candidate index, objects)."""

    def __init__(self, strategy: str, world, rng: np.random.Generator):
        self.strategy, self.world, self.rng = strategy, world, rng
        self.turn = 0
        self.design = rng.permutation(len(world.actions) * world.n_kinds)
        self.seen = []  # the candidates seen so far, as Candidate

    def choose(self, objects: Objects, model: AffordanceNetwork | None) -> tuple[str, int, Objects]:
        actions = self.world.actions
        self.turn += 1
        if self.strategy == "round_robin":
            pair = int(self.design[(self.turn - 1) % len(self.design)])
            return actions[pair % len(actions)], 0, self.world.of_kind([pair // len(actions)], self.rng)
        if self.strategy == "random":
            return actions[int(self.rng.integers(len(actions)))], 0, objects
        candidates = [Candidate(objects.sensors(j)) for j in range(len(objects))]
        self.seen = [*self.seen, *candidates][-TARGETS:]
        if model is None:  # as the node answers before its first model
            pair = (self.turn - 1) % (len(actions) * len(objects))
            return actions[pair % len(actions)], pair // len(actions), objects
        best = suggest_trials(model, candidates, criterion=CRITERIA[self.strategy], top=1, targets=self.seen)
        return best.suggestions[0].action, best.suggestions[0].candidate, objects


def held_out(setting: Setting, rng: np.random.Generator, balanced: bool = False) -> dict:
    """Trials to score a model on: objects as they come (``balanced``: every kind as likely), every action as
    likely."""
    world = setting.world
    objects = world.of_kind(rng.integers(world.n_kinds, size=HELD_OUT), rng) if balanced else \
        world.objects(HELD_OUT, rng)
    actions = np.array(setting.world.actions, dtype=object)[rng.integers(len(setting.world.actions), size=HELD_OUT)]
    return setting.columns(objects, list(actions), setting.world.act(objects, actions, rng))


def scores(model: AffordanceNetwork, setting: Setting, test: dict) -> tuple[float, float]:
    """(mean held-out log p(effect readings | action, object readings), RMSE of the predicted effect readings)."""
    ids = [str(k) for k in range(HELD_OUT)]
    causes = {name: x for name, x in test.items() if name not in setting.effects}
    cpts = [v.cpt for v in model.variables]
    engine = model.engine
    joint = engine.log_likelihood(cpts, CaseSet.from_columns(model, test, ids).evidence(model))
    marginal = engine.log_likelihood(cpts, CaseSet.from_columns(model, causes, ids).evidence(model))
    action = setting.world.action_variable
    sensors = {name: x for name, x in causes.items() if name != action}
    batch = predict_batch(model, ["effect"], sensors=sensors, values={action: causes[action]}, uncertainty=False)
    predicted = {name: r.mean[:, j] for r in batch.readings.values() for j, name in enumerate(r.names)}
    errors = np.concatenate([predicted[name] - test[name] for name in setting.effects])
    return float(np.mean(joint - marginal)), float(np.sqrt(np.mean(errors ** 2)))


def run_one(world: str, strategy: str, seed: int, checkpoints) -> dict:
    """One learning curve: {"log_density": [...], "rmse": [...], ...} at ``checkpoints``."""
    setting = Setting(world, seed)
    rng = np.random.default_rng([seed, STRATEGIES.index(strategy), 21])
    tests = {test: held_out(setting, np.random.default_rng([seed, 99, k]), balanced=test == "balanced")
             for k, test in enumerate(TESTS)}
    explorer = Explorer(strategy, setting.world, rng)
    columns = {}
    model = online = None
    curve = {f"{key}_{test}": [] for key in ("log_density", "rmse") for test in tests}
    curve.update(skipped_online=0, failed_learns=0, learn_seconds=0.0)
    for t in range(1, checkpoints[-1] + 1):
        objects = setting.world.objects(CANDIDATES, rng)
        action, index, objects = explorer.choose(objects, model)
        chosen = objects.take([index])
        trial = setting.columns(chosen, [action], setting.world.act(chosen, [action], rng))
        for name, x in trial.items():
            columns.setdefault(name, []).extend(list(x))
        if t % LEARN_EVERY == 0 or t in checkpoints:
            start = time.process_time()
            try:
                model = setting.learn(columns)
                online = OnlineEM(model, prior=float(model.metadata["learned"]["prior"]), start_weight=t)
            except AffordanceError:  # e.g. no condition of the tools has 3 trials yet: the model stays
                curve["failed_learns"] += 1
            curve["learn_seconds"] += time.process_time() - start
            for name, test in tests.items() if t in checkpoints else ():
                log_density, rmse = scores(model, setting, test) if model is not None else (np.nan, np.nan)
                curve[f"log_density_{name}"].append(log_density)
                curve[f"rmse_{name}"].append(rmse)
        elif online is not None:
            try:
                model = online.partial_fit(CaseSet.from_columns(model, trial, [str(t)])).model_
            except AffordanceError:  # a trial the model cannot take (it is learned from at the next learn)
                curve["skipped_online"] += 1
    return curve


@functools.lru_cache(maxsize=None)
def excess_log_loss(card: int, trials: int, draws: int = 5000) -> np.ndarray:
    """(trials + 1,): the expected excess log-loss, KL(p || estimate), of one CPT row after 0..``trials`` trials
    of it, the row p ~ Dirichlet(1) as in the montesano world and the estimate the learner's posterior mean
    under its prior of 1 per entry (Monte Carlo over ``draws`` rows, all at once)."""
    rng = np.random.default_rng([card, trials, draws])
    p = rng.dirichlet(np.ones(card), size=draws)
    outcomes = (rng.random((draws, trials, 1)) > np.cumsum(p, axis=1)[:, None, :-1]).sum(axis=2)
    counts = np.zeros((draws, trials + 1, card))
    counts[:, 1:] = np.cumsum(np.eye(card)[outcomes], axis=1)
    estimate = (counts + 1.0) / (np.arange(trials + 1)[None, :, None] + card)
    cross = -(p[:, None, :] * np.log(estimate)).sum(axis=2)
    return (cross - entr(p).sum(axis=1)[:, None]).mean(axis=0)


def allocation_bound(truth: AffordanceNetwork, balanced: bool, rng: np.random.Generator,
                     budgets=CHECKPOINTS, reference: int = GOAL[0], samples: int = 200_000) -> dict:
    """How far any choice of trials could take the CPTs of ``truth`` (the montesano world: structure and sensors
    known): the expected excess held-out log-loss of the effects' CPT rows, sum over rows of (how often held-out
    trials use the row) x ``excess_log_loss`` (its trials), for random trials (each row's trials binomial, as
    the objects come, every action alike) and for an oracle that knows every row's held-out frequency and
    gives each row the trials that lower the total most (each effect's rows allotted on their own, which no
    robot can: a bound). Returns {"random": [...], "oracle": [...]} at ``budgets`` and "oracle_reaches": the
    first budget at which the oracle's excess is below random's at ``reference`` trials."""
    action = truth.index(truth.group("action")[0])
    objects = [truth.index(name) for name in truth.group("object")]
    given = {action: rng.integers(truth.variables[action].card, size=samples)}
    if balanced:
        given.update({i: rng.integers(truth.variables[i].card, size=samples) for i in objects})
    test = sample_values(truth, samples, rng, given)
    natural = sample_values(truth, samples, rng, {action: given[action]})
    top = max(*budgets, reference)
    losses = {card: excess_log_loss(card, top) for card in {truth[n].card for n in truth.group("effect")}}
    random_excess, oracle_excess = np.zeros(len(budgets)), np.zeros(len(budgets))
    for name in truth.group("effect"):
        i = truth.index(name)
        parents = list(truth.parent_indices(i))
        shape = tuple(truth.variables[p].card for p in parents)
        weights, frequency = (np.bincount(np.ravel_multi_index(tuple(codes[:, parents].T), shape),
                                          minlength=int(np.prod(shape))) / samples for codes in (test, natural))
        loss = losses[truth.variables[i].card]
        # random: n ~ Binomial(budget, frequency) trials of each row; the oracle: the budget's largest decreases
        random_excess += [weights @ binom.pmf(np.arange(n + 1)[None, :], n, frequency[:, None]) @ loss[:n + 1]
                          for n in budgets]
        decreases = np.sort((weights[:, None] * -np.diff(loss)[None, :]).ravel())[::-1]
        oracle_excess += [weights.sum() * loss[0] - decreases[:n].sum() for n in budgets]
    target = random_excess[list(budgets).index(reference)]
    reaches = next((n for n, excess in zip(budgets, oracle_excess) if excess <= target), None)
    return {"random": random_excess.tolist(), "oracle": oracle_excess.tolist(), "oracle_reaches": reaches}


def ranking_time(world: str, n_candidates: int = 20, repeats: int = 20) -> dict:
    """CPU time of ranking every action on ``n_candidates`` candidates by the active criterion (the candidates the
    targets, as the node ranks them) with a model learned from 400 trials."""
    setting = Setting(world, 0)
    rng = np.random.default_rng(5)
    objects = setting.world.objects(400, rng)
    actions = np.array(setting.world.actions, dtype=object)[rng.integers(len(setting.world.actions), size=400)]
    model = setting.learn(setting.columns(objects, list(actions), setting.world.act(objects, actions, rng)))
    candidates = setting.world.objects(n_candidates, rng)
    candidates = [Candidate(candidates.sensors(j)) for j in range(n_candidates)]
    suggest_trials(model, candidates, criterion=CRITERIA["active"])  # (the query plans are compiled once per model)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        suggest_trials(model, candidates, criterion=CRITERIA["active"])
        times.append(time.process_time() - start)
    return {"actions": len(setting.world.actions), "candidates": n_candidates, "best_ms": min(times) * 1e3,
            "median_ms": float(np.median(times)) * 1e3}


def trials_to_reach(curve, checkpoints, target: float) -> int | None:
    """The first checkpoint at which ``curve`` reaches ``target`` (None: never)."""
    return next((n for n, value in zip(checkpoints, curve) if value >= target), None)


def summarise(runs: list, checkpoints) -> dict:
    """Mean and standard error over seeds of every curve; trials to reach random's log-density at 300 trials."""
    out = {}
    for key in METRICS:
        values = np.array([run[key] for run in runs], dtype=float)
        with warnings.catch_warnings():  # a checkpoint where no run has a figure yet is NaN, as it should be
            warnings.simplefilter("ignore", RuntimeWarning)
            out[key] = np.nanmean(values, axis=0).tolist()
            out[f"sem_{key}"] = (np.nanstd(values, axis=0) / np.sqrt(len(runs))).tolist()
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--resume", metavar="RESULTS_JSON",
                        help="keep the runs of an earlier exploration_results.json, run only the seeds it lacks "
                             "(the same checkpoints and settings)")


def run(args) -> int:
    out = output_dir(args.out)
    reps = args.reps or (1 if args.quick else 10)
    checkpoints = QUICK_CHECKPOINTS if args.quick else CHECKPOINTS
    earlier = earlier_runs(args.resume, checkpoints) if args.resume else {}
    jobs = [(world, strategy, seed) for world in WORLDS for strategy in STRATEGIES for seed in range(reps)
            if (world, strategy, seed) not in earlier]
    start = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            curves = list(pool.map(run_one, *zip(*jobs), [checkpoints] * len(jobs)))
    else:
        curves = [run_one(*job, checkpoints) for job in jobs]
    runs = {**earlier, **dict(zip(jobs, curves))}
    print(f"bench exploration: {len(jobs)} runs in {time.perf_counter() - start:.0f} s"
          + (f" ({len(runs) - len(jobs)} kept from {args.resume})" if earlier else "") + f" ({machine_line()})")
    reference = GOAL[0] if GOAL[0] in checkpoints else checkpoints[-1]
    results = {"checkpoints": list(checkpoints), "reps": reps, "candidates": CANDIDATES, "learn_every": LEARN_EVERY,
               "held_out": HELD_OUT, "reference_trials": reference, "worlds": {}}
    table = ""
    for world in WORLDS:
        summary = {s: summarise([runs[world, s, seed] for seed in range(reps)], checkpoints) for s in STRATEGIES}
        reached = {}
        for test in TESTS:
            target = summary["random"][f"log_density_{test}"][checkpoints.index(reference)]
            reached[test] = {"random_log_density": target, **{
                s: trials_to_reach(summary[s][f"log_density_{test}"], checkpoints, target) for s in STRATEGIES}}
        results["worlds"][world] = {"summary": summary, "trials_to_reach": reached,
                                    "runs": {s: [runs[world, s, seed] for seed in range(reps)] for s in STRATEGIES}}
        table += _table(world, summary, checkpoints, reference, reached)
    results["bound"] = {test: _mean_bound([allocation_bound(Setting("montesano", seed).truth, test == "balanced",
                                                            np.random.default_rng([seed, 7]), checkpoints, reference)
                                           for seed in range(reps)], checkpoints, reference) for test in TESTS}
    table += _bound_table(results["bound"], checkpoints, reference)
    results["ranking"] = {world: ranking_time(world) for world in WORLDS}
    table += _ranking_table(results["ranking"])
    _plot(results, checkpoints, out / "exploration_curves.png")
    write_results(out, "exploration", table, args.quick, results)
    print(f"wrote {out / 'exploration_curves.png'}")
    return 0


def earlier_runs(path, checkpoints) -> dict:
    """The runs of an earlier exploration_results.json, by (world, strategy, seed), so that ``--resume`` runs only
    the seeds it lacks; SystemExit when that file was made with other checkpoints or settings."""
    results = json.loads(Path(path).read_text())
    settings = {"checkpoints": list(checkpoints), "candidates": CANDIDATES, "learn_every": LEARN_EVERY,
                "held_out": HELD_OUT}
    differ = [key for key, value in settings.items() if results.get(key) != value]
    if differ:
        raise SystemExit(f"bench exploration: --resume {path}: made with other {', '.join(differ)} "
                         f"({', '.join(f'{k}={results.get(k)}' for k in differ)}); run without --resume")
    return {(world, strategy, seed): run for world, made in results["worlds"].items()
            for strategy, seeds in made["runs"].items() for seed, run in enumerate(seeds)}


def _table(world: str, summary: dict, checkpoints, reference: int, reached: dict) -> str:
    text = ""
    for test in TESTS:
        rows = [[strategy.replace("_", " "), *[f"{d:.3f} / {r:.2f}" for d, r in
                                               zip(summary[strategy][f"log_density_{test}"],
                                                   summary[strategy][f"rmse_{test}"])],
                 reached[test][strategy] or f"> {checkpoints[-1]}"] for strategy in STRATEGIES]
        header = ["strategy", *[f"{n}" for n in checkpoints], f"trials to reach random's {reference}"]
        active = reached[test]["active"]
        goal = "met" if active is not None and active <= GOAL[1] else "not met"
        after = active or f"more than {checkpoints[-1]}"
        text += (f"\n{world}, held-out trials {TESTS[test]}: log-density of the effects / RMSE of the effect readings "
                 f"after N trials (mean over seeds)\n\n" + markdown_table(header, rows)
                 + f"\nactive reaches random's {reference}-trial log-density after {after} trials: the goal (at most "
                 f"{GOAL[1]}) is {goal}\n")
    return text


def _mean_bound(bounds: list, checkpoints, reference: int) -> dict:
    """The seeds' bounds averaged, and the first budget at which the mean oracle is below the mean random at
    ``reference``."""
    mean = {key: np.mean([b[key] for b in bounds], axis=0).tolist() for key in ("random", "oracle")}
    target = mean["random"][list(checkpoints).index(reference)]
    return {**mean, "oracle_reaches": next((n for n, x in zip(checkpoints, mean["oracle"]) if x <= target), None)}


def _bound_table(bounds: dict, checkpoints, reference: int) -> str:
    rows = [[TESTS[test], who, *[f"{x:.3f}" for x in bound[who]],
             "" if who == "random" else (bound["oracle_reaches"] or f"> {checkpoints[-1]}")]
            for test, bound in bounds.items() for who in ("random", "oracle")]
    return ("\nmontesano: expected excess held-out log-loss of the effects' CPTs (nats per trial; allocation_bound) "
            "after N trials, random trials against an oracle allocation of trials to CPT rows\n\n"
            + markdown_table(["held-out objects", "trials", *map(str, checkpoints),
                              f"oracle reaches random's {reference}"], rows))


def _ranking_table(ranking: dict) -> str:
    rows = [[world, f"{r['actions']} x {r['candidates']}", f"{r['best_ms']:.1f} ms", f"{r['median_ms']:.1f} ms"]
            for world, r in ranking.items()]
    return ("\nRanking every action on 20 candidates (suggest_trials, a model learned from 400 trials; CPU time of "
            "this process)\n\n" + markdown_table(["world", "actions x candidates", "best", "median"], rows))


def _plot(results: dict, checkpoints, path) -> None:
    plt = pyplot()
    panels = [("log_density_natural", "log-density, objects as they come"),
              ("log_density_balanced", "log-density, every kind alike"),
              ("rmse_natural", "effect RMSE, objects as they come")]
    fig, axes = plt.subplots(len(WORLDS), len(panels), figsize=(15, 8))
    colours = {"active": "tab:red", "parameter_gain": "tab:orange", "random": "tab:blue", "round_robin": "tab:green"}
    for row, world in enumerate(WORLDS):
        summary = results["worlds"][world]["summary"]
        for col, (key, label) in enumerate(panels):
            ax = axes[row, col]
            for strategy in STRATEGIES:
                mean, sem = np.array(summary[strategy][key]), np.array(summary[strategy][f"sem_{key}"])
                ax.plot(checkpoints, mean, "o-", color=colours[strategy], label=strategy.replace("_", " "))
                ax.fill_between(checkpoints, mean - sem, mean + sem, color=colours[strategy], alpha=0.2)
            if key.startswith("log_density"):
                test = key.split("_")[-1]
                ax.axhline(results["worlds"][world]["trials_to_reach"][test]["random_log_density"], color="grey",
                           ls=":", label=f"random at {results['reference_trials']}")
            ax.set_title(f"{world}: {label}", fontsize=10)
            ax.set_xlabel("trials")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Trials chosen by predictive information (active), by information about the parameters, at random, "
                 f"in a round robin; learning in the loop "
                 f"(mean ± s.e.m. over {results['reps']} seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["run", "run_one", "scores"]
