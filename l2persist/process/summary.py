"""The watcher's report: the result document the CLI reads (``summary``), the per-launch-key
ratios, the plan document advise writes, and what watching cost the program.

Not to be confused with :mod:`l2persist.process.report`, which draws the CLI's text from the
document made here. One :class:`Report` per :class:`~l2persist.process.live.Watcher`; it reads
the owner's state and changes nothing.
"""
from __future__ import annotations

import json
import os
import statistics
import time

from .. import _core
from .part import Part

PLAN_FORMAT = _core.live_plan_format()  # the core owns the document (csrc/core/l2p_live.h)
#: The summary's per_key section lists this many launch keys, the heaviest in the probe.
PER_KEY_SHOWN = 20


def _jsonable(x):
    if isinstance(x, float):
        return None
    return str(x)


#: The most one arm's per-unit walls may spread (standard deviation over median, block to block)
#: for the summary's watching ratio to be read as a cost.
WALL_SPREAD_MAX = 0.10


def compared(res: dict) -> bool:
    """Whether the core's search result measured an arm against a baseline: it has an interval.
    Both ends are 0 where no arm was compared (only the two baselines reach the program) or the
    search ended before its first comparison; that is "not measured", never a speedup of 0x."""
    return bool(res.get("ci_high"))


def _relative_spread(values: list) -> float:
    """Standard deviation over median: how far one arm's per-unit figures move from block to
    block (0 for fewer than two)."""
    mid = statistics.median(values) if values else 0.0
    return statistics.pstdev(values) / mid if len(values) > 1 and mid > 0 else 0.0


class Report(Part):
    """What comes out of the watcher: summary, plan, result file."""

    def watch_cost(self, per_arm: dict):
        w = self.w
        d = per_arm.get(w.final_arm) if w.final_arm is not None else None
        after = w.after_decision
        if not d or not d["wall_ms_per_unit"] or not after:
            return None
        walls = d["wall_ms_per_unit"]
        recorded = statistics.median(walls)
        # where the program's mix of work moves one arm's walls per unit from block to block
        # (a request mix: the H200 zoo's server read "0.879x" at c67a953), the ratio says
        # nothing of what watching costs
        spread = _relative_spread(walls)
        return {"recorded_wall_ms_per_unit": recorded, "recorded_blocks": len(walls),
                "unrecorded_wall_ms_per_unit": after["wall_ms_per_unit"],
                "unrecorded_units": after["units"],
                "ratio": recorded / after["wall_ms_per_unit"],
                "spread": spread, "comparable": spread <= WALL_SPREAD_MAX}

    @staticmethod
    def gpu_busy(per_arm: dict, result: dict | None) -> dict:
        """How much of the program's wall time its GPU is busy, under the device default (limit
        0 where the default has no blocks): the blocks' own GPU time per unit (kernel time,
        summed) over the unrecorded rests' wall per unit (the recorded blocks' where it ran no
        rests), at most 1. Advice is judged on GPU time; a program whose host is what it waits
        on gains less wall time than GPU time: `wall_gain_at_most` is the wall's speedup if all
        the GPU time saved came off the wall (1 / (1 - share x (1 - 1/speedup))), for a verdict
        that helps. None where no baseline has blocks."""
        # int keys in the live summary; a document read back from JSON has strings
        d = per_arm.get(1) or per_arm.get("1") or per_arm.get(0) or per_arm.get("0")
        if not d or not d["gpu_ms_per_unit"]:
            return {"share": None, "wall_gain_at_most": None}
        wall = d["rest_wall_ms_per_unit"] or d["wall_ms_per_unit"]
        gpu, w = statistics.median(d["gpu_ms_per_unit"]), statistics.median(wall)
        share = min(1.0, gpu / w) if w > 0 else None
        gain = None
        res = result or {}
        if share is not None and res.get("helps") and res.get("speedup", 0) > 1:
            gain = 1.0 / (1.0 - share * (1.0 - 1.0 / res["speedup"]))
        return {"share": share, "wall_gain_at_most": gain}

    def issued(self) -> list:
        """The recorded blocks the search issued, in its order (a landing block it never
        issued is left out: Search.next_block)."""
        return [b for b in self.w.blocks[:self.w.recorded]
                if b.units and getattr(b, "counted", True)]

    def per_arm(self) -> dict:
        """Per arm, its issued blocks' samples and figures (a landing block the search never
        issued is left out: Search.next_block)."""
        w = self.w
        per_arm = {}
        for b in self.issued():
            d = per_arm.setdefault(b.arm, {"gpu_ms_per_unit": [], "wall_ms_per_unit": [],
                                          "rest_wall_ms_per_unit": [], "kernels": {},
                                          "samples": [], "shares": []})
            # the search's samples (GPU time per unit at the probe's mix), and the block's own
            # GPU time over its units (which moves with the block's mix of work)
            d["samples"].append(b.sample)
            d["shares"].append(b.share)
            d["gpu_ms_per_unit"].append(getattr(b, "gpu_ns", 0) / b.units / 1e6)
            d["wall_ms_per_unit"].append((b.end - b.start) / b.units / 1e6)
            if b.rest_units:      # the same arm unrecorded: what it costs the program's wall
                d["rest_wall_ms_per_unit"].append(b.rest_ns / b.rest_units / 1e6)
            for name, ns in getattr(b, "by_name", {}).items():
                d["kernels"][name] = d["kernels"].get(name, 0.0) + ns / b.units / 1e6
        for d in per_arm.values():
            n = len(d["gpu_ms_per_unit"])
            d["kernels"] = {k: v / n for k, v in d["kernels"].items()}
            d["wall_spread"] = _relative_spread(d["wall_ms_per_unit"])
        return per_arm

    def summary(self) -> dict:
        """The result document the CLI reads: verdict, arms, blocks, notes."""
        w = self.w
        dev = w.device
        arms_out = []
        for i, a in enumerate(w.arms):
            arms_out.append({"set_aside": a["set_aside"], "windows": self.window_docs(a)})
        per_arm = self.per_arm()
        meta = {}
        if dev is not None:
            p = dev.properties
            meta = {"name": p.name, "cc": list(p.compute_capability),
                    "l2_bytes": p.l2_cache_size,
                    "persisting_max": p.persisting_l2_cache_max_size,
                    "default_limit": w.default_limit,
                    "driver": list(_core.driver_version() or (0, 0)), "index": w.o.device}
        return {
            "mode": w.o.mode, "state": w.state, "device": meta,
            "unit": list(w.unit) if w.unit else None,
            "units_per_block": w.units_per_block,
            "points": dict(w.points), "result": w.result, "final_arm": w.final_arm,
            # verify: "plan" (the plan against both baselines) or "baseline" (the plan is one
            # of them, a "don't": the result is a search over advise's arms, and a winner
            # that helps means the plan no longer holds)
            "verify_of": (None if w.o.mode != "verify" else
                          "baseline" if getattr(w, "verify_base", None) is not None
                          else "plan"),
            "arms": arms_out, "per_arm": per_arm, "per_key": self.per_key(),
            # the GPU's share of the program's wall time, and what a gain on GPU time can
            # take off the wall at most
            "gpu_busy": self.gpu_busy(per_arm, w.result),
            "switch_ms": w.switch_ms, "switch_work_ms": w.switch_work_ms,
            "blocks": len(w.blocks),
            # the search's pace and what watching added to the program's wall time in it
            "watching": w.costs.watching(),
            # whether each arm's windows were on its kernels (CUPTI's launch attributes)
            "windows_landed": w.landing.summary(),
            # the final arm's wall per unit recorded (its blocks) over unrecorded (after)
            "watch_cost": self.watch_cost(per_arm),
            "arm_sequence": [b.arm for b in w.blocks],
            # the per-call hooks came off once decided (graph replays and points count to
            # there)
            "calls_unhooked": w.calls_unhooked,
            # probes that recorded no kernel (begun again), searches begun again at graphs
            "empty_probes": w.empty_probes, "restarts": dict(w.restarts),
            "stopped": getattr(w, "stopped", None),
            "ended_in": w.ended_in,       # the phase under way when the program ended
            "rank": w.o.rank, "world": w.o.world, "own": self.own_verdict(),
            "min_gain": self.min_gain(),
            "lockstep": w.team is not None,
            "graphs": [{"signature": g.signature, "kernels": len(g.names), "replays": g.replays,
                        "windows_applied": g.windows_applied,
                        "in_plan": g.signature in w.applied_sigs}
                       for g in w.all_graphs()],
            "targets": [{"graphs": [g.signature for g, _ in t.places], "bytes": t.size,
                         "weight_ms": t.weight / 1e6} for t in w.targets],
            # the warm-up's GPU time in kernels no window reaches (no graph, no stream known)
            "ungraphed": getattr(w, "ungraphed", None),
            # eager launches windowed through their streams (streams.py)
            "eager": {"groups": [{"signature": g.signature, "kernel": g.names[0],
                                  "stream": g.stream, "launches": g.launches,
                                  "windows_applied": g.windows_applied} for g in w.eager],
                      "streams_set": sorted(w.stream_windows.wrapped_ever)
                      if w.stream_windows is not None else [],
                      "streams_left_alone": sorted(w.unknown_streams),
                      "restored": w.streams_restored},
            "notes": w.notes,
            # the watcher's clock: its ticks, the seconds its holds skipped (unhooked rests),
            # and whether it stopped once the program's own calls were the unit (clock.quiet)
            "clock": {"ticks": w.clock.ticks if w.clock is not None else 0,
                      "held_s": w.clock.held_s if w.clock is not None else 0.0,
                      "quiet": bool(getattr(w, "clock_quiet", False))},
            # CUPTI let go once the watcher was done with it (clock.SwitchGate.release_cupti):
            # asked (its state then, and what kept it held) and now (released once a CUDA call
            # ended after the asking)
            "cupti": self.cupti(),
            # how replays were timed: a record per graph replay (--graph-records) or per node
            "graph_records": bool(getattr(w, "graph_records", False)),
            # --replay-events: what timed the graphs ("nodes": their kernels' records;
            # "events": events around each hooked replay), why not events where asked, whether
            # the records stayed off in the blocks, and the events' counts
            "timing": self.timing(),
            # from the first watched call to the decision (warm-up and probe included)
            "decision_s": getattr(w, "decision_s", None),
            "search_s": (time.perf_counter() - w.search_t0) if w.search_t0 else 0.0,
            # advise --placebo: every arm ran as no plan; no plan to write
            "placebo": bool(getattr(w.o, "placebo", False)),
            # ... and whether its arms set their windows (L2PERSIST_PLACEBO_WINDOWS=0: none)
            "placebo_windows": (bool(getattr(w.o, "placebo_windows", True))
                                if getattr(w.o, "placebo", False) else None),
            "plan": (self.make_plan() if w.o.mode == "advise" and w.result
                     and not getattr(w.o, "placebo", False) else None),
        }

    def timing(self) -> dict:
        w = self.w
        out = {"asked": bool(getattr(w.o, "replay_events", False)),
               "source": getattr(w, "timing", "nodes"), "why": getattr(w, "timing_why", None),
               "records_off": bool(getattr(w, "records_off", False)),
               "eager_share": getattr(w, "eager_share", None), "replays": None,
               # the warm-up's records paused once its graphs were made (Watcher.warm_records)
               "warmup_pauses": getattr(w, "warm_pauses", 0),
               # the probe's length (s): shorter than its whole where the unit came often
               # enough (Probe.over)
               "probe_s": getattr(w, "probe_s", None),
               # ... and the units of work it counted (the unit's calls in it)
               "probe_units": getattr(w, "probe_units", None),
               # CUPTI after a probe whose search the events time alone (letgo.LetGo):
               # [state, why] (state "released", "kept", ...), and the graphs made again
               "cupti_after_probe": getattr(w, "cupti_after_probe", None),
               "graphs_renewed": getattr(w, "graphs_renewed", 0),
               "letgo_ms": getattr(w, "letgo_ms", None)}
        if out["asked"]:
            try:
                out["replays"] = _core.replay_counts()
            except Exception:       # a stand-in core (the CPU tests' fakes)
                pass
        return out

    def cupti(self) -> dict:
        w = self.w
        asked = getattr(w, "cupti_release", None)
        try:
            now = _core.cupti_state() if asked is not None else None
        except Exception:
            now = None
        return {"asked": asked is not None, "state": asked[0] if asked else None,
                "why_held": asked[1] if asked else None, "now": now}

    def min_gain(self) -> float:
        """The least gain that counts, as the search was given it."""
        g = self.w.o.min_gain
        return g if g is not None else _core.live_defaults()["min_gain"]

    def own_verdict(self) -> dict | None:
        """Under torchrun: this rank's own confirmation samples judged alone (the search judged
        the ranks' mean), so that a rank whose figure differs from its peers' is seen: ddp at
        f7a980d read 1.068x on rank 0 alone where the mean said 1.017x (rank 1 ran without the
        windows). None alone, or without a confirmed plan."""
        w = self.w
        r = w.result
        if w.o.world <= 1 or not r or r.get("winner", -1) < 0:
            return None
        confirm = self.issued()[r.get("search_blocks", 0):]
        arms = (0, 1, r["winner"])
        by = [[b.sample for b in confirm if b.arm == a and b.sample] for a in arms]
        if min(len(x) for x in by) < 2:
            return None
        rounds = len(by[0]) if len({len(x) for x in by}) == 1 else 1
        v = _core.tune_verdict(*by, min_gain=self.min_gain(), seed=1, rounds=rounds)
        return {"speedup": v["speedup"], "ci_low": v["ci_low"], "ci_high": v["ci_high"],
                "helps": bool(v["helps"])}

    def per_key(self) -> dict | None:
        """Each launch key's GPU time per launch under the final arm and the better baseline
        (where the final arm is that baseline: the best arm tried), the heaviest keys of the
        probe first: which kernels the plan moved. ratio: the baseline's time per launch over
        the arm's (above 1: faster under the arm)."""
        w = self.w
        r = w.result
        if not r or not w.mix_ref:
            return None
        base, arm = r["baseline"], w.final_arm
        if arm is None or arm == base:
            arm = r["winner"]
        if arm is None or arm < 0 or arm == base:
            return None
        keys = _core.activity_keys()
        probe = getattr(w, "probe_keys", None) or w.mix_ref   # the unpriced collectives too
        total = sum(ns[0] for ns, n in probe.values() if n[0] > 0)
        a, b = w.key_sums.get(arm, {}), w.key_sums.get(base, {})
        rows = []
        for key, (ns, n) in probe.items():
            if not n[0] > 0:
                continue
            name, grid, block = keys[key] if 0 <= key < len(keys) else ("?", (0,) * 3, (0,) * 3)
            us_a = a[key][0] / a[key][1] / 1e3 if key in a else None
            us_b = b[key][0] / b[key][1] / 1e3 if key in b else None
            rows.append({"key": key, "kernel": _core.kernel_name(name), "grid": list(grid),
                         "block": list(block), "share": ns[0] / total,
                         "arm_us": us_a, "baseline_us": us_b,
                         "arm_launches": a[key][1] if key in a else 0,
                         "baseline_launches": b[key][1] if key in b else 0,
                         "ratio": us_b / us_a if us_a and us_b else None,
                         "priced": key in w.mix_ref})
        rows.sort(key=lambda d: -d["share"])
        return {"arm": arm, "baseline": base, "keys": rows[:PER_KEY_SHOWN]}

    def window_docs(self, arm) -> list:
        """The arm's windows as the plan document places them: per graph, the anchor word
        (node, param, offset) that finds the buffer again in the next run, the buffer's offset
        from it (delta), and the nodes that get the window."""
        w = self.w
        out = []
        for g, nodes, base, nbytes, hit, hp, mp, rec in w.switcher.placements(arm):  # as installed
            d = {"graph": g.signature}
            if rec is not None:        # a target's place: the word that finds it again
                node, param, offset, word = g.anchor(rec)
                d.update(node=node, param=param, offset=offset, delta=base - word)
            d.update(bytes=nbytes, hit_ratio=hit, hit_prop=hp, miss_prop=mp, nodes=nodes)
            if g.eager or rec is None:
                d["stream"] = "launch" if g.eager else None  # on the stream it is queued on
            out.append(d)
        return out

    def make_plan(self) -> dict:
        """The plan document: what to install at the next start."""
        w = self.w
        from .. import __version__
        r = w.result
        helps = bool(r["helps"]) and r["winner"] >= 0
        arm = w.arms[r["winner"]] if helps else w.arms[r["baseline"]]
        p = w.device.properties
        # no arm was measured against a baseline (no window reaches the kernels, a search that
        # stopped before its first comparison): the C search's zeros are "not measured", not 0x
        measured = compared(r)
        return {
            "format": PLAN_FORMAT,
            "device": {"name": p.name, "cc": list(p.compute_capability),
                       "l2_bytes": p.l2_cache_size,
                       "driver": list(_core.driver_version() or (0, 0))},
            "l2persist": __version__,
            "verdict": "helps" if helps else "dont",
            "speedup": r["speedup"] if measured else None,
            "ci": [r["ci_low"], r["ci_high"]] if measured else None,
            "set_aside": arm["set_aside"],
            "windows": self.window_docs(arm),
            # every graph advise saw, windowed or not: apply tells a graph left as advised
            # from a shape advise never saw
            "graphs": [{"graph": sig} for sig in sorted(
                {g.signature for g in w.all_graphs() if not g.eager})][
                :_core.live_defaults()["plan_max_graphs"]],
        }

    def write_result(self):
        w = self.w
        path = w.o.result_path
        if not path:
            return
        tmp = path + ".tmp"
        try:
            doc = self.summary()
        except Exception as e:  # the CLI still learns what happened
            import traceback
            doc = {"mode": w.o.mode, "state": w.state, "result": None,
                   "notes": w.notes + ["the summary failed: " + "".join(
                       traceback.format_exception(type(e), e, e.__traceback__)[-4:])]}
        with open(tmp, "w") as f:
            json.dump(doc, f, default=_jsonable)
        os.replace(tmp, path)
