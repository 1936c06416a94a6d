"""A pytest plugin for GPU tests: the `gpu` marker, skipped with the CUDA runtime's reason where
no device is found, an `l2p_device` fixture, and ``--l2p-gpu N`` to run the GPU tests on GPU N
(it becomes device 0 of the run; loop over N to cover every GPU), and ``--l2p-guard``: any
test that leaves the persisting-L2 limit or an access policy window changed (after its
fixtures' teardown, against before their setup) errors at teardown, named, with what changed
(``l2persist.l2_state`` snapshots; module and session fixtures may hold state across tests).
Installed with l2persist, pytest loads it by itself (a ``pytest11`` entry point named
``l2persist.pytest_plugin``, so a conftest.py's ``pytest_plugins = ["l2persist.pytest_plugin"]``
or ``-p l2persist.pytest_plugin`` still loads it once); ``-p no:l2persist.pytest_plugin`` turns
it off. In a run without a ``gpu`` test and without ``--l2p-guard`` it never calls CUDA."""

import os

import pytest

from . import _core


def pytest_addoption(parser):
    parser.addoption("--l2p-gpu", metavar="N", default=None,
                     help="run the GPU tests on this GPU (sets CUDA_VISIBLE_DEVICES before "
                          "CUDA starts)")
    parser.addoption("--l2p-guard", action="store_true", default=False,
                     help="fail (at teardown) any test that leaves the persisting-L2 limit or "
                          "an access policy window changed, naming the test and the change")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped where none is found)")
    config.addinivalue_line("markers", "multi_gpu: needs two CUDA devices")
    gpu = config.getoption("--l2p-gpu", default=None)
    if gpu is not None:
        # The runtime reads this once, at its first call: nothing has called CUDA yet here.
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


def pytest_collection_modifyitems(config, items):
    from . import no_device_reason

    if not any("gpu" in item.keywords for item in items):
        return  # another project's run (the entry point loads the plugin everywhere)
    why = no_device_reason()
    if why is None:
        return
    skip = pytest.mark.skip(reason=f"no CUDA device: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _guard_device():
    """The device the guard watches, or None when there is nothing to watch: no GPU and no
    replaced snapshot source."""
    from . import state
    if state._source is state._read and _core.device_count() == 0:
        return None
    return 0


@pytest.fixture(autouse=True)
def _l2p_guard(request):
    """--l2p-guard: the L2 state after a test (and its function fixtures) equals the state
    before. Autouse and set up first, so it is torn down last of the test's fixtures."""
    if not request.config.getoption("--l2p-guard"):
        yield
        return
    from .state import l2_state

    device = _guard_device()
    before = None if device is None else l2_state(device)
    yield
    if before is None:
        return
    after = l2_state(device)
    if after != before:
        pytest.fail(f"--l2p-guard: {request.node.nodeid} left the L2 state changed: "
                    + "; ".join(before.diff(after)), pytrace=False)


def need(module: str):
    """Import ``module`` (``"cupy"``, ``"torch"``) for an interop test. Where a GPU is found
    the module is required: a missing one fails the test, because a GPU run that silently
    skipped its CuPy and PyTorch tests would claim coverage it does not have. Without a GPU
    the test skips, like ``pytest.importorskip``."""
    from . import is_available
    if not is_available():
        return pytest.importorskip(module)
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"{module} is required on a GPU machine (interop tests must run there) "
                    f"and cannot be imported: {e}", pytrace=False)


@pytest.fixture(scope="session")
def l2p_device():
    """Device 0 (GPU tests only)."""
    return _core.Device(0)

__all__ = ["pytest_addoption", "pytest_configure", "pytest_collection_modifyitems",
           "l2p_device", "need"]  # and the autouse _l2p_guard fixture
