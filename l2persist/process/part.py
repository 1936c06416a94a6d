"""What every part of the watcher is (issue 50 item 8: the watcher in parts).

A part (the graphs it knows, the phases, the search driver, the eager launches, the recorder,
the pace, what watching costs, the switcher, the report, the ending) is a class of its own module that the
:class:`~l2persist.process.live.Watcher` makes once and calls; it holds no state of its own
but for a cache or a note said once, and reads and writes its owner's, which is the watcher's
one state (the phases, the blocks, the arms).
A part can so be driven alone over a small fake owner with the attributes it reads
(tests/test_live_parts_cpu.py).
"""


class Part:
    """One part of the watcher, over its owner (``w``)."""

    def __init__(self, owner):
        self.w = owner
