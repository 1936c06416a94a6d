"""Plan: one device's persisting-L2 set-aside and a window per carrier, as one object.

The set-aside belongs to the CUDA context: a process has one, and every kernel of the process
pays it. Windows live on carriers: a stream, a group of a graph's kernel nodes, a single
launch. A Plan holds both and is installed and restored as one transaction (the C core's
``l2p_plan``: all or nothing on an error, restored on an exception or KeyboardInterrupt)::

    plan = l2persist.Plan(device=0, set_aside=26 * 2**20)
    plan.add(stream, l2persist.AccessPolicyWindow(table, hit_ratio=0.6), name="table")
    with plan:
        run()
    text = plan.to_json()                        # found once ...
    plan = l2persist.Plan.from_json(text, buffers={"table": table},
                                    carriers={"stream": stream})   # ... applied at start

``tune``, ``TuneResult.apply()``, ``advise`` and the atlas grid all install Plans; the order
of the steps and the restore rule live in ``csrc/core/l2p_plan.c`` alone.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from . import _core
from ._format import human_bytes, node_label, read_json, save_json

__all__ = ["Plan"]

FORMAT = _core.PLAN_FORMAT  # the core owns the document (csrc/core/l2p_plan.h)


def _prop(v) -> str:
    return getattr(v, "name", str(v)).lower()


def _where(e) -> str:
    """An entry's carrier in words: its name (or kind), and for graph nodes each node's
    position and kernel (positions alone while the graph cannot list its nodes)."""
    where = str(e["carrier_name"] or e["kind"])
    if e["kind"] != "nodes" or e["nodes"] is None:
        return where
    positions = list(e["nodes"])
    try:
        kernels = e["graph"].kernel_nodes if e["graph"] is not None else None
        if kernels and all(p < len(kernels) for p in positions):
            return f"{where} nodes " + ", ".join(node_label(kernels[p]) for p in positions)
    except Exception:  # noqa: BLE001 - a closed graph: its positions still say which
        pass
    return f"{where} nodes {positions}"


class Plan(_core._Plan):
    __doc__ = _core._Plan.__doc__

    # ---- what it holds, in words ------------------------------------------------------

    def _lines(self) -> list[str]:
        sa = self.set_aside
        out = [f"set-aside {'as found' if sa is None else human_bytes(sa)}"]
        for i, e in enumerate(self.entries):
            where = _where(e)
            w = e["window"]
            if not e["on"] or w is None:
                out.append(f"  [{i}] {where}: no window")
                continue
            out.append(f"  [{i}] {where}: {e['name'] or 'buffer'} {human_bytes(w.num_bytes)} "
                       f"hitRatio {w.hit_ratio:.2f} {_prop(w.hit_prop)}/{_prop(w.miss_prop)}")
        return out

    def __repr__(self) -> str:
        state = ", installed" if self.installed else ""
        return (f"l2persist.Plan(device={self.device.index}{state})\n"
                + "\n".join(self._lines()))

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{i}</td><td>{html.escape(_where(e))}"
                       f"</td><td>{html.escape(str(e['name'] or ''))}</td><td>"
                       f"{self._window_text(e)}</td></tr>" for i, e in enumerate(self.entries))
        sa = self.set_aside
        head = (f"<p>l2persist.Plan on device {self.device.index}: set-aside "
                f"{'as found' if sa is None else html.escape(human_bytes(sa))}"
                f"{' (installed)' if self.installed else ''}</p>")
        return (head + "<table><tr><th>#</th><th>carrier</th><th>buffer</th><th>window</th>"
                f"</tr>{rows}</table>")

    @staticmethod
    def _window_text(e) -> str:
        w = e["window"]
        if not e["on"] or w is None:
            return "off"
        return (f"{human_bytes(w.num_bytes)}, hitRatio {w.hit_ratio:.2f}, "
                f"{_prop(w.hit_prop)}/{_prop(w.miss_prop)}")

    # ---- JSON -------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """Plain data: the set-aside, and per entry its carrier's and buffer's names, the
        node positions, the window's offset into its buffer, size, hit ratio and
        properties. Buffers and carriers are named, not addressed: ``from_json`` matches
        them by name in another process."""
        entries = []
        for e in self.entries:
            w = e["window"]
            d = {"kind": e["kind"], "carrier": e["carrier_name"], "buffer": e["name"],
                 "nodes": None if e["nodes"] is None else list(e["nodes"]), "on": e["on"]}
            if w is not None:
                target = w.target
                d.update(offset=(w.base_ptr - target.ptr) if target is not None else 0,
                         num_bytes=w.num_bytes, hit_ratio=w.hit_ratio,
                         hit_prop=int(w.hit_prop), miss_prop=int(w.miss_prop))
            entries.append(d)
        return {"format": FORMAT, "device": self.device.properties.name,
                "set_aside": self.set_aside, "entries": entries}

    def to_json(self, path=None) -> str:
        return save_json(self.to_dict(), path, indent=2)

    @classmethod
    def from_json(cls, text_or_path, *, buffers=None, carriers=None, device=None) -> "Plan":
        """A plan saved with ``to_json``, rebuilt over this process's objects.

        ``text_or_path``: the JSON text, or a file (str or os.PathLike; a str is text when
        it is valid JSON). ``buffers`` maps each entry's buffer name to a buffer (anything
        ``as_buffer`` takes); ``carriers`` maps each carrier name to a stream or a Graph
        (entries with node positions select those nodes of it). The document's values are
        checked (by the core, naming the file and the field) before any device is needed. A
        name the plan needs and the mappings lack is a ``KeyError`` that names it; an entry
        that is off needs no buffer."""
        buffers = _mapping(buffers, "buffers", "buffer")
        carriers = _mapping(carriers, "carriers", "stream or Graph")
        d, where = read_json(text_or_path, what="an l2persist plan")
        _core.plan_check_document(d, where)
        plan = cls(device, set_aside=d.get("set_aside"))
        for i, e in enumerate(d["entries"]):
            plan._add_saved(i, e, buffers, carriers)
        return plan

    def _add_saved(self, i, e, buffers, carriers):
        kind, cname = e["kind"], e.get("carrier")
        if kind == "launch":
            carrier = "launch"
        else:
            if cname not in carriers:
                raise KeyError(f"carriers: entry {i} needs the carrier {cname!r}; given: "
                               f"{sorted(carriers)}")
            carrier = carriers[cname]
            if kind == "nodes" and e.get("nodes") is not None:
                carrier = (carrier, e["nodes"])
        window = None
        if "num_bytes" in e and (e["on"] or e.get("buffer") in buffers):
            if e.get("buffer") not in buffers:
                raise KeyError(f"buffers: entry {i} needs the buffer {e.get('buffer')!r}; "
                               f"given: {sorted(buffers)}")
            window = _core.AccessPolicyWindow(
                buffers[e["buffer"]], e["num_bytes"], offset=e["offset"],
                hit_ratio=e["hit_ratio"], hit_prop=e["hit_prop"], miss_prop=e["miss_prop"])
        self.add(carrier, window, name=e.get("buffer"), carrier_name=cname,
                 enabled=bool(e["on"]))


def _mapping(obj, arg: str, of: str) -> dict:
    """A name -> object mapping argument as a dict (None: empty); anything else is named."""
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise TypeError(f"{arg}: expected a mapping of names to a {of} (a dict), got "
                        f"{type(obj).__name__}")
    bad = next((k for k in obj if not isinstance(k, str)), None)
    if bad is not None:
        raise TypeError(f"{arg}: names are str, got the key {bad!r}")
    return dict(obj)
