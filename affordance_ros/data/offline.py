"""Offline learning: cases from bags, CSV files and case databases, and moving cases between them.

A bag is turned into cases by the learner node's own code: ``PartValidator`` checks each
message as the node checks it, ``TrialAssembler`` pairs the parts (by trial_id, else by
header stamps within ``slop``) and times incomplete trials out as the node does: a part
still missing once the header stamps have moved on by ``trial_timeout`` seconds (data
time, the same at any replay speed), or after ``trial_timeout`` seconds of log time
without any message (the node's fallback on its clock when messages stop), or when the
bag ends. Cases go into the node's case database through ``CaseStore``; a trial whose id
is stored already is left as it is.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

from ..core import GROUPS, SENSOR_GROUPS, AffordanceNetwork, CaseSet, DataError
from ..core.cases import JSON_NOT_CASES, MISSING
from .bag import (
    BagMessage,
    action_message,
    features_message,
    looks_like_bag,
    to_nanoseconds,
    to_seconds,
)
from .log_text import quoted
from .pairing import (
    DEFAULT_SLOP,
    DEFAULT_TRIAL_TIMEOUT,
    DroppedTrial,
    DuplicatePartError,
    PairingError,
    PartValidator,
    TrialAssembler,
)
from .storage import CaseStore
from .trial import Trial, TrialRecord, case_set

# Stamps given to cases that have none (from a CSV file) when they are written to a bag.
STAMP_INTERVAL = 0.1
_SHOWN = 5  # trial ids / reasons listed per line of a report


@dataclass(frozen=True)
class PairingOptions:
    """How a bag is read and paired: as the node with these parameters would pair it."""

    slop: float = DEFAULT_SLOP
    trial_timeout: float = DEFAULT_TRIAL_TIMEOUT
    namespace: str = "/"


@dataclass
class Cases:
    """Records (as the case database stores them) read from one source, and what was found on the way."""

    source: Path
    records: list[TrialRecord]
    report: list[str] = field(default_factory=list)    # what was read and built
    warnings: list[str] = field(default_factory=list)  # what could not be used, and why


# ------------------------------------------------------------------ pairing
@dataclass
class Assembly:
    """Trials built from a stream of parts, and the parts and trials that did not make it."""

    trials: list[Trial] = field(default_factory=list)
    incomplete: list[DroppedTrial] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)          # part: reason (as the node logs it)
    duplicate_parts: list[str] = field(default_factory=list)

    def report(self) -> list[str]:
        by_id = sum(1 for t in self.trials if not t.trial_id.startswith("stamp-"))
        lines = [f"built {len(self.trials)} cases ({by_id} paired by trial_id, "
                 f"{len(self.trials) - by_id} by stamp)"]
        if self.incomplete:
            reasons = Counter(d.reason for d in self.incomplete)
            lines.append(f"{len(self.incomplete)} incomplete trials, not used: " + "; ".join(
                f"{n} with {reason} ({_names([d for d in self.incomplete if d.reason == reason])})"
                for reason, n in reasons.most_common()))
        if self.rejected:
            lines.append(f"{len(self.rejected)} rejected parts: " + "; ".join(self.rejected[:_SHOWN])
                         + (" ..." if len(self.rejected) > _SHOWN else ""))
        if self.duplicate_parts:
            lines.append(f"{len(self.duplicate_parts)} duplicate parts ignored: "
                         + "; ".join(self.duplicate_parts[:_SHOWN])
                         + (" ..." if len(self.duplicate_parts) > _SHOWN else ""))
        return lines


def assemble_trials(messages: Iterable[BagMessage], validator: PartValidator,
                    slop: float = DEFAULT_SLOP, trial_timeout: float = DEFAULT_TRIAL_TIMEOUT) -> Assembly:
    """Pair parts into trials as the learner node does: the same ``TrialAssembler`` calls in the
    same order, timeouts on data time (header stamps), each message's log time as the receive clock."""
    assembler = TrialAssembler(slop=slop, trial_timeout=trial_timeout)
    out = Assembly()
    for message in messages:
        now = to_seconds(message.log_time)
        out.incomplete.extend(assembler.expire(now))  # the node's timer, during a silence before this message
        msg = message.msg
        what = (f"'{message.kind}' part of trial '{quoted(msg.trial_id)}'" if msg.trial_id
                else f"'{message.kind}' part stamped {message.stamp:.3f} s")
        try:
            validator.limits.check_trial_id(msg.trial_id)
            payload = (validator.action(msg.action) if message.kind == "action"
                       else validator.readings(message.kind, msg.names, msg.values))
        except PairingError as exc:  # a rejected part does not move data time
            out.rejected.append(f"{what}: {exc}")
            continue
        out.incomplete.extend(assembler.observe(message.stamp, now))
        try:
            trial = assembler.add(message.kind, msg.trial_id, message.stamp, payload, now)
        except DuplicatePartError as exc:
            out.duplicate_parts.append(f"{what}: {exc}")
            continue
        except PairingError as exc:
            out.rejected.append(f"{what}: {exc}")
            continue
        if trial is not None:
            out.trials.append(trial)
    for dropped in assembler.expire(math.inf):  # what is still pending when the bag ends
        missing = [k for k in GROUPS if k not in dropped.parts]
        out.incomplete.append(DroppedTrial(dropped.trial_id, dropped.stamp, dropped.parts,
                                           f"no {' or '.join(repr(k) for k in missing)} part before the bag ends"))
    return out


def _names(dropped: Sequence[DroppedTrial]) -> str:
    names = [f"'{quoted(d.trial_id)}'" if d.trial_id else f"stamped {d.stamp:.3f} s" for d in dropped[:_SHOWN]]
    return ", ".join(names) + (", ..." if len(dropped) > _SHOWN else "")


# ------------------------------------------------------------------ reading
DATABASE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def source_kind(path: str | Path) -> str:
    """'bag', 'csv' or 'database' by what the path is; raises DataError for anything else."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"'{path}' does not exist")
    if looks_like_bag(path):
        return "bag"
    if path.is_dir():
        raise DataError(f"cannot read cases from '{path}': the folder is not a rosbag2 bag: it has no metadata.yaml "
                        f"and no .db3 or .mcap storage file ({_held(path)})")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in DATABASE_SUFFIXES:
        return "database"
    if _starts_as_json(path):
        raise DataError(f"cannot read cases from '{path}': it {JSON_NOT_CASES}")
    if path.name == "metadata.yaml" and looks_like_bag(path.parent):
        raise DataError(f"cannot read cases from '{path}': it is a bag's metadata; give the bag, its folder "
                        f"'{path.parent}'")
    raise DataError(f"cannot read cases from '{path}': expected a rosbag2 bag (directory, .db3 or .mcap), "
                    "a .csv file or the node's .db database")


def _starts_as_json(path: Path) -> bool:
    """Whether the file starts as a JSON object or list does (a model or configuration, given as cases)."""
    try:
        with path.open("rb") as f:
            return f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
    except OSError:
        return False


def _held(folder: Path) -> str:
    """What a folder that is not a bag holds: the bags, CSV files and databases in it (given instead, perhaps),
    else the names of a few of its files."""
    inside = sorted(folder.iterdir())
    if not inside:
        return "it is empty"
    sources = [f"a bag '{p}'" if looks_like_bag(p) else f"a CSV file '{p}'" if p.suffix.lower() == ".csv"
               else f"a case database '{p}'" for p in inside
               if looks_like_bag(p) or p.suffix.lower() in (".csv", *DATABASE_SUFFIXES) and p.is_file()]
    if len(sources) == 1:
        return f"it holds {sources[0]}: give that"
    if sources:
        return f"it holds {_and(sources)}: give one of those"
    return f"it holds {', '.join(p.name for p in inside[:_SHOWN])}{', ...' if len(inside) > _SHOWN else ''}"


def _and(items: Sequence[str]) -> str:
    """'a, b and c'; of more than ``_SHOWN``, the first few, '...' and the last."""
    first = items[:-1] if len(items) <= _SHOWN else [*items[:_SHOWN - 1], "..."]
    return f"{', '.join(first)} and {items[-1]}"


def read_cases(source: str | Path, config: AffordanceNetwork, options: PairingOptions = PairingOptions(),
               progress: Callable[[int, int | None], None] | None = None, ignore: Sequence[str] = ()) -> Cases:
    """The records of a bag, a CSV file or a case database; ``progress(done, total)`` as a bag is read;
    ``ignore``: a CSV file's columns that are not variables (e.g. object_id), left out."""
    kind = source_kind(source)
    if kind == "bag":
        return read_bag(source, config, options, progress)
    if kind == "csv":
        return read_csv(source, config, ignore)
    return read_database(source)


def read_bag(path: str | Path, config: AffordanceNetwork, options: PairingOptions = PairingOptions(),
             progress: Callable[[int, int | None], None] | None = None) -> Cases:
    """Cases from a bag, paired as the node pairs them; ``progress(done, total)`` as messages are read."""
    from .bag import BagReader  # (rosbags, the bags extra: only when a bag is read)

    validator = _validator(config)
    reader = BagReader(path, namespace=options.namespace, progress=progress)
    try:
        assembly = assemble_trials(reader, validator, options.slop, options.trial_timeout)
    finally:
        reader.close()
    bag = reader.report
    missing = [k for k in GROUPS if k not in bag.topics]
    warnings = list(bag.warnings)
    if missing:
        warnings.append(f"{path}: no usable messages for the {', '.join(repr(k) for k in missing)} parts, "
                        "so no trial can be complete")
    warnings += [f"{path}: {n} messages on {topic} did not deserialize" for topic, n in bag.undecodable.items()]
    records = [trial.to_record(validator.action_variable) for trial in assembly.trials]
    return Cases(Path(path), records, [bag.summary(), *assembly.report()], warnings)


def read_csv(path: str | Path, config: AffordanceNetwork, ignore: Sequence[str] = ()) -> Cases:
    """Cases of a CSV file (trial_id, the action label, sensor readings) as records.

    A record holds only what the node stores: the action label and the readings, each with
    its source ('object' or 'effect', from the configuration). Cases without an action label
    are left out with a warning; other label columns are an error (they have no place in a record),
    and so is a case that cannot be a record (DataError naming it, e.g. an empty trial_id). Columns in
    ``ignore`` are not variables (e.g. an object_id): left out.
    """
    validator = _validator(config)
    cases = CaseSet.from_csv(config, path, extra=ignore)
    others = [name for name in cases.labels if name != validator.action_variable]
    if others:
        raise DataError(f"'{path}': columns {others} are labels of variables other than the action "
                        f"'{validator.action_variable}'; a bag or a case database holds only the action label "
                        f"and sensor readings. Leave those columns out (--ignore-columns {' '.join(others)}).")
    source = {name: v.group for v in config.variables if v.sensor for name in v.sensor.names}
    codes = cases.labels.get(validator.action_variable)
    records, unlabelled = [], []
    for k in range(cases.n_cases):
        trial_id = str(cases.trial_ids[k])
        if codes is None or codes[k] == MISSING:
            unlabelled.append(trial_id)
            continue
        readings = {s: float(x[k]) for s, x in cases.readings.items() if not math.isnan(x[k])}
        parts = {kind: {s: x for s, x in readings.items() if source[s] == kind} for kind in SENSOR_GROUPS}
        try:
            records.append(TrialRecord.checked(trial_id, validator.action_variable, validator.actions[codes[k]],
                                               parts["object"], parts["effect"]))
        except ValueError as exc:
            raise DataError(f"'{path}' {cases.where(k)}: {exc}") from None
    warnings = []
    if unlabelled:
        warnings.append(f"{path}: left out {len(unlabelled)} cases without an action label "
                        f"({', '.join(unlabelled[:_SHOWN])}{', ...' if len(unlabelled) > _SHOWN else ''})")
    return Cases(Path(path), records, [f"read {len(records)} cases from {path}"], warnings)


def read_database(path: str | Path) -> Cases:
    with CaseStore(path, read_only=True) as store:
        records = store.records()
    return Cases(Path(path), records, [f"read {len(records)} cases from {path}"])


def _validator(config: AffordanceNetwork) -> PartValidator:
    try:
        return PartValidator(config)
    except ValueError as exc:
        raise DataError(f"the configuration cannot be used for robot trials: {exc}") from None


# ------------------------------------------------------------------ writing
class Appended(NamedTuple):
    """What ``append_to_database`` did: cases added, cases whose trial_id was stored already, and of those the
    ones whose action or readings differ from the stored case's."""

    added: int
    present: int
    differing: int


def append_to_database(path: str | Path, records: Iterable[TrialRecord]) -> Appended:
    """Add records to a case database (created if missing), each committed on its own.
    A trial_id stored already keeps its stored case, even when the new one's data differ (counted)."""
    if looks_like_bag(path):
        raise DataError(f"'{path}' is a bag, not a case database; give the case database with --db")
    added = present = differing = 0
    with CaseStore(path) as store:
        for record in records:
            if store.add(record):
                added += 1
                continue
            present += 1
            stored = store.record_of(record.trial_id)  # (stamps are not compared: a CSV file has none)
            differing += (stored is None or stored.action_variable != record.action_variable
                          or bool(record.differing_parts(stored)))
    return Appended(added, present, differing)


def write_csv(path: str | Path, records: Sequence[TrialRecord], config: AffordanceNetwork) -> None:
    """trial_id, the action label and one column per sensor (stamps and sources are not kept)."""
    path = Path(path)
    if path.exists():
        raise DataError(f"'{path}' exists already; choose a new file name")
    try:
        case_set(config, records).to_csv(path, exclusive=True)
    except FileExistsError:  # made while the cases were written
        raise DataError(f"'{path}' exists already (made while the cases were written); choose a new file name") \
            from None


def write_bag(path: str | Path, records: Sequence[TrialRecord], storage: str = "sqlite3",
              start: float | None = None) -> int:
    """Write records as the robot would have published them: per case an Action, the object
    Features and the effect Features, with its trial_id and stamp, logged at its 'received' time.

    Cases without a stamp (from a CSV file) get stamps ``STAMP_INTERVAL`` apart from ``start``
    (default: now). Returns the number of messages written.
    """
    from .bag import BagWriter  # (rosbags, the bags extra: only when a bag is written)

    start = time.time() if start is None else start
    messages = []
    for k, record in enumerate(records):
        stamp = start + k * STAMP_INTERVAL if record.stamp is None else record.stamp
        log_time = to_nanoseconds(stamp if record.received is None else record.received)
        messages.append((log_time, k, "action", action_message(record.trial_id, stamp, record.action)))
        for kind in SENSOR_GROUPS:
            messages.append((log_time, k, kind, features_message(record.trial_id, stamp, record.part(kind))))
    messages.sort(key=lambda m: (m[0], m[1]))
    # written in a folder of its own beside ``path``, then moved there whole: a bag stopped half-way (Ctrl-C, a
    # full disk) leaves no bag that looks whole, and the bag keeps its name (its storage file is named after it)
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists already")
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        with BagWriter(staging / path.name, storage) as writer:
            for log_time, _, kind, msg in messages:
                writer.write(kind, log_time, msg)
        os.rename(staging / path.name, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return len(messages)
