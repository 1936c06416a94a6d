"""The live plan document's check: every field named with what it allows.

A plan document is what ``advise --`` writes and ``apply`` / ``verify`` / ``L2PERSIST_PLAN``
read: the GPU it was found on, the set-aside (``null``: leave the device's default) and the
windows, each placed by its graph's signature and a pointer word of that graph
(``_core.live_locate`` finds it again in the next run). The core owns the document: its
format, its fields' ranges and the caps are csrc/core/l2p_live.h's, and
``_core.live_plan_check`` judges a parsed document by them."""
from __future__ import annotations

from .. import _core

FORMAT = _core.live_plan_format()


def check_plan(doc, path="") -> dict:
    """The document, checked; ValueError "plan '<path>': <field>: expected ..." otherwise."""
    _core.live_plan_check(doc, path)
    return doc
