"""The suite's `host_timed` marker (a pytest plugin, loaded by conftest.py): a test judged by
this host's wall clock runs again when it fails, three tries in all."""
import pytest
from _pytest.runner import runtestprotocol


#: Tries a host_timed test gets in all.
HOST_TIMED_TRIES = 3


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A test marked host_timed measures a simulated program by this host's wall clock (spin
    waits stand for its kernels and its host work), so another process taking the CPU can push
    one figure past its bound: one preempted tail read 0.31 ms against 0.14 on a CI machine.
    Such a test runs again when it fails, HOST_TIMED_TRIES tries in all; the tries that failed
    are shown in its report's "host_timed" section, and a test that fails every try fails. A
    wrong result, which fails every try, still fails."""
    if item.get_closest_marker("host_timed") is None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    earlier = []
    for attempt in range(1, HOST_TIMED_TRIES + 1):
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        failed = [r for r in reports if r.failed]
        if not failed or attempt == HOST_TIMED_TRIES:
            break
        earlier.append(f"try {attempt} of {HOST_TIMED_TRIES} failed:\n"
                       + "\n".join(str(r.longrepr) for r in failed)[-2000:])
    for r in reports:
        if earlier and r.when == "call":
            r.sections.append(("host_timed", "\n\n".join(earlier)))
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
