"""The Plan's presentation on the CPU (its GPU behaviour: test_plan_gpu.py)."""


def test_an_entry_on_graph_nodes_names_their_kernels():
    """A Plan's text and HTML name each windowed node by position and kernel, not by position
    alone; a graph that cannot list its nodes (closed) still gives the positions."""
    from types import SimpleNamespace
    from l2persist.plan import _where
    kernels = [SimpleNamespace(position=i, name=n)
               for i, n in enumerate(["gemm_" + "x" * 40, "softmax", "add"])]
    graph = SimpleNamespace(kernel_nodes=kernels)
    e = {"kind": "nodes", "carrier_name": "decode", "nodes": (0, 2), "graph": graph}
    assert _where(e) == "decode nodes 0:gemm_" + "x" * 26 + "…, 2:add"

    class Closed:
        @property
        def kernel_nodes(self):
            raise RuntimeError("the graph is closed")
    assert _where(dict(e, graph=Closed())) == "decode nodes [0, 2]"
    assert _where(dict(e, nodes=(5,))) == "decode nodes [5]"   # not a node it lists
    assert _where({"kind": "stream", "carrier_name": None, "nodes": None, "graph": None}) == \
        "stream"
