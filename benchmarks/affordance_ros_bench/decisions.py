"""Deciding while learning: the regret of rank_actions' strategies against the ground truth's best action.

    affordance-ros-bench decisions [--quick] [--reps N] [--jobs N] [--out DIR] [--resume] [--worlds W,..]
                                   [--policies P,..]

A contextual bandit. Each trial the robot sees a new object (drawn from the world, seen through its sensors) and is
given a wanted effect (an effect variable's label); it chooses the action from its current model by the strategy
(``rank_actions(..., strategy)``; ``random``: an action at random), does it, sees the effects, and learns. The
regret of a trial is p_truth(wanted | the truth's best action for that object) - p_truth(wanted | the chosen
action), the object's true values known to the truth: what the choice lost in expectation.

Learning in the loop: a full learn (structure and sensors known, the CPTs and their posterior learned) after 10, 20,
40, 80 and 160 trials and then every 100 (200, 300, ...); in between, online EM after every trial, which also adds
the trial to every posterior draw (``core.online``), as the learner node does with ``online_learning`` and a
``~/learn`` now and then. The full learns are what draws the posterior afresh from every trial; the online updates
keep it from lagging. Before the first learn, actions at random.

Worlds (ground-truth networks; a new one per seed where it is drawn):

- montesano: the paper's network, CPT rows from Dirichlet(1), sensors at sigma 1, the action given by label; the
  wanted effect any label of any of its four effects;
- tools: a network made from the tools scenario's simulator (``core.scenarios``): Tool (3) and Object (11) seen
  through a sensor each, the wanted effect a Distance the object moves (still < 2.5 cm, short, far >= 8 cm), whose
  CPT is the frequency of each class over 4000 simulated displacements per (action, tool, object): which action
  moves an object far depends on the tool and the object;
- lockin: 6 kinds of object (seen through a sensor), 3 actions, a binary outcome (wanted: success). One action is
  good on every kind (p 0.70-0.85), one middling (0.10-0.30), one bad (0.05-0.20) but on one kind in six best by
  far (0.95-0.99): a greedy robot that found the good action there has no reason to try the bad one;
- rare: 4 kinds of object, one rare (1 in 12), 5 actions, a binary outcome. On the common kinds the actions'
  success is drawn from 0.1-0.8; on the rare kind the best action succeeds with 0.55, the second with 0.45, the others
  0.10-0.35: the best is only slightly better, on an object seldom seen;
- size: Shape (3) and Size (3), 3 actions, a binary outcome of all three. The best action depends on Size (each
  size its own, succeeding with 0.55-0.70, the others 0.08-0.20 less); Shape moves every action's success alike
  (by -0.15 to 0.15), so it never changes which is best.

Reported over ``reps`` seeds (mean and standard error): the cumulative regret after 300 and 1000 trials, the regret
over trials 201-300, and the final policy's regret (the expected strategy on the model after 300 and after 1000
trials, over fresh objects and wanted effects, learning nothing); in the lockin, rare and size worlds how many truths
are locked out: on a watched kind (lockin's and rare's special kind; in size, every kind) the strategy never chose the
best action in trials 201-300 (for 1000: 901-1000) though objects of it came; and on what share of the watched kinds'
objects in those trials it chose the best. Beside each strategy's cumulative regret, its difference from expected's,
paired by seed (the same truth).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from affordance_ros.core import (
    STRATEGIES,
    AffordanceLearner,
    AffordanceNetwork,
    CaseSet,
    SensorModel,
    Variable,
    benchmark_network,
    predict_batch,
    rank_actions,
)
from affordance_ros.core.online import OnlineEM
from affordance_ros.core.scenarios import ACTIONS, OBJECTS, TOOLS, tools_effects
from affordance_ros.core.worlds import NetworkWorld

from .report import machine_line, markdown_table, output_dir, pyplot, write_results

WORLDS = ("montesano", "tools", "lockin", "rare", "size")
POLICIES = (*STRATEGIES, "random")
HORIZON = 1000
CHECKPOINTS = (300, 1000)
QUICK_HORIZON, QUICK_CHECKPOINTS = 40, (20, 40)
FIRST_LEARNS = (2, 4, 8, 16, 32, 64, 128)
LEARN_EVERY = 100
LATE = (200, 300)            # the trials (after the first, up to the second) whose regret 'late' sums
FINAL_QUERIES = 300          # fresh (object, wanted effect) pairs the final policy is scored on
TARGETS = {"optimistic_late": 0.5, "thompson_final": 0.5}   # at most these times expected's, in the lockin world
DISTANCE = (2.5, 8.0)        # cm: still below the first, far from the second
SIMULATED = 4000             # displacements per (action, tool, object) behind the tools world's CPT


def learn_points(horizon: int) -> set:
    return {n for n in FIRST_LEARNS if n <= horizon} | set(range(2 * LEARN_EVERY, horizon + 1, LEARN_EVERY))


def sensor(name: str, card: int, sigma: float = 1.0) -> SensorModel:
    return SensorModel(name, 5.0 * np.arange(card), np.full(card, sigma))


def tools_truth() -> AffordanceNetwork:
    """The tools world: Action, Tool, Object -> Distance, its CPT from the scenario's simulator."""
    rng = np.random.default_rng(20260)
    tools, objects = list(TOOLS), list(OBJECTS)
    cpt = np.zeros((len(ACTIONS), len(tools), len(objects), 3))
    for a, action in enumerate(ACTIONS):
        for t, tool in enumerate(tools):
            for o, obj in enumerate(objects):
                moved = tools_effects(*(np.array([x] * SIMULATED, dtype=object) for x in (tool, obj, action)), rng)
                distance = np.hypot(moved["dx"], moved["dy"])
                cpt[a, t, o] = np.bincount(np.digitize(distance, DISTANCE), minlength=3) / SIMULATED
    return AffordanceNetwork([
        Variable("Action", "action", ACTIONS, (), None, np.full(len(ACTIONS), 1.0 / len(ACTIONS))),
        Variable("Tool", "object", tuple(tools), (), sensor("tool", len(tools)), np.full(len(tools), 1 / len(tools))),
        Variable("Object", "object", tuple(objects), (), sensor("object", len(objects)),
                 np.full(len(objects), 1.0 / len(objects))),
        Variable("Distance", "effect", ("still", "short", "far"), ("Action", "Tool", "Object"),
                 sensor("distance", 3), (cpt + 1e-6) / (cpt + 1e-6).sum(axis=-1, keepdims=True))],
        metadata={"world": "tools"})


def lockin_truth(seed: int) -> tuple[AffordanceNetwork, int, int]:
    """The lockin world of ``seed``: (truth, the special kind, its best action)."""
    rng = np.random.default_rng([seed, 61])
    special, (good, middling, bad) = int(rng.integers(6)), rng.permutation(3)
    success = np.zeros((3, 6))
    success[good] = rng.uniform(0.70, 0.85, 6)
    success[middling] = rng.uniform(0.10, 0.30, 6)
    success[bad] = rng.uniform(0.05, 0.20, 6)
    success[bad, special] = rng.uniform(0.95, 0.99)
    actions = ("push", "lift", "tilt")
    truth = AffordanceNetwork([
        Variable("Action", "action", actions, (), None, np.full(3, 1.0 / 3)),
        Variable("Kind", "object", tuple(f"k{j}" for j in range(6)), (), sensor("kind", 6), np.full(6, 1.0 / 6)),
        Variable("Outcome", "effect", ("fail", "success"), ("Action", "Kind"), sensor("outcome", 2),
                 np.stack([1.0 - success, success], axis=-1))], metadata={"world": "lockin"})
    return truth, special, int(bad)


def rare_truth(seed: int) -> tuple[AffordanceNetwork, int, int]:
    """The rare world of ``seed``: (truth, the rare kind, its best action)."""
    rng = np.random.default_rng([seed, 67])
    rare, (best, second) = int(rng.integers(4)), rng.permutation(5)[:2]
    success = rng.uniform(0.10, 0.80, (5, 4))
    success[:, rare] = rng.uniform(0.10, 0.35, 5)
    success[best, rare], success[second, rare] = 0.55, 0.45
    kinds = np.full(4, 11.0 / 36.0)
    kinds[rare] = 1.0 / 12.0
    actions = ("push", "pull", "lift", "tilt", "poke")
    truth = AffordanceNetwork([
        Variable("Action", "action", actions, (), None, np.full(5, 1.0 / 5)),
        Variable("Kind", "object", tuple(f"k{j}" for j in range(4)), (), sensor("kind", 4), kinds),
        Variable("Outcome", "effect", ("fail", "success"), ("Action", "Kind"), sensor("outcome", 2),
                 np.stack([1.0 - success, success], axis=-1))], metadata={"world": "rare"})
    return truth, rare, int(best)


def size_truth(seed: int) -> tuple[AffordanceNetwork, np.ndarray]:
    """The size world of ``seed``: (truth, the best action of each size)."""
    rng = np.random.default_rng([seed, 71])
    best = rng.permutation(3)
    success = np.zeros((3, 3, 3))                  # (action, shape, size)
    for size, a in enumerate(best):
        top = rng.uniform(0.55, 0.70)
        success[:, :, size] = top - rng.uniform(0.08, 0.20, 3)[:, None]
        success[a, :, size] = top
    success = np.clip(success + rng.uniform(-0.15, 0.15, 3)[None, :, None], 0.02, 0.98)
    labels = ("small", "medium", "big")
    truth = AffordanceNetwork([
        Variable("Action", "action", ("grasp", "tap", "push"), (), None, np.full(3, 1.0 / 3)),
        Variable("Shape", "object", ("box", "ball", "cylinder"), (), sensor("shape", 3), np.full(3, 1.0 / 3)),
        Variable("Size", "object", labels, (), sensor("size", 3), np.full(3, 1.0 / 3)),
        Variable("Outcome", "effect", ("fail", "success"), ("Action", "Shape", "Size"), sensor("outcome", 2),
                 np.stack([1.0 - success, success], axis=-1))], metadata={"world": "size"})
    return truth, best


class World:
    """A ground truth, what the robot is asked (``goals``: (effect, label) pairs), and p_truth per kind of object;
    ``watched``: the (kind, its best action) pairs whose lock-out is counted (lockin, rare, size)."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.special = self.best_special = None
        if name == "montesano":
            self.truth = benchmark_network("montesano", 1.0, seed).replace_variables({"Action": {"sensor": None}})
        elif name == "tools":
            self.truth = tools_truth()
        elif name == "lockin":
            self.truth, self.special, self.best_special = lockin_truth(seed)
        elif name == "rare":
            self.truth, self.special, self.best_special = rare_truth(seed)
        else:
            self.truth, best = size_truth(seed)
        self.world = NetworkWorld(self.truth, design="truth")  # objects as the truth draws them: rare kinds too
        self.watched = [] if self.special is None else [(self.special, self.best_special)]
        if name == "size":   # each kind (shape * 3 + size) with the best action of its size
            self.watched = [(kind, int(best[kind % 3])) for kind in range(self.world.n_kinds)]
        self.config = self.truth.replace_variables({v.name: {"cpt": None} for v in self.truth.variables})
        effects = [self.truth[n] for n in self.truth.group("effect")]
        self.goals = [(v.name, label) for v in effects for label in v.values]
        if name == "tools":
            self.goals = [("Distance", label) for label in ("short", "far", "still")]
        if name in ("lockin", "rare", "size"):
            self.goals = [("Outcome", "success")]
        self.success = self._success()     # (kinds, actions, goals)

    def _success(self) -> np.ndarray:
        """p_truth(goal | action, kind) for every kind of object, action and goal."""
        world = self.world
        names = self.truth.group("object")
        codes = np.unravel_index(np.arange(world.n_kinds), [self.truth[n].card for n in names])
        values = {n: [self.truth[n].values[c] for c in col] for n, col in zip(names, codes)}
        out = np.zeros((world.n_kinds, len(world.actions), len(self.goals)))
        for a, action in enumerate(world.actions):
            batch = predict_batch(self.truth, self.truth.group("effect"),
                                  values={**values, world.action_variable: [action] * world.n_kinds}, uncertainty=False)
            for g, (effect, label) in enumerate(self.goals):
                out[:, a, g] = batch.marginals[effect][:, self.truth[effect].code(label)]
        return out

    def learn(self, columns: dict, seed: int) -> AffordanceNetwork:
        n = len(columns["Action"])
        cases = CaseSet.from_columns(self.config, columns, [str(k) for k in range(n)])
        return AffordanceLearner(structure="fixed", seed=seed).fit(self.config, cases).model_


def choose(policy: str, model, world: World, sensors: dict, goal: tuple, rng) -> int:
    """The index of the action ``policy`` chooses for an object seen as ``sensors``, wanting ``goal``."""
    actions = world.world.actions
    if policy == "random" or model is None:
        return int(rng.integers(len(actions)))
    ranking = rank_actions(model, {goal[0]: goal[1]}, sensors=sensors, strategy=policy, rng=rng,
                           uncertainty=policy != "expected")
    return actions.index(ranking.actions[0])


def final_policy(model, world: World, rng) -> dict:
    """The expected strategy of ``model`` on FINAL_QUERIES fresh (object, goal) pairs: its mean regret; in a world with
    watched kinds also whether it chooses the best action on each (on 50 objects of it, most of the time)."""
    objects = world.world.objects(FINAL_QUERIES, rng)
    goals = rng.integers(len(world.goals), size=FINAL_QUERIES)
    regret = []
    for j in range(FINAL_QUERIES):
        best = world.success[objects.kinds[j], :, goals[j]]
        regret.append(best.max() - best[choose("expected", model, world, objects.sensors(j), world.goals[goals[j]],
                                               rng)])
    out = {"regret": float(np.mean(regret))}
    finds = []
    for kind, best in world.watched:
        objects = world.world.of_kind([kind] * 50, rng)
        chosen = [choose("expected", model, world, objects.sensors(j), world.goals[0], rng) for j in range(50)]
        finds.append(bool(np.mean(np.array(chosen) == best) >= 0.5))
    if finds:
        out["finds_best"] = all(finds)
    return out


def locked_out(run: dict, window: tuple) -> bool:
    """Whether, in the trials of ``window`` (first, last], objects of a watched kind came and the run chose the kind's
    best action on none of them (a run logged as (trial, best) pairs: one watched kind)."""
    seen: dict = {}
    for entry in run["special"]:
        t, kind, best = entry if len(entry) == 3 else (entry[0], 0, entry[1])
        if window[0] < t <= window[1]:
            seen[kind] = seen.get(kind, False) or bool(best)
    return not all(seen.values())


def best_share(run: dict, window: tuple) -> float:
    """The share of the objects of watched kinds in the trials of ``window`` (first, last] on which the run chose the
    kind's best action; NaN if none came."""
    chosen = [entry[-1] for entry in run["special"] if window[0] < entry[0] <= window[1]]
    return float(np.mean(chosen)) if chosen else float("nan")


def run_one(world_name: str, policy: str, seed: int, horizon: int, checkpoints) -> dict:
    """One run: the regret of every trial, and the final policy at each checkpoint."""
    world = World(world_name, seed)
    rng = np.random.default_rng([seed, POLICIES.index(policy), WORLDS.index(world_name), 32])
    learn_at = learn_points(horizon)
    columns: dict = {}
    model = online = None
    regret, finals, seconds = [], {}, {"learn": 0.0, "choose": 0.0, "online": 0.0}
    special = []   # (trial, watched kind, whether its best action was chosen) on every object of a watched kind
    for t in range(1, horizon + 1):
        objects = world.world.objects(1, rng)
        g = int(rng.integers(len(world.goals)))
        start = time.process_time()
        a = choose(policy, model, world, objects.sensors(0), world.goals[g], rng)
        seconds["choose"] += time.process_time() - start
        p = world.success[objects.kinds[0], :, g]
        regret.append(float(p.max() - p[a]))
        for kind, best in world.watched:
            if objects.kinds[0] == kind:
                special.append((t, kind, a == best))
        action = world.world.actions[a]
        trial = {"Action": [action], **objects.readings, **world.world.act(objects, [action], rng)}
        for name, x in trial.items():
            columns.setdefault(name, []).extend(list(x))
        start = time.process_time()
        if t in learn_at:
            model = world.learn(columns, seed)
            online = OnlineEM(model, prior=float(model.metadata["learned"]["prior"]), start_weight=t)
            seconds["learn"] += time.process_time() - start
        elif online is not None:
            model = online.partial_fit(CaseSet.from_columns(model, trial, [str(t)])).model_
            seconds["online"] += time.process_time() - start
        if t in checkpoints:
            finals[str(t)] = final_policy(model, world, np.random.default_rng([seed, t, 7]))
    return {"regret": regret, "final": finals, "seconds": seconds, "special": special}


def summarise(runs: list, checkpoints) -> dict:
    """Mean and standard error over seeds of: cumulative regret at the checkpoints, late regret, final policy."""
    regret = np.array([run["regret"] for run in runs])
    cumulative = regret.cumsum(axis=1)
    out = {"seeds": len(runs)}
    sem = lambda x: float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")  # noqa: E731
    for n in checkpoints:
        out[f"cumulative_{n}"] = [float(cumulative[:, n - 1].mean()), sem(cumulative[:, n - 1])]
        final = np.array([run["final"][str(n)]["regret"] for run in runs])
        out[f"final_{n}"] = [float(final.mean()), sem(final)]
        if "finds_best" in runs[0]["final"][str(n)]:
            window = (n - LEARN_EVERY, n) if n != LATE[1] else LATE
            out[f"locked_out_{n}"] = int(sum(locked_out(run, window) for run in runs))
            out[f"final_finds_best_{n}"] = int(sum(run["final"][str(n)]["finds_best"] for run in runs))
            share = np.array([best_share(run, window) for run in runs])
            share = share[~np.isnan(share)]
            out[f"best_share_{n}"] = [float(share.mean()) if len(share) else float("nan"), sem(share)]
    late = LATE if LATE[1] <= regret.shape[1] else (checkpoints[0] // 2, checkpoints[0])
    out["late"] = [float(regret[:, late[0]:late[1]].sum(axis=1).mean()), sem(regret[:, late[0]:late[1]].sum(axis=1))]
    out["late_trials"] = list(late)
    out["curve"] = cumulative.mean(axis=0)[9::10].tolist()
    out["curve_sem"] = (cumulative.std(axis=0, ddof=1) / np.sqrt(len(runs)))[9::10].tolist() if len(runs) > 1 else []
    out["seconds_per_trial"] = float(np.mean([sum(r["seconds"].values()) for r in runs]) / regret.shape[1])
    return out


def against(runs: list, peers: list, checkpoints) -> dict:
    """The cumulative regret of ``runs`` minus that of ``peers`` (the same seeds, so the same truths) at each
    checkpoint: mean and standard error of the differences, seed by seed."""
    out = {}
    for n in checkpoints:
        diff = np.array([sum(run["regret"][:n]) - sum(peer["regret"][:n]) for run, peer in zip(runs, peers)])
        out[f"against_expected_{n}"] = [float(diff.mean()), float(np.std(diff, ddof=1) / np.sqrt(len(diff)))
                                        if len(diff) > 1 else float("nan")]
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs already in --out's decisions_runs.jsonl (the same horizon), run the rest")
    parser.add_argument("--worlds", type=_names(WORLDS), default=WORLDS, metavar="W,..",
                        help=f"comma-separated worlds to run (default: all, {','.join(WORLDS)})")
    parser.add_argument("--policies", type=_names(POLICIES), default=POLICIES, metavar="P,..",
                        help=f"comma-separated strategies to run (default: all, {','.join(POLICIES)}); the lockin "
                             "targets are said only with the strategies they compare")


def _names(known: tuple):
    """An argparse type: a comma-separated subset of ``known``, in ``known``'s order."""
    def parse(text: str) -> tuple:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = sorted(set(names) - set(known))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown) or 'empty list'}: choose from "
                                             f"{', '.join(known)}")
        return tuple(name for name in known if name in names)
    return parse


def run(args) -> int:
    out = output_dir(args.out)
    reps = args.reps or (1 if args.quick else 20)
    horizon, checkpoints = (QUICK_HORIZON, QUICK_CHECKPOINTS) if args.quick else (HORIZON, CHECKPOINTS)
    log = out / "decisions_runs.jsonl"
    done = {}
    if getattr(args, "resume", False) and log.exists():
        for line in log.read_text().splitlines():
            run_ = json.loads(line)
            if run_["horizon"] == horizon:
                done[run_["world"], run_["policy"], run_["seed"]] = run_
    elif log.exists():
        log.unlink()
    worlds, policies = getattr(args, "worlds", WORLDS), getattr(args, "policies", POLICIES)
    jobs = [(w, p, s) for w in worlds for p in policies for s in range(reps) if (w, p, s) not in done]
    start = time.perf_counter()
    with log.open("a") as sink:
        def keep(job, result):
            done[job] = {"world": job[0], "policy": job[1], "seed": job[2], "horizon": horizon, **result}
            sink.write(json.dumps(done[job]) + "\n")
            sink.flush()
        if args.jobs > 1:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                futures = {job: pool.submit(run_one, *job, horizon, checkpoints) for job in jobs}
                for job, future in futures.items():
                    keep(job, future.result())
        else:
            for job in jobs:
                keep(job, run_one(*job, horizon, checkpoints))
    print(f"bench decisions: {len(jobs)} runs of {horizon} trials in {time.perf_counter() - start:.0f} s"
          f" ({len(done) - len(jobs)} kept from {log.name}) ({machine_line()})")
    results = {"horizon": horizon, "checkpoints": list(checkpoints), "reps": reps, "learn_at": sorted(
        learn_points(horizon)), "final_queries": FINAL_QUERIES, "worlds": {}}
    for w in worlds:
        results["worlds"][w] = {p: summarise([done[w, p, s] for s in range(reps)], checkpoints) for p in policies}
        if "expected" in policies:
            for p in policies:
                results["worlds"][w][p].update(against([done[w, p, s] for s in range(reps)],
                                                       [done[w, "expected", s] for s in range(reps)], checkpoints))
    if "lockin" in worlds and "expected" in policies and {"optimistic", "thompson"} & set(policies):
        results["targets"] = targets(results["worlds"]["lockin"], checkpoints)
    table = results_table(results, checkpoints)
    _plot(results, checkpoints, out / "decisions_regret.png")
    write_results(out, "decisions", table, args.quick, results)
    print(f"wrote {out / 'decisions_regret.png'}")
    return 0


def targets(lockin: dict, checkpoints) -> dict:
    """The issue's targets in the lockin world: optimistic's late regret and thompson's final policy's regret, as
    a ratio to expected's; and whether optimistic locked out any truth (those of the strategies run; met: all run
    and met)."""
    last, out, met = checkpoints[0], {}, []
    if "optimistic" in lockin:
        out["optimistic_late_ratio"] = _ratio(lockin["optimistic"]["late"][0], lockin["expected"]["late"][0])
        out["optimistic_locked_out"] = lockin["optimistic"][f"locked_out_{last}"]
        met.append(out["optimistic_late_ratio"] <= TARGETS["optimistic_late"] and out["optimistic_locked_out"] == 0)
    if "thompson" in lockin:
        out["thompson_final_ratio"] = {n: _ratio(lockin["thompson"][f"final_{n}"][0],
                                                 lockin["expected"][f"final_{n}"][0]) for n in checkpoints}
        met.append(out["thompson_final_ratio"][last] <= TARGETS["thompson_final"])
    out["met"] = bool(len(met) == 2 and all(met))
    return out


def _ratio(value: float, peer: float) -> float:
    """value / peer; a peer of 0 (a few seeds where greedy lost nothing): inf, or NaN if value is 0 too."""
    return value / peer if peer else float("inf") if value else float("nan")


def results_table(results: dict, checkpoints) -> str:
    text = ""
    first, last = checkpoints[0], checkpoints[-1]
    for world, summary in results["worlds"].items():
        late, seeds = next(iter(summary.values()))["late_trials"], next(iter(summary.values()))["seeds"]
        header = ["strategy", f"cumulative regret, {first} trials", f"{last} trials",
                  f"regret, trials {late[0] + 1}-{late[1]}", f"final policy's regret, {first}", f"{last}"]
        if f"against_expected_{first}" in next(iter(summary.values())):
            header.append(f"minus expected's, {first} / {last} (paired)")
        if f"best_share_{first}" in next(iter(summary.values())):
            header.append(f"best action chosen on watched kinds ({first} / {last})")
        if f"locked_out_{first}" in next(iter(summary.values())):
            header.append(f"truths locked out ({first} / {last})")
        rows = []
        for policy, s in summary.items():
            row = [policy, *[f"{s[key][0]:.2f} ± {s[key][1]:.2f}" for key in (f"cumulative_{first}",
                                                                              f"cumulative_{last}", "late")],
                   *[f"{s[key][0]:.3f} ± {s[key][1]:.3f}" for key in (f"final_{first}", f"final_{last}")]]
            if f"against_expected_{first}" in s:
                row.append("—" if policy == "expected" else " / ".join(
                    f"{s[key][0]:+.2f} ± {s[key][1]:.2f}" for key in (f"against_expected_{first}",
                                                                      f"against_expected_{last}")))
            if f"best_share_{first}" in s:
                row.append(" / ".join(f"{s[key][0]:.2f} ± {s[key][1]:.2f}" for key in (f"best_share_{first}",
                                                                                   f"best_share_{last}")))
            if f"locked_out_{first}" in s:
                row.append(f"{s[f'locked_out_{first}']} / {s[f'locked_out_{last}']} of {s['seeds']}")
            rows.append(row)
        text += (f"\n{world}: regret against the truth's best action (mean ± s.e.m. over {seeds} seeds; the "
                 f"final policy: expected on the model learned, per trial)\n\n" + markdown_table(header, rows))
    if "targets" not in results:
        return text
    t = results["targets"]
    late = results["worlds"]["lockin"]["expected"]["late_trials"]
    said = []
    if "optimistic_late_ratio" in t:
        said.append(f"optimistic's regret over trials {late[0] + 1}-{late[1]} {t['optimistic_late_ratio']:.2f}x "
                    f"expected's (target <= {TARGETS['optimistic_late']}), {t['optimistic_locked_out']} truths locked "
                    "out")
    if "thompson_final_ratio" in t:
        ratios = ", ".join(f"{r:.2f}x at {n}" for n, r in t["thompson_final_ratio"].items())
        said.append(f"thompson's final policy {ratios} expected's (target <= {TARGETS['thompson_final']})")
    verdict = "met" if t["met"] else "not met" if len(said) == 2 else "not all run"
    text += f"\nlockin targets: {'; '.join(said)}: {verdict}\n"
    return text


def _plot(results: dict, checkpoints, path) -> None:
    plt = pyplot()
    worlds = list(results["worlds"])
    cols = min(3, len(worlds))
    rows = -(-len(worlds) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4.5 * rows), squeeze=False)
    for ax in axes.flat[len(worlds):]:
        ax.set_visible(False)
    colours = {"expected": "tab:blue", "optimistic": "tab:red", "thompson": "tab:green", "cautious": "tab:purple",
               "random": "tab:grey"}
    for ax, world in zip(axes.flat, worlds):
        for policy, s in results["worlds"][world].items():
            x = np.arange(10, 10 * len(s["curve"]) + 1, 10)
            mean = np.array(s["curve"])
            ax.plot(x, mean, color=colours[policy], label=policy)
            if s["curve_sem"]:
                sem = np.array(s["curve_sem"])
                ax.fill_between(x, mean - sem, mean + sem, color=colours[policy], alpha=0.2)
        learning = [max(s["curve"]) for policy, s in results["worlds"][world].items() if policy != "random"]
        if learning:
            ax.set_ylim(0, 1.6 * max(learning))   # (random's straight line leaves the plot: its slope is in the table)
        ax.set_title(f"{world}: cumulative regret ({next(iter(results['worlds'][world].values()))['seeds']} seeds)",
                     fontsize=10)
        ax.set_xlabel("trials")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Choosing the action by each strategy while learning (mean ± s.e.m. over the seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["World", "results_table", "run", "run_one", "summarise"]
