"""GPU tests carry the `gpu` marker and skip, with the runtime's reason, where no device is
found. On a GPU the session checks that the suite leaves the persisting-L2 limit as it found
it."""

import pytest

import l2persist


def pytest_collection_modifyitems(config, items):
    if l2persist.is_available():
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {l2persist.no_device_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device():
    return l2persist.Device(0)


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
