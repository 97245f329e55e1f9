"""Parameter learning: EM with sensor readings as soft evidence, and the paper's Discrete baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .cases import CaseEvidence, CaseSet
from .errors import DataError, ModelFormatError
from .estep import SeparatorEStep
from .evidence import Evidence
from .inference import JunctionTree, StreamingEStep, joint_posterior
from .network import AffordanceNetwork, SensorModel
from .options import LearningOptions
from .progress import Progress, report


@dataclass
class EMResult:
    """Trace of one EM run.

    ``log_likelihoods[t]`` is log p(data | CPTs after t iterations); ``log_posteriors`` adds the
    log Dirichlet prior, which is what EM increases when ``prior`` > 0. ``saddles``: how often
    the run reached a symmetric latent fixed point (and was restarted from there);
    ``restarts``: the final objective of each of the ``n_init`` starts; ``cpts``: the result;
    ``counts``: the expected family counts of the cases under it (one E-step at ``cpts``).
    """

    log_likelihoods: list = field(default_factory=list)
    log_posteriors: list = field(default_factory=list)
    rms_changes: list = field(default_factory=list)
    iterations: int = 0
    converged: bool = False
    saddles: int = 0
    restarts: list = field(default_factory=list)
    cpts: list = field(default_factory=list, repr=False)
    counts: list = field(default_factory=list, repr=False)

    @property
    def log_likelihood(self) -> float:
        """The log-likelihood after the last iteration."""
        return self.log_likelihoods[-1]


def family_counts(codes: np.ndarray, cards: Sequence[int], child: int, parents: Sequence[int],
                  weights: np.ndarray | None = None) -> np.ndarray:
    """Counts of (parents..., child) configurations over complete cases (K, n) of value codes."""
    axes = [*parents, child]
    shape = tuple(int(cards[a]) for a in axes)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in axes), shape)
    return np.bincount(flat, weights=weights, minlength=int(np.prod(shape))).reshape(shape).astype(float)


def normalise_counts(counts: np.ndarray, prior: float) -> np.ndarray:
    """Theta = (N_ijk + prior) / (N_ij + r * prior); rows with no data and no prior are uniform."""
    padded = counts + prior
    totals = padded.sum(axis=-1, keepdims=True)
    r = counts.shape[-1]
    return np.divide(padded, totals, out=np.full_like(padded, 1.0 / r), where=totals > 0)


def fit_discrete(network: AffordanceNetwork, cases: CaseSet | CaseEvidence, prior: float,
                 priors: Sequence[np.ndarray] | None = None) -> AffordanceNetwork:
    """The paper's Discrete baseline: MAP-assign every hidden value (``CaseEvidence.map_values``, with
    ``priors`` p(value) if given), then count, with ``prior`` pseudo-counts per CPT entry.
    """
    observed = CaseEvidence.of(cases, network)
    _check_learnable(network, observed.cases)
    codes = observed.map_values(priors)
    cards = network.cards
    counts = {v.name: family_counts(codes, cards, i, network.parent_indices(i))
              for i, v in enumerate(network.variables)}
    return network.with_cpts({name: normalise_counts(c, prior) for name, c in counts.items()},
                             {name: c + prior for name, c in counts.items()})


def fit_em(network: AffordanceNetwork, cases: CaseSet | CaseEvidence, options: LearningOptions,
           initial_cpts: Sequence[np.ndarray] | None = None, prior_model: AffordanceNetwork | None = None,
           chunk_size: int = 512, progress: Progress = None, pseudo_counts: Mapping[str, np.ndarray] | None = None,
           support: Mapping[str, np.ndarray] | None = None):
    """EM for the CPTs with sensor readings (and labels) as evidence, as derived in the paper.

    E-step: p(family | case) for every family and case by one junction-tree pass over all cases
    (``cases``' evidence under the network, a ``CaseEvidence``, built once); M-step: the paper's theta
    equation with ``options.prior`` pseudo-counts per CPT entry (0 gives maximum likelihood). Stops when
    the RMS change of all CPT entries is below ``options.tol`` or after ``options.max_iter`` iterations.
    The first start is ``initial_cpts`` if given, else ``options.em_init``: "uniform", "discrete" or
    "random" (every row from a Dirichlet(1), seeded). Returns (network with the learned CPTs, EMResult).

    Latent variables (no evidence in any case, e.g. a hidden cause without a sensor): a
    uniform start is a symmetric fixed point there (EM would stop at once), so their CPTs and
    their children's start from random rows (seeded by ``options.seed``); a run that ends on such a
    point (a latent whose children do not depend on it) is restarted from random rows
    there, and reported as not converged if it still ends on one. ``options.n_init`` > 1 runs EM
    from that many starts (the first as above, the others "random" with seeds ``seed + 1``, ...) and
    keeps the one with the highest objective, as scikit-learn's ``n_init`` does.
    ``options.em_acceleration`` "squarem": SQUAREM extrapolation (Varadhan & Roland 2008, SqS3 step
    length) with a monotone safeguard: the same fixed point in fewer E-steps, the objective never
    decreasing between the accepted points; ``iterations`` then counts E-steps (plain EM is used with
    ``fit_sensors``).

    Beyond the paper: ``prior_model`` with ``options.prior_strength`` (an equivalent sample size)
    adds pseudo-counts ``prior_strength * p_prior_model(family)`` so that what an earlier
    model learned carries over; ``options.fit_sensors`` re-estimates every sensor's means and
    stddevs in the M-step too (for sensor models only roughly known). ``progress``: called after
    every E-step with ("parameters", E-steps done, log-likelihood) (see ``core.progress``).
    ``pseudo_counts``: more pseudo-counts for some variables (by name, shaped like the CPT), e.g. the rows
    of a variable whose values are conditions pointing at their own condition (``core.conditions``).
    ``support``: for some variables (by name), where their CPT may be non-zero (booleans shaped like the CPT):
    elsewhere the CPT starts at zero and has no pseudo-counts, so EM keeps it there (structural zeros, e.g. a
    condition's row on other conditions' values: ``conditions.own_condition_support``).

    The network returned carries the Dirichlet posterior of its CPTs (``Variable.counts``): the expected
    counts of the cases under the learned CPTs plus the pseudo-counts.
    """
    observed = CaseEvidence.of(cases, network)
    _check_learnable(network, observed.cases)
    prior = options.prior
    pseudo = [np.asarray(float(prior))] * len(network)
    if prior_model is not None and options.prior_strength > 0:
        pseudo = [prior + options.prior_strength * t for t in family_priors(prior_model, network)]
    for name, extra in (pseudo_counts or {}).items():
        pseudo[network.index(name)] = pseudo[network.index(name)] + extra
    allowed = [None] * len(network)
    for name, where in (support or {}).items():
        allowed[network.index(name)] = np.asarray(where, dtype=bool)
        pseudo[network.index(name)] = np.where(allowed[network.index(name)], pseudo[network.index(name)], 0.0)
    engine = JunctionTree(network)
    if options.fit_sensors:
        estep = None
    elif not observed.held:
        estep = StreamingEStep(engine, observed.chunks, observed.n_cases, chunk_size)
    elif SeparatorEStep.fits(engine, observed.n_cases):
        estep = SeparatorEStep(engine, observed.evidence())
    else:
        estep = engine.estep(observed.evidence(), chunk_size)
    latent = observed.latent
    best, finals = None, []
    for start in range(options.n_init):
        rng = np.random.default_rng([int(options.seed), start])
        if start == 0 and initial_cpts is not None:
            cpts = list(initial_cpts)
        else:
            cpts = _initial_cpts(network, observed, prior, options.em_init if start == 0 else "random", rng)
        if start == 0 and initial_cpts is None and options.em_init == "uniform":
            cpts = _break_symmetry(network, cpts, latent, rng)
        cpts = restricted(cpts, allowed)
        if options.fit_sensors:
            run = _plain_em_with_sensors(network, observed.cases, engine, cpts, pseudo, options, chunk_size, progress)
        else:
            run = _em_escaping_saddles(network, estep, cpts, pseudo, options, latent, rng, progress, allowed)
        finals.append(run[1].log_posteriors[-1])
        if best is None or finals[-1] > best[1].log_posteriors[-1]:
            best = run
    fitted, result = best
    result.restarts = finals
    return fitted.with_cpts(dict(zip(fitted.names, result.cpts)),
                            {name: c + a for name, c, a in zip(fitted.names, result.counts, pseudo)}), result


_TINY = 1e-300


def symmetric_latents(network: AffordanceNetwork, cpts: Sequence[np.ndarray], latent: Sequence[int],
                      atol: float = 1e-9) -> list:
    """The latent variables with children whose CPTs do not depend on them: a symmetric fixed point
    of EM (a saddle of the likelihood unless the data have nothing for the latent to explain).
    """
    out = []
    for i in latent:
        kids = [(j, network.parent_indices(j).index(i)) for j in range(len(network)) if i in network.parent_indices(j)]
        if kids and all(np.ptp(cpts[j], axis=axis).max() <= atol for j, axis in kids):
            out.append(i)
    return out


def _break_symmetry(network: AffordanceNetwork, cpts: list, latent: Sequence[int], rng) -> list:
    """Random (Dirichlet(1)) rows for the latent variables and their children; the rest unchanged."""
    touched = {i for i in latent} | {j for j in range(len(network)) for i in latent if i in network.parent_indices(j)}
    return [_random_rows(c.shape, rng) if j in touched else c for j, c in enumerate(cpts)]


def _random_rows(shape, rng) -> np.ndarray:
    return rng.dirichlet(np.ones(shape[-1]), size=shape[:-1]).reshape(shape)


def restricted(cpts: Sequence[np.ndarray], allowed: Sequence[np.ndarray | None]) -> list:
    """``cpts`` with every entry outside its ``allowed`` mask (None: all allowed) set to zero, rows renormalised
    (a row with nothing left stays as it was).
    """
    out = []
    for c, where in zip(cpts, allowed):
        if where is not None:
            kept = np.where(where, c, 0.0)
            total = kept.sum(axis=-1, keepdims=True)
            c = np.divide(kept, total, out=np.array(c, dtype=float), where=total > 0)
        out.append(c)
    return out


def _em_escaping_saddles(network, estep, cpts, pseudo, options: LearningOptions, latent, rng, progress=None,
                         allowed=None, escapes: int = 3):
    """EM (plain or SQUAREM, ``options.em_acceleration``) that never reports a symmetric latent fixed point
    as converged.
    """
    result = EMResult()
    run = _squarem if options.em_acceleration == "squarem" else plain_em
    tol, max_iter = options.tol, options.max_iter
    for attempt in range(escapes + 1):
        cpts = run(estep, cpts, pseudo, tol, max_iter - result.iterations, result, progress)
        stuck = symmetric_latents(network, cpts, latent)
        if not stuck:
            break
        result.converged = False
        result.saddles += 1
        if attempt == escapes or result.iterations >= max_iter:
            break
        cpts = restricted(_break_symmetry(network, cpts, stuck, rng), allowed or [None] * len(cpts))
    result.counts, ll = estep(cpts)
    result.log_likelihoods.append(ll)
    result.log_posteriors.append(ll + log_dirichlet(cpts, pseudo))
    result.cpts = cpts
    return network, result


def plain_em(estep, cpts: list, pseudo, tol: float, max_iter: int, result: EMResult, progress: Progress = None) -> list:
    """Plain EM from ``cpts``: at most ``max_iter`` iterations of ``estep`` (an E-step: CPTs -> expected counts,
    log-likelihood) and the M-step with ``pseudo`` pseudo-counts, until the RMS change of the CPTs is below
    ``tol``; each recorded on ``result``'s trace. Returns the CPTs it ends with.
    """
    result.converged = False
    for _ in range(max_iter):
        counts, ll = estep(cpts)
        cpts, change = _m_step(result, counts, ll, cpts, pseudo)
        if _iteration_done(result, change, ll, tol, progress):
            result.converged = True
            break
    return cpts


def _m_step(result: EMResult, counts, ll: float, cpts: list, pseudo) -> tuple[list, float]:
    """Record the E-step's log-likelihood and log-posterior of ``cpts``; the M-step's CPTs and their RMS change."""
    result.log_likelihoods.append(ll)
    result.log_posteriors.append(ll + log_dirichlet(cpts, pseudo))
    new = [normalise_counts(c, a) for c, a in zip(counts, pseudo)]
    return new, rms_difference(new, cpts)


def _iteration_done(result: EMResult, change: float, ll: float, tol: float, progress) -> bool:
    """Count one iteration (and report it); whether it converged."""
    result.rms_changes.append(change)
    result.iterations += 1
    report(progress, "parameters", result.iterations, ll)
    return change < tol


def _squarem(estep, cpts, pseudo, tol, max_iter, result, progress=None) -> list:
    """SQUAREM (SqS3) on the logarithms of the CPT entries, with a monotone safeguard.

    One cycle: theta1 = M(theta0), theta2 = M(theta1); with l = log theta, r = l1 - l0, v = l2 - 2 l1 + l0,
    alpha = |r|/|v| clipped to [1, a bound], theta' = exp(l0 + 2 alpha r + alpha^2 v), capped at 1 and each
    row renormalised (every entry is positive: no step needs shortening); then one EM step from theta'.
    theta' is kept only if its objective is at least theta1's; otherwise, and whenever alpha is 1, the cycle
    ends at theta2, a plain EM point. The bound starts at 1, grows fourfold (up to 1e6) when an accepted
    alpha reached it or when it clipped alpha to 1, and falls to a quarter of a rejected alpha (at least 1).
    The objective of every point the trace records is therefore at least its predecessor's; every E-step
    counts as an iteration and the run stops, as plain EM does, when one EM step changes the CPTs by less
    than ``tol`` (RMS).
    """
    result.converged = False
    step_max = 1.0  # largest step length allowed; grows by 4 when reached, as in SQUAREM's defaults

    def em_step(theta):
        counts, ll = estep(theta)
        result.iterations += 1
        report(progress, "parameters", result.iterations, ll)
        new = [normalise_counts(c, a) for c, a in zip(counts, pseudo)]
        return new, ll, ll + log_dirichlet(theta, pseudo), rms_difference(new, theta)

    def record(ll, post, change):
        result.log_likelihoods.append(ll)
        result.log_posteriors.append(post)
        result.rms_changes.append(change)

    # theta1 = M(theta0) is always at hand: after an accepted extrapolation its EM step is the
    # first step of the next cycle (no separate stabilisation step, 2 E-steps per cycle).
    theta1, ll, post, change = em_step(cpts)
    record(ll, post, change)
    objective = post
    theta0 = cpts
    while change >= tol and result.iterations < max_iter:
        theta2, ll, post, change = em_step(theta1)
        record(ll, post, change)
        objective = post
        if change < tol or result.iterations >= max_iter:
            theta1 = theta2
            break
        # extrapolate the log-probabilities: every point is then a valid CPT (rows renormalised)
        logs = [np.log(np.concatenate([c.ravel() for c in t]) + _TINY) for t in (theta0, theta1, theta2)]
        r, v = logs[1] - logs[0], logs[2] - 2 * logs[1] + logs[0]
        norm_v = float(np.sqrt(v @ v))
        raw = float(np.sqrt(r @ r)) / norm_v if norm_v > 0 else 1.0
        alpha = min(max(raw, 1.0), step_max)
        flat = np.exp(np.minimum(logs[0] + 2 * alpha * r + alpha * alpha * v, 0.0))
        if alpha > 1.0:
            theta_x = _unflatten(flat, theta0)
            theta_next, ll, post, change_x = em_step(theta_x)
            if post >= objective:   # accepted: never below theta2's predecessor (theta1)
                record(ll, post, change_x)
                objective, change = post, change_x
                if alpha >= step_max:
                    step_max = min(4.0 * step_max, 1e6)
                theta0, theta1 = theta_x, theta_next
                continue
            step_max = max(1.0, alpha / 4.0)
        elif raw >= step_max:
            step_max *= 4.0
        if result.iterations >= max_iter:
            return theta2
        theta0 = theta2   # a plain EM cycle
        theta1, ll, post, change = em_step(theta2)
        record(ll, post, change)
        objective = post
    result.converged = change < tol
    return theta1


def _unflatten(flat: np.ndarray, like: Sequence[np.ndarray]) -> list:
    """Split a flat vector into arrays shaped like ``like``, every last-axis row renormalised."""
    out, start = [], 0
    for a in like:
        part = flat[start:start + a.size].reshape(a.shape)
        start += a.size
        out.append(part / part.sum(axis=-1, keepdims=True))
    return out


def _plain_em_with_sensors(network, cases: CaseSet, engine, cpts, pseudo, options: LearningOptions, chunk_size: int,
                           progress=None):
    """Plain EM that re-estimates the sensor models (1-D and vector) in every M-step too: the evidence is
    built again from the readings after every M-step.
    """
    tol, max_iter = options.tol, options.max_iter
    readings = {network.index(var): sensor_features(x) for var, x in cases.sensor_readings(network).items()}
    estep = engine.estep(cases.evidence(network), chunk_size, readings)
    result = EMResult()
    for _ in range(max_iter):
        counts, ll, moments = estep(cpts)
        cpts, change = _m_step(result, counts, ll, cpts, pseudo)
        network, sensor_change = _reestimate_sensors(network, moments)
        change = float(np.sqrt(change ** 2 + sensor_change ** 2))
        estep = engine.estep(cases.evidence(network), chunk_size, readings)
        if _iteration_done(result, change, ll, tol, progress):
            result.converged = True
            break
    result.counts, ll, _ = estep(cpts)
    result.log_likelihoods.append(ll)
    result.log_posteriors.append(ll + log_dirichlet(cpts, pseudo))
    result.cpts = cpts
    return network, result


def family_priors(prior_model: AffordanceNetwork, network: AffordanceNetwork) -> list:
    """p(parents, child) under ``prior_model`` for each family of ``network``, shaped like its CPT.

    The families may differ from the prior model's (a new structure); the variables and
    their values must be the same.
    """
    for v in network.variables:
        if v.name not in prior_model.names or prior_model[v.name].values != v.values:
            raise ModelFormatError(f"the prior model has no variable '{v.name}' with values {list(v.values)}")
    engine = prior_model.engine
    calibration = engine.calibrate([v.cpt for v in prior_model.variables],
                                   Evidence.empty(len(prior_model)))
    return [joint_posterior(engine, calibration, [prior_model.index(n) for n in (*v.parents, v.name)])[0]
            for v in network.variables]


def sensor_features(x: np.ndarray) -> np.ndarray:
    """What the E-step weights by the posterior of a sensor's variable to re-estimate the sensor.

    1-D readings (K,): returned as they are (the E-step forms [1, y, y^2]). Vector readings
    (K, d): [1, y, vec(y y^T)] per case, (K, 1 + d + d^2); a case with a missing reading
    contributes zeros (the vector sensor is re-estimated from complete readings).
    """
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        return x
    complete = np.all(np.isfinite(x), axis=1)
    y = np.where(complete[:, None], x, 0.0)
    outer = (y[:, :, None] * y[:, None, :]).reshape(len(y), -1)
    return np.concatenate([complete[:, None].astype(float), y, outer], axis=1)


def _reestimate_vector_sensor(old: SensorModel, moments: np.ndarray):
    """Weighted means and covariances of a vector sensor from moments (1 + d + d^2, card)."""
    d = old.dim
    w = moments[0]
    weight = np.maximum(w, 1e-12)
    means = np.where(w[:, None] > 1e-9, moments[1:1 + d].T / weight[:, None], old.means)
    second = moments[1 + d:].T.reshape(-1, d, d) / weight[:, None, None]
    covs = second - means[:, :, None] * means[:, None, :]
    floor = np.diag((1e-3 * np.maximum(np.ptp(old.means, axis=0), 1.0)) ** 2)  # as for 1-D sensors
    covs = np.where(w[:, None, None] > 1e-9, 0.5 * (covs + np.swapaxes(covs, 1, 2)) + floor, old.covariances)
    sensor = SensorModel(names=old.names, means=means, covariances=covs, max_components=old.max_components,
                         covariance_type=old.covariance_type)
    stddevs = np.sqrt(np.diagonal(covs, axis1=1, axis2=2))
    return sensor, np.concatenate([(means - old.means).ravel(), (stddevs - old.component_stddevs()).ravel()])


def _reestimate_sensors(network: AffordanceNetwork, moments: dict):
    """Gaussian M-step per sensor from posterior-weighted reading moments; returns the RMS change."""
    changes, diffs = {}, []
    for i, m in moments.items():
        v = network.variables[i]
        old = v.sensor
        if old.vector:
            sensor, diff = _reestimate_vector_sensor(old, m)
            changes[v.name] = {"sensor": sensor}
            diffs.append(diff)
            continue
        w, wy, wy2 = m
        weight = np.maximum(w, 1e-12)
        means = np.where(w > 1e-9, wy / weight, old.means)
        var = np.where(w > 1e-9, wy2 / weight - means ** 2, old.stddevs ** 2)
        floor = 1e-3 * max(float(np.ptp(old.means)), 1.0)
        stddevs = np.sqrt(np.maximum(var, floor ** 2))
        diffs.append(np.concatenate([means - old.means, stddevs - old.stddevs]))
        changes[v.name] = {"sensor": SensorModel(old.name, means, stddevs, old.max_components)}
    change = float(np.sqrt(np.mean(np.concatenate(diffs) ** 2))) if diffs else 0.0
    return network.replace_variables(changes), change


def log_likelihood(network: AffordanceNetwork, cases: CaseSet | Evidence) -> float:
    """Total log p(cases | model) under the network's CPTs and sensor models."""
    evidence = cases.evidence(network) if isinstance(cases, CaseSet) else cases
    return float(network.engine.log_likelihood([v.cpt for v in network.variables], evidence).sum())


def log_dirichlet(cpts: Sequence[np.ndarray], prior) -> float:
    """Log of the (unnormalised) Dirichlet prior whose MAP estimate ``normalise_counts`` gives.

    ``prior``: pseudo-counts, one number for every entry or one array per CPT.
    """
    priors = prior if isinstance(prior, (list, tuple)) else [prior] * len(cpts)
    return float(sum(np.sum(a * np.log(np.maximum(c, 1e-300))) for c, a in zip(cpts, priors)))


def rms_difference(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Root mean square difference of all entries of two lists of arrays."""
    diff = np.concatenate([(x - y).ravel() for x, y in zip(a, b)])
    return float(np.sqrt(np.mean(diff * diff)))


def _initial_cpts(network: AffordanceNetwork, observed: CaseEvidence, prior: float, init: str, rng) -> list:
    """EM's start: "uniform" CPTs, "discrete" (the Discrete baseline's, with at least one pseudo-count) or
    "random" (Dirichlet(1) rows from ``rng``).
    """
    if init == "discrete":
        return [v.cpt for v in fit_discrete(network, observed, prior=max(prior, 1.0)).variables]
    shapes = [[network[p].card for p in v.parents] + [v.card] for v in network.variables]
    if init == "uniform":
        return [np.full(shape, 1.0 / shape[-1]) for shape in shapes]
    return [_random_rows(shape, rng) for shape in shapes]


def _check_learnable(network: AffordanceNetwork, cases: CaseSet) -> None:
    if not network.structure_known:
        raise ModelFormatError("learn the structure first: some variables have no 'parents'")
    unfitted = [v.sensor.name for v in network.variables if v.sensor is not None and not v.sensor.fitted]
    if unfitted:
        raise ModelFormatError(f"sensor models {unfitted} have no means/stddevs: fit them first")
    if cases.n_cases == 0:
        raise DataError("no cases to learn from")
    if not cases.labels and not cases.readings:
        raise DataError("the cases observe none of the network's variables")


__all__ = ["EMResult", "family_counts", "family_priors", "fit_discrete", "fit_em", "log_likelihood", "normalise_counts",
           "plain_em", "rms_difference", "sensor_features", "symmetric_latents"]
