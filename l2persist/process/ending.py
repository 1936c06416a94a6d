"""The watcher's ending: what is put back when watching stops. ``fail``: a hook raised, so
switching stops where it is and the set-aside the program started with is put back; ``finish``
(at exit): a search still running is finished with the blocks it has, the result written;
``restore``: the persisting set-aside and each stream's own window back as they were found.

One :class:`Ending` per :class:`~l2persist.process.live.Watcher`; ``fail`` and ``finish`` take
the owner's lock (a tick on the clock's thread must not switch meanwhile) and put back inside
the core's switch lock where no capture is open; its state is the owner's (``state``,
``restored``, ``streams_restored``, ``notes``).
"""
from __future__ import annotations

from .. import _core
from .part import Part
from .recorder import _NoRecords


#: Where a hook failed, in the words a person reads (the hooks' own names are internal).
FAILED_AT = {"point": "a graph replay, synchronize or l2persist.mark()",
             "replay": "a graph replay", "sync": "a synchronize",
             "capture_begin": "the start of a CUDA graph capture",
             "capture_end": "the end of a CUDA graph capture",
             "the clock's switch point": "a switch from l2persist's own thread"}


class Ending(Part):
    """Stopping the watching and putting back what it changed."""

    def fail(self, where: str, e: BaseException) -> None:
        """A hook failed: say where (with the traceback's last frames), stop switching and put
        back the better-known state (the set-aside the program started with). The program's
        call goes on."""
        import traceback
        w = self.w
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])
        with w.lock:               # a tick on the clock's thread must not switch meanwhile
            w.notes.append(f"watching stopped at {FAILED_AT.get(where, where)}: an internal "
                           f"error in l2persist ({type(e).__name__}: {e}); the program ran on "
                           f"as without it; please report it with this traceback\n{tb}")
            w._after = None            # a failing after-decision timing must not keep the hooks
            w.launches.stop()
            w.gate.capture_open()          # the switch lock where no capture is open (see finish)
            if w.stream_windows is not None:       # in any state: a capture may be about to open
                w.stream_windows.restore()
            if w.state in ("warmup", "probe", "search"):
                w.state = "off"
                self.restore()
                w.paused = False       # a later replay must not turn the records back on
                w.activity = False
                try:
                    _core.activity_end()
                except Exception:
                    pass
            w.gate.end_tracking(release=True)   # the program runs on: without CUPTI
            if w.apply_log is not None and not w.apply_log.get("over"):
                # apply stops matching its stream windows too: a later call would begin its
                # launch log again (CUPTI attached anew, a pending release withdrawn)
                w.apply_log["over"] = True
                w._unhook()
            if w.team is not None:
                w.team.leave()

    def finish(self):
        """At exit: a search still running is finished with what it has; the set-aside the
        program started with is put back."""
        w = self.w
        if w.rest_timer is not None:
            w.rest_timer.cancel()
        if w.clock is not None:
            w.clock.stop()             # a tick in progress ends first: it holds the lock
        with w.lock:
            w.counting.take()          # the hook's counted replays, before the last block's units
            if w.state in ("warmup", "probe", "search"):
                try:
                    if w.state == "search" and w.blocks:
                        w.blocks[-1].end = w.blocks[-1].end or _core.activity_now()
                        w.blocks[-1].units = w.blocks[-1].units or w.units_now
                        if not w.blocks[-1].units and len(w.blocks) > w.recorded:
                            w.blocks.pop()         # begun just before the exit: nothing ran
                        try:
                            w.recorder.record_pending(alone=True)
                        except _NoRecords:
                            # the last block, begun just before the exit, holds no record of
                            # the work the probe saw: finish with the blocks before it (given
                            # now: the core asks for a round's samples only at its end)
                            w.blocks.pop()
                            try:
                                w.recorder.record_pending(alone=True)
                            except _NoRecords:
                                del w.blocks[w.recorded:]
                        w.result = _core.live_finish()
                    w.notes.append("the program ended before the search decided")
                    w.ended_in = w.state       # the words for what was under way
                    w.state = "done"
                except Exception as e:
                    w.notes.append(f"finishing failed: {e}")
            # put back inside the switch lock where no capture is open (a capture that begins
            # meanwhile waits); with one open, put back anyway: the process is ending. The
            # launch log first: its CUPTI calls are made outside the lock
            # a release still waiting for a CUDA call is withdrawn before the restore's calls
            # would carry it out inside the program's exit
            w.gate.withdraw_release()
            w.launches.stop()
            try:
                w.gate.capture_open()
            except Exception:
                pass
            self.restore()
            w.gate.end_tracking()
            try:
                _core.activity_end()
            except Exception:
                pass
            if w.o.mode != "apply":
                w.report.write_result()
            if w.team is not None:
                w.team.leave()
            if w.team_gave_up:
                try:
                    w.ranks.release_peers()
                except Exception:
                    pass

    def restore(self):
        w = self.w
        w.launches.stop()
        if w.stream_windows is not None:
            failed = w.stream_windows.restore()
            for e in failed:
                w.notes.append(f"restoring a stream's window failed: {e}")
            w.streams_restored = not failed
        if w.device is None or w.limit_before is None:
            return
        try:
            if w.device.persisting_l2_limit != w.limit_before:
                w.device.persisting_l2_limit = w.limit_before
            _core.reset_persisting_l2(w.device)
            w.restored = w.limit_before
        except Exception as e:
            w.notes.append(f"restoring the set-aside failed: {e}")
