"""Diagnose how the driver treats the persisting-L2 limit: set, read back, read again,
after a kernel and a sync, through l2persist and through CuPy (same process)."""
import l2persist as l2p
from l2persist import _core

dev = l2p.Device(0)
print("start", dev.persisting_l2_limit, "default", dev.default_persisting_l2_limit)
for asked in (12345, 1, 3932160, 39321600, 0):
    dev.persisting_l2_limit = asked
    a = dev.persisting_l2_limit
    b = dev.persisting_l2_limit
    l2p.kernels.noop()
    dev.synchronize()
    c = dev.persisting_l2_limit
    print(f"asked {asked}: read {a}, again {b}, after kernel {c}")
try:
    import cupy
    rt = cupy.cuda.runtime
    lim = rt.cudaLimitPersistingL2CacheSize if hasattr(rt, "cudaLimitPersistingL2CacheSize") else 0x06
    print("cupy get", rt.deviceGetLimit(lim))
    rt.deviceSetLimit(lim, 12345)
    print("cupy set 12345 -> cupy get", rt.deviceGetLimit(lim), "l2p get", dev.persisting_l2_limit)
    rt.deviceSetLimit(lim, 0)
except Exception as e:
    print("cupy:", repr(e))
