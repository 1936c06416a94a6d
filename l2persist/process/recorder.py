"""The watcher's recorder: blocks, each run under one arm, read from CUDA's activity records
into the samples the search is given (GPU time per unit of work, priced at the probe's mix of
launch keys) and into each arm's per-launch-key sums (the summary's ``per_key``).

One :class:`Recorder` per :class:`~l2persist.process.live.Watcher`; its state is the owner's
(``blocks``, ``recorded``, ``mix_ref``, ``mix_units``, ``key_sums``, ``spanning``, ``team``),
which the pace and the report read too.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from .. import _core
from .part import Part


@dataclass
class Block:
    arm: int
    start: int                     # the log's stamps (ns): CUPTI's, the host's once detached
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
    counted: bool = True           # given to the search; False: a landing block where the
                                   # records are off in the others (Search.next_block)


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
        w.replay_events.harvest()
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
            if v is not None:         # None: a landing block the search never issued
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
        res = _core.activity_blocks(bounds, timing=w.timing)
        w.spanning += res.get("spanning", 0)
        w.landing.read(done, bounds)
        if not w.mix_ref:
            raise _NoRecords("the probe recorded no kernel of the program")
        # each block priced at the probe's mix: the blocks' own mixes do not enter the sample
        priced, shares = _core.live_mix(w.mix_ref, res["by_key"], len(bounds) - 1,
                                        w.mix_units)
        # a replay whose pair may time the host's launch is priced nowhere (not in mix_ref),
        # nor counted in a block's GPU time
        host = {k for k, (_s, h) in ReplayEvents.replay_keys(res["by_key"]).items() if h} \
            if w.timing == "events" else set()
        out = []
        for k, b in enumerate(done):
            untimed = sum(res["by_key"][key][0][2 * k] for key in host)
            ns = res["gpu_ns"][2 * k] - untimed
            b.gpu_ns = ns
            b.by_name = {name: row[2 * k] for name, row in res["by_name"].items()
                         if row[2 * k] and not (host and name.startswith(HOST_REPLAY))}
            b.share, b.sample = shares[2 * k], priced[2 * k]
            if not (ns > 0 and priced[2 * k] > 0):
                if untimed:
                    raise _NoRecords(f"every replay of a block of {b.units} units was launched "
                                     f"with the GPU idle, so events could time none of them "
                                     f"(run without --replay-events)")
                # No kernel the probe saw ran in a whole block: the records are not arriving
                # (another tool took CUPTI's activity buffers) or the program's work changed
                # wholly, so nothing can be judged; stop searching rather than feed the search
                # a made-up sample.
                raise _NoRecords(f"a block of {b.units} units had no kernel records of the "
                                 f"work seen in the probe")
            out.append(priced[2 * k] if b.counted else None)
        for k, b in enumerate(done):         # each arm's launch keys (summary's per_key)
            if not b.counted:
                continue
            sums = w.key_sums.setdefault(b.arm, {})
            for key, (ns, n) in res["by_key"].items():
                if n[2 * k] and key not in host:
                    s = sums.setdefault(key, [0.0, 0])
                    s[0] += ns[2 * k]
                    s[1] += n[2 * k]
        return out


#: Events time the graphs (``timing`` "events") only where the probe's graph-node records were
#: all of hooked replays: the nodes counted against each timed replay's kernels, within this.
NODES_COVERED = 0.02
#: ... and where at most this share of the probe's replays found the GPU past their pair's
#: first event once launched (those pairs may time the host's launch: l2p_replays, not priced)
HOST_SHARE_MAX = 0.5
#: the name prefix of such a replay's records (the core's L2P_REPLAYS_HOST)
HOST_PREFIX = _core.REPLAY_HOST_PREFIX
HOST_REPLAY = HOST_PREFIX + "replay:"   # (a kernel's own name may begin "host::")
#: ... and the kernel records are off in the blocks (but each arm's landing block) only where
#: eager kernels took less than this share of the probe's GPU time: theirs are then priced at
#: the graphs' ratio in those blocks (l2p_live_mix), so their own change goes unseen.
EAGER_SHARE_MAX = 0.02


class ReplayEvents(Part):
    """advise/verify --replay-events (issue 50 item 2): each hooked PyTorch replay timed by a
    pair of CUDA events on its stream while the watcher records (the probe, settles, blocks),
    one record per replay in the activity log (``_core.replay_*``), so that a graph's samples
    need no record per node. The probe decides (``decide``): the events time the graphs where
    every graph node the probe recorded belongs to a replay they timed (CUPTI's graph id tells
    nodes from eager kernels: a CUPTI of CUDA 12 or newer), and then the kernel records stay
    off in the blocks where eager kernels are a small share, on in each arm's landing block
    (its windows checked on the nodes). A replay whose pair's first event the GPU had reached
    once the pair was enqueued (the pair may time the host's launch too) is logged as
    "host:replay:...": counted in the mix and the coverage, never priced nor counted in a
    block's GPU time; where more than :data:`HOST_SHARE_MAX` of the probe's replays were such,
    or every replay of a graph, the events do not time the graphs.
    Otherwise the nodes' records time the graphs, as without the flag, and the events stop.
    Alone only (ranks must agree on what they sum)."""

    def __init__(self, w):
        super().__init__(w)
        self.on = False            # events around replays now
        self.labels: dict = {}     # signature -> replay_label id
        self.raw_stream = None     # PyTorch's current raw stream, per device

    def start(self):
        """At the probe's start (the option on, alone, PyTorch loaded): events from here."""
        w = self.w
        if not w.o.replay_events or w.team is not None or self.on:
            return
        torch = sys.modules.get("torch")
        if torch is None:        # no PyTorch replay to time (a CuPy, Triton or JAX program)
            w.timing_why = "PyTorch is not loaded: no hooked replay to time"
            return
        get = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if get is None:
            w.timing_why = "PyTorch's raw current stream cannot be read here"
            return
        device = w.o.device
        self.raw_stream = lambda: get(device)
        from . import bootstrap
        bootstrap.set_replay_timer(self.begin, _core.replay_end)
        self.on = True

    def stop(self):
        if self.on:
            from . import bootstrap
            bootstrap.set_replay_timer(None)
            self.on = False

    def begin(self, graph):
        """On the program's thread, after the point hook, before its replay: (slot, stream) for
        the hook to end, or None (not recording now, or a graph not seen)."""
        w = self.w
        if w.paused or not w.activity:
            return None
        seen = w.graphs.get(id(graph))
        if seen is None or seen.ref() is not graph:
            return None
        label = self.labels.get(seen.signature)
        if label is None:
            label = self.labels[seen.signature] = _core.replay_label(f"replay:{seen.signature}")
        stream = self.raw_stream()
        slot = _core.replay_begin(stream, label)
        return (slot, stream) if slot >= 0 else None

    def decide(self, span: list) -> dict:
        """At the probe's end (``span``: its two stamps): the probe's records summed by the
        timing chosen, and ``w.timing`` / ``w.records_off`` set."""
        w = self.w
        if not self.on:
            return _core.activity_blocks(span)
        ev = _core.activity_blocks(span, timing="events")
        nodes = _core.activity_blocks(span)
        why = self.uncovered(ev)
        if why is None:
            w.timing, w.timing_why = "events", None
            replay_ns = self.without_host_pairs(ev)
            total = ev["gpu_ns"][0]
            eager = 1 - replay_ns / total if total > 0 else 1.0
            w.records_off = eager < EAGER_SHARE_MAX
            w.eager_share = eager
            # the blocks are priced per replay (by_key), but the targets are weighed by the
            # kernels that read them (by_name): the nodes' own records, on in the probe (with
            # the replays' names the probe's targets had no weight, and no arm but the
            # baselines was tried: H200, 65b4c57)
            ev["by_name"] = nodes["by_name"]
            return ev
        self.stop()
        w.timing, w.timing_why = "nodes", why
        return nodes

    @staticmethod
    def replay_keys(by_key: dict) -> dict:
        """key -> (signature, host) for each replay record's launch key in ``by_key``: host where
        the GPU was idle at its pair's first event (l2p_replays: named "host:replay:...", the
        pair may time the host's launch of the graph too)."""
        names = _core.activity_keys()
        out = {}
        for key in by_key:
            name = names[key][0] if key < len(names) else ""
            host = name.startswith(HOST_PREFIX)
            if host:
                name = name[len(HOST_PREFIX):]
            if name.startswith("replay:"):
                out[key] = (name[len("replay:"):], host)
        return out

    def without_host_pairs(self, ev: dict) -> float:
        """The probe's sums (``ev``) as the blocks are priced at: the host-timed replays' keys
        taken out, each signature's timed key standing for all its replays (its launches and
        GPU time scaled by all / timed: the program's whole mix, l2p_live_mix), ``gpu_ns``
        adjusted likewise. Returns the replays' GPU time so counted."""
        keys = self.replay_keys(ev["by_key"])
        launches: dict = {}
        for key, (sig, _host) in keys.items():
            launches[sig] = launches.get(sig, 0) + ev["by_key"][key][1][0]
        replay_ns = 0.0
        for key, (sig, host) in keys.items():
            ns, n = ev["by_key"].pop(key) if host else ev["by_key"][key]
            if host:
                ev["gpu_ns"][0] -= ns[0]
                continue
            f = launches[sig] / n[0] if n[0] else 1.0
            ev["by_key"][key] = ([x * f for x in ns], [x * f for x in n])
            ev["gpu_ns"][0] += ns[0] * (f - 1)
            replay_ns += ns[0] * f
        return replay_ns

    def uncovered(self, ev: dict):
        """Why the events cannot time the probe's graphs (None: they can): every graph-node
        record must be a kernel of a replay the events timed or counted, and at most
        :data:`HOST_SHARE_MAX` of the replays may have found the GPU idle."""
        replays: dict = {}
        timed: dict = {}
        for key, (sig, is_host) in self.replay_keys(ev["by_key"]).items():
            n = ev["by_key"][key][1][0]
            replays[sig] = replays.get(sig, 0) + n
            timed[sig] = timed.get(sig, 0) + (0 if is_host else n)
        if not replays:
            return "no replay of a graph the watcher knows was timed in the probe"
        every, host = sum(replays.values()), sum(replays.values()) - sum(timed.values())
        untimed = sorted(sig for sig, n in timed.items() if not n)
        if host > HOST_SHARE_MAX * every or untimed:
            return (f"the GPU was idle when {host:.0f} of {every:.0f} replays were launched"
                    + (f" (every replay of {', '.join(untimed)})" if untimed else "")
                    + ": their event pairs would time the host's launch too")
        kernels = {g.signature: len(g.names) for g in self.w.known.all_graphs()}
        expected = sum(n * kernels.get(sig, 0) for sig, n in replays.items())
        seen = ev["graph_nodes"][0]
        if not expected or abs(seen - expected) > NODES_COVERED * expected:
            return (f"the probe recorded {seen:.0f} graph-node kernels where the timed replays "
                    f"hold {expected:.0f} (graphs launched outside the hooked replays, or a "
                    f"CUPTI that does not mark graph nodes)")
        return None

    def harvest(self):
        if self.on:
            _core.replay_harvest()
