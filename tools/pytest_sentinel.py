"""A pytest plugin for hunting the "exact 7/8" (229376 of 262144 warm hit sectors in
test_l2_resident_reread_hits): after every GPU test, the L2-resident
re-read probe of tests/test_counters_gpu.py::test_l2_resident_reread_hits runs once more (a fresh
8 MiB buffer and a fresh stream, one warm-up pass, then one measured pass with the counters). A
probe whose warm pass finds fewer than 90 % of the sectors in the L2 (near hits plus hits over the
fabric: the near hits alone depend on block placement, which explained the 7/8) "trips": the
test that ran just before is named, and the state is taken apart while it lasts:

- the same probe again, on the same buffer (does it last?), on a second fresh buffer (does it
  follow the address?), after reset_persisting_l2 (is it persisting lines?);
- each of the buffer's sixteen 512 KiB chunks alone (l2_read gives each block one chunk: which
  blocks miss?);
- the hits and misses summed over the L2 slices, and the least and most of any one slice (are
  the misses in some slices only?), the fabric and DRAM counts.

Load it with ``PYTHONPATH=tools pytest -p pytest_sentinel ...``; it only reads the tree's public
API (l2persist.measure, kernels.l2_read, zeros, Stream), so it runs on older revisions too.
Records go to $L2P_SENTINEL_OUT (JSON lines; default sentinel.jsonl); a summary is printed at the
end: probes, trips, their time. At most three trips are taken apart (each costs a few seconds).
Loading the plugin does not change pytest-randomly's order (that depends on the seed and the
collected node ids only)."""

import json
import os
import time

import numpy as np
import pytest

MIB = 1 << 20
N_BYTES = 8 * MIB
CHUNK = 512 * 1024
N_SECTORS = N_BYTES // 32
HITS = "lts__t_sectors_srcunit_tex_op_read_lookup_hit"
MISSES = "lts__t_sectors_srcunit_tex_op_read_lookup_miss"
# Near hits, hits over the fabric and DRAM reads fit in one CUPTI pass (GH100), so the three
# come from one replay; hits with l2_fabric_sectors took two (tools/investigations/l2-partitions).
FABRIC_READ_HITS = "lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit.sum"
BASIC = ["l2_read_hit_sectors", FABRIC_READ_HITS, "dram_bytes_read"]
SLICES = [HITS + ".sum", HITS + ".min", HITS + ".max", MISSES + ".sum", MISSES + ".min",
          MISSES + ".max"]
MAX_TRIPS = 3

_state = {"probes": 0, "trips": 0, "seconds": 0.0, "prev": None, "records": [], "errors": 0,
          "out": None, "low": []}


def _probe(src, stream, metrics=BASIC):
    import l2persist
    from l2persist import kernels as K
    return dict(l2persist.measure(lambda: K.l2_read(src, 1, loads=64, stream=stream), metrics,
                                  warmup=lambda: K.l2_read(src, 1, loads=64, stream=stream)))


def _frac(c, n=N_SECTORS):
    """Near hits: these depend on where the blocks run against the warm-up's (the 7/8)."""
    return round(c["l2_read_hit_sectors"] / n, 4)


def _in_l2(c, n=N_SECTORS):
    """Near hits plus hits over the fabric: the region is in the L2, wherever blocks ran."""
    return round((c["l2_read_hit_sectors"] + c[FABRIC_READ_HITS]) / n, 4)


def _take_apart(src, stream, first):
    import l2persist
    from l2persist import kernels as K
    rec = {"first": first, "ptr": int(src.ptr)}
    rec["again"] = _probe(src, stream)
    try:
        rec["slices"] = _probe(src, stream, SLICES)
    except Exception as e:  # a metric this chip or revision does not know
        rec["slices"] = f"{type(e).__name__}: {e}"
    chunks = []
    for k in range(N_BYTES // CHUNK):
        part = src[k * CHUNK:(k + 1) * CHUNK]
        c = dict(l2persist.measure(lambda: K.l2_read(part, 1, loads=64, stream=stream), BASIC,
                                   warmup=lambda: K.l2_read(part, 1, loads=64, stream=stream)))
        chunks.append(_frac(c, CHUNK // 32))
    rec["chunks"] = chunks
    with l2persist.zeros(N_BYTES, np.uint8) as other:
        rec["other_buffer"] = {"ptr": int(other.ptr), **_probe(other, stream)}
    with l2persist.Stream() as s2:
        rec["fresh_stream"] = _probe(src, s2)
    l2persist.reset_persisting_l2()
    rec["after_reset"] = _probe(src, stream)
    try:
        rec["l2_state"] = repr(l2persist.l2_state(0))
    except Exception as e:
        rec["l2_state"] = f"{type(e).__name__}: {e}"
    return rec


def _write(rec):
    if _state["out"] is None:
        _state["out"] = open(os.environ.get("L2P_SENTINEL_OUT", "sentinel.jsonl"), "a")
    _state["out"].write(json.dumps(rec, default=str) + "\n")
    _state["out"].flush()


def _run_probe(nodeid):
    import l2persist
    t0 = time.perf_counter()
    try:
        with l2persist.zeros(N_BYTES, np.uint8) as src, l2persist.Stream() as s:
            c = _probe(src, s)
            f, inside = _frac(c), _in_l2(c)
            _state["probes"] += 1
            if f < 0.97:
                _state["low"].append((nodeid, f, inside))
            if inside < 0.9:  # data gone from the L2, not blocks placed elsewhere
                _state["trips"] += 1
                rec = {"after": nodeid, "before_that": _state["prev"], "trip": _state["trips"],
                       "hit_fraction": f, "in_l2_fraction": inside}
                if _state["trips"] <= MAX_TRIPS:
                    rec.update(_take_apart(src, s, c))
                else:
                    rec["first"] = c
                _write(rec)
                print(f"\n[sentinel] TRIP after {nodeid}: in L2 {inside:.4f} (near {f:.4f}) {c}")
    except Exception as e:
        _state["errors"] += 1
        _write({"after": nodeid, "error": f"{type(e).__name__}: {e}"})
    _state["seconds"] += time.perf_counter() - t0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if "gpu" in item.keywords and not any(m.name == "skip" for m in item.iter_markers()):
        _run_probe(item.nodeid)
    _state["prev"] = item.nodeid


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    tr.write_sep("-", "sentinel (the exact 7/8)")
    tr.write_line(f"probes {_state['probes']}, trips {_state['trips']}, errors "
                  f"{_state['errors']}, {_state['seconds']:.1f} s in probes")
    for nodeid, f, inside in _state["low"][:20]:
        tr.write_line(f"  warm near hits {f:.4f} (in L2 {inside:.4f}) after {nodeid}")
    _write({"summary": {k: _state[k] for k in ("probes", "trips", "errors", "seconds", "low")}})
