# The cffi extension gcpipe._engine is declared here because `cffi_modules` is a setup() keyword.
import os

from setuptools import setup

# The engine's compiler flags are gcpipe/engine/_build.py's and GCPIPE_CFLAGS, which the build record
# lists; flags from the environment (a conda environment sets CFLAGS and LDFLAGS) would change the
# games unrecorded (-ffast-math: other bits), so they are not applied, at install or `gcpipe build`.
for name in ("CFLAGS", "CPPFLAGS", "LDFLAGS"):
    os.environ.pop(name, None)

setup(cffi_modules=["gcpipe/engine/_build.py:ffibuilder"])
