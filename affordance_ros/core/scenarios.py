"""Realistic robot scenarios that are NOT drawn from our model family, to evaluate against.

Modelled on the published descriptions of the iCub tool-use experiments (Dehban et al. 2016)
and their hand-posture variant; no real data set is used or imitated beyond those descriptions.

``tools``: 3 tools x 11 objects x 4 actions (push, pull, tap from the left, tap from the right).
Each object has a fixed shape, two latent factors (roundness, elongation) from which six
correlated descriptors in [0, 1] follow (convexity, eccentricity, compactness, circleness,
squareness, elongatedness), seen with per-view noise. The effect is the object's 2-D
displacement in cm: its direction follows the action, its size the tool (a hook pulls, a
stick barely does) and the object's shape (round objects roll further, elongated ones less),
with heavy-tailed (Student t, 3 dof) noise and ~2 % outliers (the object fell, or the tool
missed it). Each tool is also seen through three descriptors (the robot knows its tools'
prototypes: see config/tools.json).

``hands``: 3 hand postures (straight, fortyfive, bent) x 2 objects (ball, box) x 4 actions,
the same kind of displacement.

Three variants look more like the real data sets: ``hands_shared``, about ten trials of each
hand-posture condition whose effects share structure (the size of a displacement is the action's, plus
the hand's, plus the object's, with a small interaction: a condition's own ten trials are a noisy
estimate, its neighbours know more); ``tools_unseen``, the tools scenario where an object's mobility is
its own, unrelated to its shape (shape does not carry over to an unseen object), each object seen
through a few views that repeat across its trials; ``transfer``, hand postures and tools seen through
the same six descriptors of the manipulator, for learning on the hands and predicting the tools (the
stick is shaped like a long straight hand, the hook like a bent one, the rake is wide as no hand is; every
tool is longer than any hand, so it moves an object two to three times as far as the hand it is shaped like:
what it does lies beyond what the hands showed).
"""

from __future__ import annotations

import numpy as np

from .cases import CaseSet
from .network import AffordanceNetwork

SCENARIOS = {
    "tools": "3 tools x 11 objects x 4 actions",
    "hands": "3 hand postures x 2 objects x 4 actions",
    "hands_shared": "hands whose conditions' effects share structure (action + hand + object)",
    "tools_unseen": "tools where an object's effect is its own, not its shape's, seen through a few views",
    "transfer": "3 hand postures and 3 tools x 2 objects x 4 actions, the manipulator seen through 6 "
                "descriptors (learn on kind=hand, predict kind=tool)",
}
ACTIONS = ("push", "pull", "tap_left", "tap_right")
# unit direction of each action in the table plane (x: to the robot's right, y: away from it)
DIRECTIONS = {"push": (0.0, 1.0), "pull": (0.0, -1.0), "tap_left": (1.0, 0.0), "tap_right": (-1.0, 0.0)}
SHAPE_DESCRIPTORS = ("convexity", "eccentricity", "compactness", "circleness", "squareness", "elongatedness")
TOOL_DESCRIPTORS = ("tool_elongation", "tool_hook", "tool_width")
TOOLS = {  # descriptor prototypes, and how far each action moves a reference object (cm)
    "stick": ((0.90, 0.05, 0.10), {"push": 11.0, "pull": 1.0, "tap_left": 9.0, "tap_right": 9.0}),
    "hook": ((0.70, 0.60, 0.25), {"push": 7.0, "pull": 13.0, "tap_left": 6.0, "tap_right": 10.0}),
    "rake": ((0.55, 0.35, 0.80), {"push": 10.0, "pull": 9.0, "tap_left": 4.0, "tap_right": 4.0}),
}
TOOL_NOISE = 0.03
# object: (roundness, elongation) in [0, 1]
OBJECTS = {
    "ball": (0.95, 0.05), "tennis_ball": (0.90, 0.10), "orange": (0.85, 0.15),
    "can": (0.65, 0.45), "bottle": (0.55, 0.70),
    "cube": (0.10, 0.10), "box": (0.15, 0.20), "dice": (0.05, 0.05),
    "pencil_case": (0.20, 0.85), "ruler_box": (0.10, 0.95), "toy_car": (0.45, 0.55),
}
VIEW_NOISE = 0.04  # per-view noise of the latent factors
DESCRIPTOR_NOISE = 0.02
OUTLIER_RATE = 0.02
HANDS = {  # finger flexion (degrees), and how far each action moves a reference object (cm)
    "straight": (0.0, {"push": 9.0, "pull": 2.0, "tap_left": 7.0, "tap_right": 7.0}),
    "fortyfive": (45.0, {"push": 7.0, "pull": 5.0, "tap_left": 6.0, "tap_right": 6.0}),
    "bent": (90.0, {"push": 5.0, "pull": 8.0, "tap_left": 4.0, "tap_right": 4.0}),
}
HAND_OBJECTS = {"ball": 1.4, "box": 0.7}  # mobility
# hands_shared: the size of a displacement (cm) is the sum of these, and of the interaction where given
SHARED_ACTION = {"push": 8.0, "pull": 5.0, "tap_left": 6.0, "tap_right": 6.0}
SHARED_HAND = {"straight": 1.5, "fortyfive": 0.0, "bent": -1.5}
SHARED_OBJECT = {"ball": 2.0, "box": -1.5}
SHARED_INTERACTION = {("pull", "bent"): 3.0, ("pull", "straight"): -2.5}
# tools_unseen: views of each object, one per trial
TOOLS_UNSEEN_VIEWS = 4
# transfer: each manipulator's kind and latent (reach, hook, width) in [0, 1]: a tool is longer than any hand
MANIPULATORS = {
    "straight": ("hand", (0.40, 0.05, 0.30)), "fortyfive": ("hand", (0.35, 0.45, 0.30)),
    "bent": ("hand", (0.30, 0.85, 0.30)),
    "stick": ("tool", (0.90, 0.05, 0.10)), "hook": ("tool", (0.80, 0.80, 0.15)),
    "rake": ("tool", (0.70, 0.50, 0.90)),
}
# the reach at which a manipulator's lever is 1: a hand's (a tool's lever, its reach over this, is 2-2.6)
HAND_REACH = 0.35
MANIPULATOR_DESCRIPTORS = ("elongation", "curvature", "width", "convexity", "compactness", "tip_angle")
TRANSFER_VIEWS = 3
HAND_OBJECT_CIRCLENESS = {"ball": 0.9, "box": 0.15}
# what a robot publishes of each trial: object features and effects, by reading name
FEATURES = {
    "tools": {"object": TOOL_DESCRIPTORS + SHAPE_DESCRIPTORS, "effect": ("dx", "dy")},
    "hands": {"object": ("finger_flexion", "object_circleness"), "effect": ("dx", "dy")},
    "transfer": {"object": MANIPULATOR_DESCRIPTORS + ("object_circleness",), "effect": ("dx", "dy")},
}
FEATURES["hands_shared"] = FEATURES["hands"]
FEATURES["tools_unseen"] = FEATURES["tools"]


def shape_descriptors(roundness: np.ndarray, elongation: np.ndarray) -> np.ndarray:
    """The six descriptors (n, 6) in [0, 1] of shapes with these latent factors (correlated by design)."""
    r, e = np.clip(roundness, 0, 1), np.clip(elongation, 0, 1)
    out = np.stack([
        0.70 + 0.28 * r - 0.10 * e,                  # convexity
        0.10 + 0.80 * e,                             # eccentricity
        0.45 + 0.45 * r * (1 - e) - 0.20 * e,        # compactness
        0.05 + 0.90 * r * (1 - 0.6 * e),             # circleness
        0.10 + 0.80 * (1 - r) * (1 - e),             # squareness
        0.05 + 0.85 * e ** 1.2,                      # elongatedness
    ], axis=1)
    return np.clip(out, 0.0, 1.0)


def _displacement(base: np.ndarray, mobility: np.ndarray, actions: np.ndarray, lateral: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """2-D displacements (n, 2): size base * mobility with multiplicative and additive Student-t noise,
    direction the action's with an angular error, plus ~2 % outliers.
    """
    n = len(base)
    size = base * mobility * np.exp(0.20 * rng.standard_t(3, n).clip(-6, 6))
    size = np.maximum(size + 0.8 * rng.standard_t(3, n), 0.0)
    direction = np.array([DIRECTIONS[a] for a in actions])
    angle = np.deg2rad(10.0 * rng.standard_t(3, n).clip(-6, 6)) + lateral * rng.standard_normal(n)
    c, s = np.cos(angle), np.sin(angle)
    rotated = np.stack([c * direction[:, 0] - s * direction[:, 1], s * direction[:, 0] + c * direction[:, 1]], axis=1)
    out = size[:, None] * rotated
    outlier = rng.random(n) < OUTLIER_RATE
    missed = outlier & (rng.random(n) < 0.5)
    fell = outlier & ~missed
    out[missed] = rng.normal(0.0, 0.3, (int(missed.sum()), 2))
    theta = rng.uniform(0, 2 * np.pi, int(fell.sum()))
    radius = rng.uniform(15.0, 35.0, int(fell.sum()))
    out[fell] = np.stack([radius * np.cos(theta), radius * np.sin(theta)], axis=1)
    return out


def tools_views(tools: np.ndarray, objects: np.ndarray, rng: np.random.Generator, n_views: int | None = None) -> dict:
    """What the robot sees of (tool, object) pairs: {descriptor: readings (n,)}, a new view of the object each
    trial or one of its ``n_views`` views (``_views``).
    """
    n = len(tools)
    latent = np.array([OBJECTS[o] for o in objects]).reshape(n, 2)
    shape = _views(np.asarray(objects), latent, n_views, rng)
    tool_desc = np.array([TOOLS[t][0] for t in tools]).reshape(n, 3) + TOOL_NOISE * rng.standard_normal((n, 3))
    views = {name: tool_desc[:, j] for j, name in enumerate(TOOL_DESCRIPTORS)}
    views.update({name: np.clip(shape[:, j], 0.0, 1.0) for j, name in enumerate(SHAPE_DESCRIPTORS)})
    return views


def _views(objects: np.ndarray, latent: np.ndarray, n_views: int | None, rng: np.random.Generator) -> np.ndarray:
    """The six shape descriptors (n, 6) of each trial's view of its object: a new view per trial, or one of the
    object's ``n_views`` views (the same readings repeat across its trials).
    """
    n = len(objects)
    if n_views is None:
        view = latent + VIEW_NOISE * rng.standard_normal((n, 2))
        return shape_descriptors(view[:, 0], view[:, 1]) + DESCRIPTOR_NOISE * rng.standard_normal((n, 6))
    names = sorted(set(objects.tolist()))
    factors = np.array([OBJECTS[o] for o in names])[:, None, :] + VIEW_NOISE * rng.standard_normal(
        (len(names), n_views, 2))
    seen = shape_descriptors(factors[..., 0].ravel(), factors[..., 1].ravel()).reshape(len(names), n_views, 6)
    seen = seen + DESCRIPTOR_NOISE * rng.standard_normal(seen.shape)
    which = np.searchsorted(names, objects.astype(str))
    return seen[which, rng.integers(n_views, size=n)]


def tools_effects(tools: np.ndarray, objects: np.ndarray, actions: np.ndarray, rng: np.random.Generator,
                  behaviour: np.ndarray | None = None) -> dict:
    """The displacements {"dx", "dy"} (n,) of ``actions`` done with ``tools`` on ``objects``; ``behaviour``:
    per trial, the (roundness, elongation) the object moves by (n, 2) (default: its shape's).
    """
    latent = np.array([OBJECTS[o] for o in objects]).reshape(len(tools), 2) if behaviour is None else behaviour
    base = np.array([TOOLS[t][1][a] for t, a in zip(tools, actions)])
    r, e = latent[:, 0], latent[:, 1]
    # round objects roll further; elongated ones less, and tapping one from the side turns it more than moves it
    tap = np.isin(actions, ("tap_left", "tap_right"))
    mobility = (0.5 + 1.1 * r) * (1.0 - 0.35 * e - 0.25 * e * tap)
    lateral = 0.05 + 0.25 * r  # round objects veer off more
    disp = _displacement(base, mobility, actions, lateral, rng)
    return {"dx": disp[:, 0], "dy": disp[:, 1]}


def simulate_tools(n_repeats: int = 10, seed: int = 0, shape_carries_over: bool = True,
                   n_views: int | None = None) -> dict:
    """Every (tool, object, action) ``n_repeats`` times, shuffled. Returns columns: trial_id, object_id,
    Action, Tool (labels), the tool and shape descriptors, dx, dy.

    ``shape_carries_over`` False: each object's mobility and veer are its own (drawn once per object), not
    its shape's. ``n_views``: each object is seen through that many views, one per trial (None: a new
    view every trial).
    """
    rng = np.random.default_rng(seed)
    grid = [(t, o, a) for t in TOOLS for o in OBJECTS for a in ACTIONS for _ in range(n_repeats)]
    grid = [grid[j] for j in rng.permutation(len(grid))]
    tools, objects, actions = (np.array(x, dtype=object) for x in zip(*grid))
    views = tools_views(tools, objects, rng, n_views)
    behaviour = None
    if not shape_carries_over:  # every object its own (roundness, elongation) of behaviour, whatever its shape
        own = {o: rng.uniform(0.0, 1.0, 2) for o in OBJECTS}
        behaviour = np.array([own[o] for o in objects])
    columns = {"trial_id": [f"tools-{k:05d}" for k in range(len(grid))], "object_id": list(objects),
               "Action": list(actions), "Tool": list(tools), **views}
    columns.update(tools_effects(tools, objects, actions, rng, behaviour))
    return columns


def hands_views(hands: np.ndarray, objects: np.ndarray, rng: np.random.Generator) -> dict:
    """What the robot senses of (hand posture, object) pairs: {"finger_flexion", "object_circleness"} (n,)."""
    n = len(hands)
    flexion = np.array([HANDS[h][0] for h in hands]) + 4.0 * rng.standard_normal(n)
    circleness = np.array([HAND_OBJECT_CIRCLENESS[o] for o in objects]) + 0.05 * rng.standard_normal(n)
    return {"finger_flexion": flexion, "object_circleness": circleness}


def hands_effects(hands: np.ndarray, objects: np.ndarray, actions: np.ndarray, rng: np.random.Generator) -> dict:
    """The displacements {"dx", "dy"} (n,) of ``actions`` done with hand postures ``hands`` on ``objects``."""
    base = np.array([HANDS[h][1][a] for h, a in zip(hands, actions)])
    mobility = np.array([HAND_OBJECTS[o] for o in objects])
    lateral = np.where(np.asarray(objects) == "ball", 0.25, 0.05)
    disp = _displacement(base, mobility, actions, lateral, rng)
    return {"dx": disp[:, 0], "dy": disp[:, 1]}


def simulate_hands(n_repeats: int = 10, seed: int = 0) -> dict:
    """Every (hand posture, object, action) ``n_repeats`` times, shuffled. Returns columns: trial_id,
    object_id, Action, Hand, Object (labels), finger_flexion, object_circleness, dx, dy.
    """
    rng = np.random.default_rng(seed)
    grid = [(h, o, a) for h in HANDS for o in HAND_OBJECTS for a in ACTIONS for _ in range(n_repeats)]
    grid = [grid[j] for j in rng.permutation(len(grid))]
    hands, objects, actions = (np.array(x, dtype=object) for x in zip(*grid))
    effects = hands_effects(hands, objects, actions, rng)  # (drawn first: the order of the random stream)
    return {"trial_id": [f"hands-{k:05d}" for k in range(len(grid))], "object_id": list(objects),
            "Action": list(actions), "Hand": list(hands), "Object": list(objects),
            **hands_views(hands, objects, rng), **effects}


def simulate_hands_shared(n_repeats: int = 10, seed: int = 0) -> dict:
    """``simulate_hands``' conditions, ``n_repeats`` trials of each, whose displacements share structure: the
    size is the action's (``SHARED_ACTION``) plus the hand's (``SHARED_HAND``) plus the object's
    (``SHARED_OBJECT``), plus a small interaction (``SHARED_INTERACTION``), with the same noise and outliers.
    The same columns as ``simulate_hands``.
    """
    rng = np.random.default_rng(seed)
    grid = [(h, o, a) for h in HANDS for o in HAND_OBJECTS for a in ACTIONS for _ in range(n_repeats)]
    grid = [grid[j] for j in rng.permutation(len(grid))]
    hands, objects, actions = (np.array(x, dtype=object) for x in zip(*grid))
    n = len(grid)
    size = np.array([SHARED_ACTION[a] + SHARED_HAND[h] + SHARED_OBJECT[o] + SHARED_INTERACTION.get((a, h), 0.0)
                     for h, o, a in zip(hands, objects, actions)])
    disp = _displacement(size, np.ones(n), actions, np.where(objects == "ball", 0.15, 0.05), rng)
    return {"trial_id": [f"hands-{k:05d}" for k in range(n)], "object_id": list(objects), "Action": list(actions),
            "Hand": list(hands), "Object": list(objects), **hands_views(hands, objects, rng),
            "dx": disp[:, 0], "dy": disp[:, 1]}


def manipulator_descriptors(reach: np.ndarray, hook: np.ndarray, width: np.ndarray) -> np.ndarray:
    """The six descriptors (n, 6) in [0, 1] of manipulators with these latent factors (correlated by design)."""
    out = np.stack([
        0.20 + 0.70 * reach,                          # elongation
        0.10 + 0.80 * hook,                           # curvature
        0.10 + 0.80 * width,                          # width
        0.90 - 0.40 * hook - 0.20 * width,            # convexity
        0.70 - 0.40 * reach + 0.20 * width,           # compactness
        0.10 + 0.80 * hook * (1.0 - 0.3 * width),     # tip angle
    ], axis=1)
    return np.clip(out, 0.0, 1.0)


def simulate_transfer(n_repeats: int = 10, seed: int = 0, n_views: int = TRANSFER_VIEWS) -> dict:
    """Every (manipulator, object, action) of ``MANIPULATORS`` (3 hand postures, 3 tools) ``n_repeats`` times,
    shuffled. Each manipulator is seen through ``n_views`` views of its six descriptors, one per trial (the
    same readings repeat); the displacement's size follows its latent reach, hook and width
    (``_transfer_size``) times the object's mobility. Returns columns: trial_id, kind (hand or tool),
    manipulator_id, Action, Object (labels), the descriptors ``MANIPULATOR_DESCRIPTORS``, object_circleness,
    dx, dy.
    """
    rng = np.random.default_rng(seed)
    names = list(MANIPULATORS)
    grid = [(m, o, a) for m in names for o in HAND_OBJECTS for a in ACTIONS for _ in range(n_repeats)]
    grid = [grid[j] for j in rng.permutation(len(grid))]
    manipulators, objects, actions = (np.array(x, dtype=object) for x in zip(*grid))
    n = len(grid)
    latent = np.array([MANIPULATORS[m][1] for m in names])                              # (M, 3)
    views = latent[:, None, :] + VIEW_NOISE * rng.standard_normal((len(names), n_views, 3))
    seen = manipulator_descriptors(*views.reshape(-1, 3).T).reshape(len(names), n_views, 6)
    seen = seen + DESCRIPTOR_NOISE * rng.standard_normal(seen.shape)
    which = np.array([names.index(m) for m in manipulators])
    descriptors = np.clip(seen[which, rng.integers(n_views, size=n)], 0.0, 1.0)
    size = _transfer_size(latent[which], actions)
    mobility = np.array([HAND_OBJECTS[o] for o in objects])
    disp = _displacement(size, mobility, actions, np.where(objects == "ball", 0.25, 0.05), rng)
    circleness = np.array([HAND_OBJECT_CIRCLENESS[o] for o in objects]) + 0.05 * rng.standard_normal(n)
    columns = {"trial_id": [f"transfer-{k:05d}" for k in range(n)],
               "kind": [MANIPULATORS[m][0] for m in manipulators], "manipulator_id": list(manipulators),
               "Action": list(actions), "Object": list(objects)}
    columns.update({name: descriptors[:, j] for j, name in enumerate(MANIPULATOR_DESCRIPTORS)})
    columns.update({"object_circleness": circleness, "dx": disp[:, 0], "dy": disp[:, 1]})
    return columns


def _transfer_size(latent: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """How far (cm) each action moves a reference object with a manipulator of latent (reach, hook,
    width): what its contact does (a straight front pushes, a hook draws, a wide one taps) times its
    lever (its reach over ``HAND_REACH``): a tool, longer than any hand, moves an object two to
    three times as far as the hand posture it is shaped like, as the real iCub data's tools do.
    """
    reach, hook, width = latent.T
    contact = {"push": 2.0 + 8.0 * (1.0 - hook), "pull": 1.0 + 9.0 * hook, "tap_left": 3.0 + 6.0 * width,
               "tap_right": 3.0 + 6.0 * width}
    return reach / HAND_REACH * np.select([actions == a for a in ACTIONS], [contact[a] for a in ACTIONS])


SIMULATORS = {"tools": simulate_tools, "hands": simulate_hands, "hands_shared": simulate_hands_shared,
              "tools_unseen": lambda n_repeats=10, seed=0: simulate_tools(n_repeats, seed, shape_carries_over=False,
                                                                          n_views=TOOLS_UNSEEN_VIEWS),
              "transfer": simulate_transfer}


def simulate(scenario: str, n_repeats: int = 10, seed: int = 0) -> dict:
    """Columns of a scenario's trials (``SCENARIOS``; see ``simulate_tools``, ``simulate_hands``,
    ``simulate_hands_shared``, ``simulate_transfer``).
    """
    if scenario not in SIMULATORS:
        raise ValueError(f"unknown scenario '{scenario}'; expected one of {list(SCENARIOS)}")
    return SIMULATORS[scenario](n_repeats, seed)


def scenario_cases(config: AffordanceNetwork, columns: dict, extra=("object_id",), labels=None) -> CaseSet:
    """A CaseSet of simulated ``columns`` for ``config``: its label columns (default: every column that
    names a variable) and every reading the config has a sensor for; ``extra`` columns kept aside.
    """
    known = set(config.sensor_variable) | set(config.names if labels is None else labels)
    picked = {name: list(col) for name, col in columns.items() if name in known}
    cases = CaseSet.from_columns(config, picked, [str(t) for t in columns["trial_id"]])
    return cases.with_extra({name: columns[name] for name in extra})


__all__ = ["ACTIONS", "FEATURES", "MANIPULATOR_DESCRIPTORS", "SCENARIOS", "SHAPE_DESCRIPTORS", "TOOL_DESCRIPTORS",
           "hands_effects", "hands_views", "scenario_cases", "simulate", "simulate_hands", "simulate_hands_shared",
           "simulate_tools", "simulate_transfer", "tools_effects", "tools_views"]
