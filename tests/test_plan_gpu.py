"""Plans and the advisor on the GPU: a Plan installs and restores as one transaction (also
through an exception and KeyboardInterrupt, all or nothing when a write fails), switches
within a transaction, round-trips through JSON by names at a "server start"; graphs that
servers capture the default way are reached (keep_graphs, window_captures); advise() restores
everything and reports each workload's own tax. Outputs are checked against NumPy references
on poisoned data."""

import gc

import numpy as np
import pytest

import l2persist as l2p
from l2persist import AccessPolicyWindow, AccessProperty, foreign
from l2persist import kernels as K
from l2persist.pytest_plugin import need

pytestmark = pytest.mark.gpu
MIB = 1 << 20
PERSIST = ["l2_persisting_requests"]


def _win(buf, hit_ratio=1.0):
    return AccessPolicyWindow(buf, hit_ratio=hit_ratio, hit_prop=AccessProperty.PERSISTING,
                              miss_prop=AccessProperty.STREAMING)


def _same(w, ref):
    if ref is None:
        return w is None or w.num_bytes == 0
    return w is not None and (w.base_ptr, w.num_bytes) == (ref.base_ptr, ref.num_bytes) and \
        w.hit_ratio == pytest.approx(ref.hit_ratio)


@pytest.fixture
def bufs(rng, device):
    hot = l2p.to_device(rng.integers(0, 100, 4 * MIB // 4, dtype=np.int32))
    cold = l2p.to_device(rng.integers(0, 100, 48 * MIB // 4, dtype=np.int32))
    yield hot, cold
    hot.close()
    cold.close()


def test_plan_installs_and_restores(device, bufs):
    hot, cold = bufs
    with l2p.Stream() as s1, l2p.Stream() as s2:
        own = AccessPolicyWindow(cold, 4096, hit_ratio=0.25)
        s2.access_policy_window = own
        limit = device.persisting_l2_limit
        plan = l2p.Plan(device, set_aside=device.properties.persisting_l2_cache_max_size // 2)
        assert plan.add(s1, _win(hot), name="hot", carrier_name="s1") == 0
        assert plan.add(s2, None, carrier_name="s2") == 1      # s2's window off under the plan
        with plan as p:
            assert p is plan and plan.installed
            assert device.persisting_l2_limit == plan.granted >= plan.set_aside
            assert _same(s1.access_policy_window, _win(hot)) and _same(s2.access_policy_window, None)
            out = K.hot_cold(hot, cold, stream=s1)  # the work runs under the plan
            s1.synchronize()
        assert not plan.installed and plan.granted is None
        assert device.persisting_l2_limit == limit
        assert _same(s1.access_policy_window, None) and _same(s2.access_policy_window, own)
        plan.restore()                                          # idempotent
        assert device.persisting_l2_limit == limit
        del out
        s2.access_policy_window = None


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_plan_restores_through_an_exception(device, bufs, exc):
    hot, _ = bufs
    with l2p.Stream() as s:
        limit = device.persisting_l2_limit
        plan = l2p.Plan(device, set_aside=device.properties.persisting_l2_cache_max_size)
        plan.add(s, _win(hot))
        with pytest.raises(exc):
            with plan:
                raise exc("inside the plan")
        assert device.persisting_l2_limit == limit and _same(s.access_policy_window, None)


def test_plan_switches_within_one_transaction(device, bufs):
    """apply() switches plans; the restore still returns to what install() found."""
    hot, cold = bufs
    with l2p.Stream() as s:
        limit = device.persisting_l2_limit
        targets = l2p.Plan(device)
        targets.add(s, _win(hot), enabled=False)
        targets.add(s, _win(cold, 0.1), enabled=False)
        assert targets.groups == [0, 0]                          # alternatives on one stream
        session = l2p.Plan(device)
        session.install()
        try:
            a = targets.configured({"set_aside": 0, "windows": [None, None]})
            b = targets.configured({"set_aside": device.properties.persisting_l2_cache_max_size,
                                    "windows": [None, {"hit_ratio": 0.1}]})
            assert session.apply(b) == device.persisting_l2_limit > 0
            assert _same(s.access_policy_window, _win(cold, 0.1))
            assert session.apply(a) == 0 == device.persisting_l2_limit
            assert _same(s.access_policy_window, None)
            with pytest.raises(ValueError, match="holds one window"):
                targets.configured({"set_aside": 0, "windows": [{"hit_ratio": 1.0},
                                                                 {"hit_ratio": 1.0}]})
        finally:
            session.restore()
        assert device.persisting_l2_limit == limit and _same(s.access_policy_window, None)


# All or nothing when a write fails mid-install is tested through a fake driver in
# tests/c/test_plan.c (a failure at every call): a GPU cannot be made to fail a given write.


def test_plan_refuses_bad_input(device, bufs):
    hot, _ = bufs
    with pytest.raises(ValueError, match="set_aside"):
        l2p.Plan(device, set_aside=device.properties.persisting_l2_cache_max_size + 1)
    plan = l2p.Plan(device)
    with pytest.raises(TypeError, match="carrier"):
        plan.add(object(), _win(hot))
    with pytest.raises(TypeError, match="window"):
        plan.add(0, "not a window")
    with pytest.raises(ValueError, match="config"):
        plan.configured({"set_aside": 0, "windows": [None]})
    with pytest.raises(RuntimeError, match="install"):
        plan.apply(l2p.Plan(device))
    assert plan.entries == []                                  # nothing half-added


def test_plan_json_at_a_server_start(device, bufs, tmp_path):
    """Found once, saved, rebuilt by names over this process's objects, installed the same."""
    hot, cold = bufs
    with l2p.Stream() as s:
        plan = l2p.Plan(device, set_aside=8 * MIB)
        plan.add(s, AccessPolicyWindow(hot, 2 * MIB, offset=4096, hit_ratio=0.7),
                 name="hot", carrier_name="main")
        path = tmp_path / "plan.json"
        plan.to_json(path)
        again = l2p.Plan.from_json(path, buffers={"hot": hot}, carriers={"main": s})
        e0, e1 = plan.entries[0], again.entries[0]
        assert again.set_aside == 8 * MIB and e1["name"] == "hot" and e1["on"]
        assert (e1["window"].base_ptr, e1["window"].num_bytes) == \
            (e0["window"].base_ptr, e0["window"].num_bytes)
        assert "hot" in repr(again) and "<table>" in again._repr_html_()
        with pytest.raises(KeyError, match="buffers: .*'hot'"):
            l2p.Plan.from_json(path, buffers={}, carriers={"main": s})
        with pytest.raises(KeyError, match="carriers: .*'main'"):
            l2p.Plan.from_json(path, buffers={"hot": hot}, carriers={})
        with again:
            assert _same(s.access_policy_window, e0["window"])


# ---- graphs captured the default way --------------------------------------------------------

def _hist(torch, acc_elems, n):
    gen = torch.Generator(device="cuda").manual_seed(int(np.random.default_rng().integers(1 << 30)))
    acc = torch.zeros(acc_elems, device="cuda")
    idx = torch.randint(0, acc_elems, (n,), device="cuda", generator=gen)
    vals = torch.rand(n, device="cuda", generator=gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        acc.index_add_(0, idx, vals)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return acc, idx, vals


def _check_hist(torch, run, acc, idx, vals):
    acc.fill_(float("nan"))
    acc.zero_()
    run()
    torch.cuda.synchronize()
    ref = np.zeros(acc.numel())
    np.add.at(ref, idx.cpu().numpy(), vals.cpu().numpy())
    np.testing.assert_allclose(acc.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)


def test_keep_graphs_makes_default_torch_graphs_windowable(device):
    torch = need("torch")
    acc, idx, vals = _hist(torch, 1 << 21, 1 << 22)
    with foreign.keep_graphs():
        g = torch.cuda.CUDAGraph()                    # the default way
        with torch.cuda.graph(g):
            acc.index_add_(0, idx, vals)
    plain = torch.cuda.CUDAGraph()                    # outside: as before
    G = l2p.as_graph(g)
    by = {r.name: r for r in G.buffers({"acc": acc, "idx": idx})}
    assert {"acc", "idx"} <= set(by)
    plan = l2p.Plan(device, set_aside=device.properties.persisting_l2_cache_max_size)
    plan.add(G.nodes_window(by["acc"].nodes), _win(by["acc"].buffer), name="acc")
    with plan:
        assert _same(by["acc"].nodes[0].access_policy_window, _win(by["acc"].buffer))
        _check_hist(torch, g.replay, acc, idx, vals)
    assert _same(by["acc"].nodes[0].access_policy_window, None)
    _check_hist(torch, g.replay, acc, idx, vals)
    with pytest.raises(ValueError, match="keeps no raw graph"):
        with torch.cuda.graph(plain):
            acc.add_(1)
        l2p.as_graph(plain)


def _kept_hist_graph(torch):
    """The histogram captured into a PyTorch graph that keeps its raw graph, and the graph as
    l2persist borrows it."""
    acc, idx, vals = _hist(torch, 1 << 20, 1 << 21)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        acc.index_add_(0, idx, vals)
    return acc, idx, vals, g, l2p.as_graph(g)


def test_a_graph_its_owner_reset_is_never_touched_again(device):
    """torch.cuda.CUDAGraph.reset() destroys the graph l2persist borrowed while the owner object
    lives on (a review at 4dc3107: its node handles were kept and used). After the reset: the
    Graph and its KernelNodes raise ValueError (a repr still works), a Plan naming its nodes is
    refused at install, and a plan installed before the reset restores every other carrier and
    leaves the freed nodes alone. A graph captured again into the same owner is borrowed anew
    and windowed; its results are NumPy's."""
    torch = need("torch")
    acc, idx, vals, g, G = _kept_hist_graph(torch)
    by = {r.name: r for r in G.buffers({"acc": acc, "idx": idx})}
    node = by["acc"].nodes[0]
    cap = device.properties.persisting_l2_cache_max_size
    limit = device.persisting_l2_limit
    held = l2p.Plan(device, set_aside=cap)
    held.add(G.nodes_window(by["acc"].nodes), _win(by["acc"].buffer), name="acc")
    again = l2p.Plan(device, set_aside=cap)            # made before the reset, installed after
    again.add(G.nodes_window(by["acc"].nodes), _win(by["acc"].buffer), name="acc")
    with l2p.Stream() as s:
        held.add(s, _win(by["idx"].buffer), name="idx")
        held.install()
        assert _same(node.access_policy_window, _win(by["acc"].buffer))
        g.reset()                                      # the owner destroys its graph
        held.restore()                                 # no call on the freed nodes
        assert _same(s.access_policy_window, None)     # the stream's window put back
    assert device.persisting_l2_limit == limit
    for read in (lambda: G.kernel_nodes, lambda: node.access_policy_window, lambda: node.name,
                 lambda: G.buffers({"acc": acc})):
        with pytest.raises(ValueError, match="its owner no longer holds the graph"):
            read()
    assert repr(node).startswith("l2persist.KernelNode(position=")
    with pytest.raises(ValueError, match=r"carrier: entry 0's graph .*owner no longer holds"):
        again.install()
    with pytest.raises(ValueError, match="its owner no longer holds the graph"):
        l2p.Plan(device).add(held.entries[0]["carrier"], _win(by["acc"].buffer))
    assert device.persisting_l2_limit == limit
    with torch.cuda.graph(g):                          # captured again: a new graph
        acc.index_add_(0, idx, vals)
    G2 = l2p.as_graph(g)
    acc2 = {r.name: r for r in G2.buffers({"acc": acc})}["acc"]
    fresh = l2p.Plan(device, set_aside=cap)
    fresh.add(G2.nodes_window(acc2.nodes), _win(acc2.buffer), name="acc")
    with fresh:
        _check_hist(torch, g.replay, acc, idx, vals)
    _check_hist(torch, g.replay, acc, idx, vals)


def test_a_graph_captured_again_into_an_installed_transaction_is_put_back(device):
    """A plan installed over a borrowed graph, the graph reset by its owner and captured again
    (its new nodes may take the freed nodes' handles), then another plan over the new graph
    applied into the same transaction (review of 09ef71b, finding 8): the reset graph's nodes
    leave the transaction before the new ones are remembered, and once only, so that restore
    puts the new node's window back to none rather than forgetting it as the old one's. The
    limit comes back too, and the histogram is NumPy's under both plans."""
    torch = need("torch")
    acc, idx, vals, g, G = _kept_hist_graph(torch)
    old = {r.name: r for r in G.buffers({"acc": acc})}["acc"]
    cap = device.properties.persisting_l2_cache_max_size
    limit = device.persisting_l2_limit
    held = l2p.Plan(device, set_aside=cap)
    held.add(G.nodes_window(old.nodes), _win(old.buffer), name="acc")
    held.install()
    try:
        g.reset()
        with torch.cuda.graph(g):                      # a new graph in the same owner
            acc.index_add_(0, idx, vals)
        G2 = l2p.as_graph(g)
        new = {r.name: r for r in G2.buffers({"acc": acc})}["acc"]
        assert _same(new.nodes[0].access_policy_window, None)
        second = l2p.Plan(device, set_aside=cap)
        second.add(G2.nodes_window(new.nodes), _win(new.buffer), name="acc")
        held.apply(second)
        assert _same(new.nodes[0].access_policy_window, _win(new.buffer))
        _check_hist(torch, g.replay, acc, idx, vals)
    finally:
        held.restore()
    assert _same(new.nodes[0].access_policy_window, None)
    assert device.persisting_l2_limit == limit
    _check_hist(torch, g.replay, acc, idx, vals)


def test_a_plan_dropped_while_installed_puts_back_what_it_found(device, bufs):
    """An installed plan holds itself (the transaction's list of applied plans), so only the
    collector frees it; it restores in its finalizer, before the collector clears its carriers
    (a review at d42e881: the restore ran in dealloc, after them). Dropped with its only
    Stream inside it, and with the caller's Stream kept: the limit and the kept stream's window
    are as found after a collection."""
    hot, _ = bufs
    limit = device.persisting_l2_limit
    with l2p.Stream() as kept:
        plan = l2p.Plan(device, set_aside=device.properties.persisting_l2_cache_max_size)
        plan.add(kept, _win(hot), name="kept")
        plan.add(l2p.Stream(), _win(hot), name="inside")
        plan.install()
        assert _same(kept.access_policy_window, _win(hot))
        del plan
        gc.collect()
        assert _same(kept.access_policy_window, None)
        assert device.persisting_l2_limit == limit


def _persisting(fn):
    ok, why = l2p.counters_available()
    if not ok:
        pytest.skip(f"CUPTI: {why}")
    return l2p.measure(fn, PERSIST)[PERSIST[0]]


@pytest.mark.parametrize("how", ["CUDAGraph", "make_graphed_callables", "torch.compile"])
def test_window_captures_reach_graphs_captured_the_default_way(device, how):
    """The window goes on the capture stream while PyTorch captures, so the default graph's
    own replays persist lines (by counters) without any raw graph."""
    torch = need("torch")
    acc, idx, vals = _hist(torch, 1 << 21, 1 << 22)

    def step(v):
        acc.index_add_(0, idx, v)
        return acc

    class Step(torch.nn.Module):  # buffers: static inputs of a reduce-overhead graph
        def __init__(self):
            super().__init__()
            self.register_buffer("acc", acc)
            self.register_buffer("idx", idx)
            self.register_buffer("vals", vals)

        def forward(self):
            self.acc.index_add_(0, self.idx, self.vals)

    win = _win(l2p.as_buffer(acc))
    with foreign.window_captures(win):
        if how == "CUDAGraph":
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step(vals)
            run = g.replay
        elif how == "make_graphed_callables":
            graphed = torch.cuda.make_graphed_callables(step, (vals,))
            run = lambda: graphed(vals)  # noqa: E731
        else:
            compiled = torch.compile(Step(), mode="reduce-overhead")
            for _ in range(3):                          # warm-up, then the capture
                compiled()
            run = compiled
    run()
    torch.cuda.synchronize()
    with device.persisting_l2():
        on = _persisting(run)
    l2p.reset_persisting_l2()
    with device.persisting_l2(0):
        off = _persisting(run)
    assert on > idx.numel() / 4, (on, off)             # the atomics on acc persist
    _check_hist(torch, run, acc, idx, vals)


def test_timing_refuses_a_replay_on_another_stream(device):
    """Measured: tune(lambda: g.replay(), stream=s) timed 6 us of nothing. Now refused, with
    both streams named; without stream= the replay's stream is timed."""
    torch = need("torch")
    acc, idx, vals = _hist(torch, 1 << 20, 1 << 21)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        acc.index_add_(0, idx, vals)
    with l2p.Stream() as s:
        with pytest.raises(ValueError, match=r"stream: fn replays its CUDA graph on stream"):
            l2p.tune(lambda: g.replay(), stream=s, repeat=3, max_evals=6, confirm_rounds=1)
    from l2persist.tune import timed_stream
    stream = timed_stream(lambda: g.replay(), None, device, given=False)
    assert (0 if stream is None else stream.handle) == torch.cuda.current_stream().cuda_stream


# ---- the advisor --------------------------------------------------------------------------

def test_advise_restores_and_reports_every_workloads_tax(device, bufs):
    torch = need("torch")
    hot, cold = bufs
    acc, idx, vals = _hist(torch, int(0.7 * device.properties.l2_cache_size) // 4, 1 << 23)
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        acc.index_add_(0, idx, vals)
    src = torch.rand(32 * MIB // 4, device="cuda")
    dst = torch.empty_like(src)
    with l2p.Stream() as s:
        own = AccessPolicyWindow(cold, 4096, hit_ratio=0.25)
        s.access_policy_window = own
        limit = device.persisting_l2_limit
        adv = l2p.advise({
            "histogram": (lambda: g.replay(), 0.6),
            "hot_cold": {"fn": lambda: K.hot_cold(hot, cold, stream=s), "weight": 0.3,
                         "stream": s, "targets": [hot]},
            "copy": (lambda: dst.copy_(src), 0.1),
        }, repeat=4, search_repeat=3, confirm_rounds=2, must_not_slow=["copy"])
        assert device.persisting_l2_limit == limit and _same(s.access_policy_window, own)
        s.access_policy_window = None
        with adv.plan:                                 # the one plan, installed
            assert device.persisting_l2_limit >= adv.set_aside
            _check_hist(torch, g.replay, acc, idx, vals)
        assert device.persisting_l2_limit == limit
    # the stream is closed now: the plan refuses it by name instead of handing a destroyed
    # handle to the driver
    with pytest.raises(ValueError, match="carrier: entry .*'hot_cold'.* is closed"):
        adv.plan.install()
    assert device.persisting_l2_limit == limit and not adv.plan.installed
    assert set(adv.workloads) == {"histogram", "hot_cold", "copy"}
    for w in adv.workloads.values():
        assert w.tax > 0 and np.isfinite(w.tax) and w.plan_ms > 0
        assert w.ci[0] <= w.speedup <= w.ci[1]
    assert adv.workloads["copy"].must_not_slow and adv.workloads["copy"].windows == []
    assert adv.evals > 0 and adv.levels and adv.ci[0] <= adv.speedup <= adv.ci[1]
    if adv.helps:
        assert adv.set_aside == adv.found_set_aside > 0 and not adv.workloads["copy"].slows
    else:
        assert adv.set_aside in (0, device.default_persisting_l2_limit)
    text = adv.table()
    assert "histogram" in text and ("persist:" in text or "don't persist" in text)
    again = l2p.Advice.from_json(adv.to_json())
    assert again.workloads["copy"].tax == adv.workloads["copy"].tax


def test_advise_dont_installs_the_better_baseline_alone(device):
    """A "don't" (here forced: no plan can gain 90 %) recommends the better process-wide
    baseline, limit 0 or the default, with every window off."""
    torch = need("torch")
    src = torch.rand(96 * MIB // 4, device="cuda")
    dst = torch.empty_like(src)
    b = torch.rand(64 * MIB // 4, device="cuda")
    adv = l2p.advise({"copy": lambda: dst.copy_(src), "scale": lambda: b.mul_(1.0000001)},
                     repeat=4, search_repeat=3, confirm_rounds=2, min_gain=0.9)
    assert not adv.helps and "don't persist" in adv.verdict()
    assert adv.plan.set_aside == adv.set_aside in (0, device.default_persisting_l2_limit)
    # limit 0 only where the confirmation tells it faster; else the default (changes nothing)
    assert adv.set_aside == (0 if adv.kept == "limit0" else device.default_persisting_l2_limit)
    assert adv.kept == "default" or adv.baseline == "limit0"
    assert all(not e["on"] for e in adv.plan.entries)
    assert all(w.windows == [] for w in adv.workloads.values())


def test_workload_set_times_the_workloads_interleaved(device, bufs):
    """evaluate_mix installs the configuration once and runs every workload in turn, one
    untimed round and then n timed rounds of one call each: samples come back
    workload-major, each workload's own (50 passes over 48 MiB take far longer than one
    pass over 1 MiB, whose time is mostly the launch: 7 us against 12 us for 20 passes
    over 4 MiB on the H200); the limit and windows are restored after."""
    hot, cold = bufs
    calls = {"short": 0, "long": 0}
    with l2p.Stream() as s:
        def short():
            calls["short"] += 1
            K.l2_read(hot[:hot.nbytes // 4], 1, stream=s)

        def long():
            calls["long"] += 1
            K.l2_read(cold, 50, stream=s)

        limit = device.persisting_l2_limit
        ws = l2p.WorkloadSet({"short": {"fn": short, "stream": s, "targets": [hot]},
                              "long": {"fn": long, "stream": s, "targets": [cold]}},
                             device=device)
        with ws:
            cfg = ws.off(device.persisting_l2_granule)
            cfg["windows"][0] = {"hit_ratio": 1.0, "hit_prop": 2, "miss_prop": 1}
            before = dict(calls)
            t = ws.evaluate_mix(cfg, 5)
            assert device.persisting_l2_limit >= device.persisting_l2_granule
            assert _same(s.access_policy_window, _win(hot))
        assert device.persisting_l2_limit == limit and _same(s.access_policy_window, None)
    assert calls["short"] - before["short"] == calls["long"] - before["long"] == 6
    assert len(t) == 10 and all(np.isfinite(t)) and min(t) > 0
    assert np.median(t[5:]) > 5 * np.median(t[:5]), t
