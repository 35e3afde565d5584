# The cffi extension gcpipe._engine is declared here because `cffi_modules` is a setup() keyword.
from setuptools import setup

setup(cffi_modules=["gcpipe/engine/_build.py:ffibuilder"])
