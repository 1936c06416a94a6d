"""What an MPS client sees of the persisting-L2 set-aside: the limit it reads, what setting
it does, and whether a window still changes the hot/cold traffic (DRAM bytes, hit rate, time)
at each limit it asks for. Prints one JSON object. Run it inside and outside MPS
(tools/investigations/mps-check starts a private MPS daemon for that).

    mps_probe.py HOT_MIB                  limits 0, default, max/4, max: window vs none
    mps_probe.py 0 reading                the limit this process reads (try the variable)
    mps_probe.py 0 curve [LIMIT]          window hit rate against the hot set's size"""
import json
import os
import sys
from contextlib import nullcontext

import numpy as np

import l2persist
from l2persist import kernels as K


def raw_set_limit(limit):
    """cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize) through the toolkit's shared cudart
    (the limit belongs to the primary context, which every runtime in the process shares)."""
    import ctypes
    rt = ctypes.CDLL(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64",
                                  "libcudart.so"))
    value = ctypes.c_size_t()
    assert rt.cudaDeviceSetLimit(0x06, ctypes.c_size_t(limit)) == 0
    assert rt.cudaDeviceGetLimit(ctypes.byref(value), 0x06) == 0
    return value.value


def hot_cold(dev, hot_mib, limit):
    out = {"asked": limit}
    try:
        dev.persisting_l2_limit = limit
        out["read_back"] = dev.persisting_l2_limit
    except l2persist.NotSupportedError as e:
        # l2persist refuses under MPS; ask the driver directly, as a plain CUDA program would,
        # to show that the hardware ignores it.
        out["set_error"] = str(e)[:120]
        out["read_back"] = raw_set_limit(limit)
    with l2persist.zeros((hot_mib << 20) // 4, np.int32) as hot, \
            l2persist.zeros((512 << 20) // 4, np.int32) as cold, l2persist.Stream() as s:
        run = lambda: K.hot_cold(hot, cold, stream=s)  # noqa: E731
        for label, win in (("none", None), ("window", l2persist.AccessPolicyWindow(hot))):
            dev.reset_persisting_l2()
            with (s.access_policy(win, reset=True) if win is not None else nullcontext()):
                t = l2persist.benchmark(run, stream=s, repeat=15)
                row = {"median_ms": t.median}
                try:
                    c = l2persist.measure(run, ["dram_bytes_read", "l2_read_hit_rate"],
                                          warmup=run)
                    row.update(dict(c))
                except Exception as e:  # noqa: BLE001
                    row["counters_error"] = f"{type(e).__name__}: {e}"
            out[label] = row
    return out


def window_effect(dev, hot_mib):
    """DRAM bytes read and L2 read hit rate of hot/cold with a window over the hot set."""
    with l2persist.zeros((hot_mib << 20) // 4, np.int32) as hot, \
            l2persist.zeros((512 << 20) // 4, np.int32) as cold, l2persist.Stream() as s:
        run = lambda: K.hot_cold(hot, cold, stream=s)  # noqa: E731
        dev.reset_persisting_l2()
        with s.access_policy(l2persist.AccessPolicyWindow(hot), reset=True):
            c = l2persist.measure(run, ["dram_bytes_read", "l2_read_hit_rate"], warmup=run)
            t = l2persist.benchmark(run, stream=s, repeat=15)
    return {"hot_mib": hot_mib, "dram": c["dram_bytes_read"], "hit": c["l2_read_hit_rate"],
            "ms": t.median}


def main():
    dev = l2persist.Device(0)
    mode = sys.argv[2] if len(sys.argv) > 2 else "full"
    if mode == "reading":
        print(json.dumps({"env_pct": os.environ.get(
            "CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"), "mps": dev.mps,
            "reading": dev.persisting_l2_limit}))
        return
    if mode == "curve":  # hit rate against the hot set's size, at the limit in argv[3]
        limit = int(sys.argv[3]) if len(sys.argv) > 3 else None
        if limit is not None:
            dev.persisting_l2_limit = limit
        runs = [window_effect(dev, hot) for hot in (6, 9, 12, 15, 18, 21, 24, 27, 30, 36)]
        print(json.dumps({"mps": dev.mps, "limit": limit, "runs": runs}))
        return
    rep = {"env_pct": os.environ.get("CUDA_DEVICE_DEFAULT_PERSISTING_L2_CACHE_PERCENTAGE_LIMIT"),
           "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY")}
    rep["mps"] = dev.mps
    p = dev.properties
    rep["max"] = p.persisting_l2_cache_max_size
    rep["l2"] = p.l2_cache_size
    rep["limit_first"] = dev.persisting_l2_limit
    rep["default"] = dev.default_persisting_l2_limit
    rep["supports"] = dev.supports_persisting_l2
    try:
        rep["granule"] = dev.persisting_l2_granule
    except Exception as e:  # noqa: BLE001
        rep["granule"] = repr(e)
    hot = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    rep["hot_mib"] = hot
    rep["runs"] = [hot_cold(dev, hot, lim) for lim in
                   (0, rep["default"], p.persisting_l2_cache_max_size // 4,
                    p.persisting_l2_cache_max_size)]
    print(json.dumps(rep))


if __name__ == "__main__":
    main()
