"""GPU tests carry the `gpu` marker and skip, with the runtime's reason, where no device is
found (l2persist's pytest plugin does that). On a GPU the session checks that the suite leaves
the persisting-L2 limit as it found it."""

import pytest

import l2persist

pytest_plugins = ["l2persist.pytest_plugin", "pytester"]


@pytest.fixture(scope="session")
def device(l2p_device):
    return l2p_device


@pytest.fixture(scope="session", autouse=True)
def _limit_unchanged_by_suite():
    """The process's persisting limit at the end equals its value at the start."""
    if not l2persist.is_available():
        yield
        return
    dev = l2persist.Device(0)
    before = dev.persisting_l2_limit
    yield
    after = dev.persisting_l2_limit
    assert after == before, f"the suite changed the persisting-L2 limit: {before} -> {after}"


@pytest.fixture
def rng():
    import numpy as np
    return np.random.default_rng()
