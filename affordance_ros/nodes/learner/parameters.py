"""The learner node's parameters: names, defaults and descriptors, declared in one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rcl_interfaces.msg import IntegerRange, ParameterDescriptor, SetParametersResult

from ...core import STRUCTURES, LearningOptions
from ...data.pairing import (
    DEFAULT_MAX_LIST_LENGTH,
    DEFAULT_MAX_NAME_LENGTH,
    DEFAULT_MAX_TRIAL_ID_LENGTH,
    DEFAULT_SLOP,
    DEFAULT_TRIAL_TIMEOUT,
    INTERFACE_MAX_LIST_LENGTH,
    SizeLimits,
)
from ...share import configuration_file, default_config_path, default_database_path, default_model_path
from ..contract import KEEP_ALL, robot_name_problem
from ..number_parameters import accept_integers, number_descriptor, number_value
from .node_state import NodeState


def _range(low: float, high: float) -> dict:
    """A double parameter (integers accepted) from ``low`` to ``high``."""
    return {"number_range": (low, high)}


def _int_range(low: int, high: int) -> dict:
    return {"integer_range": [IntegerRange(from_value=low, to_value=high)]}


# The default of 'max_stamp_skew': generous (a robot's clock an hour off still works), yet a stamp from
# the far future (which would time out every trial being paired) is refused.
DEFAULT_MAX_STAMP_SKEW = 3600.0
# The default of 'max_pending_trials': far above what a robot has in flight (a few trials), far below what a
# flood of parts of trials that never complete would otherwise pile up.
DEFAULT_MAX_PENDING_TRIALS = 1000


# name -> (default (for a path: the function that gives it when declared), description, read_only,
#          extra descriptor fields)
PARAMETERS = {
    "config_path": (default_config_path, (
        "Configuration in the model schema (JSON): variables, their groups and values, sensors, "
        "optionally arcs and 'learning' options; or the name of a shipped one (montesano, tools, hands, "
        "transfer). Default: the montesano config the simulated robot matches."),
        True, {}),
    "database_path": (default_database_path, (
        "SQLite case database; every completed trial is committed here at once. "
        "Default: $ROS_HOME/affordance_ros/cases.db ($ROS_HOME defaults to ~/.ros)."), True, {}),
    "model_path": (default_model_path, (
        "Where ~/learn writes the learned model (atomically) and where it is loaded from at start-up. "
        "Default: $ROS_HOME/affordance_ros/model.json."), True, {}),
    "structure": ("", (
        "How ~/learn finds the arcs when the request leaves 'structure' empty: average (a weighted sample of "
        "the structures the cases support, every answer averaged over it), k2 (greedy search: one structure, "
        "whose answers' intervals assume it), mcmc (the best structure sampled), fixed (keep the current "
        "model's arcs, else the configured ones). Empty: the configuration's learning block, else average."),
        False, {"additional_constraints": f"empty, or one of {list(STRUCTURES)}"}),
    "prior_strength": (LearningOptions().prior_strength, (
        "0: ~/learn learns from all stored cases. > 0 (with a current model): ~/learn learns from the cases "
        "stored since the current model was learned, with that model as a Dirichlet prior worth this many "
        "cases, so knowledge accumulates across sessions. Can be changed while the node runs."),
        False, _range(0.0, 1e9)),
    "slop": (DEFAULT_SLOP, (
        "Seconds the header stamps of the three parts of a trial may differ by when they are paired "
        "by stamp (empty trial_id). Keep it below half the time between trials."), True, _range(0.0, 3600.0)),
    "trial_timeout": (DEFAULT_TRIAL_TIMEOUT, (
        "An incomplete trial is dropped with a warning once the header stamps of the messages received "
        "after its first part are this many seconds later (data time: replay speed does not matter), or "
        "when no message at all has arrived for this many seconds of the node clock (use_sim_time applies)."),
        True, _range(0.001, 86400.0)),
    "qos_depth": (KEEP_ALL, (
        "History of the three reliable subscriptions. 0 (default): keep all, so a robot publishing "
        "faster than the node stores is slowed down instead of losing trials. N > 0: keep the last N "
        "messages per topic (bounded memory; the oldest messages of a longer burst are lost)."),
        True, {"integer_range": [IntegerRange(from_value=0, to_value=100000)]}),
    "robots": ("", (
        "Robots with trial topics of their own, comma-separated names (e.g. 'arm1,arm2'): for each the node "
        "also takes trials on <name>/action, <name>/object_features and <name>/effects (relative names), so that "
        "one robot's backlog cannot delay another's trials; robots without a name use action, object_features "
        "and effects, as before. A robot gets its topics with TrialPublisher(robot_name=...) or the simulated "
        "robot's robot_name parameter."), True, {}),
    "online_learning": (False, (
        "Update the model with every newly stored case at once (stepwise EM; structure and sensor models "
        "stay as learned), once a model exists. Predictions use the updated model; ~/learn replaces it and "
        "the updates restart from the new one."), True, {}),
    "online_save_period": (10.0, (
        "With online_learning: seconds between writes of the updated model to model_path (atomically; "
        "also when the node stops); 0 writes it after every update."), True, _range(0.0, 86400.0)),
    "max_stamp_skew": (DEFAULT_MAX_STAMP_SKEW, (
        "A part whose header stamp is more than this many seconds ahead of the node's clock is not taken "
        "(counted, warned, answered 'retry': the robot sends it again later): it would move data time and time "
        "out the trials being paired, and the fault may be the node's clock. Stamps in the past are accepted "
        "(replayed bags, robot clocks counting from boot). 0: no limit."), True, _range(0.0, 1e9)),
    "max_pending_trials": (DEFAULT_MAX_PENDING_TRIALS, (
        "Most trials waiting for their other parts; beyond it the oldest is dropped (counted, warned), so "
        "that parts of trials that never complete cannot fill memory."), True, _int_range(1, 10000000)),
    "max_trial_id_length": (DEFAULT_MAX_TRIAL_ID_LENGTH, (
        "Longest trial_id accepted (characters); a part with a longer one is rejected."), True,
        _int_range(1, 1000000)),
    "max_name_length": (DEFAULT_MAX_NAME_LENGTH, (
        "Longest sensor name, action label or variable name accepted in a part or a request (characters)."),
        True, _int_range(1, 1000000)),
    "max_list_length": (DEFAULT_MAX_LIST_LENGTH, (
        "Most names or values accepted in one Features message or one request list (the interfaces bound "
        "every such list to 100000 entries: no ROS client sends more)."), True,
        _int_range(1, INTERFACE_MAX_LIST_LENGTH)),
    "select_seed": (-1, (
        "Seed of ~/select_action's random draws: the order of actions whose scores tie, and strategy thompson's "
        "draw of the CPTs. -1: a seed drawn at random when the node activates (logged); a given seed repeats the "
        "answers of a run that asks the same questions in the same order."), True, _int_range(-1, 2**31 - 1)),
    "status_period": (10.0, (
        "Seconds between log lines with the counters (stored cases, rejected messages, ...), "
        "written only when they changed; 0 turns them off."), True, _range(0.0, 86400.0)),
    "diagnostics_period": (1.0, (
        "Seconds between DiagnosticArray messages on /diagnostics (OK / WARN / ERROR and key values) "
        "from configure to cleanup; 0 turns them off."), True, _range(0.0, 3600.0)),
    "autostart": (True, (
        "Configure and activate the node at start (a managed lifecycle node). false: it starts unconfigured "
        "and a lifecycle manager drives it through ~/change_state (configure, activate, ...)."), True, {}),
}


@dataclass(frozen=True)
class LearnerSettings:
    """The parameters' values at start-up; an empty path means its default."""

    config_path: Path
    database_path: Path
    model_path: Path
    structure: str
    prior_strength: float
    slop: float
    trial_timeout: float
    qos_depth: int
    robots: str
    online_learning: bool
    online_save_period: float
    max_stamp_skew: float
    max_pending_trials: int
    max_trial_id_length: int
    max_name_length: int
    max_list_length: int
    select_seed: int
    status_period: float
    diagnostics_period: float
    autostart: bool

    @property
    def robot_names(self) -> tuple[str, ...]:
        """The names in ``robots`` (checked when declared: ``robot_names``)."""
        return robot_names(self.robots)

    @property
    def limits(self) -> SizeLimits:
        """The size limits of parts and requests."""
        return SizeLimits(self.max_trial_id_length, self.max_name_length, self.max_list_length)


class ParameterError(ValueError):
    """A parameter value the node cannot start with; the message says which and why."""


def declare_learner_parameters(node) -> LearnerSettings:
    """Declare every parameter on ``node`` with its descriptor; the values it starts with.

    Double parameters take integers too (``slop:=1``); ParameterError for a value of the wrong type.
    'structure' set at run time must be one of ``STRUCTURES``.
    """
    defaults = {name: str(default()) if callable(default) else default
                for name, (default, *_) in PARAMETERS.items()}
    numbers = {}
    for name, (_, text, read_only, extra) in PARAMETERS.items():
        if "number_range" in extra:
            descriptor = numbers[name] = number_descriptor(text, *extra["number_range"], read_only=read_only)
        else:
            descriptor = ParameterDescriptor(description=text, read_only=read_only, **extra)
        node.declare_parameter(name, defaults[name], descriptor)
    accept_integers(node, numbers)
    node.add_on_set_parameters_callback(_check_structure)
    value = {name: node.get_parameter(name).value for name in PARAMETERS}
    try:
        for name, descriptor in numbers.items():
            value[name] = number_value(name, value[name], descriptor)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None
    for name in ("config_path", "database_path", "model_path"):
        value[name] = Path(value[name] or defaults[name])
    value["config_path"] = configuration_file(value["config_path"])
    if value["structure"] not in ("", *STRUCTURES):
        raise ParameterError(f"structure '{value['structure']}' is not one of {list(STRUCTURES)} (or empty)")
    names = robot_names(value["robots"])
    for name in names:
        problem = robot_name_problem(name, node.get_name(), node.get_namespace())
        if problem:
            raise ParameterError(f"robots: {problem}")
    if len(set(names)) < len(names):
        raise ParameterError(f"robots: a name is given twice in '{value['robots']}'")
    return LearnerSettings(**value)


def robot_names(text: str) -> tuple[str, ...]:
    """The names of a comma-separated list (spaces around a name and empty entries left out)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _check_structure(params) -> SetParametersResult:
    for p in params:  # (prior_strength: its descriptor's range is checked by rclpy)
        if p.name == "structure" and p.value not in ("", *STRUCTURES):
            return SetParametersResult(successful=False,
                                       reason=f"structure '{p.value}' is not one of {list(STRUCTURES)} (or empty)")
    return SetParametersResult(successful=True)


def refuse_clock_changes(node, lifecycle: NodeState) -> None:
    """Refuse to change ``use_sim_time`` on ``node`` while its ``lifecycle`` is active: its clock would jump, and
    every trial's stamp would look far ahead of it (or behind)."""
    def check(params) -> SetParametersResult:
        if lifecycle.active and any(p.name == "use_sim_time" for p in params):
            return SetParametersResult(successful=False, reason=(
                "use_sim_time cannot change while the node is active (its clock would jump, and every trial's "
                "stamp would look far ahead or behind): deactivate it first, or start it with the parameter"))
        return SetParametersResult(successful=True)
    node.add_on_set_parameters_callback(check)
