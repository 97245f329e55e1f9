"""Model files of other tools: the discrete network (variables, values, parents, CPTs) in and out.

- ``bif``: the Bayesian Interchange Format (pgmpy, pyAgrum, GeNIe, bnlearn).
- ``xmlbif``: XMLBIF 0.3 (pgmpy, pyAgrum's .bifxml, JavaBayes, Weka).
- ``uai``: the UAI competition format (pyAgrum, pgmpy; no names or labels).
- ``exchange``: choosing the format by name or file extension, and ``import_model``, which gives a
  network read from such a file the groups, sensors and learning options of a configuration.
"""

from .bif import read_bif, write_bif
from .exchange import FORMATS, export_model, format_of, import_model
from .uai import read_uai, write_uai
from .xmlbif import read_xmlbif, write_xmlbif

__all__ = ["FORMATS", "export_model", "format_of", "import_model", "read_bif", "read_uai", "read_xmlbif",
           "write_bif", "write_uai", "write_xmlbif"]
