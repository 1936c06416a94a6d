"""PEP 517 backend: setuptools, plus NVIDIA's CUDA wheels when the machine has no toolkit.

pyproject.toml names this module (``backend-path = ["_backend"]``). Everything is
``setuptools.build_meta`` except the hooks that list build requirements: building a wheel
(or an editable install) on a machine without nvcc asks pip for the compiler, runtime and
CUPTI wheels too, so ``pip install .`` needs only Python and a driver. The rule for "has a
toolkit" lives in l2p_toolkit, which setup.py also uses. An sdist compiles nothing.
"""

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 (every other hook as setuptools has it)

import l2p_toolkit


def get_requires_for_build_wheel(config_settings=None):
    return (_setuptools.get_requires_for_build_wheel(config_settings)
            + l2p_toolkit.build_requirements())


def get_requires_for_build_editable(config_settings=None):
    return (_setuptools.get_requires_for_build_editable(config_settings)
            + l2p_toolkit.build_requirements())
