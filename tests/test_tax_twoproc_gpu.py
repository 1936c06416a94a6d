"""The set-aside belongs to the CUDA context: another process holding the maximum set-aside
does not slow this process's writes, while this process's own maximum does; a fresh process
(python -m l2persist check) does not see the other's limit. Two processes on one GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest

import l2persist
from l2persist import _core
from l2persist import kernels as K
from l2persist import tax

pytestmark = pytest.mark.gpu

# The holder: sets the maximum in its own context, says so, holds it until told to stop, and
# says what it still holds (exit 0 only when the limit held throughout).
HOLDER = """
import sys
import l2persist
dev = l2persist.Device(int(sys.argv[1]))
pmax = dev.properties.persisting_l2_cache_max_size
dev.persisting_l2_limit = pmax
print("READY", dev.persisting_l2_limit, flush=True)
sys.stdin.readline()
held = dev.persisting_l2_limit
print("HELD", held, flush=True)
sys.exit(0 if held == pmax else 1)
"""


def _own_limit(device):
    if device.persisting_l2_source != "process" or not device.supports_persisting_l2:
        pytest.skip("the set-aside is not this process's to change (MPS or no persisting L2)")
    if os.environ.get("CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT") is not None:
        pytest.skip("CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT is set: every "
                    "process starts with that set-aside")


def _start_holder(device):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(device.index)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"the holder did not start (rc {proc.returncode}): {line}{out}{err}")
    return proc, int(line.split()[1])


def _stop_holder(proc):
    out, err = proc.communicate("stop\n", timeout=60)
    return proc.returncode, out, err


def test_another_process_max_set_aside_does_not_tax_this_one(device):
    _own_limit(device)
    pmax = device.properties.persisting_l2_cache_max_size
    before = device.persisting_l2_limit
    ws = tax.predict(device, pmax).probe_working_set  # where this process's own max shows
    with l2persist.Stream(device) as s, l2persist.zeros(ws // 4, np.uint32, device) as t:
        def probe():
            K.tax_probe(t, "write", stream=s)

        with device.persisting_l2(0):
            alone = list(_core.time_calls(probe, stream=s, warmup=3, repeat=15, device=device))
        proc, held = _start_holder(device)
        try:
            assert held == pmax
            # this process still has its own limit: the other's is not seen here
            assert device.persisting_l2_limit == before
            # nor by a fresh process: it starts at the driver's default
            check = subprocess.run([sys.executable, "-m", "l2persist", "check", "--device",
                                    str(device.index)], capture_output=True, text=True,
                                   timeout=120)
            # this process: limit 0 (the other holds its maximum) against its own maximum
            r = tax.measure(probe, pmax, stream=s)
        finally:
            if proc.poll() is None:
                rc, out, err = _stop_holder(proc)
            else:
                rc, out, err = proc.returncode, *proc.communicate()
        assert rc == 0 and f"HELD {pmax}" in out, (rc, out, err)
        with device.persisting_l2(0):
            alone += _core.time_calls(probe, stream=s, warmup=3, repeat=15, device=device)
    assert device.persisting_l2_limit == before
    assert check.returncode == 0, (check.stdout, check.stderr)
    assert "(0 or the default)" in check.stdout and "never sees another process's limit" \
        in check.stdout, check.stdout
    # limit 0 beside the other process's maximum against limit 0 alone: noise only
    other, lo, hi = _core.speedup_ci(list(r.base_samples), alone)
    print(f"limit 0 beside another process's maximum: {other:.3f}x [{lo:.3f}, {hi:.3f}] of "
          f"limit 0 alone; this process's own maximum: {r.summary()}")
    assert 0.9 < other < 1.1, (other, lo, hi)
    # this process's own maximum: a tax well beyond that noise
    assert r.slowdown > 1.5 and r.interval[0] > max(hi, 1.1), (r, other, hi)
