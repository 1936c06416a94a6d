#!/usr/bin/env python3
"""The interposer's CPU check (no GPU, no driver): interpose.c over fake_libcuda.c, a stand-in
libcuda.so.1, every way a capture call reaches it; prints one JSON line (the calls' results and
the library's eight counts). Run by `run fake` and tests/test_tools_cpu.py, with the library
preloaded and the stand-in first on LD_LIBRARY_PATH:

    fake_check.py LINKED_SO    (linked.c built against the stand-in)

The ways: cuGetProcAddress_v2 taken by dlsym, asked for the begin and end in both default-stream
flavours; cuGetProcAddress asked for itself (the new ABI), and for its old ABI, which hands out
the old begin; dlsym on libcuda's handle; dlsym on the whole process (this library's exports);
the linked library (two captures, one invalidated, a failed begin); an end with nothing open."""
import ctypes
import json
import sys
from ctypes import POINTER, byref, c_char_p, c_int, c_ulonglong, c_void_p

G2 = ctypes.CFUNCTYPE(c_int, c_char_p, POINTER(c_void_p), c_int, c_ulonglong, POINTER(c_int))
G1 = ctypes.CFUNCTYPE(c_int, c_char_p, POINTER(c_void_p), c_int, c_ulonglong)
B2 = ctypes.CFUNCTYPE(c_int, c_void_p, c_int)
B1 = ctypes.CFUNCTYPE(c_int, c_void_p)
E = ctypes.CFUNCTYPE(c_int, c_void_p, POINTER(c_void_p))


def proc(gpa, name, ver, flags, proto, old=False):
    """A driver function from a cuGetProcAddress (either ABI) as `proto`."""
    p = c_void_p()
    args = (name.encode(), byref(p), ver, flags) + (() if old else (None,))
    rc = gpa(*args)
    if rc:
        raise SystemExit(f"fake_check: cuGetProcAddress({name}) returned {rc}")
    return proto(p.value)


def main(linked_path):
    cuda = ctypes.CDLL("libcuda.so.1")
    linked = ctypes.CDLL(linked_path)
    top = ctypes.CDLL(None)
    rcs = []

    def capture(begin, end, stream, *mode):
        g = c_void_p()
        rcs.append((begin(stream, *mode), end(stream, byref(g))))

    gpa2 = G2(ctypes.cast(cuda.cuGetProcAddress_v2, c_void_p).value)
    for flags, stream in ((0, 1), (2, 2)):        # the legacy and the per-thread flavours
        capture(proc(gpa2, "cuStreamBeginCapture", 12000, flags, B2),
                proc(gpa2, "cuStreamEndCapture", 12000, flags, E), stream, 0)
    inner = proc(gpa2, "cuGetProcAddress", 12000, 0, G2)
    capture(proc(inner, "cuStreamBeginCapture", 12000, 0, B2),
            proc(inner, "cuStreamEndCapture", 12000, 0, E), 3, 0)
    old = proc(gpa2, "cuGetProcAddress", 11000, 0, G1)
    capture(proc(old, "cuStreamBeginCapture", 10000, 0, B1, old=True),
            proc(old, "cuStreamEndCapture", 10000, 0, E, old=True), 4)
    capture(cuda.cuStreamBeginCapture_v2, cuda.cuStreamEndCapture, 5, 0)
    capture(top.cuStreamBeginCapture_v2, top.cuStreamEndCapture, 6, 0)
    rcs.append((linked.l2p_linked_captures(c_void_p(7)),
                linked.l2p_linked_invalidated(c_void_p(8)), linked.l2p_linked_failed_begin()))
    g = c_void_p()
    rcs.append(cuda.cuStreamEndCapture(c_void_p(9), byref(g)))
    out = (ctypes.c_long * 8)()
    top.l2p_interpose_counts(out)
    keys = ("begun", "failed", "ended", "open", "unmatched", "wrapped", "unwrapped", "full")
    print(json.dumps({"rcs": rcs, "counts": dict(zip(keys, out))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
