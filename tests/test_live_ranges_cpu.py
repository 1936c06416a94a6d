"""Windows where the hot bytes are (issue 50, item 4), on the simulated GPU of
tests/test_live_sim_cpu.py.

A decode-like graph of 63 kernel nodes whose pointer words fall in two allocations:

- a 2 MiB small-pool segment (SEG) holding an activation every layer writes, a small hot
  tensor read by one kernel, and two other tensors;
- a flat 36 MiB weight tensor (FLAT) viewed per layer: 60 words, each read by one layer's
  k_gemv node.

Targets used to be whole allocations (cuPointerGetAttribute's range), each weighed by every
kernel that touched anything in it, and a window went on every node of the graph. Here the
words split the allocations (the core's l2p_live_ranges): the flat weight is one target
weighed by its 60 readers, the hot tensor its own, a window lands only on the nodes whose words
point into its target, and the plan found again by `verify` in a fresh watcher (at other
addresses) puts the same window on the same nodes.
"""
import json

import pytest

from l2persist import _core
from l2persist.process import live

from test_live_sim_cpu import MIB, ProgramGraph, _watcher, world  # noqa: F401

KIB = 1 << 10
SEG = 0x7F30_0000_0000            # the small-pool segment
FLAT = 0x7F40_0000_0000           # the flat weight
FLAT_BYTES = 36 * MIB
LAYERS = 60
SLICE = 600 * KIB                 # a layer's view (element-aligned, as real views are)
ACT, HOT, T_C, T_D = SEG, SEG + 256 * KIB, SEG + 320 * KIB, SEG + MIB   # inside SEG
GEMV = list(range(1, LAYERS + 1))  # the layers' nodes
HOT_NODE, SMALL_NODE = LAYERS + 1, LAYERS + 2
NS = {"k_norm": 5_000.0, "k_gemv": 20_000.0, "k_hot": 50_000.0, "k_small": 5_000.0}


def decode_graph(shift=0, stray=False):
    """The graph's kernels, allocations and pointer words (as Graph._scan gives them), every
    address moved by ``shift`` (the next process's allocator); ``stray``: k_hot's by-value
    parameters also hold stale bytes that look like a pointer 999 bytes into the flat weight."""
    g = ProgramGraph()
    kernels = [(0, "k_norm", (32, 1, 1), (256, 1, 1), 0, 2)]
    kernels += [(n, "k_gemv", (132, 1, 1), (128, 1, 1), 0, 2) for n in GEMV]
    kernels += [(HOT_NODE, "k_hot", (64, 1, 1), (256, 1, 1), 0, 1),
                (SMALL_NODE, "k_small", (8, 1, 1), (256, 1, 1), 0, 1)]
    seg, flat = SEG + shift, FLAT + shift
    records = [(seg, 2 * MIB, -1), (flat, FLAT_BYTES, -1)]
    uses = [(0, 0, 0, ACT + shift, 0), (0, 1, 0, T_D + shift, 0)]
    for layer, n in enumerate(GEMV):
        uses += [(n, 0, 0, ACT + shift, 0), (n, 1, 0, flat + layer * SLICE, 1)]
    uses += [(HOT_NODE, 1, 0, HOT + shift, 0), (SMALL_NODE, 0, 0, T_C + shift, 0)]
    if stray:
        uses.insert(0, (HOT_NODE, 0, 8, flat + 999, 1))
    g.scan, g.kernels, g.flat = (kernels, records, uses), kernels, flat
    return g


def flat_model(world, gain=1.5):
    """k_gemv is faster by up to ``gain`` in the share of the flat weight that persists (a
    persisting window over it on its node, hitRatio x bytes held, at most the set-aside);
    nothing else changes."""
    def kernel_ns(graph, node, name):
        d = NS[name]
        win = world.graph_windows.get((id(graph), node))
        if name == "k_gemv" and win is not None and win.hit_prop == "persisting":
            lo, hi = max(win.base, graph.flat), min(win.base + win.nbytes,
                                                    graph.flat + FLAT_BYTES)
            held = min(win.hit_ratio * max(0, hi - lo), world.limit)
            d /= 1 + (gain - 1) * held / FLAT_BYTES
        return d
    world.kernel_ns = kernel_ns


def run(world, watcher, graph, replays=200_000):
    """The program: capture the graph, replay it until the watcher has decided."""
    watcher.capture_begin()
    world.captures_open += 1
    world.captures_open -= 1
    watcher.capture_end(graph)
    for _ in range(replays):
        watcher.point("replay", graph)
        world.replay(graph)
        if watcher.state in ("done", "off"):
            break
    return graph


def windowed_nodes(world, graph, base):
    return sorted(n for (gid, n), w in world.graph_windows.items()
                  if gid == id(graph) and w.base == base)


def test_a_flat_weight_is_one_target_and_a_segments_tensors_their_own(world):
    flat_model(world)
    w = _watcher()
    g = run(world, w, decode_graph())
    assert w.state == "done", w.notes
    by_addr = {t.address: t for t in w.targets}
    assert 2 * MIB not in [t.size for t in w.targets]      # the segment is split
    # the flat weight: one target over its 60 slices, on the 60 nodes that read it, weighed
    # by them alone (the warm-up's k_gemv time: each node's share of it)
    flat = by_addr[FLAT]
    assert flat.size == FLAT_BYTES and len(flat.places) == 1
    seen, at = flat.places[0]
    assert seen.nodes_of(at) == GEMV
    assert seen.anchor(at) == (1, 1, 0, FLAT)               # a word inside it: its first
    ns = w.kernel_ns_warmup
    assert flat.weight == pytest.approx(ns["k_gemv"])
    # the hot tensor is its own target up to the next word pointed at, weighed by k_hot alone
    hot = by_addr[HOT]
    assert hot.size == T_C - HOT and hot.weight == pytest.approx(ns["k_hot"])
    assert hot.places[0][0].nodes_of(hot.places[0][1]) == [HOT_NODE]
    # the activation every layer writes: its readers are the gemv nodes and k_norm
    assert by_addr[ACT].size == HOT - ACT
    assert by_addr[ACT].weight == pytest.approx(ns["k_gemv"] + ns["k_norm"])
    assert by_addr[T_D].size == MIB and by_addr[T_D].weight == pytest.approx(ns["k_norm"])
    # ranked by their readers: the flat weight ahead of every tensor of the segment but the
    # activation its own readers write
    order = [t.address for t in w.targets]
    assert order.index(FLAT) < min(order.index(a) for a in (HOT, T_C, T_D))
    # the decision windows the flat weight, on its 60 readers and nowhere else
    arm = w.arms[w.final_arm]
    assert w.result["helps"], (w.result, w.notes)
    assert [w.targets[t].address for t, *_ in arm["windows"]] == [FLAT]
    assert windowed_nodes(world, g, FLAT) == GEMV
    assert set(n for (gid, n) in world.graph_windows if gid == id(g)) == set(GEMV)
    assert w.summary()["targets"][0]["bytes"] in (FLAT_BYTES, HOT - ACT)


def test_a_window_on_the_hot_tensor_lands_on_its_one_node(world):
    """Any arm: each window goes on the nodes of its own target (placements), so an arm that
    windows the hot tensor touches one node of 63."""
    flat_model(world, gain=1.0)
    w = _watcher()
    g = run(world, w, decode_graph())
    hot = next(i for i, t in enumerate(w.targets) if t.address == HOT)
    arm = {"set_aside": 8 * MIB, "windows": [(hot, 1.0, "persisting", "streaming")]}
    [(seen, nodes, base, nbytes, *_rest)] = w.switcher.placements(arm)
    assert seen.ref() is g and nodes == [HOT_NODE] and (base, nbytes) == (HOT, T_C - HOT)
    docs = w.report.window_docs(arm)
    assert [(d["node"], d["param"], d["offset"], d["delta"], d["bytes"], d["nodes"])
            for d in docs] == [(HOT_NODE, 1, 0, 0, T_C - HOT, [HOT_NODE])]


def test_the_plan_round_trips_through_verify_at_other_addresses(world, tmp_path):
    """advise's plan names the flat weight by a word inside it (node, param, offset, delta)
    and the 60 nodes; a fresh watcher in verify mode, in a graph whose allocations moved,
    finds the same range and puts the window on the same nodes."""
    flat_model(world)
    w = _watcher()
    run(world, w, decode_graph())
    assert w.result["helps"], (w.result, w.notes)
    plan = w.make_plan()
    [doc] = plan["windows"]
    assert (doc["node"], doc["param"], doc["offset"], doc["delta"]) == (1, 1, 0, 0)
    assert doc["bytes"] == FLAT_BYTES and doc["nodes"] == GEMV
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    world.windows.clear()
    world.graph_windows.clear()
    world.limit = 4 * MIB
    shift = 0x10_0000_0000
    v = _watcher(mode="verify")
    v.load_plan(str(path))
    g2 = run(world, v, decode_graph(shift))
    assert v.state == "done", v.notes
    [(base, nbytes, nodes, _e)] = v.graphs[id(g2)].plan_windows
    assert (base, nbytes, nodes) == (FLAT + shift, FLAT_BYTES, GEMV)
    assert v.result["helps"], (v.result, v.notes)
    assert windowed_nodes(world, g2, FLAT + shift) == GEMV


def test_the_core_rule_is_the_one_used(world):
    """The targets are the core's ranges (no second rule in Python): the words the watcher
    hands over give back exactly its targets' extents."""
    flat_model(world, gain=1.0)
    w = _watcher()
    run(world, w, decode_graph())
    kernels, records, uses = decode_graph().scan
    names = {}
    words = [(0, u[0], u[1], u[2], names.setdefault(kernels[u[0]][1], len(names)), u[3],
              records[u[4]][0], records[u[4]][1], 1.0) for u in uses]
    ranges, _of = _core.live_ranges(words)
    assert sorted((r[0], r[1]) for r in ranges) == sorted((t.address, t.size)
                                                          for t in w.targets)
    assert [r[4] for r in ranges if r[0] == FLAT] == [LAYERS]


def test_a_stray_odd_word_changes_no_target(world):
    """ddp at f7a980d: stale bytes 999 bytes into a buffer cut it in two. An odd word is taken
    for no pointer (the core): the targets, their weights and their nodes are those of the
    graph without it, and no target is anchored on it."""
    flat_model(world)
    plain = _watcher()
    run(world, plain, decode_graph())
    w = _watcher()
    run(world, w, decode_graph(stray=True))
    key = lambda ts: sorted((t.address, t.size) for t in ts)   # noqa: E731
    assert key(w.targets) == key(plain.targets)
    flat = next(t for t in w.targets if t.address == FLAT)
    assert flat.size == FLAT_BYTES and flat.weight == pytest.approx(w.kernel_ns_warmup["k_gemv"])
    for t in w.targets:
        for g, at in t.places:
            assert g.anchor(at)[3] % 2 == 0 and HOT_NODE not in g.nodes_of(at) or \
                t.address == HOT, (t.address, g.anchor(at), g.nodes_of(at))
    assert w.result["helps"] and w.make_plan()["windows"][0]["offset"] == 0
