"""Model files of other tools: the discrete network (variables, values, parents, CPTs) in and out.

- ``bif``: the Bayesian Interchange Format (pgmpy, pyAgrum, GeNIe, bnlearn).
"""

from .bif import read_bif, write_bif

__all__ = ["read_bif", "write_bif"]
