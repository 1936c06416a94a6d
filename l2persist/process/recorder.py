"""The watcher's recorder: blocks, each run under one arm, read from CUDA's activity records
into the samples the search is given (GPU time per unit of work, priced at the probe's mix of
launch keys) and into each arm's per-launch-key sums (the summary's ``per_key``).

One :class:`Recorder` per :class:`~l2persist.process.live.Watcher`; its state is the owner's
(``blocks``, ``recorded``, ``mix_ref``, ``mix_units``, ``key_sums``, ``spanning``, ``team``),
which the pace and the report read too.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _core
from .part import Part


@dataclass
class Block:
    arm: int
    start: int                     # CUPTI stamps (ns)
    end: int = 0
    units: int = 0
    rest_ns: int = 0               # the unrecorded rest just before it, under the same arm: the
    rest_units: int = 0            # counted part (an unhooked rest's tail) and its units
    rest_wall_ns: int = 0          # the whole rest
    rest_unhooked: bool = False    # its uncounted part ran with the hooks' gate closed
    settle_ns: int = 0             # recorded, uncounted: from the rest's end to its start
    settle_units: int = 0
    share: float | None = None     # the probe's GPU time in launch keys seen in the block
    sample: float | None = None    # what the search was given: ms per unit at the probe's mix
    attrs: bool = False            # its records carry launch attributes (landing.py)


class _NoRecords(RuntimeError):
    pass


def _increasing(bounds: list) -> list:
    """Block bounds with a gap of zero length made one nanosecond long (blocks back to back
    share a stamp; the C side wants them increasing)."""
    out = []
    for b in bounds:
        out.append(b if not out or b > out[-1] else out[-1] + 1)
    return out


class Recorder(Part):
    """Records to samples: the blocks that ended, given to the search."""

    def record_pending(self, alone: bool = False):
        """Give the search the samples of the blocks that ended (ms of GPU time per unit). In a
        team every rank gives the ranks' mean of the same blocks (``alone``: this rank's own,
        at exit, when peers may be anywhere)."""
        w = self.w
        _core.activity_flush()
        done = [b for b in w.blocks[w.recorded:] if b.end]
        if not done:
            return
        try:
            samples, why = self.block_samples(done), None
        except _NoRecords as e:
            samples, why = [], str(e)
        if w.team is not None and not alone:
            from .team import mean_samples
            docs = w.team.gather({"samples": samples, "why": why})
            bad = [(r, d["why"]) for r, d in enumerate(docs) if d["why"]]
            if bad:
                raise _NoRecords("; ".join(f"rank {r}: {why}" for r, why in bad))
            samples = mean_samples(docs)
        elif why:
            raise _NoRecords(why)
        for v in samples:
            _core.live_record(v)
            w.recorded += 1
        # the summed blocks' records are read no more: each activity_blocks call scans the
        # whole log, which would otherwise grow with the program's run
        rest = w.blocks[w.recorded:]
        _core.activity_trim(rest[0].start if rest else w.blocks[w.recorded - 1].end)

    def block_samples(self, done: list) -> list:
        w = self.w
        bounds = []
        for b in done:
            bounds += [b.start, b.end]
        bounds = _increasing(bounds)
        res = _core.activity_blocks(bounds)
        w.spanning += res.get("spanning", 0)
        w.landing.read(done, bounds)
        if not w.mix_ref:
            raise _NoRecords("the probe recorded no kernel of the program")
        # each block priced at the probe's mix: the blocks' own mixes do not enter the sample
        priced, shares = _core.live_mix(w.mix_ref, res["by_key"], len(bounds) - 1,
                                        w.mix_units)
        out = []
        for k, b in enumerate(done):
            ns = res["gpu_ns"][2 * k]
            b.gpu_ns = ns
            b.by_name = {name: row[2 * k] for name, row in res["by_name"].items() if row[2 * k]}
            b.share, b.sample = shares[2 * k], priced[2 * k]
            if not (ns > 0 and priced[2 * k] > 0):
                # No kernel the probe saw ran in a whole block: the records are not arriving
                # (another tool took CUPTI's activity buffers) or the program's work changed
                # wholly, so nothing can be judged; stop searching rather than feed the search
                # a made-up sample.
                raise _NoRecords(f"a block of {b.units} units had no kernel records of the "
                                 f"work seen in the probe")
            out.append(priced[2 * k])
        for k, b in enumerate(done):         # each arm's launch keys (summary's per_key)
            sums = w.key_sums.setdefault(b.arm, {})
            for key, (ns, n) in res["by_key"].items():
                if n[2 * k]:
                    s = sums.setdefault(key, [0.0, 0])
                    s[0] += ns[2 * k]
                    s[1] += n[2 * k]
        return out
