"""setuptools entry point: everything is declared in setup.cfg (`pip install .`, docs/install.md)."""

from setuptools import setup

setup()
