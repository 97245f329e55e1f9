"""Cases (trials): labels of label-observed variables and raw sensor readings, as arrays; their evidence.

A ``CaseSet`` holds K cases column-wise: for each variable observed by label an
int array of value codes (-1: not observed), for each reading name (a 1-D sensor's,
or one of a vector sensor's) a float array of readings (NaN: not observed).
``CaseSet.evidence`` turns them into the per-variable likelihood arrays
(``evidence.Evidence``) that inference consumes: the one place evidence is built.
``CaseEvidence`` is that evidence as a learn reads it, built once when the sensors
are fitted and handed to structure learning and EM.
"""

from __future__ import annotations

import csv
import math
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from .errors import DataError, EvidenceError, UnknownColumnError, meant, suggestion
from .evidence import CompleteCases, Evidence, evidence_from_log_likelihoods, impossible_rows, most_probable_values
from .network import AffordanceNetwork, out_of_range, unknown_sensor, written_atomically
from .number_checks import decimal_comma_hint

MISSING = -1
STREAM_ENTRIES = 1 << 24   # cases x sum of cardinalities above which a learn's evidence is built per chunk
EVIDENCE_CHUNK = 65536     # cases per evidence chunk then
# separators a CSV file may have instead of commas (a spreadsheet's export in a locale with decimal commas)
SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}
JSON_NOT_CASES = ("is a JSON file (a model or configuration?), not cases: the cases are a CSV file, the learner "
                  "node's database or a rosbag2 bag")


class CaseSet:
    """K cases for one network; validated on construction, arrays in and out.

    Cases read from a CSV file keep the file's line of each case (``lines``): errors about a case
    name its line there (``where``); and, while they are all its rows, the file (``source``).
    """

    def __init__(self, network: AffordanceNetwork, labels: Mapping[str, np.ndarray],
                 readings: Mapping[str, np.ndarray], trial_ids: Sequence[str] | None = None,
                 extra: Mapping[str, Sequence[str]] | None = None,
                 lines: Sequence[int] | None = None, source: Path | None = None):
        self.network = network
        self.lines = None if lines is None else np.asarray(lines, dtype=np.int64)
        self.source = source
        # columns that are not variables, carried along (e.g. an object_id that groups cases)
        self.extra = {name: _one_per_case(f"column '{name}'", np.asarray(column, dtype=object))
                      for name, column in (extra or {}).items()}
        self.labels = {name: _one_per_case(f"the label codes of '{name}'",
                                           np.asarray(codes, dtype=np.int64))
                       for name, codes in labels.items()}
        self.readings = {name: _one_per_case(f"the readings of sensor '{name}'",
                                             np.asarray(x, dtype=float))
                         for name, x in readings.items()}
        self.n_cases = _common_length([*self.labels.items(), *self.readings.items(),
                                       *self.extra.items(), ("trial_ids", trial_ids),
                                       ("lines", self.lines)])
        self.trial_ids = (np.asarray(trial_ids, dtype=object) if trial_ids is not None
                          else np.array([str(i) for i in range(self.n_cases)], dtype=object))
        _check_columns(network, self.labels, self.readings)

    def __len__(self) -> int:
        return self.n_cases

    def where(self, k: int) -> str:
        """Where to look for case ``k``: its line in the CSV file it was read from, else its
        trial_id.
        """
        return f"line {self.lines[k]}" if self.lines is not None else _case_name(k, self.trial_ids)

    # ------------------------------------------------------------ construction
    @classmethod
    def from_columns(cls, network: AffordanceNetwork, columns: Mapping[str, Sequence],
                     trial_ids: Sequence[str] | None = None) -> "CaseSet":
        """Columns named by variable (labels, None or '' for unobserved) or sensor (readings,
        None for unobserved). Non-finite readings, readings outside their sensor's valid_range and
        unknown labels raise, naming the case.
        """
        columns = {name: _column(name, column) for name, column in columns.items()}
        labels, readings = _parsed_columns(network, columns, lambda k: _case_name(k, trial_ids))
        return cls(network, labels, readings, trial_ids)

    @classmethod
    def from_records(cls, network: AffordanceNetwork, records: Iterable[Mapping]) -> "CaseSet":
        """Records as the node stores them: {"trial_id", "labels": {var: label}, "readings":
        {sensor: x}}.
        """
        records = list(records)
        names = sorted({n for r in records for n in r.get("labels", {})})
        sensors = sorted({n for r in records for n in r.get("readings", {})})
        columns = {n: [r.get("labels", {}).get(n) for r in records] for n in names}
        columns.update({s: [r.get("readings", {}).get(s) for r in records] for s in sensors})
        trial_ids = [str(r.get("trial_id", i)) for i, r in enumerate(records)]
        return cls.from_columns(network, columns, trial_ids)

    @classmethod
    def from_csv(cls, network: AffordanceNetwork, path: str | Path,
                 extra: Sequence[str] = ()) -> "CaseSet":
        """CSV with a header: trial_id, one column per label-observed variable, one per sensor
        reading.

        ``extra`` names columns that are not variables (e.g. ``object_id``): kept as text in
        ``CaseSet.extra``, not learned from; any other unknown column is an error.
        """
        path = Path(path)
        return cls(network, *_csv_columns(network, path, extra), path)

    def to_csv(self, path: str | Path, exclusive: bool = False) -> None:
        """Write the cases as a CSV file (the format ``from_csv`` reads), atomically: whole or not
        at all; ``exclusive``: never over a file (FileExistsError, also for one made while the cases
        were written).
        """
        with written_atomically(path, newline="", exclusive=exclusive) as f:
            csv.writer(f).writerows(_csv_rows(self))

    def take(self, rows) -> "CaseSet":
        """The cases at ``rows`` (an index, slice or mask)."""
        return CaseSet(self.network, {n: c[rows] for n, c in self.labels.items()},
                       {s: x[rows] for s, x in self.readings.items()}, self.trial_ids[rows],
                       {n: c[rows] for n, c in self.extra.items()},
                       None if self.lines is None else self.lines[rows])

    def with_network(self, network: AffordanceNetwork) -> "CaseSet":
        """The same cases for a network with the same variable values (e.g. after learning);
        DataError when ``network`` lacks one of their columns or gives a labelled variable other
        values (its codes would be read as other labels).
        """
        if network is not self.network:
            _check_same_columns(self, network)
        return CaseSet(network, self.labels, self.readings, self.trial_ids, self.extra, self.lines,
                       self.source)

    def with_extra(self, extra: Mapping[str, Sequence[str]]) -> "CaseSet":
        """The same cases with these columns that are not variables added to ``extra``."""
        return CaseSet(self.network, self.labels, self.readings, self.trial_ids,
                       {**self.extra, **extra}, self.lines, self.source)

    # ---------------------------------------------------------------- evidence
    def evidence(self, network: AffordanceNetwork | None = None) -> Evidence:
        """Likelihood arrays of these cases under ``network``'s sensor models (default: own)."""
        log_lik = _log_likelihoods(self, network or self.network)
        return evidence_from_log_likelihoods(log_lik, self.n_cases)

    def evidence_chunks(self, network: AffordanceNetwork, size: int):
        """The evidence of these cases under ``network``, built ``size`` cases at a time."""
        for start in range(0, self.n_cases, size):
            yield self.take(slice(start, start + size)).evidence(network)

    def impossible(self, network: AffordanceNetwork | None = None) -> np.ndarray:
        """(K,) bool: the cases whose evidence has zero likelihood for every value of some variable
        under ``network``'s fitted sensor models (default: own; sensors not fitted yet are not
        judged), e.g. a reading so far from every mean that its Gaussian density underflows.
        ``evidence`` refuses them: ``take(~cases.impossible())`` leaves them out.
        """
        log_lik = _log_likelihoods(self, network or self.network, fitted_only=True)
        return impossible_rows(log_lik, self.n_cases)

    def unobserved(self) -> list[str]:
        """The variables that no case observes (no label, no reading of their sensor), in the
        network's order.
        """
        seen = {name for name, codes in self.labels.items() if np.any(codes != MISSING)}
        seen |= {self.network.sensor_variable[name] for name, x in self.readings.items()
                 if not np.all(np.isnan(x))}
        return [name for name in self.network.names if name not in seen]

    def sensor_readings(self, network: AffordanceNetwork | None = None) -> dict[str, np.ndarray]:
        """{variable: its sensor's readings} for every variable with at least one reading column:
        (K,) for a 1-D sensor, (K, d) for a vector sensor in the order of its ``names`` (NaN:
        missing).
        """
        network = network or self.network
        out = {}
        for v in network.variables:
            if v.sensor is None or not any(n in self.readings for n in v.sensor.names):
                continue
            if not v.sensor.vector:
                out[v.name] = self.readings[v.sensor.name]
                continue
            missing = np.full(self.n_cases, np.nan)
            out[v.name] = np.stack([self.readings.get(n, missing) for n in v.sensor.names], axis=1)
        return out


def _csv_columns(network: AffordanceNetwork, path: Path, extra: Sequence[str]) -> tuple:
    """(labels, readings, trial_ids, extra columns, the file's line of each case) of a cases CSV
    file, every column checked against ``network``.
    """
    header, body, lines = _read_csv_rows(path)
    cols = {h: [row[j] for row in body] for j, h in enumerate(header)}
    ids = cols.pop("trial_id")
    _check_unique_ids(path, ids, lines)
    missing = [name for name in extra if name not in cols]
    if missing:
        raise DataError(f"'{path}': no column {missing[0]!r}; the header has {header}")
    kept = {name: cols.pop(name) for name in extra}
    _check_unknown_columns(network, path, list(cols))
    for name in list(cols):
        if name in network.sensor_variable:
            cols[name] = [None if x.strip() == "" else _float(x, name, path, n)
                          for n, x in zip(lines, cols[name])]
    labels, readings = _parsed_columns(network, cols, lambda k: f"'{path}' line {lines[k]}",
                                       "leave it out when it is missing")
    return labels, readings, ids, kept, lines


def _csv_rows(cases: CaseSet):
    """The rows of ``cases``' CSV file (``CaseSet.to_csv``), the header first."""
    yield ["trial_id", *cases.extra, *cases.labels, *cases.readings]
    for k in range(cases.n_cases):
        row = [cases.trial_ids[k], *(str(column[k]) for column in cases.extra.values())]
        for n in cases.labels:
            code = cases.labels[n][k]
            row.append("" if code == MISSING else cases.network[n].values[code])
        for s in cases.readings:
            x = cases.readings[s][k]
            row.append("" if math.isnan(x) else repr(float(x)))
        yield row


def _log_likelihoods(cases: CaseSet, network: AffordanceNetwork, fitted_only: bool = False) -> list:
    """Per variable of ``network``, log p(the cases' label and readings | value) (K, card), or None
    without any; ``fitted_only``: sensors still to be fitted are left out.
    """
    log_lik = [None] * len(network)
    for name, codes in cases.labels.items():
        i = network.index(name)
        hard = np.where(codes[:, None] == np.arange(network.variables[i].card), 0.0, -np.inf)
        hard[codes == MISSING] = 0.0
        log_lik[i] = hard
    for var, x in cases.sensor_readings(network).items():
        i = network.index(var)
        model = network.variables[i].sensor
        if fitted_only and not model.fitted:
            continue
        with np.errstate(over="ignore", invalid="ignore"):  # a huge reading: -inf, for the caller
            ll = model.log_likelihood(x)
        log_lik[i] = ll if log_lik[i] is None else log_lik[i] + ll
    return log_lik


def _common_length(columns: Sequence[tuple[str, Sequence | None]]) -> int:
    """The number of entries every (name, column) has (None: not given), 0 without any; DataError
    naming the columns by length when they differ.
    """
    lengths = {name: len(column) for name, column in columns if column is not None}
    sizes = set(lengths.values())
    if len(sizes) > 1:
        raise DataError("columns of different lengths: " + "; ".join(
            f"{size} in {', '.join(repr(name) for name, n in lengths.items() if n == size)}"
            for size in sorted(sizes)) + " (one entry per case in each)")
    return sizes.pop() if sizes else 0


def _check_columns(network: AffordanceNetwork, labels: Mapping[str, np.ndarray],
                   readings: Mapping[str, np.ndarray]) -> None:
    """DataError for a label code outside its variable's values or an infinite reading;
    EvidenceError for a reading no sensor of ``network`` has.
    """
    for name, codes in labels.items():
        card = network[name].card
        if codes.size and (codes.min() < MISSING or codes.max() >= card):
            raise DataError(f"label codes of '{name}' must be in -1..{card - 1}")
    unknown = sorted(set(readings) - set(network.sensor_variable))
    if unknown:
        raise unknown_sensor(network, unknown[0])
    for name, x in readings.items():
        if np.any(np.isinf(x)):
            raise DataError(f"sensor '{name}' has infinite readings")


def missing_data(cases: CaseSet, latent: Iterable[str] = ()) -> list[str]:
    """What ``cases.network`` expects and no case has, a phrase each naming the columns: every variable no case
    observes (but those in ``latent``, unobserved by design), then every sensor some of whose readings the
    cases have and others none (a column of a vector sensor left out). A variable observed by label only
    needs no readings of its sensor.
    """
    unobserved, latent = cases.unobserved(), set(latent)
    missing = [f"variable '{name}' ({_columns_state(cases, _columns_of(cases, name))})"
               for name in unobserved if name not in latent]
    for v in cases.network.variables:
        if v.sensor is None or v.name in unobserved:
            continue
        lacking = [n for n in v.sensor.names if n not in cases.readings or np.all(np.isnan(cases.readings[n]))]
        if lacking and len(lacking) < len(v.sensor.names):
            missing.append(f"sensor of '{v.name}' ({_columns_state(cases, lacking)})")
    return missing


def _columns_of(cases: CaseSet, name: str) -> tuple[str, ...]:
    """The columns that would observe variable ``name``: its sensor's readings, and its label where the
    variable has no sensor or the label column is there (empty).
    """
    sensor = cases.network[name].sensor
    if sensor is None:
        return (name,)
    return ((name,) if name in cases.labels else ()) + sensor.names


def _columns_state(cases: CaseSet, columns: Sequence[str]) -> str:
    """'no column 'x'', 'columns 'y', 'z' are empty', or both: how ``columns`` lack data."""
    absent = [c for c in columns if c not in cases.labels and c not in cases.readings]
    empty = [c for c in columns if c not in absent]
    parts = [f"no column{'s' if len(absent) > 1 else ''} {_listed(absent)}"] if absent else []
    if empty:
        parts.append(f"column{'s' if len(empty) > 1 else ''} {_listed(empty)} {'are' if len(empty) > 1 else 'is'} "
                     "empty")
    return "; ".join(parts)


class CaseEvidence:
    """A case set's evidence under one network's sensor models, as a learn reads it: built once, when the
    sensors are fitted, and handed to structure learning and EM (whose networks differ from it in their
    arcs and CPTs only).

    Held whole when it has at most ``STREAM_ENTRIES`` numbers (cases x the variables' values); otherwise
    built again, ``EVIDENCE_CHUNK`` cases at a time, on every pass over the cases (``chunks``), so that
    memory stays bounded by a chunk.
    """

    def __init__(self, cases: CaseSet, network: AffordanceNetwork):
        self.cases = cases.with_network(network)
        self.network = network
        self.n_cases = cases.n_cases
        self.held = self.n_cases * sum(network.cards) <= STREAM_ENTRIES
        self._evidence = None

    @classmethod
    def of(cls, cases: "CaseSet | CaseEvidence", network: AffordanceNetwork) -> "CaseEvidence":
        """The evidence of ``cases`` under ``network``: ``cases`` itself when it is a CaseEvidence that
        ``fits`` the network, else built.
        """
        if isinstance(cases, CaseEvidence):
            if cases.fits(network):
                return cases
            cases = cases.cases
        return cls(cases, network)

    def fits(self, network: AffordanceNetwork) -> bool:
        """Whether ``network`` has this evidence's variables, values and sensor models (the same objects)."""
        return network.names == self.network.names and all(
            a.values == b.values and a.sensor is b.sensor for a, b in zip(network.variables, self.network.variables))

    def evidence(self) -> Evidence:
        """The evidence of all the cases: built once when held, else built anew on every call."""
        if not self.held:
            return self.cases.evidence(self.network)
        if self._evidence is None:
            self._evidence = self.cases.evidence(self.network)
        return self._evidence

    def chunks(self):
        """The evidence ``EVIDENCE_CHUNK`` cases at a time: slices of the held evidence, or built per chunk."""
        if not self.held:
            yield from self.cases.evidence_chunks(self.network, EVIDENCE_CHUNK)
            return
        evidence = self.evidence()
        for start in range(0, self.n_cases, EVIDENCE_CHUNK):
            yield evidence.take(slice(start, start + EVIDENCE_CHUNK))

    @cached_property
    def complete(self) -> CompleteCases:
        """The cases whose every variable is given by label (``CompleteCases``), read from the labels; their
        readings' log-likelihood at the labelled values in its ``log_scale``. EvidenceError where a reading has
        zero likelihood at its label, as ``evidence`` refuses it.
        """
        network, labels = self.network, self.cases.labels
        if any(name not in labels for name in network.names):
            return CompleteCases.none(self.n_cases, len(network))
        rows = np.ones(self.n_cases, dtype=bool)
        for name in network.names:
            rows &= labels[name] != MISSING
        codes = np.stack([labels[name][rows] for name in network.names], axis=1)
        log_scale = 0.0
        for var, x in self.cases.sensor_readings(network).items():
            i = network.index(var)
            with np.errstate(over="ignore", invalid="ignore"):
                at_label = network.variables[i].sensor.log_likelihood(x[rows])[np.arange(len(codes)), codes[:, i]]
            if np.any(np.isneginf(at_label)):
                raise EvidenceError("evidence with zero likelihood for every value of a variable "
                                    "(find such cases with CaseSet.impossible and leave them out)")
            log_scale += float(at_label.sum())
        return CompleteCases(rows, codes, log_scale)

    def incomplete(self) -> "CaseEvidence":
        """The evidence of the cases that are not ``complete`` (sharing the evidence already built)."""
        rows = ~self.complete.rows
        rest = CaseEvidence(self.cases.take(rows), self.network)
        if self._evidence is not None and rest.held:
            rest._evidence = self._evidence.take(rows)
        return rest

    @cached_property
    def priors(self) -> list:
        """p(value) of every variable for MAP assignment: its sensor's mixture weights over the cases with a
        reading (``SensorModel.mixture_weights``), else uniform.
        """
        readings = self.cases.sensor_readings(self.network)
        return [v.sensor.mixture_weights(readings[v.name]) if v.name in readings else np.full(v.card, 1.0 / v.card)
                for v in self.network.variables]

    @cached_property
    def latent(self) -> list:
        """Indices of the variables that no case observes (no label, no reading)."""
        return [self.network.index(name) for name in self.cases.unobserved()]

    def map_values(self, priors=None) -> np.ndarray:
        """The most probable value of every variable in every case, argmax_v p(evidence | v) p(v), (K, n).

        Each variable is assigned from its own label and sensor (the paper's equation for e*, o*); ``priors``
        defaults to ``self.priors``. Done chunk by chunk (``chunks``).
        """
        priors = self.priors if priors is None else priors
        if self.complete.all:
            # one-hot likelihoods: argmax(likelihood x prior) is the label, or 0 where the prior rules the label out
            codes = self.complete.codes
            return np.stack([np.where(np.asarray(prior, dtype=float)[codes[:, i]] > 0, codes[:, i], 0)
                             for i, prior in enumerate(priors)], axis=1).reshape(codes.shape)
        return np.concatenate([most_probable_values(chunk, priors) for chunk in self.chunks()])


def _check_same_columns(cases: CaseSet, network: AffordanceNetwork) -> None:
    """DataError unless ``network`` has every label column of ``cases`` with the same values in the same order
    (a label is kept as its code) and every reading column (a sensor of that name).
    """
    again = "; read the cases again for it (CaseSet.from_csv(network, path) or CaseSet.from_columns)"
    for name in cases.labels:
        if name not in network.names:
            raise DataError(f"the cases have labels of '{name}', which is not a variable of this network "
                            f"{list(network.names)}{again}")
        before, now = cases.network[name].values, network[name].values
        if now != before:
            raise DataError(f"the cases were read for a network whose '{name}' has the values {list(before)}; this "
                            f"network's '{name}' has {None if now is None else list(now)}{again}")
    unknown = sorted(set(cases.readings) - set(network.sensor_variable))
    if unknown:
        raise DataError(f"the cases have readings of sensor '{unknown[0]}', which this network does not have "
                        f"(its sensors: {sorted(network.sensor_variable)}){again}")


def _column(name: str, column) -> Sequence:
    """A column given to ``from_columns`` as a sequence of one entry per case: a list, a 1-D array (a column
    vector (K, 1) too) or any other iterable; DataError for a single value or a table.
    """
    if isinstance(column, np.ndarray):
        return column[:, 0] if column.ndim == 2 and column.shape[1] == 1 else _one_per_case(f"column '{name}'",
                                                                                          column)
    if isinstance(column, (str, bytes)) or not isinstance(column, Iterable):
        raise DataError(f"column '{name}' is {column!r}: give one entry per case (a list or a 1-D array)")
    return column if isinstance(column, Sequence) else list(column)


def _one_per_case(what: str, column: np.ndarray) -> np.ndarray:
    """``column`` if it is 1-D; DataError naming ``what`` it holds otherwise."""
    if column.ndim != 1:
        given = "a single value" if column.ndim == 0 else f"an array of shape {list(column.shape)}"
        raise DataError(f"{what}: {given}; give one entry per case (a list or a 1-D array)")
    return column


def _parsed_columns(network: AffordanceNetwork, columns: Mapping[str, Sequence], where: Callable[[int], str],
                    missing: str = "None where it is missing") -> tuple[dict, dict]:
    """(labels, readings) of columns named by variable or sensor; ``where(k)`` names case k in errors, ``missing``
    says how to give a missing reading.
    """
    labels, readings = {}, {}
    for name, column in columns.items():
        if name in network.sensor_variable:
            readings[name] = _parse_readings(name, column, where, network.sensor(name)[1].bounds, missing)
        elif name in network.names:
            labels[name] = _parse_labels(network[name], column, where)
        else:
            raise _unknown_column(network, name)
    return labels, readings


def _parse_labels(var, column: Sequence, where: Callable[[int], str]) -> np.ndarray:
    """Label codes of a column (None or '' -> MISSING), one dictionary look-up per distinct label; an unknown
    label names the first case that has one.
    """
    text = np.array(["" if x is None else str(x) for x in column], dtype=object)
    distinct, first, inverse = (np.unique(text, return_index=True, return_inverse=True) if text.size
                                else (text, np.zeros(0, int), np.zeros(0, int)))
    codes_of_distinct = np.empty(len(distinct), dtype=np.int64)
    for j in np.argsort(first):  # in the order of the cases
        if distinct[j] == "":
            codes_of_distinct[j] = MISSING
            continue
        try:
            codes_of_distinct[j] = var.code(distinct[j])
        except EvidenceError as exc:
            given = column[int(first[j])]
            nan = isinstance(given, float) and math.isnan(given)  # (pandas' missing entry)
            raise DataError(f"{where(int(first[j]))}: {exc}" + ("; a missing label is None or ''" if nan else "")
                            ) from None
    return codes_of_distinct[inverse.reshape(-1)]


def _parse_readings(name: str, column: Sequence, where: Callable[[int], str],
                    bounds: tuple[float, float], missing: str) -> np.ndarray:
    """Readings as floats (None -> NaN: not observed); non-numbers, NaN/inf (the error says how to give a
    reading that is ``missing``) and readings outside ``bounds`` name the case.
    """
    try:
        values = np.array([np.nan if x is None else x for x in column], dtype=float).reshape(-1)
        bad = ~np.isfinite(values) & np.array([x is not None for x in column], dtype=bool).reshape(-1)
    except (TypeError, ValueError):
        for k, x in enumerate(column):
            try:
                float(x if x is not None else 0.0)
            except (TypeError, ValueError):
                raise DataError(
                    f"{where(k)}: reading {x!r} of sensor '{name}' is not a number") from None
        raise
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise DataError(f"{where(k)}: reading of sensor '{name}' is {column[k]}, "
                        f"expected a finite number ({missing})")
    with np.errstate(invalid="ignore"):
        outside = np.flatnonzero((values < bounds[0]) | (values > bounds[1]))
    if outside.size:
        k = int(outside[0])
        raise DataError(f"{where(k)}: {out_of_range(name, values[k], bounds)}")
    return values


def _read_csv_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """(header, non-empty rows, the file's line number of each row) of a cases CSV, checked: a trial_id column,
    no column named twice, every row as long as the header. utf-8-sig: a byte order mark (Excel writes one) is
    not part of the first name.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header, body, lines = next(reader, None), [], []
            for row in reader:
                if row:
                    body.append(row)
                    lines.append(reader.line_num)  # the line the row ends on (a quoted field may span lines)
    except OSError as exc:
        raise DataError(f"cannot read cases file '{path}': {exc.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"'{path}' is not a readable CSV file: {exc}") from None
    if header is None:
        raise DataError(f"'{path}' is empty: expected a header row")
    if "trial_id" not in header:
        raise DataError(_separator_problem(path, header) or _json_problem(path, header)
                        or f"'{path}': the header needs a 'trial_id' column, has {header}")
    repeated = [name for j, name in enumerate(header) if name in header[:j]]
    if repeated:
        raise DataError(f"'{path}': the header names column '{repeated[0]}' twice; keep one of them")
    for n, row in zip(lines, body):
        if len(row) != len(header):
            raise DataError(f"'{path}' line {n}: {len(row)} fields, the header has {len(header)}")
    return header, body, lines


def _separator_problem(path: Path, header: Sequence[str]) -> str:
    """For a header read as one column: the separator the file uses instead of commas, and what to do ('' if none
    of ``SEPARATORS``).
    """
    for separator, name in SEPARATORS.items():
        if len(header) == 1 and separator in header[0]:
            return (f"'{path}' separates its columns by {name}; a cases CSV separates them by commas: save it again "
                    "with ',' as the separator (and '.' as the decimal point)")
    return ""


def _json_problem(path: Path, header: Sequence[str]) -> str:
    """For a JSON file read as cases (a model or configuration given as the cases): what it is ('' if not JSON)."""
    return (f"'{path}' {JSON_NOT_CASES}" if header and header[0].lstrip().startswith(("{", "[")) else "")


def _check_unknown_columns(network: AffordanceNetwork, path: Path, names: Sequence[str]) -> None:
    """UnknownColumnError for the columns of a CSV file that are neither variables nor sensors of ``network``: the
    first when there is one, or one meant but for case or spaces; all of them when there are more (cases made with
    another configuration, most likely).
    """
    unknown = [name for name in names if name not in network.sensor_variable and name not in network.names]
    near = [name for name in unknown if meant(name, [*network.names, *network.sensor_variable], False)]
    if len(unknown) == 1 or near:
        exc = _unknown_column(network, (near or unknown)[0])
        raise UnknownColumnError(f"'{path}': {exc}", exc.column, exc.near)
    if unknown:
        raise UnknownColumnError(
            f"'{path}': {len(unknown)} of its {len(names) + 1} columns are neither variables nor sensors of the "
            f"configuration ({', '.join(unknown)}): were the cases made with another configuration? This one has "
            f"the variables {list(network.names)} and the sensors {sorted(network.sensor_variable)}",
            unknown[0], columns=tuple(unknown))


def _check_unique_ids(path: Path, trial_ids: Sequence[str], lines: Sequence[int]) -> None:
    """DataError naming the first trial_id given to more than one case (a case database keeps one case per
    trial_id, so a CSV must not count one trial twice) and how many ids repeat.
    """
    first_line, repeats = {}, []
    for line, trial_id in zip(lines, trial_ids):
        if trial_id in first_line:
            repeats.append((trial_id, first_line[trial_id], line))
        else:
            first_line[trial_id] = line
    if repeats:
        trial_id, first, again = repeats[0]
        more = f" ({len(repeats)} rows repeat an earlier trial_id)" if len(repeats) > 1 else ""
        raise DataError(f"'{path}' line {again}: trial_id '{trial_id}' is that of line {first} too{more}; "
                        "every case needs its own trial_id")


def _unknown_column(network: AffordanceNetwork, name: str) -> UnknownColumnError:
    """The error for a column that is neither a variable nor a sensor; it names the one it differs from in case
    only.
    """
    known = [*network.names, *network.sensor_variable]
    near = meant(name, known, spelling=False)  # (a column like none may be an id or a note, to leave out)
    if near:
        ask, why = suggestion(name, known, spelling=False)
        return UnknownColumnError(f"column '{name}': {ask}" + (f" ({why})" if why else ""), name, near=near[0])
    return UnknownColumnError(f"column '{name}' is neither a variable {list(network.names)} "
                              f"nor a sensor {sorted(network.sensor_variable)}", name)


def _float(text: str, name: str, path: Path, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise DataError(f"'{path}' line {line}: reading {text!r} of sensor '{name}' is not a number"
                        + decimal_comma_hint(text)) from None


def _listed(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _case_name(k: int, trial_ids) -> str:
    """Case ``k`` of cases not read from a file: by its trial_id (what a database or a bag names it by), and its
    index among the cases given (counting from 0).
    """
    return f"trial '{trial_ids[k]}' (case index {k})" if trial_ids is not None else f"case index {k}"
