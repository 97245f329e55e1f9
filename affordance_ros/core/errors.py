"""Exceptions of the core library; each says what is wrong and what to fix."""


class AffordanceError(ValueError):
    """Base class: a user-facing mistake in a model, the data or a query."""


class ModelFormatError(AffordanceError):
    """A model or configuration file (or dict) that does not follow the schema."""


class EvidenceError(AffordanceError):
    """A query or evidence that does not fit the model (unknown names, labels, NaN)."""


class DataError(AffordanceError):
    """Training cases that cannot be used (empty, malformed, unknown labels)."""


class UnknownColumnError(DataError):
    """A column of cases that is neither a variable nor a sensor of the network; ``column`` names it, ``near`` the
    variable or sensor whose name differs from it in case only (None: none).
    """

    def __init__(self, message: str, column: str, near: str | None = None):
        super().__init__(message)
        self.column = column
        self.near = near

    def __reduce__(self):  # (pickled whole: errors cross from the learning process)
        return type(self), (str(self), self.column, self.near)
