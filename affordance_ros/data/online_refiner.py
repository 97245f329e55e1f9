"""Online learning: the current model refined by stepwise EM with every case stored.

``OnlineRefiner(model)`` starts ``core.online.OnlineEM`` from a learned model, worth as many
cases as that model embodies (the cases it was learned from, plus its prior's worth when a
prior carried an earlier model, plus earlier online updates), so that each new case refines
it instead of replacing it. Structure and sensor models stay as learned.

The posterior draws of a model that has them (``core.posterior``) take every case too: each draw imputes it
and counts it (``core.online``), so that answers' standard deviations and intervals follow the CPTs between
learns without becoming surer than the last learn made them; the metadata entry "posterior" counts these
``online_updates`` (a learn draws the posterior afresh from every case).

Which stored cases a model has seen is kept in its metadata, so that a restart (or a batch
learn that took a while) can catch up on the cases stored after them:

    "cases":  {"database": path, "count": cases seen, "last_id": case id of the last one seen,
               "last_trial_id": its trial_id}
    "online": {"updates": online updates so far, "num_cases": what the model is worth in cases}

"""

from __future__ import annotations

import time

from ..core import AffordanceNetwork
from ..core.online import OnlineEM
from .trial import TrialRecord, case_set


def cases_marker(database, count: int, last_id: int, last_trial_id: str | None) -> dict:
    """The metadata entry "cases": which stored cases a model has seen (up to and including ``last_id``)."""
    return {"database": str(database), "count": int(count), "last_id": int(last_id), "last_trial_id": last_trial_id}


def model_weight(model: AffordanceNetwork) -> float:
    """How many cases the model's CPTs are worth."""
    online = model.metadata.get("online") or {}
    if "num_cases" in online:
        return float(online["num_cases"])
    learned = model.metadata.get("learned") or {}
    return float(learned.get("num_cases", 0)) + float(learned.get("prior_strength") or 0.0)


class OnlineRefiner:
    """The current model, updated case by case; ``model`` builds the updated network when asked."""

    def __init__(self, model: AffordanceNetwork):
        learned = model.metadata.get("learned") or {}
        online = model.metadata.get("online") or {}
        self.num_cases = model_weight(model)
        self.updates = int(online.get("updates", 0))
        self.session_updates = 0
        self.cases = dict(model.metadata.get("cases") or {})
        self._em = OnlineEM(model, prior=float(learned.get("prior", 1.0)), start_weight=self.num_cases)
        self._base = model
        self._model = model
        self._stale = False  # updates not yet in self._model
        self.unsaved = False  # updates not yet written to the model file

    def update(self, case_id: int, record: TrialRecord) -> None:
        """One stored case. Raises AffordanceError (e.g. a sensor the model does not know) and then changes
        nothing."""
        self._em.partial_fit(case_set(self._base, [record]))
        self.num_cases += 1
        self.updates += 1
        self.session_updates += 1
        self.cases.update(count=int(self.cases.get("count", 0)) + 1, last_id=int(case_id),
                          last_trial_id=record.trial_id)
        self._stale = self.unsaved = True

    @property
    def model(self) -> AffordanceNetwork:
        """The model with every update so far (built once per batch of updates)."""
        if self._stale:
            model = self._em.model_
            model.metadata = {**self._base.metadata, **({"posterior": model.metadata["posterior"]}
                                                         if "posterior" in model.metadata else {})}
            model.metadata["online"] = {"updates": self.updates, "num_cases": self.num_cases,
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            model.metadata["cases"] = dict(self.cases)
            self._model, self._stale = model, False
        return self._model
