"""What a watched run found, for people: a few lines on the terminal and an HTML report.

Everything here draws the watcher's result document (``Watcher.summary()``); nothing is
computed that the C core decided (the verdict, its interval, the arms). The HTML page is
self-contained (inline SVG, no script), so it opens anywhere, from a CI artifact too.
"""
from __future__ import annotations

import html
import math
import statistics

from .._format import kernel_label
from .. import _core
from .costs import COVERS_TICKS
from .streams import PER_THREAD
from .summary import WALL_SPREAD_MAX, compared

#: The least gain that counts where a result document does not say (older documents).
MIN_GAIN = _core.live_defaults()["min_gain"]

_MIB = 1 << 20
#: The widest bar label (characters): kernel names are shortened to it by the core's rule.
BAR_LABEL_CHARS = 70


def _arm_text(a: dict) -> str:
    aside = a.get("set_aside")
    s = "the default set-aside" if aside is None else \
        "limit 0" if aside == 0 else f"set-aside {aside / _MIB:.2f} MiB"
    wins = a.get("windows", [])
    if wins:
        s += "; " + ", ".join(f"{w['hit_prop']} window {w['bytes'] / _MIB:.2f} MiB "
                              f"(hitRatio {w['hit_ratio']:.2f}) on {len(w.get('nodes', []))} "
                              f"node(s) of {w['graph']}" for w in wins)
    else:
        s += ", no window"
    return s


def _med(v):
    return statistics.median(v) if v else float("nan")


def switch_said(r: dict, capital: bool = False) -> str:
    """A switch's time, and apart from it its own work. A switch is timed from the block's end
    to the next arm installed: first the next arm's graphs readied where the core knows that
    arm (Search.ready_ahead), then a synchronization that waits for the GPU to finish the
    block's queued work (which the program's own next one would have waited for too), then
    its own work with the GPU idle. On a program that keeps its queue full the whole is mostly
    the wait (decode_big, H200 a0a4b97: 10.6 ms median, its own work 0.48 ms); where the queue
    is short the readying is paid with the GPU idle too (server_mix: 2.8 ms readied, 2 of 48
    while the GPU still ran the block), so the readying is said with its count."""
    sw = r.get("switch_ms") or []
    work = r.get("switch_work_ms") or []
    said = (f"{'S' if capital else 's'}witching {_med(sw):.2f} ms median, "
            f"{max(sw) if sw else float('nan'):.2f} ms max")
    if not work:
        return said
    w = r.get("watching") or {}
    said += (f" (its own work after the synchronization {_med(work):.2f} ms median, "
             f"{max(work):.2f} ms max; before it, the wait for the block's queued work")
    if w.get("ahead"):
        said += (f" and, at {w['ahead']} switches, the next arm's graphs readied "
                 f"({w.get('ahead_ms_median') or 0:.2f} ms median, "
                 f"{w.get('ahead_hidden', 0)} of them while the GPU still ran the block)")
    return said + ")"


def undecided_reason(r: dict) -> tuple[str, str]:
    """Why a search did not decide, and the kind of ending: ("stopped", the watcher's words),
    ("ended", the program ended first), ("capped", the confirmation's rounds ran out with the
    best plan's interval reaching both above and below the least gain) or ("budget", the --budget ran
    out). One reading for the summary's verdict and the CLI's "undecided" line."""
    res = r.get("result") or {}
    if res.get("capped"):
        return "capped", (f"the confirmation reached its cap of {res.get('confirm_rounds', 0)} "
                          "rounds")
    notes = r.get("notes") or []
    # not the budget: the search stopped (Phases.stop_search: the records stopped coming, or
    # graphs came after a search on the clock); older documents only in their notes
    stopped = r.get("stopped") or next(
        (n for n in notes if n.startswith("search stopped: ")), None)
    if stopped:
        return "stopped", stopped
    if any("ended before the search decided" in n for n in notes):
        return "ended", f"the program ended {r.get('search_s', 0):.1f} s into the search"
    return "budget", "the --budget ran out"


def verdict_line(r: dict) -> str:
    res = r["result"]
    mode = r["mode"]
    base = "limit 0" if res["baseline"] == 0 else "the device default"
    if not res.get("baseline_decided"):
        base = "the device default (limit 0 was within noise of it)"
    if mode == "verify":
        if not compared(res):   # no plan compared, or the search ended first
            what = ("only the two baselines could be compared" if res["decided"] else
                    "no verdict yet")
            return f"plan: {what}; the better baseline {base}"
        nums = (f"{res['speedup']:.4f}x the better baseline, {base}; 95 % interval "
                f"{res['ci_low']:.4f}-{res['ci_high']:.4f}")
        # the words follow verify's exit status (the core's one rule), not the rule's `helps`
        # alone: an interval reaching both sides of the least gain is neither
        dont = r.get("verify_of") == "baseline"   # a "don't" plan: advise's other plans searched
        status = _core.live_verify_status(dont, bool(res["decided"]), bool(res["helps"]),
                                          res["ci_low"], res["ci_high"],
                                          min_gain=r.get("min_gain", MIN_GAIN))
        said = {0: ("none helps", "it helps"), 1: ("it helps now", "it does not help")}.get(
            status, ("inconclusive", "inconclusive"))[0 if dont else 1]
        if dont:
            return f"\"don't\" plan: the best other plan tried gives {nums}: {said}"
        return f"plan: {nums}: {said}"
    if res["helps"] and res["winner"] >= 0:
        arm = r["arms"][res["winner"]]
        return (f"helps: {res['speedup']:.4f}x the better baseline, {base}; 95 % interval "
                f"{res['ci_low']:.4f}-{res['ci_high']:.4f}: {_arm_text(arm)}")
    if res["winner"] < 0 and len(r.get("arms", [])) <= 2:
        why = ("no candidate: no buffer a window can reach (none in a CUDA graph the "
               "program replays, none read by eager launches on a stream known to live), so "
               "only limit 0 and the default were compared")
    elif not res["decided"]:
        kind, said = undecided_reason(r)
        why = "undecided: " + ("the search stopped" if kind == "stopped" else said)
    else:
        why = "no plan tried beat the better baseline by the least gain that counts"
    best = ""
    if res["winner"] >= 0 and res.get("speedup"):
        best = (f"; the best plan tried gave {res['speedup']:.4f}x "
                f"({res['ci_low']:.4f}-{res['ci_high']:.4f})")
    return f"don't: {why}{best}; keep {base}"


#: Below this share of the wall time busy, a gain on GPU time is said to be a bound on the wall's.
BUSY_SAID = 0.9


def busy_lines(r: dict) -> list[str]:
    """Where the verdict helps and the GPU was busy under BUSY_SAID of the program's wall
    time: what the gain on GPU time can take off the wall at most."""
    if r.get("verify_of") == "baseline":
        return []                  # there "helps" means the "don't" plan no longer holds
    b = r.get("gpu_busy") or {}
    gain = b.get("wall_gain_at_most")
    if gain is None or b.get("share") is None or b["share"] >= BUSY_SAID:
        return []
    return [f"  wall: the GPU was busy {100 * b['share']:.0f} % of the program's wall time: "
            f"the gain on GPU time shortens the wall by {100 * (1 - 1 / gain):.1f} % at most, "
            f"and by nothing where the host is what the program waits on"]


#: The summary text's per-launch-shape table shows this many keys (the HTML all the summary has).
PER_KEY_TEXT = 5


def _shape(d: dict) -> str:
    return f"<<<{'x'.join(map(str, d['grid']))}, {'x'.join(map(str, d['block']))}>>>"


def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def _per_key_head(r: dict) -> str | None:
    """What the per_key section compares, in words; None where the summary has none."""
    pk = r.get("per_key")
    if not pk or not pk.get("keys"):
        return None
    base = "limit 0" if pk["baseline"] == 0 else "the default"
    arms = r.get("arms") or []
    what = (_arm_text(arms[pk["arm"]]) if 0 <= pk["arm"] < len(arms) else
            f"plan tried {pk['arm']}")
    return (f"per launch shape: {what}, against {base} (GPU us per launch; ratio above 1: "
            f"faster under that plan; share: of the probe's GPU time)")


def per_key_lines(r: dict, n: int = PER_KEY_TEXT) -> list[str]:
    """The heaviest launch keys' ratios as a short table, for the terminal."""
    head = _per_key_head(r)
    if head is None:
        return []
    lines = [f"  {head}:",
             f"    {'share':>6} {'ratio':>7} {'baseline':>10} {'plan':>10}  kernel"]
    for d in r["per_key"]["keys"][:n]:
        lines.append(f"    {100 * d['share']:5.1f}% {_num(d['ratio'], '7.4f'):>7} "
                     f"{_num(d['baseline_us'], '10.2f'):>10} {_num(d['arm_us'], '10.2f'):>10}  "
                     f"{d['kernel']} {_shape(d)}{_unpriced(d)}")
    return lines


def _correction_said(k) -> str:
    """The pace's model scaled by what its newest cycles measured (Costs.correction), where it
    was: the rests were that much longer than the model alone would have made them."""
    if not k or k <= 1.005:
        return ""
    return (f"; the rests sized for {k:.2f}x the cost the pace's model gave (what its newest "
            f"cycles measured: a median switch misses the slow ones)")


def _fast_said(w: dict) -> str:
    """The calls that only counted (a unit, a sync), counted in the hook
    (process/fastcount.py)."""
    if not w.get("fast_calls"):
        return " in the watcher"
    return (f" ({w['fast_calls']} of its {w.get('hook_calls') or '?'} calls were replays and "
            f"syncs that only counted, in the hook at an estimated "
            f"{w.get('fast_us_per_call') or 0:.2f} us each; the others in the watcher)")


def _unpriced(d: dict) -> str:
    """A collective's row: timed, but left out of the blocks' time (it waits on peers)."""
    return " (not priced: waits on other ranks)" if d.get("priced") is False else ""


def _per_key_html(r: dict) -> str:
    head = _per_key_head(r)
    if head is None:
        return ""
    rows = "".join(
        f"<tr><td><code>{html.escape(d['kernel'])}</code></td><td><code>"
        f"{html.escape(_shape(d) + _unpriced(d))}</code></td><td>{100 * d['share']:.1f} %</td>"
        f"<td>{_num(d['baseline_us'], '.2f')} ({d['baseline_launches']})</td>"
        f"<td>{_num(d['arm_us'], '.2f')} ({d['arm_launches']})</td>"
        f"<td>{_num(d['ratio'], '.4f')}</td></tr>" for d in r["per_key"]["keys"])
    return (f"<h2>Per launch shape</h2><p>{html.escape(head)}; launches measured in "
            f"parentheses.</p><table><tr><th>kernel</th><th>grid, block</th><th>share</th>"
            f"<th>baseline us</th><th>arm us</th><th>ratio</th></tr>{rows}</table>\n")


def watch_cost_lines(wc: dict | None) -> list[str]:
    """The summary's words on what watching cost, from its ``watch_cost`` (None: nothing)."""
    if not wc:
        return []
    if wc.get("comparable", True):
        return [f"  watching: wall {wc['recorded_wall_ms_per_unit']:.4f} ms/unit while "
                f"recorded ({wc['recorded_blocks']} blocks of the final arm), "
                f"{wc['unrecorded_wall_ms_per_unit']:.4f} after the decision "
                f"({wc['unrecorded_units']} units): {wc['ratio']:.3f}x"]
    return [f"  watching: the final arm's wall per unit spread {100 * wc['spread']:.0f} % from "
            f"block to block (the program's mix of work moves it), so the walls before and "
            f"after the decision ({wc['ratio']:.3f}x) say nothing of what watching costs; time "
            f"the same fixed work in fresh processes with and without advise"]


def _arm_name(i: int) -> str:
    return "limit 0" if i == 0 else "default" if i == 1 else f"arm {i}"


def landed_lines(wl: dict | None, most: int = 4) -> list[str]:
    """The summary's words on whether each arm's windows were on its kernels (its
    ``windows_landed``; nothing where it has none)."""
    if not wl:
        return []
    if not wl.get("checked"):
        return [f"  windows: not checked on the kernels: {wl['why']}"] if wl.get("why") else []
    arms = wl["arms"]
    off = [a for a in arms if not a["as_meant"]]
    where = ("from its graphs' kernel nodes, read back once CUPTI was let go"
             if wl.get("from") == "nodes" else
             "from CUDA's launch attributes in the kernels' records")
    lines = [f"  windows landed: {len(arms) - len(off)} of {len(arms)} arms as meant (each "
             f"arm's first block, {where})"]
    for a in off[:most]:
        lines.append(f"    {_arm_name(a['arm'])}: {a['meant']} of {a['kernels']} kernels under "
                     f"its windows, {a['foreign']} under windows it did not set, "
                     f"{a['missing']} of its {a['windows']} windows on no kernel")
    if len(off) > most:
        lines.append(f"    and {len(off) - most} more arms (the report lists them)")
    return lines


def _landed_html(r: dict) -> str:
    wl = r.get("windows_landed") or {}
    if not wl.get("checked"):
        why = wl.get("why")
        return f"<h2>Windows on the kernels</h2><p>Not checked: {html.escape(why)}</p>" \
            if why else ""
    rows = "".join(
        f"<tr><td>{_arm_name(a['arm'])}</td><td>{a['windows']}</td><td>{a['kernels']}</td>"
        f"<td>{a['meant']}</td><td>{a['foreign']}</td><td>{a['missing']}</td>"
        f"<td>{'yes' if a['as_meant'] else '<b>no</b>'}</td></tr>" for a in wl["arms"])
    where = ("From the graphs' kernel nodes as each arm installed them (read back: CUPTI was "
             "let go after the probe; a node counts once)" if wl.get("from") == "nodes" else
             "From CUDA's launch attributes in the records of each arm's first block")
    return ("<h2>Windows on the kernels</h2><p>" + where + ": the kernels under the arm's "
            "windows, under windows it did not set, and its windows that no kernel carried."
            "</p><table><tr><th>arm</th>"
            "<th>windows set</th><th>kernels</th><th>under its windows</th><th>under others"
            "</th><th>windows on no kernel</th><th>as meant</th></tr>" + rows + "</table>\n")


def _gpu_per_unit(d: dict) -> list:
    """An arm's GPU time per unit, block by block: at the program's mix (the search's samples)
    where the document has them, else each block's own GPU time over its units."""
    return d.get("samples") or d.get("gpu_ms_per_unit") or []


def _arm_line(label: str, d: dict) -> str:
    """A baseline's figures: GPU time per unit at the program's mix (the search's samples,
    l2p_live_mix), and the wall per unit where it holds still from block to block (a request
    mix moves it: on the H200 zoo's server the two baselines read 6.31 and 3.09 ms/unit for
    the same work)."""
    text = f"  {label:>8}: GPU {_med(_gpu_per_unit(d)):.4f} ms/unit"
    if d.get("samples"):
        text += " at the program's mix"
    if d.get("wall_spread", 0.0) <= WALL_SPREAD_MAX:
        text += f", wall {_med(d['wall_ms_per_unit']):.4f} ms/unit"
    else:
        text += (f"; wall per unit not shown: it moved {100 * d['wall_spread']:.0f} % from "
                 f"block to block with the program's mix of work")
    return text + f" ({len(d['gpu_ms_per_unit'])} blocks)"


def summary_text(r: dict) -> str:
    res = r["result"]
    unit = r.get("unit") or ["?"]
    unit_text = {"replay": f"replay of graph {unit[-1]}", "sync": "host synchronization",
                 "mark": "l2persist.mark()"}.get(unit[0], unit[0])
    lines = [f"l2persist {r['mode']}: {r['device'].get('name', '?')}, unit of work: one "
             f"{unit_text}, {r['units_per_block']} per block",
             "  " + verdict_line(r)]
    if r.get("placebo"):
        how = ("no window set anywhere (L2PERSIST_PLACEBO_WINDOWS=0: the records, rests and "
               "switches alone)" if r.get("placebo_windows") is False
               else "normal hit and miss properties")
        lines.insert(1, f"  placebo: every arm ran as no plan ({how}, the default set-aside); "
                        "the verdict below compares arms that differ in nothing, and no plan "
                        "is written")
    lines += busy_lines(r)
    per = r.get("per_arm", {})
    for key, label in (("0", "limit 0"), ("1", "default")):
        d = per.get(key) or per.get(int(key))
        if d:
            lines.append(_arm_line(label, d))
    lines += per_key_lines(r)
    lines.append(f"  timed blocks: {res['search_blocks']} to compare plans + "
                 f"{res['confirm_blocks']} to confirm "
                 f"in {r.get('search_s', 0):.1f} s; {switch_said(r)}")
    w = r.get("watching") or {}
    if w.get("added_share") is not None:
        lines.append(f"  pace: {100 * w['recorded_share']:.0f} % of the search's units "
                     f"recorded (rests of {w['rest_units']} units before each block, to add "
                     f"at most "
                     f"{100 * w['max_overhead']:g} %); "
                     + (f"recording cost {100 * w['record_cost']:+.1f} % per unit; watching "
                        f"added {100 * w['added_share']:.2f} % to the search's wall time"
                        if w.get("covers") != COVERS_TICKS else
                        f"the switches and the blocks' time beyond their ticks added "
                        f"{100 * w['added_share']:.2f} % to the search's "
                        f"wall time; what the records cost the program's own pace is not "
                        f"seen here (the unit is the clock's tick, whose wall is the clock's: "
                        f"advise --placebo, timed against a plain run of the same work, "
                        f"measures it)")
                     + _correction_said(w.get("pace_correction")))
        if w.get("hooks_share") is not None:
            lines.append(f"  hooks: {w['hook_us_per_call'] or 0:.2f} us per call of the "
                         f"program{_fast_said(w)}, {100 * w['hooks_share']:.2f} "
                         f"% of the search's wall time (rests and blocks alike, the counting "
                         f"thread's calls); observing as the watcher sees it "
                         f"{100 * w['observing_share']:.2f} % (not CUPTI attached, the hooks' "
                         f"outer frames or its threads: advise --placebo, timed against a "
                         f"plain run of the same work, measures those)"
                         + ("; the hooks came off once decided" if r.get("calls_unhooked")
                            else ""))
        if w.get("exploring_share") is not None:
            lines.append(f"  exploring: the arms tried cost the program "
                         f"{100 * w['exploring_share']:+.2f} % of the search's wall time beyond "
                         f"the baselines' pace (their unrecorded rests' wall per unit"
                         + (f"; the costliest arm's {w['exploring_worst']:.3f}x"
                            if w.get("exploring_worst") else "")
                         + "): what trying plans costs, apart from observing")
        if w.get("rests_unhooked"):
            lines.append(f"  hooks: {w['rests_unhooked']} of {w['rests']} rests ran with the "
                         f"call hooks off but for their last block's worth (counted, timed)")
        if w.get("rests_capped") and w["rests_capped"] * 2 >= (w.get("rests") or 0):
            lines.append(f"  pace: {w['rests_capped']} of {w['rests']} rests at the cap "
                         f"({w['max_rest_ratio']:g} blocks' worth, what the --budget's time "
                         f"left allowed): the {100 * w['max_overhead']:g} % bound is out of "
                         f"reach on this program within the budget (the switches and the "
                         f"recorded units cost more than the rests can hide, beside the hooks "
                         f"on every call); a longer --budget lets the rests hide more")
    elif w.get("comparable") is False:
        lines.append(f"  pace: {100 * (w.get('recorded_share') or 0):.0f} % of the search's "
                     f"units recorded; what watching added is not measured here: the "
                     f"program's unrecorded wall per unit moved "
                     f"{100 * w['rest_spread']:.0f} % from rest to rest (its mix of work), "
                     f"more than the {100 * WALL_SPREAD_MAX:.0f} % a comparison allows; the "
                     f"hooks took {100 * (w.get('hooks_share') or 0):.2f} % of the search's "
                     f"wall time")
    if w.get("switch_work_ms_median") is not None and (w.get("added_share") is not None
                                                       or w.get("comparable") is False):
        # the whole and the readying ahead are said once, on the blocks line (switch_said)
        lines.append(f"  a switch's own work of {w['switch_work_ms_median']:.2f} ms median: "
                     f"install {w.get('install_ms_median') or 0:.2f} ms (of which windows "
                     f"{w.get('windows_ms_median') or 0:.2f} ms), the search's bookkeeping "
                     f"the remainder")
    lines += watch_cost_lines(r.get("watch_cost"))
    lines += landed_lines(r.get("windows_landed"))
    g = r.get("graphs", [])
    e = r.get("eager") or {}
    lines.append(f"  graphs: {len(g)} captured, eager launch groups: "
                 f"{len(e.get('groups', []))}, buffers a window can reach: "
                 f"{len(r.get('targets', []))}, plans tried: "
                 f"{max(len(r.get('arms', [])) - 2, 0)} beside the two baselines")
    if r.get("ranks"):
        lines.append("  " + ranks_line(r))
    for n in r.get("notes", []):
        lines.append(f"  note: {n}")
    # the other ranks' own notes (the document is the lowest rank's): a rank that ran without
    # the windows is said where the verdict is read, not only in the JSON
    for x in r.get("ranks") or []:
        for n in x.get("notes") or []:
            if x.get("rank") != r.get("rank", 0) and n not in (r.get("notes") or []):
                lines.append(f"  note (rank {x.get('rank')}): {n}")
    return "\n".join(lines)


def ranks_line(r: dict) -> str:
    """Under torchrun: how many ranks were watched, whether they switched the same arms in the
    same order, and the GPU models (one plan each)."""
    ranks = r["ranks"]
    models = sorted({str(x["device"]) for x in ranks})
    held = "the same arms in the same order" if r.get("same_arms") else \
        "NOT the same arms in the same order (see each rank's notes)"
    how = "in lockstep" if all(x.get("lockstep") for x in ranks) else \
        "NOT in lockstep (each rank on its own; see the notes)"
    gone = (f"; no result from rank(s) {r['missing_ranks']}" if r.get("missing_ranks")
            else "")
    return (f"ranks: {len(ranks)} watched {how}, {held}{gone}; GPU model(s): "
            f"{', '.join(models)} (one plan per model)"
            + own_said(ranks, all(x.get("lockstep") for x in ranks)))


def own_said(ranks: list, lockstep: bool) -> str:
    """Each rank's own samples judged alone (summary's `own`), and whether the ranks disagree:
    one's own interval says the plan helps where another's says it does not (in lockstep the
    verdict is their mean's; alone, each rank's own)."""
    own = [(x["rank"], x["own"]) for x in ranks if x.get("own")]
    if not own:
        return ""
    said = ", ".join(f"rank {k} {o['speedup']:.4f}x ({o['ci_low']:.4f}-{o['ci_high']:.4f})"
                     for k, o in own)
    split = len({bool(o["helps"]) for _k, o in own}) > 1
    return (f"; the plan on each rank's own samples: {said}"
            + (": the ranks disagree" + (", and the verdict is their mean's" if lockstep
                                         else "") if split else ""))


def _bars_svg(rows, title, unit, ref=None) -> str:
    """Horizontal bars with an interval (lo, hi) per row: [(label, value, lo, hi)]; ``ref``: a
    value marked by a dashed line across the rows (1 for ratios)."""
    rows = [x for x in rows if x[1] == x[1]]
    if not rows:
        return ""
    # The labels are in a monospace font (at 11 px about 6.6 px a character), so the label
    # column is as wide as its longest label, at most 70 characters; a longer label is cut with
    # an ellipsis (the whole of it in a tooltip): no label runs into the bars.
    char, most = 6.7, BAR_LABEL_CHARS
    n = min(most, max(len(x[0]) for x in rows))
    w, h = 960, 22
    left = max(90, int(12 + char * n))
    top = max(max(x[3] for x in rows), max(x[1] for x in rows), ref or 0) * 1.1 or 1
    x = lambda t: left + (w - left - 80) * t / top  # noqa: E731
    bottom = 24 + h * len(rows)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{bottom + 18}" '
           f'role="img" aria-label="{html.escape(title)}">',
           f'<text x="4" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for i, (label, v, lo, hi) in enumerate(rows):
        y = 24 + i * h
        shown = label if len(label) <= n else label[:n - 1] + "\u2026"
        out.append(f'<text x="4" y="{y + 14}" font-size="11" font-family="monospace">'
                   f'<title>{html.escape(label)}</title>{html.escape(shown)}</text>')
        out.append(f'<rect x="{left}" y="{y + 3}" width="{x(v) - left:.1f}" height="{h - 8}" '
                   f'fill="#4c78a8"/>')
        out.append(f'<line x1="{x(lo):.1f}" x2="{x(hi):.1f}" y1="{y + h / 2}" y2="{y + h / 2}" '
                   f'stroke="black" stroke-width="2"/>')
        # the value right of its bar, its interval and the reference line, crossing none
        out.append(f'<text x="{x(max(v, hi, ref or 0)) + 4:.1f}" y="{y + 14}" font-size="11">'
                   f'{v:.4g} {unit}</text>')
    if ref is not None:
        out.append(f'<line x1="{x(ref):.1f}" x2="{x(ref):.1f}" y1="20" y2="{bottom + 2}" '
                   f'stroke="#666" stroke-width="1" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x(ref):.1f}" y="{bottom + 14}" font-size="11" '
                   f'text-anchor="middle">{ref:g}</text>')
    out.append("</svg>")
    return "".join(out)


def _arm_html(a: dict) -> str:
    """An arm's text for the page: its graphs' names in code, never broken at their hyphen."""
    text = html.escape(_arm_text(a))
    for g in sorted({html.escape(str(w["graph"])) for w in a.get("windows", [])}, key=len,
                    reverse=True):
        text = text.replace(f" of {g}", f" of <code>{g}</code>")
    return text


def _spread(v):
    if len(v) < 2:
        return (v[0], v[0]) if v else (float("nan"), float("nan"))
    s = sorted(v)
    q = lambda p: s[min(len(s) - 1, max(0, int(round(p * (len(s) - 1)))))]  # noqa: E731
    return q(0.25), q(0.75)


TAX_TITLE = ("Per kernel, measured (CUDA activity records): the chosen arm / the better "
             "baseline (above 1: it costs)")


def write_report(r: dict, path: str) -> None:
    res = r["result"]
    per = {int(k): v for k, v in r.get("per_arm", {}).items()}
    arms = r.get("arms", [])
    rows = []
    for i, d in sorted(per.items()):
        v = _gpu_per_unit(d)
        lo, hi = _spread(v)
        label = ("limit 0" if i == 0 else "default" if i == 1 else f"arm {i}")
        rows.append((label, _med(v), lo, hi))
    # the search's own figure where the document has it (older ones: each block's own)
    bars_title = ("GPU time per unit of work at the program's mix, by arm"
                  if any(d.get("samples") for d in per.values())
                  else "GPU time per unit of work, by arm")
    show = [0, 1] + ([res["winner"]] if res.get("winner", -1) >= 2 else [])
    kernels = {}
    for i in show:
        for name, ms in per.get(i, {}).get("kernels", {}).items():
            kernels.setdefault(name, {})[i] = ms
    top = sorted(kernels, key=lambda k: -max(kernels[k].values()))[:12]
    # keyed by the driver's (mangled) names; shown demangled, short, the whole in a tooltip
    krows = "".join(
        '<tr><td><code title="{}">{}</code></td>{}</tr>'.format(
            html.escape(_core.kernel_name(k, short=False)), html.escape(kernel_label(k, 90)),
            "".join(f"<td>{kernels[k].get(i, 0):.4f}</td>" for i in show))
        for k in top)
    tax = []
    base = res.get("baseline", 1)
    for k in top:
        b = kernels[k].get(base)
        w = kernels[k].get(show[-1])
        if b and w:
            tax.append((kernel_label(k, BAR_LABEL_CHARS), w / b, w / b, w / b))
    arm_rows = "".join(
        f"<tr><td>{i}</td><td>{_arm_html(a)}</td>"
        f"<td>{_med(_gpu_per_unit(per.get(i, {}))):.4f}</td>"
        f"<td>{(r['result']['stage_dropped'][i] or '') if i < len(res['stage_dropped']) else ''}"
        f"</td></tr>" for i, a in enumerate(arms))
    graphs = "".join(f"<tr><td><code>{g['signature']}</code></td><td>{g['kernels']}</td>"
                     f"<td>{g['replays']}</td></tr>" for g in r.get("graphs", []))
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.get("notes", [])) or "<li>none</li>"
    gated = r.get("calls_unhooked") or (r.get("watching") or {}).get("rests_unhooked")
    replays_head = "replays seen (with the call hooks on)" if gated else "replays"
    doc = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>l2persist {r['mode']} report</title>
<style>body{{font-family:sans-serif;max-width:980px;margin:2em auto}}td,th{{padding:2px 8px;
text-align:left}}table{{border-collapse:collapse}}tr:nth-child(even){{background:#f3f3f3}}
svg{{display:block;margin:1.2em 0}}h2{{margin-top:1.4em}}code{{white-space:nowrap}}</style>
</head><body>
<h1>l2persist {r['mode']}: {html.escape(str(r['device'].get('name', '?')))}</h1>
<p id="verdict"><b>{html.escape(verdict_line(r))}</b></p>
{''.join(f'<p id="wall">{html.escape(x.strip())}</p>' for x in busy_lines(r))}
<p>Unit of work: {html.escape(' '.join(map(str, r.get('unit') or [])))}; {r['units_per_block']}
units per block; {res['search_blocks']} search and {res['confirm_blocks']} confirmation blocks in
{r.get('search_s', 0):.1f} s. {html.escape(switch_said(r, capital=True))}. GPU time is the sum of the program's kernel
durations from CUDA's activity records; the bars show each arm's median over its blocks with
the interquartile range.</p>
{_bars_svg(rows, bars_title, 'ms')}
<h2>Per kernel (GPU ms per unit)</h2>
<table><tr><th>kernel</th>{''.join(f'<th>{"limit 0" if i == 0 else "default" if i == 1 else f"arm {i}"}</th>' for i in show)}</tr>{krows}</table>
{_bars_svg(tax, TAX_TITLE, 'x', ref=1)}
{_per_key_html(r)}<h2>Plans tried</h2><p>The search's arms: 0 is limit 0, 1 the device's
default, the others the plans it tried; it drops the slower ones round by round.</p>
<table><tr><th>#</th><th>plan</th><th>GPU ms/unit (median)</th>
<th>dropped after round</th></tr>{arm_rows}</table>
{_landed_html(r)}<h2>Graphs seen</h2><table><tr><th>signature</th><th>kernels</th><th>{replays_head}</th></tr>{graphs}
</table>
<h2>Not windowed, and why</h2><ul><li>Eager kernels are windowed through their streams only
where the stream is known to live (the legacy default stream or PyTorch's pool); those on
streams the program made itself or on a per-thread default stream run under each arm's
set-aside with no window{_left_alone(r)}.</li>
<li>Kernels neither in a captured graph nor logged on such a stream: {_ungraphed(r)}.</li>
<li>Buffers under 256 KiB are not targets.</li></ul>
{_ranks_html(r)}<h2>Notes</h2><ul>{notes}</ul>
</body></html>
"""
    with open(path, "w") as f:
        f.write(doc)


def _left_alone(r: dict) -> str:
    left = (r.get("eager") or {}).get("streams_left_alone") or []
    said = [f"<code>{h:#x}</code>" + (" (per-thread default)" if h == PER_THREAD else "")
            for h in left]
    return (" (here: " + ", ".join(said) + ")") if left else " (here: none)"


def _ungraphed(r: dict) -> str:
    u = r.get("ungraphed") or {}
    if u.get("share") is None:
        return "not known (no kernel records)"
    return f"{100 * u['share']:.1f} % of the warm-up's GPU time" + (
        " (" + ", ".join(f"<code>{html.escape(kernel_label(k))}</code>" for k in u["heaviest"])
        + ")"
        if u.get("heaviest") else "")


def _ranks_html(r: dict) -> str:
    if not r.get("ranks"):
        return ""
    rows = "".join(
        f"<tr><td>{x['rank']}</td><td>{html.escape(str(x['device']))} ({x['index']})</td>"
        f"<td>{html.escape(str(x['state']))}</td><td>{x['final_arm']}</td>"
        f"<td>{x['blocks']}</td><td>{html.escape('; '.join(x['notes']) or '-')}</td></tr>"
        for x in r["ranks"])
    return (f"<h2>Ranks</h2><p>{html.escape(ranks_line(r))}</p><table><tr><th>rank</th>"
            f"<th>GPU</th><th>state</th><th>kept arm</th><th>blocks</th><th>notes</th></tr>"
            f"{rows}</table>")


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)
