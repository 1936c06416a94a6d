"""A pytest plugin for GPU tests: the `gpu` marker, skipped with the CUDA runtime's reason where
no device is found, an `l2p_device` fixture, and ``--l2p-gpu N`` to run the GPU tests on GPU N
(it becomes device 0 of the run; loop over N to cover every GPU). Enable it in a conftest.py
with ``pytest_plugins = ["l2persist.pytest_plugin"]``."""

import os

import pytest

from . import _core


def pytest_addoption(parser):
    parser.addoption("--l2p-gpu", metavar="N", default=None,
                     help="run the GPU tests on this GPU (sets CUDA_VISIBLE_DEVICES before "
                          "CUDA starts)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped where none is found)")
    config.addinivalue_line("markers", "multi_gpu: needs two CUDA devices")
    gpu = config.getoption("--l2p-gpu", default=None)
    if gpu is not None:
        # The runtime reads this once, at its first call: nothing has called CUDA yet here.
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


def pytest_collection_modifyitems(config, items):
    from . import no_device_reason

    why = no_device_reason()
    if why is None:
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def l2p_device():
    """Device 0 (GPU tests only)."""
    return _core.Device(0)

__all__ = ["pytest_addoption", "pytest_configure", "pytest_collection_modifyitems",
           "l2p_device"]
