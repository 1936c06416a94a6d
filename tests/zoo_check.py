"""The check each zoo program gets on a GPU (tests/test_zoo_graphs_gpu.py and
tests/test_zoo_libs_gpu.py: two files, so that each half fits one part of tools/gpu-check).

The zoo of programs nobody wrote around l2persist (issue 50 item 7), on a GPU: each of the
ten shapes (``live.ZOO_SHAPES``) run as the live study runs it, a subprocess started with
``live.run_program``.

Per program: two plain runs of the same length (the calibration length: a few seconds) must
write the same digest, and the digest must change with the length (it hashes what was
computed); then one plain run long enough for a short search (about ``ADVISE_LOOP_S`` of the
program's own loop, from the first run's throughput) and one ``python -m l2persist advise
--budget 10 -- python prog.py`` run of the same length must write the same digest, and advise
must exit 0 (a plan came out). Where L2P_ZOO_OUT names a folder (tools/gpu-check sets it), each
program's runs, advise's result document, its plan and its last words are written there as
NAME.json before the checks: what advise decided, how fast and at what cost, kept with the
suite's logs. A program whose library is missing, or (ddp) with fewer than
two GPUs, is skipped with the reason. Each program costs about twice ADVISE_LOOP_S plus its
start-ups (torch.compile's compilation, JAX's and transformers' imports)."""
import json
import os

import pytest

from l2persist.studies import live

# a short search, back to back (no rests between blocks): a verdict or the budget's end; a
# warm-up of 1 s, so that the probe's whole length (half of it, 0.5 s) is longer than its least
# (PROBE_MIN_S) and a fast unit ends it sooner (Probe.over), as at advise's defaults
WARMUP_S = 1.0
FAST = ["--warmup", str(WARMUP_S), "--block-ms", "20", "--budget", "10", "--max-overhead", "0"]
ADVISE_LOOP_S = 20.0      # the program's loop under advise: the warm-up, the budget and room


def _skip_unless_runnable(name):
    why = live.missing_for(name, 0)
    if why is not None:
        pytest.skip(why)


def _run(name, iters, tmp_path, tag, env, cli=None, timeout=900):
    return live.run_program(name, iters, str(tmp_path), tag, env, timeout, cli)


def check_program(name, tmp_path, flags=()):
    """The check; ``flags``: more of advise's options (``--replay-events``). Returns advise's
    result document."""
    _skip_unless_runnable(name)
    ranks = live.ranks_of(name)
    env = live._env(0, ranks)
    short = live.CALIBRATE_ITERS[name]
    a = _run(name, short, tmp_path, "plain_a", env)
    assert a["rc"] == 0, a["stderr"]
    assert a["digest"] is not None, f"{name} wrote no digest: {a['stderr']}"
    assert a["loop_s"], f"{name} printed no loop line: {a['stderr']}"
    b = _run(name, short, tmp_path, "plain_b", env)
    assert b["rc"] == 0, b["stderr"]
    assert b["digest"] == a["digest"], f"{name}: two plain runs of {short} iterations differ"
    if ranks > 1:   # each rank wrote its own digest; the collective made their checks agree
        assert sorted(a["digest"]) == [f"rank{r}" for r in range(ranks)]
        assert a["digest"]["rank0"]["checks"] == a["digest"]["rank1"]["checks"]
    iters = max(short + 1, int(live.rate_of(a) * ADVISE_LOOP_S))
    ref = _run(name, iters, tmp_path, "plain_long", env)
    assert ref["rc"] == 0, ref["stderr"]
    assert ref["digest"] != a["digest"], f"{name}: the digest does not depend on the work"
    plan = os.path.join(str(tmp_path), "plan.json")
    adv = _run(name, iters, tmp_path, "advise", env,
               ["advise", *live._device_opts(ranks), *FAST, *flags, "--out", plan])
    _keep(name, {"plain_a": a, "plain_b": b, "plain_long": ref, "advise": adv}, plan)
    assert adv["digest"] == ref["digest"], \
        f"{name}: the program's results changed under advise: {adv['stderr']}"
    assert adv["rc"] == 0, f"{name}: advise exited {adv['rc']}: {adv['stderr']}"
    assert os.path.exists(plan), adv["stderr"]
    # once the watcher let CUPTI go (decided and timed), the program's next CUDA call's exit
    # detached it: by the program's exit it has made many
    c = (adv["result"] or {}).get("cupti") or {}
    if c.get("asked") and c.get("state") not in ("held", "withdrawn"):
        assert c.get("now") == "released", f"{name}: CUPTI asked to go, still attached: {c}"
    _check_probe(name, adv["result"] or {})
    return adv["result"] or {}


def _check_probe(name, result):
    """The probe lasted PROBE_MIN_S at least, its whole length at most, and ended sooner where
    the program's unit (a mark, a graph's replay) came fast enough to reach PROBE_UNITS well
    within PROBE_MIN_S (Probe.over)."""
    from l2persist.process.probe import PROBE_MIN_S, PROBE_UNITS
    t = result.get("timing") or {}
    probe_s, units, unit = t.get("probe_s"), t.get("probe_units"), result.get("unit") or ()
    if probe_s is None:
        return                     # no probe ended (a program that made no watched call)
    whole = max(PROBE_MIN_S, WARMUP_S / 2)
    assert PROBE_MIN_S <= probe_s, f"{name}: the probe ended after {probe_s} s"
    fast = (tuple(unit)[:1] in (("replay",), ("mark",))
            and units / probe_s >= 1.5 * PROBE_UNITS / PROBE_MIN_S)
    if fast:
        assert probe_s < whole - 0.05, \
            f"{name}: {units} units in a {probe_s:.3f} s probe, which did not end at the 256th"


def _keep(name, runs, plan):
    """The runs of one program, as data (L2P_ZOO_OUT; nothing where it is unset)."""
    where = os.environ.get("L2P_ZOO_OUT")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    doc = {"program": name, "runs": runs}
    try:
        with open(plan) as f:
            doc["plan"] = json.load(f)
    except (OSError, ValueError) as e:
        doc["plan"] = f"not read: {e}"
    with open(os.path.join(where, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
