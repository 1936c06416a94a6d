"""Run by tests/test_mps.py as a client of a private MPS server (or, with --plain, as an
ordinary process): prints one JSON object of what l2persist says and measures there."""

import json
import sys

import numpy as np

import l2persist
from l2persist import kernels as K
from l2persist.__main__ import device_report

HOT_MIB, COLD_MIB = 24, 512


def window_effect(dev):
    """DRAM bytes read by hot/cold without and with a window over the hot set."""
    out = {}
    with l2persist.zeros((HOT_MIB << 20) // 4, np.int32) as hot, \
            l2persist.zeros((COLD_MIB << 20) // 4, np.int32) as cold, l2persist.Stream() as s:
        run = lambda: K.hot_cold(hot, cold, stream=s)  # noqa: E731
        for name, win in (("none", None), ("window", l2persist.AccessPolicyWindow(hot))):
            dev.reset_persisting_l2()
            if win is not None:
                s.access_policy_window = win
            c = l2persist.measure(run, ["dram_bytes_read", "l2_read_hit_rate"], warmup=run)
            out[name] = dict(c)
            s.access_policy_window = None
        if "--tune" in sys.argv:
            r = l2persist.tune(run, [hot], stream=s, repeat=5, confirm_rounds=2)
            out["tune"] = {"mps_set_aside": r.mps_set_aside, "verdict": r.verdict(),
                           "levels": r.set_aside_levels,
                           "trial_set_asides": sorted({t["config"]["set_aside"]
                                                       for t in r.trials}),
                           "table": r.table()}
    return out


def main():
    dev = l2persist.Device(0)
    rep = {"mps": dev.mps, "source": dev.persisting_l2_source,
           "percentage": dev.mps_server_percentage, "limit": dev.persisting_l2_limit,
           "default": dev.default_persisting_l2_limit}
    if "--set" in sys.argv:
        mx = dev.properties.persisting_l2_cache_max_size
        try:
            dev.persisting_l2_limit = mx if rep["limit"] != mx else 0
            rep["set_other"] = "accepted"
        except l2persist.NotSupportedError as e:
            rep["set_other"] = str(e)
        dev.persisting_l2_limit = rep["limit"]  # its own value: a no-op that must succeed
        rep["limit_after"] = dev.persisting_l2_limit
        rep["report"] = device_report(0)
    if "--limit" in sys.argv:
        dev.persisting_l2_limit = int(sys.argv[sys.argv.index("--limit") + 1])
    if "--effect" in sys.argv:
        rep["effect"] = window_effect(dev)
    print(json.dumps(rep))


if __name__ == "__main__":
    main()
