"""Assemble trials from their three parts (action, object features, effects) as they arrive.

Parts with the same ``trial_id`` belong together. Parts with an empty id are paired by
their header stamps: the three stamps of a trial lie within ``slop`` seconds of each
other.

Incomplete trials are judged on **data time**, the latest header stamp seen, so that a
bag replayed at any speed pairs and times out exactly as it was recorded:

- every part that is accepted (``PartValidator`` found it valid) goes through ``observe(stamp, now)``
  before ``add``: data time moves on to its stamp, and a trial still missing a part once data time is
  ``trial_timeout`` past the data time of its first part is dropped. A rejected part does not move
  data time (a bad part stamped far in the future would otherwise time out every trial being paired);
- the fallback for when messages stop: ``expire(now)`` drops every trial still missing a
  part when no message at all has arrived for ``trial_timeout`` seconds of the *receive
  clock* (``now``: the node's ROS clock, or a bag's log times), so the last incomplete
  trials of a stream are still dropped and reported. Offline import calls it before each
  message (and with ``inf`` when the bag ends), the node on a timer.

A part without a stamp (0) advances data time by the receive-clock time since the
previous message instead. A stamp more than ``CLOCK_RESTART`` seconds behind or ahead of data
time restarts data time at that stamp, the trials waiting included: a simulator or a robot whose
clock started over, or two senders whose clocks are that far apart (a bag of another day replayed
while a robot streams, a robot whose clock was never set), whose parts would otherwise take turns
moving data time by hours and drop every trial waiting at each turn.
The node converts its messages into (kind, trial_id, stamp, payload).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass, field

from ..core import GROUPS, SENSOR_GROUPS, AffordanceNetwork
from ..core.errors import did_you_mean
from ..core.network import out_of_range
from ..core.number_checks import is_finite_number
from .log_text import quoted
from .trial import Trial

# The defaults of the learner node's 'slop' and 'trial_timeout' parameters (and of offline import).
DEFAULT_SLOP = 0.1
DEFAULT_TRIAL_TIMEOUT = 5.0
# Completed trial ids remembered to recognise parts sent again after their trial was stored.
_REMEMBERED_IDS = 10000
# Seconds a stamp may lie behind (or ahead of) data time before it is taken for another clock, or one that started
# over.
CLOCK_RESTART = 3600.0


# The defaults of the learner node's size limits (parameters max_trial_id_length, max_name_length,
# max_list_length): far above what a robot sends, far below what hurts (memory, database, log size).
DEFAULT_MAX_TRIAL_ID_LENGTH = 256
DEFAULT_MAX_NAME_LENGTH = 256
DEFAULT_MAX_LIST_LENGTH = 1000
# The bound of every list in msg/Features.msg and in the requests of srv/ (test/test_interfaces.py checks):
# a ROS client's middleware refuses to serialise a longer one (rclpy: "failed to send request").
INTERFACE_MAX_LIST_LENGTH = 100_000


@dataclass(frozen=True)
class SizeLimits:
    """The longest trial_id, name (sensor, action label, variable) and list (names, values) accepted."""

    max_trial_id_length: int = DEFAULT_MAX_TRIAL_ID_LENGTH
    max_name_length: int = DEFAULT_MAX_NAME_LENGTH
    max_list_length: int = DEFAULT_MAX_LIST_LENGTH

    def __post_init__(self):
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def check_name(self, name: str, what: str) -> None:
        """PairingError if ``name`` (a ``what``: 'sensor name', 'action label', ...) is too long."""
        if len(name) > self.max_name_length:
            raise OversizedError(f"the {what} is {len(name)} characters long, more than max_name_length "
                                 f"{self.max_name_length}")

    def check_list(self, size: int, what: str) -> None:
        if size > self.max_list_length:
            raise OversizedError(f"{size} {what}, more than max_list_length {self.max_list_length}")

    def check_trial_id(self, trial_id: str) -> None:
        if len(trial_id) > self.max_trial_id_length:
            raise OversizedError(f"its trial_id is {len(trial_id)} characters long, more than "
                                 f"max_trial_id_length {self.max_trial_id_length}")


class PairingError(ValueError):
    """A part that cannot be paired; the message says why."""


class OversizedError(PairingError):
    """A part with a string or a list longer than the size limits allow."""


class OutOfRangeError(PairingError):
    """A part with a reading outside its sensor's valid_range."""


class DuplicatePartError(PairingError):
    """A part whose trial already has a part of this kind."""


@dataclass(frozen=True)
class DroppedTrial:
    """An incomplete trial given up on: ``trial_id`` ('' when paired by stamp), its parts, why."""

    trial_id: str
    stamp: float | None
    parts: tuple[str, ...]
    reason: str


@dataclass
class _Pending:
    trial_id: str
    started: float  # data time when its first part arrived
    sequence: int   # the order trials started in
    anchor: float = 0.0  # the stamp of its first part (trials paired by stamp)
    parts: dict = field(default_factory=dict)  # kind -> (stamp, payload)

    def stamps(self) -> list[float]:
        return [stamp for stamp, _ in self.parts.values()]


class StampedTrials:
    """The trials without a trial_id being paired, in the order they started, found by stamp.

    Every part of such a trial lies within ``slop`` of each of its other parts, so of its first part's
    stamp (its anchor): the trials a part may belong to are those still missing its kind with an
    anchor within ``slop`` of its stamp, found by bisection in one sorted list per kind. A flood of
    parts of one kind therefore costs a logarithm per part, not a pass over every trial waiting.
    """

    def __init__(self, slop: float):
        self.slop = slop
        self.trials: dict[int, _Pending] = {}  # sequence -> trial, in the order they started
        self._missing = {kind: [] for kind in GROUPS}  # kind -> sorted (anchor, sequence) of trials without it
        self._held: set[tuple[str, float]] = set()     # (kind, stamp) of every part held

    def __len__(self) -> int:
        return len(self.trials)

    def match(self, kind: str, stamp: float) -> _Pending | None:
        """The trial a part of ``kind`` stamped ``stamp`` completes best (the nearest, all its stamps within
        ``slop``), None for none; DuplicatePartError for a part of that kind and stamp held already."""
        if (kind, stamp) in self._held:
            raise DuplicatePartError(f"a '{kind}' part with stamp {stamp:.6f} s and no trial_id was already received")
        index = self._missing[kind]
        low = bisect.bisect_left(index, (stamp - self.slop, -1))
        best, best_distance = None, None
        for _, sequence in index[low:bisect.bisect_right(index, (stamp + self.slop, math.inf))]:
            trial = self.trials[sequence]
            distance = max(abs(stamp - s) for s in trial.stamps())
            if distance <= self.slop and (best is None or distance < best_distance):
                best, best_distance = trial, distance
        return best

    def start(self, trial: _Pending, kind: str, stamp: float, payload) -> None:
        """A new trial, with its first part."""
        trial.anchor = stamp
        self.trials[trial.sequence] = trial
        for other in GROUPS:
            if other != kind:
                bisect.insort(self._missing[other], (stamp, trial.sequence))
        self._held.add((kind, stamp))
        trial.parts[kind] = (stamp, payload)

    def add(self, trial: _Pending, kind: str, stamp: float, payload) -> None:
        """Another part of ``trial``."""
        self._unindex(trial, kind)
        self._held.add((kind, stamp))
        trial.parts[kind] = (stamp, payload)

    def remove(self, trial: _Pending) -> None:
        del self.trials[trial.sequence]
        for kind in GROUPS:
            if kind in trial.parts:
                self._held.discard((kind, trial.parts[kind][0]))
            else:
                self._unindex(trial, kind)

    def _unindex(self, trial: _Pending, kind: str) -> None:
        index, key = self._missing[kind], (trial.anchor, trial.sequence)
        del index[bisect.bisect_left(index, key)]


class TrialAssembler:
    """For every message: ``observe`` (returns the trials that timed out), then ``add`` if the part is
    valid (returns the trial it completes). Call ``expire`` between messages with the receive clock.

    ``max_pending``: at most this many trials wait for parts (0: no limit); beyond it the oldest are
    dropped by ``observe``. ``remember_completed``: how many completed trial ids are remembered to tell
    a part sent again after its trial completed (0: none; the node's intake knows its stored trials)."""

    def __init__(self, slop: float = DEFAULT_SLOP, trial_timeout: float = DEFAULT_TRIAL_TIMEOUT, max_pending: int = 0,
                 remember_completed: int = _REMEMBERED_IDS):
        if not slop >= 0:
            raise ValueError(f"slop must be >= 0 seconds, got {slop}")
        if not trial_timeout > 0:
            raise ValueError(f"trial_timeout must be > 0 seconds, got {trial_timeout}")
        if max_pending < 0:
            raise ValueError(f"max_pending must be >= 0 (0: no limit), got {max_pending}")
        self.slop = float(slop)
        self.trial_timeout = float(trial_timeout)
        self.max_pending = max_pending
        self.remember_completed = remember_completed
        self.counts = {"completed": 0, "duplicate_parts": 0, "dropped": 0}
        self.data_time: float | None = None     # the latest header stamp seen
        self._stamped = False                   # whether data time comes from a stamp yet
        self.last_arrival: float | None = None  # receive-clock time of the latest message
        self._by_id: dict[str, _Pending] = {}
        self._by_stamp = StampedTrials(self.slop)
        self._lone: dict[int, _Pending] = {}  # sequence -> the trials with one part, in the order they started
        self._sequence = 0
        self._completed_ids: OrderedDict[str, None] = OrderedDict()

    @property
    def pending(self) -> int:
        """Trials waiting for a part."""
        return len(self._by_id) + len(self._by_stamp)

    def waiting_for(self, trial_id: str) -> bool:
        """Whether the trial ``trial_id`` has parts here, waiting for the others."""
        return trial_id in self._by_id

    def observe(self, stamp: float | None, now: float) -> list[DroppedTrial]:
        """A message stamped ``stamp`` arrived at ``now`` (receive clock): data time moves on, and
        the trials it leaves more than ``trial_timeout`` behind are dropped and returned (and the oldest
        beyond ``max_pending``, making room for one more)."""
        previous, self.last_arrival = self.last_arrival, now
        if stamp is None or not stamp > 0:  # no stamp: the receive clock stands in
            self.data_time = self._data_time() + (max(0.0, now - previous) if previous is not None else 0.0)
        elif not self._stamped or abs(stamp - self.data_time) > CLOCK_RESTART:
            # the first stamp, the sender's clock started over, or another sender's clock: data time starts (again)
            # here, for the trials waiting too (on a jump forward they would all look trial_timeout behind)
            self._stamped = True
            self.data_time = stamp
            for pending in self._pendings():
                pending.started = stamp
        elif stamp > self.data_time:
            self.data_time = stamp
        late = []
        for pendings in (self._by_id.values(), self._by_stamp.trials.values()):  # each in the order they started
            for pending in pendings:
                if self.data_time - pending.started <= self.trial_timeout:
                    break
                late.append(pending)
        dropped = self._drop(late, f"while the header stamps moved on by trial_timeout {self.trial_timeout:g} s")
        if self.max_pending and self.pending >= self.max_pending:
            dropped += self._drop(self._oldest(self.pending - self.max_pending + 1),
                                  f"while max_pending_trials {self.max_pending} trials waited for parts")
        return dropped

    def add(self, kind: str, trial_id: str, stamp: float | None, payload, now: float) -> Trial | None:
        """Add one part (``observe`` it first); return the trial it completes, or None while parts are missing.

        ``payload``: the action label for 'action', {sensor: reading} for 'object' and 'effect';
        ``now``: the receive clock, kept as the trial's ``received`` time.
        Raises PairingError (DuplicatePartError for a part seen before) and leaves the state unchanged.
        """
        if kind not in GROUPS:
            raise ValueError(f"unknown part kind '{kind}'; expected one of {list(GROUPS)}")
        if trial_id:
            pending = self._pending_by_id(kind, trial_id)
            pending.parts[kind] = (stamp, payload)
        else:
            pending = self._pending_by_stamp(kind, stamp, payload)
        if len(pending.parts) == 1:
            self._lone[pending.sequence] = pending
        else:
            self._lone.pop(pending.sequence, None)
        if len(pending.parts) < len(GROUPS):
            return None
        return self._complete(pending, now)

    def expire(self, now: float) -> list[DroppedTrial]:
        """The fallback once messages stop: if none arrived for more than ``trial_timeout`` of the
        receive clock before ``now``, drop every incomplete trial (``now`` = inf: drop them all)."""
        if self.last_arrival is not None and now < self.last_arrival:  # the clock jumped back (a looped bag)
            self.last_arrival = now
        if self.last_arrival is None or now - self.last_arrival <= self.trial_timeout:
            return []
        return self._drop(self._pendings(), f"and no message at all for trial_timeout {self.trial_timeout:g} s")

    def forget(self, trial_id: str) -> None:
        """Forget that ``trial_id`` was completed (its case could not be stored): it may be sent again."""
        self._completed_ids.pop(trial_id, None)

    def _pendings(self) -> list[_Pending]:
        return [*self._by_id.values(), *self._by_stamp.trials.values()]

    def _oldest(self, n: int) -> list[_Pending]:
        """The ``n`` trials to drop when too many wait: those with one part first (a flood of parts of trials
        that never complete goes before a trial whose last part is merely late), the oldest of each. Looks at
        no more than ``n`` trials of each kind, however many wait: a flood's part costs the same at any bound."""
        oldest = list(itertools.islice(self._lone.values(), n))
        if len(oldest) < n:  # then every lone trial goes: the oldest others after them
            others = (trial for trial in heapq.merge(self._by_id.values(), self._by_stamp.trials.values(),
                                                     key=lambda t: t.sequence) if len(trial.parts) > 1)
            oldest += itertools.islice(others, n - len(oldest))
        return oldest

    def _drop(self, pendings: list[_Pending], why: str) -> list[DroppedTrial]:
        dropped = []
        for pending in pendings:
            self._remove(pending)
            missing = [k for k in GROUPS if k not in pending.parts]
            stamps = pending.stamps()
            dropped.append(DroppedTrial(
                trial_id=pending.trial_id, stamp=min(stamps) if stamps else None,
                parts=tuple(k for k in GROUPS if k in pending.parts),
                reason=f"no {' or '.join(repr(k) for k in missing)} part {why}"))
        self.counts["dropped"] += len(dropped)
        return dropped

    # ---------------------------------------------------------------- helpers
    def _new(self, trial_id: str) -> _Pending:
        self._sequence += 1
        return _Pending(trial_id, self._data_time(), self._sequence)

    def _remove(self, pending: _Pending) -> None:
        self._lone.pop(pending.sequence, None)
        if pending.trial_id:
            del self._by_id[pending.trial_id]
        else:
            self._by_stamp.remove(pending)

    def _pending_by_id(self, kind: str, trial_id: str) -> _Pending:
        if trial_id in self._completed_ids:
            self.counts["duplicate_parts"] += 1
            raise DuplicatePartError(f"trial '{quoted(trial_id)}' is already complete; this '{kind}' part was sent "
                                     "again")
        pending = self._by_id.get(trial_id)
        if pending is None:
            pending = self._by_id[trial_id] = self._new(trial_id)
        elif kind in pending.parts:
            self.counts["duplicate_parts"] += 1
            raise DuplicatePartError(f"trial '{quoted(trial_id)}' already has its '{kind}' part; kept the first one")
        return pending

    def _pending_by_stamp(self, kind: str, stamp: float | None, payload) -> _Pending:
        if stamp is None or stamp <= 0:
            raise PairingError(f"'{kind}' part with no trial_id and no header stamp: cannot pair it; "
                               "set header.stamp or trial_id")
        try:
            pending = self._by_stamp.match(kind, stamp)
        except DuplicatePartError:
            self.counts["duplicate_parts"] += 1
            raise
        if pending is None:
            pending = self._new("")
            self._by_stamp.start(pending, kind, stamp, payload)
        else:
            self._by_stamp.add(pending, kind, stamp, payload)
        return pending

    def _data_time(self) -> float:
        return self.data_time if self.data_time is not None else 0.0

    def _complete(self, pending: _Pending, now: float) -> Trial:
        action_stamp, action = pending.parts["action"]
        trial_id = pending.trial_id or f"stamp-{action_stamp:.6f}"
        trial = Trial(trial_id=trial_id, action=action, object_features=dict(pending.parts["object"][1]),
                      effects=dict(pending.parts["effect"][1]), stamp=action_stamp, received=now)
        self._remove(pending)
        if pending.trial_id and self.remember_completed:
            self._completed_ids[trial_id] = None
            if len(self._completed_ids) > self.remember_completed:
                self._completed_ids.popitem(last=False)
        self.counts["completed"] += 1
        return trial


class PartValidator:
    """What a configuration accepts in each part: one of its action labels, its sensors of the right group.

    The action label is the value of the configuration's one variable in the group 'action';
    object features are readings of sensors of 'object' variables, effects of 'effect' variables,
    each within its sensor's ``valid_range`` (``SensorModel.bounds``); names and lists within ``limits``.
    """

    def __init__(self, config: AffordanceNetwork, limits: SizeLimits = SizeLimits()):
        self.limits = limits
        actions = config.group("action")
        if len(actions) != 1:
            raise ValueError(f"the configuration needs exactly one variable in the group 'action' "
                             f"(the Action message carries one label), it has {actions}")
        self.action_variable = actions[0]
        self.actions = config[self.action_variable].values
        if self.actions is None:
            raise ValueError(f"the action variable '{self.action_variable}' needs its 'values' (the action labels)")
        self.sensors = {kind: sorted(name for v in config.variables if v.group == kind and v.sensor
                                     for name in v.sensor.names)
                        for kind in SENSOR_GROUPS}
        self.ranges = {name: v.sensor.bounds for v in config.variables if v.sensor for name in v.sensor.names}

    def action(self, label: str) -> str:
        if not label:
            raise PairingError(f"the action label is empty; expected one of {list(self.actions)}")
        self.limits.check_name(label, "action label")
        if label not in self.actions:
            raise PairingError(f"unknown action '{quoted(label)}'{did_you_mean(label, self.actions)}; "
                               f"expected one of {list(self.actions)}")
        return label

    def readings(self, kind: str, names, values) -> dict[str, float]:
        """{sensor: reading} from the parallel name and value lists of a Features message."""
        self.limits.check_list(max(len(names), len(values)), "names or values")
        for name in names:
            self.limits.check_name(name, "sensor name")
        readings = named_values(names, values, fields=("names", "values"), repeated="sensor {} appears twice",
                                error=PairingError)
        for name, value in readings.items():
            if name not in self.sensors[kind]:
                other = "effect" if kind == "object" else "object"
                if name in self.sensors[other]:
                    raise PairingError(f"sensor '{name}' is an {other} sensor; publish it with the {other} part")
                raise PairingError(f"unknown sensor '{quoted(name)}'{did_you_mean(name, self.sensors[kind])}; "
                                   f"the {kind} sensors are {self.sensors[kind]}")
            readings[name] = float(value)
            if not is_finite_number(readings[name]):
                raise PairingError(f"reading of sensor '{name}' is {value}; send finite numbers only "
                                   "(leave a sensor out when it has no reading)")
            low, high = self.ranges[name]
            if not low <= readings[name] <= high:
                raise OutOfRangeError(out_of_range(name, readings[name], (low, high)))
        return readings


def named_values(names, values, what: str = "", fields: tuple[str, str] | None = None,
                 repeated: str = "{} is given twice", error: type[Exception] = ValueError) -> dict:
    """{name: value} from the parallel name and value lists of a message or request; ``error`` when the
    lengths differ or a name is given twice. ``what`` ('sensor', 'variable', ...) names the fields
    ``<what>_names``/``<what>_values`` (or give ``fields``) and the repeated name in the message."""
    names, values = list(names), list(values)
    fields = fields or (f"{what}_names", f"{what}_values")
    if len(names) != len(values):
        raise error(f"{len(names)} {fields[0]} but {len(values)} {fields[1]}; send one value per name")
    out = {}
    for name, value in zip(names, values):
        if name in out:
            raise error(repeated.format(f"{what} '{quoted(name)}'" if what else f"'{quoted(name)}'"))
        out[name] = value
    return out
