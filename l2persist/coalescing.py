"""A coalescing model for any warp's addresses (computed in C), the L1/L2 study's cases, and a
check of the model against the hardware's counters.

``analyze(addresses, size=4, rule="sectors")`` groups the threads' byte addresses into warps
of 32 and returns, per warp and in total, requests, transactions, replays, 32 B sectors,
128 B lines, bytes requested (distinct bytes) and bytes moved. Rules: ``kepler_caching``,
``kepler_noncaching``, ``sectors`` (cc >= 7.0); see csrc/core/l2p_model.h for what each one
reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _core

RULES = ("kepler_caching", "kepler_noncaching", "sectors")
FIELDS = ("requests", "transactions", "replays", "sectors", "lines", "bytes_requested",
          "bytes_moved")


@dataclass(frozen=True)
class Analysis:
    """The model's answer: per-warp arrays (``per_warp[field]``) and totals."""

    rule: str
    size: int
    store: bool
    per_warp: dict
    total: dict

    def __getattr__(self, name):
        if name in FIELDS or name == "efficiency":
            return self.total[name]
        raise AttributeError(name)

    def __add__(self, other: "Analysis") -> "Analysis":
        """Two instructions of one kernel (e.g. C[x] = A[3] + B[x]): totals add."""
        total = {k: self.total[k] + other.total[k] for k in FIELDS}
        total["efficiency"] = (100.0 * total["bytes_requested"] / total["bytes_moved"]
                               if total["bytes_moved"] else 0.0)
        return Analysis(self.rule, self.size, self.store, {}, total)


def analyze(addresses, *, size: int = 4, rule: str = "sectors", store: bool = False,
            masks=None, active=None) -> Analysis:
    """Model the accesses of threads at ``addresses``.

    ``addresses``: one byte address per thread (a non-empty 1-D integer sequence or array),
    32 threads a warp. ``size``: bytes each thread accesses (1, 2, 4, 8 or 16). ``rule``: one
    of ``RULES``. ``store``: model stores rather than loads. ``masks``: one active-lane mask
    per warp, or ``active``: one bool per thread (give at most one; default all active).
    Bad arguments raise ValueError / TypeError naming the argument (checked in C)."""
    out = _core.analyze(addresses, size=size, rule=rule, store=store, masks=masks,
                        active=active)
    total = out.pop("total")
    return Analysis(rule, size, bool(store), out, total)  # C took 0 / 1 / np.bool_ as a bool


# ---- address patterns (byte addresses, one per thread) ----

def contiguous(threads: int = 32, size: int = 4, offset: int = 0, base: int = 0):
    """Thread t (of ``threads``, in [1, 2^24]) accesses element ``offset + t`` of ``size``-byte
    elements (1, 2, 4, 8 or 16) starting at byte address ``base``."""
    return strided(threads, size, offset, 1, base)


def strided(threads: int = 32, size: int = 4, offset: int = 0, stride: int = 1, base: int = 0):
    """Thread t (of ``threads``, in [1, 2^24]) accesses element ``offset + t * stride`` of
    ``size``-byte elements (1, 2, 4, 8 or 16) starting at byte address ``base`` (computed and
    checked in C: a ValueError / TypeError names the argument and its range)."""
    return _core.strided_addresses(threads, size, offset, stride, base)


def broadcast(threads: int = 32, size: int = 4, element: int = 0, base: int = 0):
    """Every thread (of ``threads``, in [1, 2^24]) accesses element ``element`` of
    ``size``-byte elements starting at byte address ``base``."""
    return _core.broadcast_addresses(threads, size, element, base)


def permuted_within_line(rng, threads: int = 32, size: int = 4, line: int = 0):
    """Threads access the elements of 128-byte lines (from line ``line`` on) in a random order
    (``rng.permutation`` per line; the arguments checked and the addresses computed in C)."""
    return _core.permuted_line_addresses(rng, threads, size, line)


def random_scatter(rng, threads: int = 32, size: int = 4, elements: int = 4096):
    """Threads access uniformly random elements of the first ``elements``
    (``rng.integers(0, elements, threads)``; checked and computed in C)."""
    return _core.scatter_addresses(rng, threads, size, elements)


# ---- the L1/L2 study ----

_STUDY = [
    # case, rule, threads, what the study printed
    ("1 thread, caching (-dlcm=ca)", "kepler_caching", dict(threads=1), {"efficiency": 3.12}),
    ("32 threads, caching", "kepler_caching", dict(threads=32), {"efficiency": 100.0}),
    ("1 thread, non-caching (-dlcm=cg)", "kepler_noncaching", dict(threads=1),
     {"efficiency": 12.5}),
    ("9 threads, non-caching", "kepler_noncaching", dict(threads=9), {"efficiency": 56.25}),
    ("17 threads, non-caching", "kepler_noncaching", dict(threads=17), {"efficiency": 70.83}),
    ("25 threads, non-caching", "kepler_noncaching", dict(threads=25), {"efficiency": 78.12}),
    ("warp offset by one, B[x] = A[x+1]", "kepler_noncaching", dict(threads=32, offset=1),
     {"efficiency": 80.0, "transactions": 2, "sectors": 5}),
]


def study_table() -> list[dict]:
    """The L1/L2 study's cases under each rule, beside the numbers the study printed.

    Loads are modelled; stores give the same numbers under the non-caching and sector rules
    (Kepler did not cache stores in L1), and ``C[x] = A[3] + B[x]`` adds a broadcast load to a
    contiguous one."""
    rows = []
    for case, study_rule, pattern, printed in _STUDY:
        addrs = contiguous(**pattern)
        row = {"case": case, "study_rule": study_rule, "study": printed}
        for rule in RULES:
            a = analyze(addrs, rule=rule)
            row[rule] = {"efficiency": round(a.efficiency, 2), "transactions": a.transactions,
                         "sectors": a.sectors, "requests": a.requests}
        rows.append(row)
    row = {"case": "C[x] = A[3] + B[x] (two loads)", "study_rule": "kepler_noncaching",
           "study": {"efficiency": 82.5}}
    for rule in RULES:
        a = analyze(broadcast(element=3), rule=rule) + analyze(contiguous(base=1 << 20), rule=rule)
        row[rule] = {"efficiency": round(a.efficiency, 2), "transactions": a.transactions,
                     "sectors": a.sectors, "requests": a.requests}
    rows.append(row)
    for threads, offset, printed in ((1, 0, 12.5), (32, 1, 80.0)):
        addrs = contiguous(threads=threads, offset=offset)
        row = {"case": f"store, {threads} thread(s), offset {offset}",
               "study_rule": "kepler_noncaching", "study": {"efficiency": printed}}
        for rule in RULES:
            a = analyze(addrs, rule=rule, store=True)
            row[rule] = {"efficiency": round(a.efficiency, 2), "transactions": a.transactions,
                         "sectors": a.sectors, "requests": a.requests}
        rows.append(row)
    return rows


def format_study_table(rows=None) -> str:
    rows = study_table() if rows is None else rows
    out = ["| case | study | kepler_caching | kepler_noncaching | sectors |",
           "|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r[rule]['efficiency']:.2f} % ({r[rule]['transactions']} tr, "
                 f"{r[rule]['sectors']} sec)" for rule in RULES]
        study = ", ".join(f"{k} {v}" for k, v in r["study"].items())
        out.append(f"| {r['case']} | {study} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# ---- the model against the hardware ----

def generate_patterns(rng, count_random: int = 40) -> list[dict]:
    """Several hundred launches of the pattern kernel: offsets 0..31, strides 1..64, sizes
    1..16, partial warps, random permutations within a line, broadcasts and random scatter;
    the stores vary too."""
    pats = []
    for off in range(32):
        pats.append(dict(threads=32, width=4, load_offset=off, store_offset=(off * 7) % 32))
    for stride in range(1, 65):
        pats.append(dict(threads=32, width=4, load_stride=stride, store_stride=1 + stride % 5))
    for width in (1, 2, 4, 8, 16):
        for off in (0, 1, 3, 7):
            for stride in (1, 2, 3, 5):
                pats.append(dict(threads=32, width=width, load_offset=off, load_stride=stride,
                                 store_offset=off, store_stride=stride))
    for threads in range(1, 33):
        pats.append(dict(threads=threads, width=4, load_offset=threads % 5))
    for threads in (64, 96, 128):
        for width in (4, 8, 16):
            pats.append(dict(threads=threads, width=width, load_offset=int(rng.integers(0, 40)),
                             load_stride=int(rng.integers(1, 4))))
    for _ in range(count_random):
        width = int(rng.choice([1, 2, 4, 8, 16]))
        pats.append(dict(threads=32, width=width,
                         index=permuted_within_line(rng, 32, width, int(rng.integers(0, 64)))
                         // width))
        pats.append(dict(threads=32, width=width,
                         index=random_scatter(rng, 32, width, 1 << 14) // width))
    for el in range(0, 40, 4):
        pats.append(dict(threads=32, width=4, index=np.full(32, el, np.int64)))
        idx = np.arange(32, dtype=np.int64)
        idx[::3] = el  # broadcast mixed into a contiguous run
        pats.append(dict(threads=32, width=8, index=idx))
    return pats


def predict(p: dict) -> dict:
    """The sectors rule's prediction for one pattern launch (its index load included)."""
    threads, width = p["threads"], p["width"]
    if "index" in p:
        loads = analyze(np.asarray(p["index"], np.int64) * width, size=width)
        loads = loads + analyze(contiguous(threads, 4, base=1 << 30), size=4)  # index[t]
    else:
        loads = analyze(strided(threads, width, p.get("load_offset", 0), p.get("load_stride", 1)),
                        size=width)
    stores = analyze(strided(threads, width, p.get("store_offset", 0), p.get("store_stride", 1)),
                     size=width, store=True)
    return {"load_requests": loads.requests, "load_sectors": loads.sectors,
            "store_requests": stores.requests, "store_sectors": stores.sectors}


def hardware_check(device=None, patterns=None, rng=None) -> list[dict]:
    """Run every pattern once under the counters (one CUPTI range per launch) and put the
    measured global load/store requests and sectors beside the model's prediction."""
    from . import kernels as K
    from .counters import measure
    from ._core import empty, to_device

    rng = np.random.default_rng() if rng is None else rng
    patterns = generate_patterns(rng) if patterns is None else patterns
    n = 1 << 16
    with empty(n * 16, np.uint8, device) as src, empty(n * 16, np.uint8, device) as dst:
        src.fill_bytes(1)
        launches = []
        for p in patterns:
            kw = {k: v for k, v in p.items() if k != "index"}
            if "index" in p:
                kw["index"] = to_device(np.asarray(p["index"], np.int32), device)
            launches.append(kw)

        def run():
            for kw in launches:
                K.pattern(src, dst, **kw)

        ranges = measure(run, ["global_load_requests", "global_load_sectors",
                               "global_store_requests", "global_store_sectors"],
                         device=device, per_kernel=True, max_ranges=len(launches) + 8)
        for kw in launches:
            if "index" in kw:
                kw["index"].close()
    rows = []
    for p, r in zip(patterns, ranges):
        pred = predict(p)
        meas = {"load_requests": int(r["global_load_requests"]),
                "load_sectors": int(r["global_load_sectors"]),
                "store_requests": int(r["global_store_requests"]),
                "store_sectors": int(r["global_store_sectors"])}
        desc = {k: (v if k != "index" else "index") for k, v in p.items()}
        rows.append({"pattern": desc, "predicted": pred, "measured": meas,
                     "match": pred == meas})
    return rows

__all__ = ["RULES", "FIELDS", "Analysis", "analyze", "contiguous", "strided", "broadcast",
           "permuted_within_line", "random_scatter", "study_table", "format_study_table",
           "generate_patterns", "predict", "hardware_check"]
