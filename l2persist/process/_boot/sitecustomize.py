"""l2persist's start-up hook: on PYTHONPATH only for a program started by
``python -m l2persist advise|verify|apply -- ...`` (or by a launcher that sets it with
L2PERSIST_PLAN). It starts the watcher before the program's code runs, then hands over to the
sitecustomize this one shadows, if the environment has one."""
import importlib
import os
import sys


def _start():
    try:
        from l2persist.process import bootstrap
        bootstrap.start()
    except Exception as e:  # the program runs whatever happens here
        plain = ("without the plan" if os.environ.get("L2PERSIST_PLAN") and
                 os.environ.get("L2PERSIST_MODE", "apply") == "apply" else "unwatched")
        print(f"l2persist: could not start, the program runs {plain}: {e}", file=sys.stderr)


def _chain():
    """Import the next sitecustomize on sys.path (ours shadows it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    me = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if me is not None:
            sys.modules["sitecustomize"] = me


_start()
_chain()
