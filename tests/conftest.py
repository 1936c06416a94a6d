"""GPU tests carry the `gpu` marker and skip, with the runtime's reason, where no device is
found (l2persist's pytest plugin does that). On a GPU the session checks that the suite leaves
the persisting-L2 limit as it found it. Tests judged by this host's wall clock carry the
`host_timed` marker (host_timed.py: three tries)."""

import os
import zlib

import pytest

import l2persist

pytest_plugins = ["l2persist.pytest_plugin", "pytester", "host_timed"]


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


# One seed per session, printed in the header: a failing test's data can be made again with
# L2P_TEST_SEED=<seed> (each test draws from the seed and its own node id, so the order the tests
# run in, pytest-randomly's included, does not change a test's data).
_SEED = int(os.environ.get("L2P_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


def pytest_report_header(config):
    return f"l2persist test data seed: {_SEED} (L2P_TEST_SEED={_SEED} repeats it)"


@pytest.fixture
def rng(request):
    import numpy as np
    test_key = zlib.crc32(request.node.nodeid.encode())
    request.node.user_properties.append(("l2p_seed", _SEED))
    return np.random.default_rng([_SEED, test_key])


def pytest_runtest_makereport(item, call):
    """A failing test that used the rng fixture names the seed that makes its data again."""
    if call.when == "call" and call.excinfo is not None and "rng" in getattr(item, "fixturenames", ()):
        item.add_report_section("call", "seed", f"L2P_TEST_SEED={_SEED}")

