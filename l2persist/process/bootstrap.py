"""Start-up: watch or plan a program without a line of it changed.

``python -m l2persist advise|verify|apply ... -- COMMAND`` starts COMMAND with
``l2persist/process/_boot`` first on ``PYTHONPATH``; Python imports the ``sitecustomize`` there
before the program's code, and it calls :func:`start`, which reads ``L2PERSIST_MODE`` (or only
``L2PERSIST_PLAN``, for launchers that start the program themselves) and:

- makes the process's :class:`~l2persist.process.live.Watcher`;
- hooks PyTorch when the program imports it (a post-import hook: nothing is imported on the
  program's behalf): every ``torch.cuda.CUDAGraph`` keeps its raw graph, its capture's start
  and end and each replay reach the watcher, and so do ``torch.cuda.synchronize`` and
  ``Stream.synchronize`` / ``Event.synchronize``; the originals run unchanged, the hooks run
  around them on the caller's thread; once advise or verify has decided (and timed its own
  cost), the replay and synchronize hooks come off (the capture hooks stay);
- apply: checks the plan's GPU model, sets the set-aside once, windows graphs as they are
  captured; everything is put back at exit (normal exit, an exception, SIGTERM; SIGINT raises
  KeyboardInterrupt, which exits normally).

Nothing here raises into the program: a hook that fails is reported at exit and the program's
call goes on.
"""
from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import signal
import sys

from .fastcount import COUNT as _COUNT

_watcher = None
_patched = False
# The per-call hooks' gate: the watcher closes it for a rest's uncounted part (the hooks then
# cost a call one global test, not the watcher's ~3 us), and opens it again from a timer.
_calls_on = True


def _set_calls(on: bool) -> None:
    global _calls_on
    _calls_on = on


# The watcher's events around a replay (process/recorder.py, ReplayEvents.begin), set while
# it times graphs by events; None otherwise (a replay then pays one global test).
_replay_timer = None
_replay_end = None


def set_replay_timer(begin, end=None) -> None:
    """``begin(graph)`` before each replay (a token or None), ``end(*token)`` after it."""
    global _replay_timer, _replay_end
    _replay_end = end
    _replay_timer = begin


def _on_replay(graph, _stream):
    # a replay that only counts a unit never comes here: the C method in front of this hook
    # counted it (process/fastcount.py; the count is armed only while the gate is open)
    if _calls_on:
        _hook("point", "replay", graph)
        timer = _replay_timer
        if timer is not None:      # after the point: it may have begun or ended a block
            try:
                return timer(graph)
            except Exception:      # never the program's replay's failure: it goes untimed
                return None
    return None


def _after_replay(token) -> None:
    end = _replay_end
    if end is not None:
        try:
            end(*token)
        except Exception:
            pass


def watcher():
    """The process's watcher, or None where the program is not watched."""
    return _watcher


def start(env=os.environ) -> None:
    global _watcher
    mode = env.get("L2PERSIST_MODE") or ("apply" if env.get("L2PERSIST_PLAN") else "")
    if not mode or _watcher is not None or is_launcher():
        return
    from .live import Options, Watcher
    o = Options.from_env(env)
    o.mode = mode
    w = Watcher(o)
    if mode in ("apply", "verify"):
        try:
            w.load_plan(o.plan)
        except ValueError as e:
            _say(f"l2persist: {e}; the program runs without the plan")
            return
        if mode == "apply" and not _apply_at_start(w):
            return
    _watcher = w
    atexit.register(_at_exit)
    _chain_sigterm()
    if mode in ("advise", "verify"):
        _start_clock(w)
    if "torch" in sys.modules:
        _patch_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterImport("torch", _patch_torch))


def _start_clock(w) -> None:
    """The watcher's own switch points (process/clock.py), for a program whose calls never
    reach it; alone only (ranks switch together at their shared calls). The clock's thread
    starts here and touches nothing of CUDA's until the program has loaded CUDA's driver
    (SwitchGate.armed in process/clock.py: then it starts counting captures)."""
    from . import clock
    clock.start(w)


#: Programs that only start the program's ranks (they inherit the bootstrap too): they are
#: neither watched nor planned, their workers are. By module (``python -m``) or script name.
LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch", "torchrun")


def is_launcher(argv=None) -> bool:
    """Whether this process is a launcher of ranks (torchrun), from the command line Python was
    started with (``sys.orig_argv``: already set when the bootstrap runs, unlike ``sys.argv``).
    A launcher never touches a GPU, so setting a set-aside there would only make a context."""
    argv = list(getattr(sys, "orig_argv", []) if argv is None else argv)
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return i + 1 < len(argv) and argv[i + 1] in LAUNCHERS
        if a.startswith("-m") and len(a) > 2:
            return a[2:] in LAUNCHERS
        if a == "-c" or not a.startswith("-"):
            return os.path.basename(a) in LAUNCHERS
        i += 2 if a in _TAKES_VALUE else 1     # -W ignore, -X faulthandler: not the script
    return False


#: Python's options whose value is the next argument.
_TAKES_VALUE = ("-W", "-X", "--check-hash-based-pycs")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _apply_at_start(w) -> bool:
    """The plan's device check and its set-aside, before the program's code runs."""
    from .. import Device
    doc = w.plan_doc
    try:
        dev = Device(w.o.device)
        name = dev.properties.name
    except Exception as e:
        from .. import _core
        why = None if _core.device_count() else _core.no_device_reason()
        said = f"no usable CUDA device: {why[2]} ({why[1]})" if why else \
            f"no usable device {w.o.device} ({e})"
        _say(f"l2persist: plan not applied: {said}; the program runs without the plan")
        return False
    if name != doc["device"]["name"]:
        _say(f"l2persist: plan not applied: it was found on {doc['device']['name']}, this is "
             f"{name}; the program runs as without it")
        return False
    w.device = dev
    w.default_limit = dev.default_persisting_l2_limit
    w.limit_before = dev.persisting_l2_limit
    if doc["set_aside"] is not None and dev.persisting_l2_limit != doc["set_aside"]:
        dev.persisting_l2_limit = doc["set_aside"]
    w.state = "applied"
    return True


def _at_exit():
    w = _watcher
    if w is None:
        return
    w.finish()
    if w.o.mode == "apply":
        _say(apply_report(w))


def apply_report(w) -> str:
    """What matched: graphs windowed, graphs the plan does not know, entries that found
    nothing."""
    doc = w.plan_doc
    known = {e["graph"] for e in doc["windows"]}
    # the graphs advise saw (plans before the list have none: then no graph is called new)
    seen = None if doc.get("graphs") is None else {e["graph"] for e in doc["graphs"]}
    graphs = w.all_graphs()              # those the program dropped too
    windowed = [g for g in graphs if g.windows_applied]
    unknown = [g for g in graphs if g.signature not in known]
    new = [g for g in unknown if seen is not None and g.signature not in seen]
    unknown = [g for g in unknown if g not in new]
    missed = [e for e in doc["windows"] if not e.get("_applied")]
    aside = "the default" if doc["set_aside"] is None else \
        f"{doc['set_aside']} bytes ({doc['set_aside'] / 2**20:.2f} MiB)"
    lines = [f"l2persist apply: set-aside {aside}; {len(windowed)} graph(s) windowed "
             f"({sum(g.windows_applied for g in windowed)} window(s))"]
    if not doc["windows"]:      # no graph is meant to match, none is news
        kind = "a \"don't\" plan" if doc.get("verdict") == "dont" else "a set-aside only"
        lines[0] = (f"l2persist apply: set-aside {aside}; {kind} (no windows): "
                    f"{len(graphs)} graph(s) left as captured")
    elif unknown:
        lines.append(f"  {len(unknown)} graph(s) captured that no window of the plan names, "
                     "left as captured" + (", as advised" if seen is not None else "") + ": "
                     + ", ".join(g.signature for g in unknown[:5]))
    if new:
        lines.append(f"  {len(new)} graph(s) of a shape advise did not see, left as captured "
                     "(run advise again where they matter): "
                     + ", ".join(g.signature for g in new[:5]))
    streams = sorted({g.stream for g in getattr(w, "eager", []) if g.windows_applied})
    if streams:
        lines.append(f"  {len(streams)} stream window(s) set, on the stream(s) of the eager "
                     f"launches they name: " + ", ".join(f"{h:#x}" for h in streams))
    if missed:
        lines.append(f"  {len(missed)} plan window(s) found no graph or launch: " +
                     ", ".join(e["graph"] for e in missed[:5]))
    if getattr(w, "restored", None) is not None:
        lines.append(f"  set-aside put back to {w.restored} bytes, as the program found it")
    lines += _cupti_lines(getattr(w, "cupti_release", None))
    lines += [f"  note: {n.splitlines()[0]}" for n in getattr(w, "notes", []) if n]
    return "\n".join(lines)


def _cupti_lines(asked) -> list:
    """apply --release-cupti: whether CUPTI, attached for the launch log, was let go after it
    (launches.Launches.apply_over), as the core says now; nothing where none was asked."""
    if asked is None:
        return []
    state, why = asked
    if state == "held":
        return [f"  CUPTI stays attached after the launch log ({why}): it costs each launch "
                f"a little for the rest of the program"]
    try:
        from .. import _core
        now = _core.cupti_state()
    except Exception:
        now = None
    if now == "withdrawn":
        why = "a capture began as it was being let go"
    if state == "withdrawn" or now in ("held", "withdrawn"):
        return [f"  CUPTI stayed attached: {why or 'attached again after it was let go'}"]
    return [f"  CUPTI let go after the launch log (the program made no CUDA graph; "
            f"now {now or '?'})"]


def _chain_sigterm():
    """SIGTERM: put the set-aside back, then die of the signal as before. A handler the
    program installs later replaces this one; the set-aside then goes with the context."""
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, TypeError):
        return
    if previous not in (signal.SIG_DFL, None):
        return                      # the program (or its launcher) handles it already

    def on_term(signum, frame):
        _at_exit()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:              # not the main thread
        pass


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` once the module `name` has been executed by the program's own
    import (the finder only wraps the real loader; it imports nothing itself)."""

    def __init__(self, name, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader, then = spec.loader, self.then
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            try:
                then(module)
            except Exception as e:  # never break the program's import
                _say(f"l2persist: could not hook {fullname}: {e}")
        loader.exec_module = exec_and_patch
        return spec


def _patch_torch(torch) -> None:
    """Hook the program's graph captures (every mode) and its replays and synchronizations
    (advise and verify only: apply adds nothing to a launch), once. The patches are
    process/torch.py's; what each calls in the watcher is here."""
    global _patched
    if _patched:
        return
    _patched = True
    from .torch import Hook, note_pool_streams, patch_after, patch_capture, patch_keep_graph, \
        patch_replay
    cls = torch.cuda.CUDAGraph
    # Keep every graph's raw graph (as keep_graph=True): its nodes are read and windowed
    # before PyTorch instantiates it at its first replay.
    patch_keep_graph(cls)
    patch_capture(cls, lambda graph: _hook("capture_begin"), _hook_end)
    try:
        note_pool_streams(torch)
    except Exception as e:  # the other hooks still go on; no pool stream is windowed
        _say(f"l2persist: could not hook torch.cuda.Stream: {e}")
    if _watcher is None or (_watcher.o.mode == "apply" and not _watcher.wants_calls()):
        return              # apply without stream windows adds nothing to a call
    replay = cls.replay
    patch_replay(cls, _on_replay, stream=False, after=_after_replay, count=_COUNT)
    hooks = [Hook(cls, "replay", cls.__dict__["replay"], replay, "CUDAGraph.replay"),
             patch_after(torch.cuda, "synchronize", _on_sync, "torch.cuda.synchronize",
                         count=_COUNT)]
    for klass in (torch.cuda.Stream, torch.cuda.Event):
        hooks.append(patch_after(klass, "synchronize", _on_sync, f"{klass.__name__}.synchronize",
                                 count=_COUNT))

    def calls_off() -> list:
        """The per-call hooks off for good (the capture hooks stay: a capture is rare);
        returns the names left hooked because something wrapped them since. A caller that
        kept a hooked function still reaches the watcher, which answers at once."""
        return [h.name for h in hooks if not h.off()]
    _watcher.unhook_calls = calls_off          # once decided
    # around a rest's uncounted part: the gate, not the attributes (nothing to race with a
    # wrapper another tool installs meanwhile)
    _watcher.rest_hooks = (lambda: _set_calls(False), lambda: _set_calls(True))


def _on_sync() -> None:
    if _calls_on:
        _hook("point", "sync")


def _hook(what, *args):
    w = _watcher
    if w is None:
        return
    try:
        if what == "capture_begin":
            w.capture_begin()
        else:
            w.point(*args)
    except SystemExit:
        raise                       # --exit-after: the program ends here, as asked
    except Exception as e:
        w.fail(what, e)


def _hook_end(graph, failed=False):
    w = _watcher
    if w is None:
        return
    try:
        if failed:
            w.capture_failed()
        else:
            w.capture_end(graph)
    except Exception as e:
        w.fail("capture_end", e)


def mark() -> None:
    """One unit of the program's work ended (``l2persist.mark()``); a switch point."""
    if _calls_on:
        _hook("point", "mark")
