"""Whether each arm's windows landed on the kernels it meant (issue 50 item 2): CUPTI's launch
attributes put the access policy window a kernel ran under in its record
(once CUPTI is let go after the probe, the graphs' kernel nodes are read back instead:
:meth:`Landing.read_back`)
(``_core.activity_attributes``), collected in each arm's first :data:`CHECK_BLOCKS` blocks
only (what collecting them costs a launch was not measured apart from the records' own cost,
so the search's other blocks go without). The core judges an arm's blocks
(``_core.live_landed``): kernels under a window the arm meant, under one it did not (another
arm's left behind, or the program's own), and meant windows no kernel carried.

The attributes say what each launch was given, not what the hardware applied: a window put on
PyTorch's executable by ``cudaGraphExecUpdate`` shows in every kernel's attributes and leaves
the GPU's time unchanged (H200, 88474ae, tools/investigations/exec-update). The switcher sets
windows by a new instantiation, which does take effect, so the check holds for its windows.

One :class:`Landing` per :class:`~l2persist.process.live.Watcher`; its counts are the owner's
(``landed_seen``, ``landed_blocks``, ``landed_table``, ``landed_why``).
"""
from __future__ import annotations

from .. import _core
from .part import Part

#: Blocks per arm recorded with launch attributes: the first of each arm (every arm has one in
#: the search's first round; verify's plan and baselines in the confirmation's first).
CHECK_BLOCKS = 1


class Landing(Part):
    """Launch attributes on for each arm's first blocks; what its windows were on."""

    def before_block(self, arm: int) -> bool:
        """Called as a block begins under ``arm`` (no kernel of it launched yet): attributes
        on for an arm not yet checked, off otherwise; True when this block collects them."""
        w = self.w
        if getattr(w, "landed_read_back", False):
            self.read_back(arm)
            return False                # no launch attribute: the block is the arm's own
        want = w.landed_why is None and w.landed_blocks.get(arm, 0) < CHECK_BLOCKS
        if want != w.landed_on:
            try:
                _core.activity_attributes(want)
                w.landed_on = want
            except Exception as e:      # an older CUPTI: said once, the search goes on
                w.landed_why = f"launch attributes not collected ({e})"
                w.landed_on = want = False
        if want:
            w.landed_blocks[arm] = w.landed_blocks.get(arm, 0) + 1
        return want

    def read_back(self, arm: int):
        """Where CUPTI was let go after the probe (letgo.py) no kernel's record carries its
        window: for an arm not yet checked, the windows are read back from the kernel nodes of
        every graph the watcher knows, as the arm installed them, each node counted once (not
        per launch). What is read is the graph the executable was made from; the switcher makes
        the executable again after every change (a graph whose owner could not is flagged
        ``renew_failed``), so the two agree. A graph the program dropped or reset is left out; where
        none is left the arm stays unchecked (not read as windows missing on no kernel)."""
        w = self.w
        if w.landed_blocks.get(arm, 0) >= CHECK_BLOCKS:
            return
        seen, read = {}, 0
        ids = {bw: wid for wid, bw in w.landed_table.items()}
        for g in list(w.graphs.values()):
            graph = g.borrow()
            if graph is None:
                continue
            try:
                wins = [n.access_policy_window for n in graph.kernel_nodes]
            except (ValueError, RuntimeError):   # reset by the program meanwhile
                continue
            read += 1
            for win in wins:
                wid = 0
                if win is not None:
                    key = (int(win.base_ptr), int(win.num_bytes))
                    wid = ids.get(key)
                    if wid is None:
                        wid = ids[key] = len(w.landed_table) + 1
                        w.landed_table[wid] = key
                seen[wid] = seen.get(wid, 0) + 1
        if not read:       # no graph left to read: the arm stays unchecked, not "0 kernels"
            return
        w.landed_blocks[arm] = w.landed_blocks.get(arm, 0) + 1
        mine = w.landed_seen.setdefault(arm, {})
        for wid, n in seen.items():
            mine[wid] = mine.get(wid, 0) + n

    def forget(self):
        """The search begins again (Search.restart): attributes off, nothing checked yet."""
        w = self.w
        if w.landed_on:
            try:
                _core.activity_attributes(False)
            except Exception:          # not collecting now: they went off with the records
                pass
            w.landed_on = False
        w.landed_blocks, w.landed_seen, w.landed_table = {}, {}, {}

    def read(self, done: list, bounds: list):
        """The windows the checked blocks among ``done`` (bounds as the recorder cut them:
        two per block) ran under, added to their arms' counts."""
        w = self.w
        ks = [k for k, b in enumerate(done) if getattr(b, "attrs", False)]
        if not ks:
            return
        res = _core.activity_windows(bounds)
        w.landed_table.update(res["windows"])
        for k in ks:
            seen = w.landed_seen.setdefault(done[k].arm, {})
            for wid, n in res["counts"][2 * k].items():
                seen[wid] = seen.get(wid, 0) + n

    def meant(self, arm: int) -> list:
        """(base, bytes) of each window the arm installs (the switcher's placements; none in a
        placebo that sets no window)."""
        if self.w.switcher.windowless():
            return []
        a = self.w.arms[arm]
        return sorted({(base, nbytes)
                       for _g, _n, base, nbytes, *_ in self.w.switcher.placements(a)})

    def summary(self) -> dict:
        """Per checked arm, the core's judgement; ``checked`` False with ``why`` where no
        attributes were collected."""
        w = self.w
        out = {"checked": bool(w.landed_seen), "why": w.landed_why, "arms": [],
               # where they were read: the kernels' launch attributes (CUPTI's records), or the
               # graphs' kernel nodes once CUPTI was let go (read_back)
               "from": "nodes" if getattr(w, "landed_read_back", False) else "records"}
        for arm in sorted(a for a in w.landed_seen if a < len(w.arms)):
            seen_ids = w.landed_seen[arm]
            seen = []
            for wid, n in seen_ids.items():
                if wid == 0:
                    continue
                bw = w.landed_table.get(wid)
                seen.append((bw[0], bw[1], n) if bw else (0, 0, n))  # past the table: foreign
            meant = self.meant(arm)
            j = _core.live_landed(meant, seen, seen_ids.get(0, 0))
            j.update(arm=arm, blocks=w.landed_blocks.get(arm, 0), windows=len(meant),
                     as_meant=j["foreign"] == 0 and j["missing"] == 0)
            out["arms"].append(j)
        return out
