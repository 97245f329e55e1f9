"""Exceptions of the core library; each says what is wrong and what to fix."""


class AffordanceError(ValueError):
    """Base class: a user-facing mistake in a model, the data or a query."""


class ModelFormatError(AffordanceError):
    """A model or configuration file (or dict) that does not follow the schema."""


class EvidenceError(AffordanceError):
    """A query or evidence that does not fit the model (unknown names, labels, NaN)."""


class DataError(AffordanceError):
    """Training cases that cannot be used (empty, malformed, unknown labels)."""
