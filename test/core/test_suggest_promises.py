"""What docs/exploration.md promises of ~/suggest_trial (core.suggest.suggest_trials), measured in closed
loops over small seeded worlds: the robot sees a few objects as they come, does the top suggestion, and the model's
Dirichlet counts take the outcome (its values seen: the CPTs are what is learned). The exactness of the
information gain is test_suggest.py's (against brute-force enumeration); the montesano and tools worlds with
sensors and learning in the loop are benchmarks.md §12's.

- A pure-noise trap: one (action, object) condition whose effect is a coin flip. Predictive entropy (how unsure
  the model is of the effects) keeps choosing it, since it cannot tell ignorance from noise; the information gain
  about the parameters gives it its share of the trials, as any other condition.
- Every kind of object alike: with rare kinds of object, trials chosen by the information gain leave a model
  closer to the truth on every kind (KL averaged over the conditions, each alike) than random trials; on the
  objects as they come (KL weighted by how often each kind comes) they do not beat random trials, which are
  drawn from that distribution already.
"""

import numpy as np

from affordance_ros.core import AffordanceNetwork, Variable
from affordance_ros.core.suggest import Candidate, suggest_trials

TRIALS = 300
IN_VIEW = 3


def world(actions: int, kinds: int, effects: int) -> AffordanceNetwork:
    """Action and Object (labels) -> Effect."""
    return AffordanceNetwork([
        Variable("Action", "action", tuple(f"a{i}" for i in range(actions)), ()),
        Variable("Object", "object", tuple(f"k{i}" for i in range(kinds)), ()),
        Variable("Effect", "effect", tuple(f"e{i}" for i in range(effects)), ("Action", "Object"))])


def explore(truth: np.ndarray, frequency: np.ndarray, criterion: str, rng: np.random.Generator) -> np.ndarray:
    """The Effect counts (prior 1) after ``TRIALS`` trials: each of ``IN_VIEW`` objects as they come
    (``frequency``), the top suggestion by ``criterion`` done ('random': a random action on the first object)."""
    actions, kinds, effects = truth.shape
    network = world(actions, kinds, effects)
    counts = {"Action": np.ones(actions), "Object": np.ones(kinds), "Effect": np.ones(truth.shape)}
    for _ in range(TRIALS):
        objects = rng.choice(kinds, size=IN_VIEW, p=frequency)
        if criterion == "random":
            a, o = int(rng.integers(actions)), int(objects[0])
        else:
            model = network.with_cpts({name: c / c.sum(axis=-1, keepdims=True) for name, c in counts.items()},
                                      counts)
            best = suggest_trials(model, [Candidate(values={"Object": f"k{o}"}) for o in objects],
                                  criterion=criterion, top=1).suggestions[0]
            a, o = int(best.action[1:]), int(objects[best.candidate])
        counts["Effect"][a, o, rng.choice(effects, p=truth[a, o])] += 1
        counts["Action"][a] += 1
        counts["Object"][o] += 1
    return counts["Effect"]


def test_the_information_gain_is_not_caught_by_a_pure_noise_trap():
    # push on a ball is a coin flip; every other condition nearly always does the same thing
    truth = np.array([[[0.5, 0.5], [0.9, 0.1]], [[0.1, 0.9], [0.95, 0.05]], [[0.85, 0.15], [0.05, 0.95]]])
    share = {}
    for criterion in ("information_gain", "predictive_entropy"):
        trapped = [explore(truth, np.array([0.5, 0.5]), criterion, np.random.default_rng(seed))[0, 0].sum() - 2
                   for seed in range(5)]
        share[criterion] = float(np.mean(trapped)) / TRIALS
    print(f"trials on the noise: information gain {share['information_gain']:.3f}, predictive entropy "
          f"{share['predictive_entropy']:.3f}")
    # 6 conditions, every kind and action as likely: a fair share is 1/6 of the trials
    assert share["information_gain"] < 0.25 and share["predictive_entropy"] > 0.6


def kl(truth: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """KL(truth row || posterior mean row) of every condition (actions, kinds)."""
    estimate = counts / counts.sum(axis=-1, keepdims=True)
    return np.sum(truth * np.log(truth / estimate), axis=-1)


def test_the_information_gain_knows_every_kind_of_object_better_than_random_trials_not_the_common_ones():
    per_seed = []  # (balanced, as they come) KL of the information gain's model, then of random trials'
    for seed in range(20):
        worlds = np.random.default_rng([seed, 0])  # the same world for both: 3 actions, 6 kinds, 3 effects
        truth = worlds.dirichlet(np.ones(3), size=(3, 6))
        frequency = worlds.dirichlet(np.full(6, 0.7))  # some kinds rare
        row = []
        for criterion in ("information_gain", "random"):
            divergence = kl(truth, explore(truth, frequency, criterion, np.random.default_rng([seed, 1])))
            row += [divergence.mean(), (divergence * frequency).sum(axis=1).mean()]
        per_seed.append(row)
    ours_balanced, ours_as_they_come, random_balanced, random_as_they_come = np.mean(per_seed, axis=0)
    gain = np.array(per_seed)[:, 2] - np.array(per_seed)[:, 0]
    print(f"KL after {TRIALS} trials, every kind alike: information gain {ours_balanced:.3f}, random "
          f"{random_balanced:.3f} (paired difference {gain.mean():.3f} +- {gain.std(ddof=1) / np.sqrt(20):.3f}); "
          f"as they come: {ours_as_they_come:.3f}, {random_as_they_come:.3f}")
    assert gain.mean() > 2 * gain.std(ddof=1) / np.sqrt(len(gain))  # better on every kind, beyond the seeds' noise
    assert ours_as_they_come > 0.8 * random_as_they_come  # on the objects as they come, no large gain
