"""A pytest plugin for GPU tests: the `gpu` marker, skipped with the CUDA runtime's reason where
no device is found, and an `l2p_device` fixture. Enable it in a conftest.py with
``pytest_plugins = ["l2persist.pytest_plugin"]``."""

import pytest

from . import _core


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped where none is found)")


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

__all__ = ["pytest_configure", "pytest_collection_modifyitems", "l2p_device"]
