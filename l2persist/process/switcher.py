"""The watcher's switcher: the targets (ranges the kernels point into), an arm's placements,
and installing it (the set-aside, windows on the graph nodes that point into each target, one
window per eager stream), including a saved plan's windows found again (verify, apply).

One :class:`Switcher` per :class:`~l2persist.process.live.Watcher`; it reads the owner's
``arms``, ``targets``, ``graphs``, ``eager``, ``device`` and ``plan_doc``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .. import _core
from . import streams as _streams
from .part import Part


@dataclass
class Target:
    """One range the hot graphs' kernels point into (_core.live_ranges: a tensor inside a
    shared segment, or a flat tensor's per-layer slices together), wherever it is used: a
    window on it is put on the nodes whose words point into it, in every graph that has them.
    places: (graph, at) pairs; at: the index of the graph's anchor word in its uses (its
    nodes: GraphSeen.spans), or an eager group's record (its whole allocation, on its stream)."""
    address: int
    size: int
    weight: float = 0.0
    places: list = field(default_factory=list)


def _node_ns(kernel_ns: dict, seen: list) -> dict:
    """id(graph) -> each node's share of the warm-up's GPU time. The records are summed per
    kernel name, so a name's time is shared among the nodes that launch it, by how often each
    ran (its graph's replays, an eager group's launches): a range read by 60 nodes of one kernel
    is not weighed 60 times that kernel's whole time."""
    runs: dict[str, int] = {}
    for g in seen:
        for name in g.names:
            runs[name] = runs.get(name, 0) + g.replays
    return {id(g): [kernel_ns.get(name, 0.0) * g.replays / runs[name] if runs[name] else 0.0
                    for name in g.names] for g in seen}


def _first_on_its_stream(g, taken: set) -> bool:
    """A stream holds one window: an arm's eager placements after the first on a stream (the
    heavier target's, targets being heaviest first) are dropped where the arm is placed (and
    so where it is installed and written); apply keeps the first plan entry matched on a
    stream. Graph placements always pass."""
    if not g.eager:
        return True
    if g.stream in taken:
        return False
    taken.add(g.stream)
    return True


def _whole_allocation(records: list, at: tuple, nbytes: int) -> bool:
    """Whether the located window (base, bytes) starts an allocation of ``nbytes`` bytes."""
    return any(r[0] == at[0] and r[1] == nbytes == at[1] for r in records)


def _window(base, nbytes, hit, hit_prop, miss_prop):
    from .discover import _RawRange
    return _core.AccessPolicyWindow(_RawRange(base, nbytes), nbytes, hit_ratio=hit,
                                    hit_prop=_core.AccessProperty[hit_prop.upper()],
                                    miss_prop=_core.AccessProperty[miss_prop.upper()],
                                    clamp=True)


class Switcher(Part):
    """Finds the targets and installs arms."""

    def __init__(self, owner):
        super().__init__(owner)
        self._noted_unrenewable = False   # said once: graphs that could not be renewed

    def find_targets(self, kernel_ns: dict) -> list:
        """The ranges the replayed graphs' kernels point into (the core's rule,
        l2p_live_ranges), by address (the same table used by three decode graphs is one
        target), each weighted by the warm-up's GPU time of the nodes whose words point into
        it; an eager group's, the allocations it uses. The C core ranks them (l2p_live_arms)."""
        w = self.w
        seen = [g for g in list(w.graphs.values()) + w.eager
                if g.replays and g.ref() is not None]   # not: never replayed, or dropped
        node_ns = _node_ns(kernel_ns, seen)
        by_addr: dict[tuple, Target] = {}

        def target(address, size):
            return by_addr.setdefault((address, size), Target(address, size))
        for g in seen:
            if g.eager:   # a stream window: the whole allocations (apply matches them whole)
                for i, (address, size, _offer) in enumerate(g.records):
                    t = target(address, size)
                    t.places.append((g, i))
                    t.weight += sum(node_ns[id(g)][n] for n in g.nodes_of(i))
        graphs = [g for g in seen if not g.eager]
        kernels: dict[str, int] = {}
        words = [(gi, u[0], u[1], u[2], kernels.setdefault(g.names[u[0]], len(kernels)), u[3],
                  g.records[u[4]][0], g.records[u[4]][1], node_ns[id(g)][u[0]])
                 for gi, g in enumerate(graphs) for u in g.uses]
        ranges, range_of = _core.live_ranges(words)
        k = 0
        for g in graphs:
            at: dict[int, int] = {}           # range -> its anchor: the graph's lowest word in it
            nodes: dict[int, set] = {}
            for i, u in enumerate(g.uses):
                r, k = range_of[k], k + 1
                if r < 0:                     # an odd word: taken for no pointer (the core)
                    continue
                if r not in at or u[3] < g.uses[at[r]][3]:
                    at[r] = i
                nodes.setdefault(r, set()).add(u[0])
            g.spans = {i: sorted(nodes[r]) for r, i in at.items()}
            for r, i in at.items():
                target(*ranges[r][:2]).places.append((g, i))
        for address, size, weight, _readers, _pieces in ranges:
            target(address, size).weight += weight
        out = sorted(by_addr.values(), key=lambda t: -t.weight)
        return out  # the core ranks the first L2P_LIVE_MAX_TARGETS (heaviest first here)

    def install(self, arm: int, fresh: bool = False):
        """The arm's set-aside and windows; returns the windows' ms. ``fresh`` (a rest with
        CUPTI's records paused follows): every graph replayed with records on since its
        executable was made is instantiated again, windows changed or not. After a pause
        CUPTI's records of such a graph, left alone, read short (H100, 7eafa56,
        tools/investigations/pause-bias: the baseline blocks that followed the other baseline, whose graphs
        were left alone, read 1.2-2.2 % less GPU time than the same arm's other blocks; over
        the arm's blocks every graph kernel read less than back to back, the eager kernels the
        same), which made the paced search's baselines look faster and its gain smaller
        (1.032-1.042x against 1.055-1.057x back to back). A graph replayed only while paused
        since its executable was made needs nothing: its executable stays fresh."""
        w = self.w
        a = w.arms[arm]
        # advise --placebo: the default set-aside, and each window with normal hit and miss
        # properties (no line persists or streams), its hit ratio kept so that arms still
        # differ and switching changes the same nodes as it would
        placebo = getattr(w.o, "placebo", False)
        limit = w.default_limit if a["set_aside"] is None or placebo else a["set_aside"]
        if w.device.persisting_l2_limit != limit:
            w.device.persisting_l2_limit = limit
        _core.reset_persisting_l2(w.device)   # an arm starts on clean lines
        t_windows = time.perf_counter()
        want, on_streams = self._wants(a, placebo)
        if on_streams or w.stream_windows is not None:
            self.set_stream_windows(on_streams)
        self._set_graphs(want, fresh)
        if fresh:
            self.note_unrenewable()
        return (time.perf_counter() - t_windows) * 1e3

    def _set_graphs(self, want: dict, fresh: bool) -> int:
        """The graphs' windows as ``want`` says, and with ``fresh`` the recorded ones renewed;
        returns how many graphs were instantiated again (or asked to be)."""
        windowed = self.windowed_graphs()
        made = 0
        for g in windowed:
            made += self.set_graph_windows(g, want.get(id(g), {}), fresh and g.recorded_exec)
        if fresh:
            done = {id(g) for g in windowed}
            for g in self.w.graphs.values():
                if id(g) not in done and g.recorded_exec and g.ref() is not None:
                    g.change_windows([], fresh=True)
                    made += 1
        return made

    def windowless(self) -> bool:
        """advise --placebo with L2PERSIST_PLACEBO_WINDOWS=0 (a diagnostic): no arm sets a
        window on any node or stream, so the records, rests and switches are timed alone."""
        o = self.w.o
        return bool(getattr(o, "placebo", False)) and not getattr(o, "placebo_windows", True)

    def _wants(self, a: dict, placebo: bool) -> tuple:
        """The arm's windows: {id(graph): {node: (key, window)}} and {stream: (key, window)}."""
        want: dict[int, dict] = {}
        on_streams: dict[int, tuple] = {}
        if placebo and self.windowless():
            return want, on_streams
        for g, nodes, base, nbytes, hit, hp, mp, _rec in self.placements(a):
            if placebo:
                hp = mp = "normal"
            key = (base, nbytes, hit, hp, mp)
            if g.eager:            # one per stream (placements)
                on_streams[g.stream] = (key, _window(*key))
                continue
            kw = (key, _window(*key))
            d = want.setdefault(id(g), {})
            for n in nodes:
                d[n] = kw
        return want, on_streams

    def ready(self, arm: int, fresh: bool = False) -> float | None:
        """Before a block's synchronization, while the GPU still runs the block's queued work:
        the arm's windows set on its graphs' nodes and each graph that changes instantiated
        again (and, with ``fresh``, those install would renew: the caller guesses it from the
        last cycle, so a cycle that rests no more renews them for nothing, but correctly).
        The executable replaced is freed by the driver once its launches complete, and
        nothing launches it again before the block ends: the program's thread is here (the
        caller readies nothing once another thread has made watched calls). install then
        finds these graphs as the arm wants them, and after the synchronization, with the GPU
        idle, only the limit and the streams' windows are left (a switch on the H200's
        decode_big at d067c58: 3.4 ms median, 3.2 ms of it two graphs instantiated again
        after the synchronization). Returns the ms it took, or None where no graph changed."""
        w = self.w
        t0 = time.perf_counter()
        want, _ = self._wants(w.arms[arm], getattr(w.o, "placebo", False))
        if not self._set_graphs(want, fresh):
            return None
        return (time.perf_counter() - t0) * 1e3

    def note_unrenewable(self):
        w = self.w
        if getattr(self, "_noted_unrenewable", False):
            return
        bad = [g for g in w.graphs.values() if g.renew_failed]
        if bad:
            self._noted_unrenewable = True
            w.notes.append(f"{len(bad)} graph(s) could not be instantiated again before a "
                           f"rest (their owner is not PyTorch's): CUPTI's records of them "
                           f"may read short after each paused rest (H100: 1.2-2.2 %), biasing "
                           f"their arms; --max-overhead 0 records back to back, unpaused")

    def placements(self, arm) -> list:
        """(graph, nodes, base, bytes, hit_ratio, hit_prop, miss_prop, record) per graph a
        window of the arm lands in, as installed and as written (Report.window_docs); record: the
        target's record in the graph, None for a saved plan's window found again (verify)."""
        w = self.w
        out = []
        taken: set = set()
        for ti, hit, hp, mp in arm["windows"]:
            if "_located" in arm:           # verify: a saved plan's window, found again
                g = arm["_graphs"][ti]
                if _first_on_its_stream(g, taken):
                    base, nbytes, nodes = arm["_located"][ti]
                    out.append((g, nodes, base, nbytes, hit, hp, mp, None))
                continue
            t = w.targets[ti]
            for g, rec in t.places:
                if _first_on_its_stream(g, taken):
                    out.append((g, g.nodes_of(rec), t.address, t.size, hit, hp, mp, rec))
        return out

    def set_stream_windows(self, want: dict):
        w = self.w
        sw = w.stream_windows
        if sw is None:
            sw = w.stream_windows = _streams.StreamWindows(w.o.device)
        sw.resume()                # no capture is open here (a failed one left them held)
        sw.set(want)

    def forget_arms(self):
        """The arms are made again (Search.restart): the graphs they window are found anew."""
        self.__dict__.pop("_all_windowed", None)

    def windowed_graphs(self) -> list:
        w = self.w
        if not hasattr(self, "_all_windowed"):
            gs = {}
            for a in w.arms:
                for p in self.placements(a):
                    if not p[0].eager:
                        gs[id(p[0])] = p[0]
            self._all_windowed = list(gs.values())
        return self._all_windowed

    def set_graph_windows(self, g, want: dict, fresh: bool = False) -> bool:
        """Each node gets the window the arm wants on it, or none: one call per distinct window
        that changes (a node that keeps its window is not touched), one re-instantiation per
        graph. A graph the program dropped is left alone. True where it asked for one."""
        had = getattr(g, "_windowed", {})       # node -> the window's key
        keys = {n: kw[0] for n, kw in want.items()}
        changes = []
        clear = sorted(set(had) - set(want))
        if clear:
            changes.append((None, clear))
        for key, w in {id(kw): kw for kw in want.values()}.values():
            nodes = sorted(n for n in want if want[n][1] is w and had.get(n) != key)
            if nodes:
                changes.append((w, nodes))
        if g.change_windows(changes, fresh):
            g._windowed = keys
        return bool(changes) or fresh

    def apply_plan_windows(self, seen, install: bool):
        """The plan's windows for this graph (or eager launch group), located in it; set
        where ``install`` (apply; a group's on its stream)."""
        w = self.w
        eager = seen.eager
        entries = [e for e in w.plan_doc["windows"] if e["graph"] == seen.signature
                   and (e.get("stream") == "launch") == eager and not (eager and e.get("_applied"))]
        located = []
        uses6 = [(u[0], u[1], u[2], u[3], seen.records[u[4]][0], seen.records[u[4]][1])
                 for u in seen.uses]
        for e in entries:
            at = _core.live_locate(uses6, e["node"], e["param"], e["offset"], e["delta"],
                                   e["bytes"])
            if at is not None and eager and not _whole_allocation(seen.records, at, e["bytes"]):
                # one kernel launched on several buffers is several groups of one signature:
                # the word must point into an allocation of the saved size, from its start
                at = None
            if at is None:
                e.setdefault("_missed", 0)
                e["_missed"] += 1
                continue
            located.append((at[0], at[1], [n for n in e["nodes"] if n < len(seen.names)], e))
        if located:
            w.applied_sigs.add(seen.signature)
        seen.plan_windows = located
        if eager:
            if install and located:
                base, nbytes, _nodes, e = located[0]
                if not _first_on_its_stream(seen, set(w._stream_plan)):
                    e["_superseded"] = True     # the first matched holds its stream
                    return
                key = (base, nbytes, e["hit_ratio"], e["hit_prop"], e["miss_prop"])
                w._stream_plan[seen.stream] = (key, _window(*key))
                e["_applied"] = e.get("_applied", 0) + 1
                seen.windows_applied = 1
            return
        graph = seen.borrow() if install and located else None
        if graph is not None:
            for base, nbytes, nodes, e in located:
                win = _window(base, nbytes, e["hit_ratio"], e["hit_prop"], e["miss_prop"])
                graph.set_access_policy_window(win, nodes=nodes)
                e["_applied"] = e.get("_applied", 0) + 1
            seen.windows_applied = len(located)

    def baseline_of(self, arm) -> int | None:
        """The baseline a plan's arm is (0: limit 0, 1: the device's default), or None where it
        has windows or another set-aside."""
        w = self.w
        if arm["windows"]:
            return None
        if arm["set_aside"] is None or arm["set_aside"] == w.default_limit:
            return 1
        return 0 if arm["set_aside"] == 0 else None

    def verify_arms(self) -> list:
        w = self.w
        doc = w.plan_doc
        plan_arm = {"set_aside": doc["set_aside"], "windows": [], "_graphs": {}, "_located": {}}
        k = 0
        for g in list(w.graphs.values()) + w.eager:
            for base, nbytes, nodes, e in getattr(g, "plan_windows", []):
                plan_arm["windows"].append((k, e["hit_ratio"], e["hit_prop"], e["miss_prop"]))
                plan_arm["_graphs"][k] = g
                plan_arm["_located"][k] = (base, nbytes, nodes)
                k += 1
        return [{"set_aside": 0, "windows": []}, {"set_aside": None, "windows": []}, plan_arm]
