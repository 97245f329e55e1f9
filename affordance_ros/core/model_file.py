"""The model file: the JSON document of an ``AffordanceNetwork`` and its reading and atomic writing.

The ``affordance_ros/model/1`` schema (docs/model-format.md), or ``affordance_ros/model/2`` when a sensor is a vector
sensor (several readings at once); a model whose sensors are all 1-D is still written as /1, so that earlier versions
read it (unless it carries the optional ``counts``, which versions before them refuse as an unknown key). Every field
read is checked; a file that is something else (cases, a bag, another tool's network) is told apart by how it starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import ModelFormatError
from .number_checks import is_finite_number
from .variables import SensorModel, Variable, WeightedNetwork, posterior_mean

FORMAT = "affordance_ros/model/1"
# /1 plus vector sensors ("names", "means" (card, d), "covariances" (card, d, d)).
FORMAT_VECTOR = "affordance_ros/model/2"
FORMATS = (FORMAT, FORMAT_VECTOR)
_CASES = ": cases, to learn a model from (affordance-ros learn --cases FILE --config CONFIG --out model.json)"
_NETWORK = ": another tool's network, to make a model of with a configuration (affordance-ros import-model)"
# what a file given as a model or configuration may be instead, told by how it starts: (starts, kind, advice)
OTHER_KINDS = (
    ((b"SQLite format 3\x00",), "an SQLite database (the node's cases, or a bag's)", _CASES),
    ((b"\x89MCAP",), "an MCAP bag", _CASES),
    ((b"network ", b"// Bayesian"), "a BIF network", _NETWORK),
    ((b"<?xml",), "an XML file (an XMLBIF network?)", _NETWORK),
    ((b"BAYES", b"MARKOV"), "a UAI network", _NETWORK),
    ((b"\x89PNG", b"%PDF", b"<svg"), "a picture", ""),
)


class NetworkFile:
    """The JSON document and file of an ``AffordanceNetwork`` (the ``affordance_ros/model`` schema):
    ``to_dict``/``from_dict``, ``save``/``load``.
    """

    @property
    def has_vector_sensors(self) -> bool:
        """Whether any sensor reports several readings at once (the model file is then /2)."""
        return any(v.sensor is not None and v.sensor.vector for v in self.variables)

    def to_dict(self) -> dict:
        """The JSON document: format /1, or /2 when a sensor is a vector sensor."""
        doc = {"format": FORMAT_VECTOR if self.has_vector_sensors else FORMAT,
               "variables": [_variable_dict(v) for v in self.variables], "metadata": self.metadata}
        if self.learning:
            doc["learning"] = self.learning
        if self.structures:
            doc["structures"] = [{"weight": self.structures[0].weight},
                                 *({"weight": m.weight, "variables": [_member_variable_dict(v) for v in
                                                                      m.network.variables]}
                                   for m in self.structures[1:])]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping):
        """The network of a JSON document; ModelFormatError for anything off the schema."""
        return _network_of(cls, doc)

    def save(self, path: str | os.PathLike) -> None:
        """Write the JSON (``model_text``) atomically: readers see the old file or the new."""
        with written_atomically(path) as f:
            f.write(model_text(self))

    @classmethod
    def load(cls, path: str | os.PathLike, what: str = "model file"):
        """Read a model or configuration file (``what``: for the messages), every field checked."""
        path = Path(path)
        doc = _read_json(path, what)
        try:
            return cls.from_dict(doc)
        except ModelFormatError as exc:
            raise ModelFormatError(f"'{path}': {exc}") from None


def _network_of(cls, doc: Mapping):
    """``_network_from_document``, with every error of a malformed document a ModelFormatError."""
    try:
        return _network_from_document(cls, doc)
    except ModelFormatError:
        raise
    except RecursionError:
        raise ModelFormatError("the document is nested too deeply to be a model") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        # e.g. a name that is a list (unhashable): whatever the schema's checks did not name
        raise ModelFormatError(f"malformed model ({type(exc).__name__}: {_clipped(exc)})") from None


def _read_json(path: Path, what: str):
    """The JSON document of file ``path``; ModelFormatError saying what it is instead when it is
    not JSON.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFormatError(f"cannot read {what} '{path}': {exc.strerror}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelFormatError(_other_kind(path, data, what)
                               or f"'{path}' is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:  # json.JSONDecodeError, and numbers too long to convert
        raise ModelFormatError(_other_kind(path, data, what)
                               or f"'{path}' is not valid JSON: {_clipped(exc)}") from None
    except RecursionError:
        raise ModelFormatError(f"'{path}' is not a model: its JSON is nested too deeply") from None


# ------------------------------------------------------------------ validation
def _network_from_document(cls, doc: Mapping):
    if not isinstance(doc, Mapping):
        raise ModelFormatError("a model must be a JSON object with 'format' and 'variables'")
    if doc.get("format") not in FORMATS:
        raise ModelFormatError(f"'format' is {doc.get('format')!r}, expected one of {list(FORMATS)}")
    unknown = set(doc) - {"format", "variables", "metadata", "learning", "structures"}
    if unknown:
        raise ModelFormatError(f"unknown top-level keys {sorted(unknown)}")
    raw = doc.get("variables")
    if not isinstance(raw, list):
        raise ModelFormatError("'variables' must be a list")
    network = cls([_variable_from_dict(d, i) for i, d in enumerate(raw)],
                                _mapping(doc.get("metadata"), "metadata"), _mapping(doc.get("learning"), "learning"))
    if doc.get("structures") is not None:
        network = network.with_structures(_members_from_document(network, doc["structures"]))
    if network.has_vector_sensors and doc["format"] != FORMAT_VECTOR:
        raise ModelFormatError(f"a sensor with several 'names' needs 'format' {FORMAT_VECTOR!r}")
    return network


MEMBER_KEYS = ("parents", "cpt", "counts", "draws", "prior")  # what a structure of a sample has of its own


def _members_from_document(network, raw) -> list:
    """The ``WeightedNetwork`` members of a document's "structures": the first is ``network`` itself (its weight
    only), every other the network's variables with its own parents, CPTs and draws.
    """
    if not isinstance(raw, list) or not raw or not all(isinstance(m, Mapping) for m in raw):
        raise ModelFormatError("'structures' must be a non-empty list of objects, each with a 'weight'")
    members = []
    for k, m in enumerate(raw):
        where = f"structures[{k}]"
        unknown = set(m) - {"weight", "variables"}
        if unknown or "weight" not in m or (k > 0) != ("variables" in m):
            raise ModelFormatError(f"{where}: expected {{'weight'}} for the first structure (the model's own) and "
                                   f"{{'weight', 'variables'}} for the others, got keys {sorted(m)}")
        if not is_finite_number(m["weight"]) or not 0 < m["weight"] <= 1:
            raise ModelFormatError(f"{where}: 'weight' must be a number in (0, 1], got {m['weight']!r}")
        if k == 0:
            members.append(WeightedNetwork(float(m["weight"]), type(network)(network.variables)))
            continue
        own = m["variables"]
        if not isinstance(own, list) or len(own) != len(network) or not all(isinstance(d, Mapping) for d in own):
            raise ModelFormatError(f"{where}: 'variables' must list the {len(network)} variables, each an object")
        changes = {}
        for v, d in zip(network.variables, own):
            unknown = set(d) - {"name", *MEMBER_KEYS}
            if d.get("name") != v.name or unknown:
                raise ModelFormatError(f"{where}: expected variable '{v.name}' with keys among "
                                       f"{['name', *MEMBER_KEYS]}, got {d.get('name')!r} with {sorted(d)}")
            if not isinstance(d.get("parents"), list) or not all(isinstance(p, str) for p in d["parents"]):
                raise ModelFormatError(f"{where}: variable '{v.name}': 'parents' must be a list of variable names")
            change = {"parents": tuple(d["parents"]), **{key: _number_array(d.get(key), f"{where}: variable '{v.name}'",
                                                                            key) for key in MEMBER_KEYS[1:]}}
            if change["draws"] is not None and change["prior"] is not None:   # what the file left out, derived
                mean = _posterior_mean(change["draws"], change["prior"], f"{where}: variable '{v.name}'")
                change.update({key: mean[key] for key in ("cpt", "counts") if change[key] is None})
            changes[v.name] = change
        members.append(WeightedNetwork(float(m["weight"]),
                                       type(network)([dataclasses.replace(v, **changes[v.name])
                                                      for v in network.variables])))
    return members


def _member_variable_dict(v: Variable) -> dict:
    """A variable's entry in a structure of the sample: what differs between structures (``MEMBER_KEYS``), without
    the CPT or its counts where they are what the draws give (``_posterior_mean``, as a learn makes them: most of the
    file would be those floats); a CPT set otherwise (another tool, an edit) is written.
    """
    whole = _variable_dict(v)
    derived = {}
    if v.draws is not None and v.prior is not None:
        mean = _posterior_mean(v.draws, v.prior, "")
        derived = {key: mean[key] for key in ("cpt", "counts")
                   if getattr(v, key) is not None and np.array_equal(getattr(v, key), mean[key])}
    return {"name": v.name, **{key: whole[key] for key in MEMBER_KEYS if key in whole and key not in derived}}


def _posterior_mean(draws: np.ndarray, prior: np.ndarray, where: str) -> dict:
    """The CPT and counts of a structure of the sample that its file entry leaves out (``variables.posterior_mean``)."""
    if draws.ndim < 2 or draws.shape[1:] != prior.shape:
        raise ModelFormatError(f"{where}: 'draws' have shape {list(draws.shape)}, expected [S, "
                               f"{', '.join(str(k) for k in prior.shape)}] (the 'prior''s shape)")
    counts, cpt = posterior_mean(draws, prior)
    return {"counts": counts, "cpt": cpt}


# ------------------------------------------------------------- (de)serial.
def current_umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # (elsewhere: set and restore it)
    os.umask(mask)
    return mask


def model_text(network) -> str:
    """The model file's JSON: indented by one space, but every variable's posterior ``draws`` on one
    line (they are most of the numbers: one a line would make the file several times larger), and each other
    structure of the sample one line a variable.
    """
    doc = network.to_dict()
    draws = {}
    for j, variable in enumerate(doc["variables"]):
        if "draws" in variable:
            draws[f"@draws {j}@"] = json.dumps(variable["draws"], separators=(",", ":"))
            variable["draws"] = f"@draws {j}@"
    for k, member in enumerate(doc.get("structures", [])[1:]):
        for j, variable in enumerate(member["variables"]):
            draws[f"@structure {k} {j}@"] = json.dumps(variable, separators=(",", ":"))
            member["variables"][j] = f"@structure {k} {j}@"
    text = json.dumps(doc, indent=1)
    for mark, array in draws.items():
        text = text.replace(json.dumps(mark), array, 1)
    return text


def write_json_atomic(path: str | os.PathLike, doc) -> None:
    """Write ``doc`` as JSON to ``path`` atomically, with the permissions of a new file (0666 & ~umask)."""
    with written_atomically(path) as f:
        json.dump(doc, f, indent=1)


@contextlib.contextmanager
def written_atomically(path: str | os.PathLike, newline: str | None = None, exclusive: bool = False):
    """A text file to write that becomes ``path`` when the block ends: written beside it, synced, renamed over it
    (readers see the old file or the new one, never half). On any exception, Ctrl-C included, ``path`` is left as
    it was and the temporary file removed. The permissions are a new file's (0666 & ~umask). ``exclusive``: never
    over a file: FileExistsError if ``path`` exists when the block ends (made meanwhile by another program too).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:  # named after the file asked for, not the temporary one beside it
        why = (f"{path.parent} is a file, not a folder" if path.parent.is_file()
               else f"no file can be made in {path.parent} ({exc.strerror})")
        raise OSError(exc.errno, f"cannot write {path}: {why}") from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes it 0600
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            _link_new(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _other_kind(path: Path, data: bytes, what: str) -> str:
    """For a file that is not JSON: what it is instead, when its start tells (a cases CSV: 'trial_id' in its first
    line; else ``OTHER_KINDS``), and what to do with it ('' when its start does not tell).
    """
    start = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if b"trial_id" in start.split(b"\n", 1)[0]:
        return f"'{path}' is a cases CSV file, not a {what} (a JSON file){_CASES}"
    for starts, kind, advice in OTHER_KINDS:
        if start.startswith(starts):
            return f"'{path}' is {kind}, not a {what} (a JSON file){advice}"
    return ""


def _link_new(tmp: str, path: Path) -> None:
    """Give the file ``tmp`` the name ``path`` unless that names a file already (FileExistsError), in one step: a
    hard link (os.replace would replace a file made since the caller looked); then ``tmp`` goes.
    """
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{path} exists already") from None
    except OSError as exc:  # a file system without hard links: look, then rename (another program may come between)
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, f"{path} exists already") from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def _clipped(exc: BaseException, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


def _mapping(value, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelFormatError(f"'{what}' must be a JSON object")
    return dict(value)


def _variable_from_dict(d, i: int) -> Variable:
    if not isinstance(d, Mapping):
        raise ModelFormatError(f"variables[{i}] must be a JSON object")
    name = d.get("name")
    where = f"variable '{name}'" if isinstance(name, str) else f"variables[{i}]"
    unknown = set(d) - {"name", "group", "values", "parents", "cpt", "counts", "draws", "prior", "sensor"}
    if unknown:
        raise ModelFormatError(f"{where}: unknown keys {sorted(unknown)}")
    values = d.get("values")
    if values is not None:
        if not isinstance(values, list):
            raise ModelFormatError(f"{where}: 'values' must be a list of strings")
        values = tuple(values)
    parents = d.get("parents")
    if parents is not None:
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            raise ModelFormatError(f"{where}: 'parents' must be a list of variable names")
        parents = tuple(parents)
    cpt, counts, draws, prior = (_number_array(d.get(key), where, key) for key in ("cpt", "counts", "draws", "prior"))
    sensor = d.get("sensor")
    if sensor is not None:
        sensor = _sensor_from_dict(sensor, where)
    return Variable(name=name, group=d.get("group"), values=values, parents=parents, sensor=sensor, cpt=cpt,
                    counts=counts, draws=draws, prior=prior)


def _number_array(value, where: str, key: str) -> np.ndarray | None:
    if value is None:
        return None
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelFormatError(f"{where}: '{key}' must be nested lists of numbers of equal lengths") from None


def _variable_dict(v: Variable) -> dict:
    d = {"name": v.name, "group": v.group, "values": list(v.values) if v.values is not None else None}
    if v.parents is not None:
        d["parents"] = list(v.parents)
    if v.cpt is not None:
        d["cpt"] = v.cpt.tolist()
    if v.counts is not None:
        d["counts"] = v.counts.tolist()
    if v.draws is not None:
        d["draws"] = _compact(v.draws)
    if v.prior is not None:
        d["prior"] = _compact(v.prior)
    d["sensor"] = None if v.sensor is None else _sensor_dict(v.sensor)
    return d


def _compact(array: np.ndarray) -> list:
    """Nested lists of whole numbers (written without '.0') where every entry is one, as counts are: a model's
    posterior draws are most of its file.
    """
    whole = np.round(array)
    if np.array_equal(whole, array) and np.abs(array).max(initial=0) < 2 ** 53:
        return whole.astype(np.int64).tolist()
    return array.tolist()


def _sensor_dict(sensor: SensorModel) -> dict:
    """A 1-D sensor: "name", "means", "stddevs"; a vector sensor: "names", "means", "covariances", and its
    "covariance_type" while it is to be fitted; "cluster_by" when it has one.
    """
    s = {"names": list(sensor.names)} if sensor.vector else {"name": sensor.name}
    if sensor.fitted and sensor.vector:
        s.update(means=sensor.means.tolist(), covariances=sensor.covariances.tolist())
    elif sensor.fitted:
        s.update(means=sensor.means.tolist(), stddevs=sensor.stddevs.tolist())
    else:
        s["max_components"] = sensor.max_components
        if sensor.vector:
            s["covariance_type"] = sensor.covariance_type
    if sensor.cluster_by:  # fitted too: a model read back predicts and learns on as the one that was saved
        s["cluster_by"] = list(sensor.cluster_by)
    if sensor.valid_range is not None:
        s["valid_range"] = list(sensor.valid_range)
    return s


def _sensor_from_dict(s, where: str) -> SensorModel:
    if not isinstance(s, Mapping):
        raise ModelFormatError(f"{where}: 'sensor' must be a JSON object or null")
    valid_range = s.get("valid_range")
    if valid_range is not None:
        if (not isinstance(valid_range, list) or len(valid_range) != 2
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in valid_range)):
            raise ModelFormatError(f"{where}: sensor 'valid_range' must be [low, high], two numbers")
        valid_range = (float(valid_range[0]), float(valid_range[1]))
    unknown = set(s) - {"name", "names", "means", "stddevs", "covariances", "max_components", "covariance_type",
                        "valid_range", "cluster_by"}
    if unknown:
        raise ModelFormatError(f"{where}: unknown sensor keys {sorted(unknown)}")
    names = s.get("names")
    if names is not None:
        if "name" in s:
            raise ModelFormatError(f"{where}: give the sensor 'name' (one reading) or 'names', not both")
        if not isinstance(names, list) or not names:
            raise ModelFormatError(f"{where}: sensor 'names' must be a non-empty list of reading names")
        names = tuple(names)
    vector = names is not None and len(names) > 1
    cluster_by = s.get("cluster_by", [])
    if not isinstance(cluster_by, list) or any(not isinstance(n, str) or not n for n in cluster_by):
        raise ModelFormatError(f"{where}: sensor 'cluster_by' must be a list of variable names")
    arrays = {}
    for field in ("means", "stddevs", "covariances"):
        if s.get(field) is not None:
            try:
                arr = np.asarray(s[field], dtype=float)
            except (TypeError, ValueError):
                raise ModelFormatError(f"{where}: sensor '{field}' must be (nested) lists of numbers") from None
            arrays[field] = arr if vector else arr.reshape(-1)
    return SensorModel(name=s.get("name"), names=names, max_components=s.get("max_components", 6),
                       covariance_type=s.get("covariance_type", "auto"), valid_range=valid_range,
                       cluster_by=tuple(cluster_by), **arrays)


__all__ = ["FORMAT", "FORMATS", "FORMAT_VECTOR", "OTHER_KINDS", "NetworkFile", "current_umask", "model_text",
           "write_json_atomic", "written_atomically"]
